#!/bin/sh
# After gale-agent's files went. dpkg passes "remove", "purge" or "upgrade"; RPM passes how
# many gale-agent packages remain installed (0: removal, 1: after an upgrade).
set -e

case "$1" in
remove)
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
	fi
	if command -v deb-systemd-helper >/dev/null; then
		deb-systemd-helper mask gale-agent.service >/dev/null || true
	fi
	;;
purge)
	if command -v deb-systemd-helper >/dev/null; then
		deb-systemd-helper purge gale-agent.service >/dev/null || true
		deb-systemd-helper unmask gale-agent.service >/dev/null || true
	fi
	# Purging forgets the enrollment (the device's credential) and the agent's state.
	rm -rf /etc/gale-agent /var/lib/gale-agent
	;;
0)
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
	fi
	;;
1)
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
		systemctl try-restart gale-agent.service >/dev/null 2>&1 || true
	fi
	;;
esac
