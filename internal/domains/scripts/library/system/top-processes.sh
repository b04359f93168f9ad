#!/bin/sh
# The processes using the most CPU and the most memory.
n="${COUNT:-15}"
echo "== By CPU"
ps -eo pid,user,pcpu,pmem,etime,comm --sort=-pcpu | head -n "$((n + 1))"
echo
echo "== By memory"
ps -eo pid,user,pmem,rss,etime,comm --sort=-rss | head -n "$((n + 1))"
