#!/bin/sh
# Before gale's files go: dpkg passes "remove" (or "upgrade" before an upgrade); RPM passes
# how many gale packages remain installed afterwards (0: removal).
set -e

if [ "$1" = remove ] || [ "$1" = 0 ]; then
	if [ -d /run/systemd/system ]; then
		if command -v deb-systemd-invoke >/dev/null; then
			deb-systemd-invoke stop gale.service >/dev/null || true
		else
			systemctl --no-reload disable --now gale.service >/dev/null 2>&1 || true
		fi
	fi
fi
