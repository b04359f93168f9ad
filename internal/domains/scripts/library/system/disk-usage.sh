#!/bin/sh
# Filesystems by use, then the largest directories under TARGET_DIR (default /).
target="${TARGET_DIR:-/}"
echo "== Filesystems"
df -hT -x tmpfs -x devtmpfs -x squashfs -x overlay 2>/dev/null || df -h
echo
echo "== Largest directories under $target"
du -xh --max-depth=1 "$target" 2>/dev/null | sort -rh | head -n "${TOP:-10}"
# Exit 1 when a filesystem is fuller than THRESHOLD percent (default 90).
full=$(df -P -x tmpfs -x devtmpfs -x squashfs -x overlay 2>/dev/null | awk -v t="${THRESHOLD:-90}" 'NR>1 && $5+0 >= t {print $6" "$5}')
if [ -n "$full" ]; then
    echo
    echo "== Over ${THRESHOLD:-90}%:"
    echo "$full"
    exit 1
fi
