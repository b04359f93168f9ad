#!/bin/sh
# Memory and swap, the largest processes by resident memory, and recent OOM kills.
free -m
echo
ps -eo pid,user,rss,comm --sort=-rss | head -n 11
echo
if command -v journalctl >/dev/null 2>&1; then
    journalctl -k --no-pager --since -7d 2>/dev/null | grep -i 'out of memory' | tail -n 5
else
    dmesg 2>/dev/null | grep -i 'out of memory' | tail -n 5
fi
exit 0
