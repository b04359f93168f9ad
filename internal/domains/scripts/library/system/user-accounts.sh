#!/bin/sh
# Accounts that can log in, members of the administrator groups, and recent logins.
echo "== Accounts with a login shell"
awk -F: '$7 !~ /(nologin|false|sync|halt|shutdown)$/ {print $1" (uid "$3") "$7}' /etc/passwd
echo
echo "== Administrators"
for g in sudo wheel admin; do
    getent group "$g" >/dev/null 2>&1 && echo "$g: $(getent group "$g" | cut -d: -f4)"
done
echo
echo "== Recent logins"
last -n 10 2>/dev/null || echo "(no login history)"
