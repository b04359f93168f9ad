#!/bin/sh
# Exit 1 when the system asks for a reboot (after updates), naming the packages that do.
if [ -f /var/run/reboot-required ]; then
    cat /var/run/reboot-required
    [ -f /var/run/reboot-required.pkgs ] && sort -u /var/run/reboot-required.pkgs
    exit 1
fi
if command -v needs-restarting >/dev/null 2>&1; then
    needs-restarting -r
    exit $?
fi
echo "No reboot required."
