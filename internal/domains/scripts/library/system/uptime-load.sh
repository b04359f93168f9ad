#!/bin/sh
# Uptime, load per CPU, and the last boots. Exit 1 when the 15-minute load per CPU passes
# MAX_LOAD_PER_CPU (default 2).
uptime
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
load=$(cut -d' ' -f3 /proc/loadavg)
echo "CPUs: $cpus, 15-minute load: $load"
last -x reboot 2>/dev/null | head -n 5
awk -v l="$load" -v c="$cpus" -v m="${MAX_LOAD_PER_CPU:-2}" 'BEGIN { exit (l / c > m) ? 1 : 0 }'
