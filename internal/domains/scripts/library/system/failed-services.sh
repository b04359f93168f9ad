#!/bin/sh
# Services that failed: systemd units, or SysV services that are not running.
if [ -d /run/systemd/system ]; then
    failed=$(systemctl list-units --state=failed --no-legend --plain 2>/dev/null)
    if [ -n "$failed" ]; then
        echo "$failed"
        exit 1
    fi
    echo "No failed units."
    exit 0
fi
status=0
for s in /etc/init.d/*; do
    [ -x "$s" ] || continue
    if ! "$s" status >/dev/null 2>&1; then
        echo "not running: $(basename "$s")"
        status=1
    fi
done
exit $status
