#!/bin/sh
# Starts SERVICE_NAME when it is not running; exit 1 when it cannot be started.
name="$SERVICE_NAME"
if [ -d /run/systemd/system ]; then
    systemctl is-active --quiet "$name" && { echo "$name is running"; exit 0; }
    echo "$name is not running; starting it"
    systemctl start "$name" && systemctl is-active --quiet "$name"
else
    service "$name" status >/dev/null 2>&1 && { echo "$name is running"; exit 0; }
    echo "$name is not running; starting it"
    service "$name" start
fi
