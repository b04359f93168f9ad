#!/bin/sh
# Packages with an update waiting, from the system's package manager. Exit 1 when there are
# security updates (apt) or any update (others).
if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1
    list=$(apt list --upgradable 2>/dev/null | grep -v '^Listing')
    echo "${list:-No upgradable packages.}"
    echo "$list" | grep -qi -- '-security' && exit 1
    exit 0
elif command -v dnf >/dev/null 2>&1; then
    dnf -q check-update; [ $? -eq 100 ] && exit 1
elif command -v yum >/dev/null 2>&1; then
    yum -q check-update; [ $? -eq 100 ] && exit 1
elif command -v zypper >/dev/null 2>&1; then
    zypper -q list-updates
else
    echo "No supported package manager found." >&2
    exit 2
fi
