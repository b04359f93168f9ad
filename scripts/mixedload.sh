#!/usr/bin/env bash
# Mixed load: the API beside agents heartbeating. Writes DEVICES devices of one partner (100
# organizations) and AGENTS enrolled agents straight into a fresh database (enrolling them one
# request at a time would take minutes at 100,000), starts a real gale on it, then runs
# gale-agentsim: CLIENTS clients send LIST_PATH back to back for DURATION alone, then for
# DURATION again while AGENTS simulated agents heartbeat every HEARTBEAT over WebSocket.
# Prints the list's requests per second alone and mixed (and their ratio), its p50 and p99,
# its 503s, and the heartbeats' acknowledgement p50, p99 and max with how many were sent,
# acknowledged and never acknowledged.
#
#   scripts/mixedload.sh                                 # 100,000 devices, 1,000 agents every 1 s, 32 clients, 30 s; SQLite
#   DATABASE_URL=postgres://... scripts/mixedload.sh     # an empty PostgreSQL database
#   DEVICES=2000 AGENTS=200 DURATION=10s scripts/mixedload.sh   # small (CI's smoke check)
#
# Linux only; needs curl and jq. As root it raises the file-descriptor limits itself.
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICES=${DEVICES:-100000}
AGENTS=${AGENTS:-1000}
HEARTBEAT=${HEARTBEAT:-1s}
CLIENTS=${CLIENTS:-32}
DURATION=${DURATION:-30s}
LIST_PATH=${LIST_PATH:-/api/v1/devices?limit=50}
# Past ~28,000 agents one source address runs out of ports: give each connection its own.
SPREAD=${SPREAD:-$([ "$AGENTS" -gt 20000 ] && echo true || echo false)}
PORT=${PORT:-18183}
work=$(mktemp -d)
trap 'kill $(cat "$work/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
# Server and simulator each hold a descriptor per agent.
need=$((AGENTS + CLIENTS + 1000))
[ "$(ulimit -Hn)" -ge "$need" ] || ulimit -Hn "$need" 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -ge "$need" ] || { echo "the file-descriptor limit $(ulimit -n) is too low for $AGENTS agents" >&2; exit 1; }

go build -o "$work/gale" ./cmd/gale
go build -o "$work/gale-agentsim" ./cmd/gale-agentsim
export DATABASE_URL=${DATABASE_URL:-sqlite:$work/gale.db}
start=$(date +%s%N)
PARTNER=$("$work/gale-agentsim" -seed-devices "$DEVICES" -seed-agents "$AGENTS" -state "$work/state.json")
echo "seeded $DEVICES devices and $AGENTS agents in $((($(date +%s%N) - start) / 1000000)) ms"
export DATA_DIR=$work LISTEN_ADDR=127.0.0.1:$PORT LOG_LEVEL=warn PUBLIC_URL=http://127.0.0.1:$PORT
export BOOTSTRAP_ADMIN_EMAIL=load@example.test BOOTSTRAP_ADMIN_PASSWORD=Load-Test-Passw0rd
"$work/gale" serve >"$work/log" 2>&1 &
pid=$!
echo $pid >"$work/pid"
API=http://127.0.0.1:$PORT/api/v1
until curl -sf "http://127.0.0.1:$PORT/ready" >/dev/null; do
	kill -0 $pid 2>/dev/null || { echo "gale did not start:" >&2; cat "$work/log" >&2; exit 1; }
	sleep 0.2
done

# The list is a Partner Admin's, of the seeded partner, as in BenchmarkListDevices.
GALE_USER_PASSWORD=Load-Test-Passw0rd "$work/gale" user create --email tech@example.test --level partner \
	--partner-id "$PARTNER" >/dev/null
TOKEN=$(curl -sf -H 'Content-Type: application/json' -d '{"email":"tech@example.test","password":"Load-Test-Passw0rd"}' \
	"$API/auth/login" | jq -r .accessToken)

echo "$CLIENTS clients on GET $LIST_PATH, alone and beside $AGENTS agents heartbeating every $HEARTBEAT, $DURATION each"
"$work/gale-agentsim" -server "http://127.0.0.1:$PORT" -agents "$AGENTS" -state "$work/state.json" -heartbeat "$HEARTBEAT" \
	-duration "$DURATION" -token "$TOKEN" -commands 0 -list-clients "$CLIENTS" -list-path "$LIST_PATH" -spread-sources="$SPREAD"
echo "server: peak resident memory $(awk '/VmHWM/ {printf "%.0f MiB", $2/1024}' "/proc/$pid/status"), $(grep -c '"level":"ERROR"' "$work/log" || true) errors logged"
grep -m3 '"level":"ERROR"' "$work/log" || true
