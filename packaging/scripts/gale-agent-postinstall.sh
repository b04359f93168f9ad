#!/bin/sh
# After gale-agent's files are in place: on installation and upgrade. dpkg passes
# "configure" (and the version configured before, on an upgrade); RPM passes how many
# gale-agent packages are installed now (1: installation, 2: upgrade).
set -e

case "$1" in
configure) dpkg=1 ;;
[0-9]*) dpkg= ;;
*) exit 0 ;;
esac

# The service is enabled at once and starts once the machine is enrolled (the unit's
# ConditionPathExists); an enrolled agent restarts on upgrade.
if [ -n "$dpkg" ]; then
	deb-systemd-helper unmask gale-agent.service >/dev/null || true
	if deb-systemd-helper --quiet was-enabled gale-agent.service; then
		deb-systemd-helper enable gale-agent.service >/dev/null || true
	else
		deb-systemd-helper update-state gale-agent.service >/dev/null || true
	fi
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
		if [ -n "$2" ]; then
			deb-systemd-invoke restart gale-agent.service >/dev/null || true
		else
			deb-systemd-invoke start gale-agent.service >/dev/null || true
		fi
	fi
elif [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
	if [ "$1" -eq 1 ]; then
		systemctl --no-reload enable gale-agent.service >/dev/null 2>&1 || true
	fi
fi

if [ ! -e /etc/gale-agent/agent.json ]; then
	echo "gale-agent: enroll this machine, then start the service:"
	echo "gale-agent:   gale-agent enroll <key> --server <server address> --enrollment-secret <secret>"
	echo "gale-agent:   systemctl start gale-agent"
fi
