#!/bin/sh
# Frees space: the package manager's cache and journal files older than JOURNAL_DAYS.
set -e
before=$(df -P / | awk 'NR==2 {print $4}')
if command -v apt-get >/dev/null 2>&1; then apt-get clean; apt-get -y autoremove --purge >/dev/null 2>&1 || true
elif command -v dnf >/dev/null 2>&1; then dnf clean all
elif command -v yum >/dev/null 2>&1; then yum clean all
fi
if command -v journalctl >/dev/null 2>&1; then
    journalctl --vacuum-time="${JOURNAL_DAYS:-14}d" 2>&1 | tail -n 1
fi
after=$(df -P / | awk 'NR==2 {print $4}')
echo "Freed $(( (after - before) / 1024 )) MiB on /."
