#!/bin/sh
# Errors logged in the last HOURS hours (default 24): the journal, or /var/log otherwise.
hours="${HOURS:-24}"
if command -v journalctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    journalctl --no-pager -p err --since "-${hours}h" | tail -n "${LINES_MAX:-200}"
else
    for f in /var/log/syslog /var/log/messages; do
        [ -r "$f" ] && grep -iE 'error|fail|crit' "$f" | tail -n "${LINES_MAX:-200}"
    done
fi
