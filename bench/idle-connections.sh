#!/usr/bin/env bash
# RAM per idle connection, Strata against redis-server: CONNS connections
# each send one PING and then stay idle; the server's RSS growth
# (/proc/PID/status VmRSS) after SETTLE seconds, divided by CONNS. Strata
# gives an idle connection's buffers back after 2 s (as Redis frees an
# idle client's query buffer). OLD=another strata-server adds that build.
# Servers alternate, ROUNDS rounds, fresh servers each.
#
# Usage: bench/idle-connections.sh
#        CONNS=5000 ROUNDS=3 SETTLE=3.5 OLD=/tmp/old/strata-server bench/idle-connections.sh
set -euo pipefail

CONNS=${CONNS:-5000}
ROUNDS=${ROUNDS:-3}
SETTLE=${SETTLE:-3.5}
OLD=${OLD:-}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup idle-connections

# per_connection KIND (of compared_kinds): bytes of RSS per idle connection.
per_connection() {
    local pid
    start_compared c "$1" --maxclients $((CONNS + 100)) --save ""
    pid=${PID[c]}
    python3 - "$(port_of c)" "$pid" "$CONNS" "$SETTLE" <<'PY'
import socket, sys, time
port, pid, n, settle = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
def rss():
    with open(f"/proc/{pid}/status") as f:
        return int(next(l for l in f if l.startswith("VmRSS")).split()[1]) * 1024
before = rss()
socks = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"PING\r\n")
    socks.append(s)
for s in socks:
    s.recv(64)
time.sleep(settle)
print(round((rss() - before) / n))
PY
    stop c
    rm -rf "$WORK/c"
}

echo "# RSS per idle connection ($CONNS connections, ${SETTLE} s idle)"
echo
echo "| round | server | bytes per connection |"
echo "|---|---|---|"
for round in $(seq "$ROUNDS"); do
    for kind in $(compared_kinds); do
        bytes=$(per_connection "$kind")
        echo "| $round | $kind | $bytes |"
    done
done
