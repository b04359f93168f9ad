#!/usr/bin/env bash
# Load test of an authenticated GET /orgs/organizations?limit=100 with 10,000 organizations,
# from wrk (16 connections) against a real gale process.
#
#   scripts/loadtest.sh                      # embedded SQLite in a temporary directory
#   DATABASE_URL=postgres://... scripts/loadtest.sh   # an empty PostgreSQL database
#
# Needs wrk, curl and jq (Debian packages of the same names).
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
seq 1 "$ORGS" | xargs -P 4 -I{} curl -sf -o /dev/null -H 'Content-Type: application/json' \
	-H "Authorization: Bearer $ADMIN" \
	-d "{\"partnerId\":\"$PARTNER\",\"name\":\"Customer {}\",\"createDefaultSite\":false}" $API/orgs/organizations
GALE_USER_PASSWORD=Load-Test-Passw0rd "$work/gale" user create --email tech@example.test --level partner \
	--partner-id "$PARTNER" >/dev/null
TOKEN=$(login tech@example.test Load-Test-Passw0rd)
curl -sf -H "Authorization: Bearer $TOKEN" "$API/orgs/organizations?limit=100" | jq '.data | length' |
	grep -qx 100 || { echo "the list did not return 100 organizations" >&2; exit 1; }

echo "wrk: 2 threads, 16 connections, $DURATION"
wrk -t2 -c16 -d"$DURATION" --latency -H "Authorization: Bearer $TOKEN" "$API/orgs/organizations?limit=100"
