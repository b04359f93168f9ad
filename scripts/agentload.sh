#!/usr/bin/env bash
# Load test of the agent channel: AGENTS simulated agents (gale-agentsim) enroll, hold one
# WebSocket each to a real gale process, heartbeat every HEARTBEAT, and receive COMMANDS
# commands; prints heartbeat and command-delivery latency and the server's peak memory.
#
#   scripts/agentload.sh                                # 10,000 agents, embedded SQLite
#   AGENTS=20000 scripts/agentload.sh                   # push further
#   DATABASE_URL=postgres://... scripts/agentload.sh    # an empty PostgreSQL database
#   FLEET=true scripts/agentload.sh                     # also run a script on every agent (an automation)
#   FLEET=true SCAN=true scripts/agentload.sh           # ... or scan every agent for patches
#
# Needs curl and jq, and a file-descriptor limit above AGENTS for both processes (the script
# raises the soft limit to the hard one).
set -euo pipefail
cd "$(dirname "$0")/.."
AGENTS=${AGENTS:-10000}
HEARTBEAT=${HEARTBEAT:-60s}
DURATION=${DURATION:-4m}
COMMANDS=${COMMANDS:-300}
FLEET=${FLEET:-false}
SCAN=${SCAN:-false}
PORT=${PORT:-18182}
work=$(mktemp -d)
trap 'kill $(cat "$work/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -gt $((AGENTS + 1000)) ] || { echo "the file-descriptor limit $(ulimit -n) is too low for $AGENTS agents" >&2; exit 1; }

go build -o "$work/gale" ./cmd/gale
go build -o "$work/gale-agentsim" ./cmd/gale-agentsim
export DATABASE_URL=${DATABASE_URL:-sqlite:$work/gale.db}
export DATA_DIR=$work LISTEN_ADDR=127.0.0.1:$PORT LOG_LEVEL=warn PUBLIC_URL=http://127.0.0.1:$PORT
export BOOTSTRAP_ADMIN_EMAIL=load@example.test BOOTSTRAP_ADMIN_PASSWORD=Load-Test-Passw0rd
# Enrollment is rate-limited per client address; every simulated agent shares one.
export AGENT_ENROLL_RATE_PER_MINUTE=0
"$work/gale" serve >"$work/log" 2>&1 &
pid=$!
echo $pid >"$work/pid"
API=http://127.0.0.1:$PORT/api/v1
until curl -sf "http://127.0.0.1:$PORT/ready" >/dev/null; do sleep 0.2; done

post() { curl -sf -H 'Content-Type: application/json' -H "Authorization: Bearer $TOKEN" -d "$2" "$API$1"; }
TOKEN=$(curl -sf -H 'Content-Type: application/json' -d '{"email":"load@example.test","password":"Load-Test-Passw0rd"}' \
	"$API/auth/login" | jq -r .accessToken)
PARTNER=$(post /orgs/partners '{"name":"Load MSP"}' | jq -r .id)
ORG=$(post /orgs/organizations "{\"partnerId\":\"$PARTNER\",\"name\":\"Load Customer\"}" | jq -r .id)
post /enrollment-keys "{\"orgId\":\"$ORG\",\"name\":\"load\",\"maxUsage\":100000,\"ttlMinutes\":600,\"issueEnrollmentSecret\":true}" >"$work/key.json"

peak() { awk '/VmHWM/ {printf "%.0f MiB", $2/1024}' "/proc/$pid/status"; }
"$work/gale-agentsim" -server "http://127.0.0.1:$PORT" -agents "$AGENTS" -key "$(jq -r .key "$work/key.json")" \
	-secret "$(jq -r .enrollmentSecret "$work/key.json")" -state "$work/state.json" -heartbeat "$HEARTBEAT" \
	-duration "$DURATION" -token "$TOKEN" -commands "$COMMANDS" -fleet="$FLEET" -scan="$SCAN"
echo "server: peak resident memory $(peak); at the end:"
curl -sf "http://127.0.0.1:$PORT/metrics" | grep -E '^(go_goroutines|go_memstats_heap_inuse_bytes|go_memstats_sys_bytes) '
echo "(GOGC=${GOGC:-400 by default})"
echo "devices: $(curl -sf -H "Authorization: Bearer $TOKEN" "$API/devices?limit=1&includeTotal=true" | jq .total) enrolled"
