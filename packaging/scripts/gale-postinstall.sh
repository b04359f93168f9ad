#!/bin/sh
# After gale's files are in place: on installation and upgrade. dpkg passes "configure"
# (and the version configured before, on an upgrade); RPM passes how many gale packages
# are installed now (1: installation, 2: upgrade).
set -e

case "$1" in
configure) dpkg=1 ;;
[0-9]*) dpkg= ;;
*) exit 0 ;;
esac

# The server runs as the system user gale, which owns its state in /var/lib/gale.
if ! getent group gale >/dev/null; then
	groupadd --system gale
fi
if ! getent passwd gale >/dev/null; then
	nologin=$(command -v nologin || echo /bin/false)
	useradd --system --gid gale --home-dir /var/lib/gale --no-create-home --shell "$nologin" \
		--comment "Gale server" gale
fi
install -d -o gale -g gale -m 0750 /var/lib/gale

# The settings are readable by the server and root only: they may hold passwords
# (DATABASE_URL, SMTP_URL).
chown root:gale /etc/gale/gale.env
chmod 0640 /etc/gale/gale.env

# Secrets of this installation, generated once; the server refuses to start in production
# without them. Every node of an installation needs the same, so copy the file to the others.
if [ ! -e /etc/gale/secrets.env ]; then
	(
		umask 077
		{
			echo "# Generated when the gale package was installed. Keep a copy with the database"
			echo "# backups: without APP_ENCRYPTION_KEY, stored MFA secrets cannot be read."
			echo "JWT_SECRET=$(head -c 48 /dev/urandom | base64 | tr -d '\n')"
			echo "APP_ENCRYPTION_KEY=$(head -c 32 /dev/urandom | base64 | tr -d '\n')"
		} >/etc/gale/secrets.env.new
	)
	chown root:gale /etc/gale/secrets.env.new
	chmod 0640 /etc/gale/secrets.env.new
	mv /etc/gale/secrets.env.new /etc/gale/secrets.env
fi

# The service starts on installation and restarts on upgrade, where systemd runs.
if [ -n "$dpkg" ]; then
	deb-systemd-helper unmask gale.service >/dev/null || true
	if deb-systemd-helper --quiet was-enabled gale.service; then
		deb-systemd-helper enable gale.service >/dev/null || true
	else
		deb-systemd-helper update-state gale.service >/dev/null || true
	fi
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
		if [ -n "$2" ]; then
			deb-systemd-invoke restart gale.service >/dev/null || true
		else
			deb-systemd-invoke start gale.service >/dev/null || true
		fi
	fi
elif [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
	if [ "$1" -eq 1 ]; then
		# The distribution's presets decide whether a new service starts enabled.
		systemctl --no-reload preset gale.service >/dev/null 2>&1 || true
	fi
fi

case "$1:${2:-}" in
configure: | 1:)
	echo "gale: set PUBLIC_URL in /etc/gale/gale.env to the address endpoints reach this server at,"
	echo "gale: and BOOTSTRAP_ADMIN_EMAIL and BOOTSTRAP_ADMIN_PASSWORD for the first administrator;"
	echo "gale: then systemctl restart gale (see /usr/share/doc/gale/operations.md)"
	;;
esac
