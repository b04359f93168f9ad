#!/bin/sh
# After gale's files went. dpkg passes "remove", "purge" or "upgrade"; RPM passes how many
# gale packages remain installed (0: removal, 1: after an upgrade).
set -e

case "$1" in
remove)
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
	fi
	if command -v deb-systemd-helper >/dev/null; then
		deb-systemd-helper mask gale.service >/dev/null || true
	fi
	;;
purge)
	if command -v deb-systemd-helper >/dev/null; then
		deb-systemd-helper purge gale.service >/dev/null || true
		deb-systemd-helper unmask gale.service >/dev/null || true
	fi
	# Purging removes what the package made: its generated secrets and the server's state,
	# the SQLite database included. The gale user stays, as files may still belong to it.
	rm -f /etc/gale/secrets.env
	rmdir /etc/gale 2>/dev/null || true
	rm -rf /var/lib/gale
	;;
0)
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
	fi
	;;
1)
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
		systemctl try-restart gale.service >/dev/null 2>&1 || true
	fi
	;;
esac
