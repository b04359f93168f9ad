#!/bin/sh
# TCP and UDP ports the machine listens on, with their processes.
if command -v ss >/dev/null 2>&1; then
    ss -tulpn
else
    netstat -tulpn 2>/dev/null || cat /proc/net/tcp /proc/net/tcp6
fi
