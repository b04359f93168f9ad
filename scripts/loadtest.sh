#!/usr/bin/env bash
# Load test of an authenticated GET /orgs/organizations?limit=100 with 10,000 organizations,
# from wrk (16 connections) against a real gale process.
#
#   scripts/loadtest.sh                      # embedded SQLite in a temporary directory
#   DATABASE_URL=postgres://... scripts/loadtest.sh   # an empty PostgreSQL database
#
# Needs wrk, curl and jq (Debian packages of the same names), and psql for PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
ORGS=${ORGS:-10000}
DURATION=${DURATION:-15s}
work=$(mktemp -d)
trap 'kill $(cat "$work/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT

go build -o "$work/gale" ./cmd/gale
export DATABASE_URL=${DATABASE_URL:-sqlite:$work/gale.db}
export DATA_DIR=$work LISTEN_ADDR=127.0.0.1:18181 LOG_LEVEL=warn
export BOOTSTRAP_ADMIN_EMAIL=load@example.test BOOTSTRAP_ADMIN_PASSWORD=Load-Test-Passw0rd
"$work/gale" serve >"$work/log" 2>&1 &
echo $! >"$work/pid"
API=http://127.0.0.1:18181/api/v1
until curl -sf http://127.0.0.1:18181/ready >/dev/null; do sleep 0.2; done

login() {
	curl -sf -H 'Content-Type: application/json' -d "{\"email\":\"$1\",\"password\":\"$2\"}" $API/auth/login | jq -r .accessToken
}
ADMIN=$(login load@example.test Load-Test-Passw0rd)
PARTNER=$(curl -sf -H 'Content-Type: application/json' -H "Authorization: Bearer $ADMIN" \
	-d '{"name":"Load MSP"}' $API/orgs/partners | jq -r .id)
echo "seeding $ORGS organizations through the API"
for i in $(seq 1 "$ORGS"); do
	[ "$i" -eq 1 ] || echo next
	printf 'url = "%s"\nheader = "Content-Type: application/json"\nheader = "Authorization: Bearer %s"\ndata = "{\\"partnerId\\":\\"%s\\",\\"name\\":\\"Customer %05d\\",\\"createDefaultSite\\":false}"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n' \
		"$API/orgs/organizations" "$ADMIN" "$PARTNER" "$i"
done >"$work/seed.curl"
curl -s --parallel --parallel-max 4 -K "$work/seed.curl" >"$work/codes"
created=$(grep -c "^201$" "$work/codes" || true)
[ "$created" -eq "$ORGS" ] || { echo "created $created of $ORGS organizations:" >&2; sort "$work/codes" | uniq -c >&2; grep -m5 "error" "$work/log" >&2; exit 1; }
# Measure the steady state: on PostgreSQL, autovacuum analyzes new rows within about a
# minute; do it now instead of waiting.
case "$DATABASE_URL" in postgres*) psql -q "$DATABASE_URL" -c ANALYZE ;; esac
GALE_USER_PASSWORD=Load-Test-Passw0rd "$work/gale" user create --email tech@example.test --level partner \
	--partner-id "$PARTNER" >/dev/null
TOKEN=$(login tech@example.test Load-Test-Passw0rd)
curl -sf -H "Authorization: Bearer $TOKEN" "$API/orgs/organizations?limit=100" | jq '.data | length' |
	grep -qx 100 || { echo "the list did not return 100 organizations" >&2; exit 1; }

echo "wrk: 1 and then 16 connections, $DURATION each"
for c in 1 16; do
	echo "== $c connection(s)"
	wrk -t"$(( c < 2 ? 1 : 2 ))" -c"$c" -d"$DURATION" --latency -H "Authorization: Bearer $TOKEN" "$API/orgs/organizations?limit=100"
done
