#!/bin/sh
# Restarts SERVICE_NAME and shows its state afterwards; exit 1 when it is not running then.
name="$SERVICE_NAME"
case "$name" in
    ""|*[!A-Za-z0-9@._-]*) echo "SERVICE_NAME must be a service name." >&2; exit 2 ;;
esac
if [ -d /run/systemd/system ]; then
    systemctl restart "$name" || exit 1
    sleep 2
    systemctl --no-pager status "$name" | head -n 15
    systemctl is-active --quiet "$name"
else
    service "$name" restart || exit 1
    sleep 2
    service "$name" status
fi
