#!/bin/sh
# Installs gale-agent from a Gale server and enrolls this machine.
#
# Usage:
#   curl -fsSL @SERVER_DISPLAY@/api/v1/agents/install.sh | sudo sh -s -- \
#     --key <enrollment key> --secret <enrollment secret> [--site-id <uuid>] [--version <v>]
#
# Options:
#   --key KEY         enrollment key (required)
#   --secret SECRET   enrollment secret (or set GALE_ENROLLMENT_SECRET)
#   --site-id UUID    site to enroll into, when the key does not pin one
#   --version V       install that registered version instead of the promoted one
#   --prefix DIR      install directory (or set GALE_INSTALL_DIR; default /usr/local/bin)
#   --config PATH     agent configuration file, passed on to gale-agent
#   --server URL      server address (default: the server this script came from)
#   --no-service      enroll only; do not install or start the system service
#
# Linux and macOS only. Running it again is safe: an enrolled agent keeps its enrollment.
set -eu

server=@SERVER@
key=""
secret="${GALE_ENROLLMENT_SECRET:-}"
site_id=""
version=""
prefix="${GALE_INSTALL_DIR:-/usr/local/bin}"
config=""
service=1

die() {
	echo "gale-agent install: $*" >&2
	exit 1
}

usage() {
	echo "usage: sh install.sh --key KEY --secret SECRET [--site-id UUID] [--version V] [--prefix DIR]"
	echo "                     [--config PATH] [--server URL] [--no-service]"
}

need_value() {
	[ "$2" -ge 2 ] || die "$1 needs a value"
}

while [ $# -gt 0 ]; do
	case "$1" in
	--key) need_value "$1" $#; key=$2; shift 2 ;;
	--secret) need_value "$1" $#; secret=$2; shift 2 ;;
	--site-id) need_value "$1" $#; site_id=$2; shift 2 ;;
	--version) need_value "$1" $#; version=$2; shift 2 ;;
	--prefix) need_value "$1" $#; prefix=$2; shift 2 ;;
	--config) need_value "$1" $#; config=$2; shift 2 ;;
	--server) need_value "$1" $#; server=${2%/}; shift 2 ;;
	--no-service) service=0; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option $1" ;;
	esac
done

[ -n "$key" ] || die "--key is required: the enrollment key from the Gale console"
[ -n "$secret" ] || die "--secret (or GALE_ENROLLMENT_SECRET) is required: the enrollment secret"

case "$(uname -s)" in
Linux) os=linux ;;
Darwin) os=darwin ;;
*) die "unsupported operating system $(uname -s); download the agent from $server/api/v1/agents/download/<os>/<arch>" ;;
esac
case "$(uname -m)" in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) die "unsupported architecture $(uname -m); gale-agent is built for amd64 and arm64" ;;
esac

url="$server/api/v1/agents/download/$os/$arch"
if [ -n "$version" ]; then
	# "+" in a query means a space; a version's build suffix keeps its "+".
	url="$url?version=$(printf '%s' "$version" | sed 's/+/%2B/g')"
fi

tmp=$(mktemp -d 2>/dev/null || mktemp -d -t gale-agent) || die "cannot create a temporary directory"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
bin="$tmp/gale-agent"
headers="$tmp/headers"

echo "Downloading gale-agent for $os/$arch from $server"
if command -v curl >/dev/null 2>&1; then
	status=$(curl -sS -L -D "$headers" -o "$bin" -w '%{http_code}' "$url") || die "download from $url failed"
elif command -v wget >/dev/null 2>&1; then
	# wget prints the response headers (-S) on standard error; a 4xx also makes it fail.
	wget -q -S -O "$bin" "$url" 2>"$headers" || true
	status=$(sed -n 's/^ *HTTP\/[0-9.]* \([0-9][0-9]*\).*/\1/p' "$headers" | tail -n 1)
	[ -n "$status" ] || die "download from $url failed: $(cat "$headers")"
else
	die "neither curl nor wget is installed"
fi
if [ "$status" != 200 ]; then
	message=$(sed -n 's/.*"message": *"\([^"]*\)".*/\1/p' "$bin" 2>/dev/null | head -n 1)
	die "download from $url failed (HTTP $status)${message:+: $message}"
fi

# header NAME prints the value of the last response's header NAME (names ignore case).
header() {
	tr -d '\r' <"$headers" | awk -v name="$1" '
		{ n = $0; sub(/:.*/, "", n); sub(/^ */, "", n) }
		tolower(n) == tolower(name) { v = $0; sub(/^[^:]*: */, "", v) }
		END { print v }'
}
want=$(header X-Checksum-Sha256)
agent_version=$(header X-Agent-Version)
[ -n "$want" ] || die "the server sent no X-Checksum-Sha256 header; refusing to install an unverified binary"
if command -v sha256sum >/dev/null 2>&1; then
	got=$(sha256sum "$bin" | cut -d ' ' -f 1)
elif command -v shasum >/dev/null 2>&1; then
	got=$(shasum -a 256 "$bin" | cut -d ' ' -f 1)
else
	got=""
	echo "gale-agent install: neither sha256sum nor shasum is installed; the checksum is not verified" >&2
fi
if [ -n "$got" ] && [ "$got" != "$want" ]; then
	die "checksum mismatch: expected $want, got $got; the download is corrupt or was altered"
fi

mkdir -p "$prefix" 2>/dev/null || die "cannot create $prefix; run as root (sudo) or pass --prefix DIR"
target="$prefix/gale-agent"
# Copy beside the target, then rename: a running agent keeps its old file until it restarts.
cp "$bin" "$target.new" 2>/dev/null || die "cannot write to $prefix; run as root (sudo) or pass --prefix DIR"
chmod 0755 "$target.new" || die "cannot make $target.new executable"
mv -f "$target.new" "$target" || die "cannot replace $target"
echo "Installed gale-agent ${agent_version:-} to $target"

set -- enroll "$key" --server "$server" --enrollment-secret "$secret"
[ -z "$site_id" ] || set -- "$@" --site-id "$site_id"
set -- "$@" --quiet
[ -z "$config" ] || set -- "$@" --config "$config"
"$target" "$@" || die "enrollment failed; check the key, the secret and that this machine reaches $server"

if [ "$service" = 1 ]; then
	if [ -n "$config" ]; then
		"$target" service install --config "$config" || die "gale-agent service install failed"
		"$target" service start --config "$config" || die "gale-agent service start failed"
	else
		"$target" service install || die "gale-agent service install failed"
		"$target" service start || die "gale-agent service start failed"
	fi
	echo "gale-agent is installed, enrolled and running"
else
	echo "gale-agent is installed and enrolled (service not installed: --no-service)"
fi
