#!/usr/bin/env bash
# A primary and its replica (one strata-server build, persistence off),
# redis-benchmark SETs of 100 B at pipeline 16 (50 connections, 1 M
# random keys) on the primary for SECS seconds; prints SETs/s and each
# thread's CPU time per SET on the primary (a) and the replica (b), from
# /proc/PID/task/*/schedstat. Run it alternately for two builds to see
# which thread a change moved.
#
# Usage: bench/replica-threads.sh path/to/strata-server [SECS]
set -euo pipefail
BIN=$(realpath "${1:?usage: bench/replica-threads.sh path/to/strata-server [SECS]}")
SECS=${2:-5}
command -v redis-benchmark >/dev/null || { echo "needs redis-benchmark (redis-tools)" >&2; exit 1; }
d=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
P=$(free_port)
R=$(free_port)
"$BIN" --port "$P" --dir "$d/p" --save "" --appendonly no >"$d/p.log" 2>&1 &
pp=$!
"$BIN" --port "$R" --dir "$d/r" --save "" --appendonly no --replicaof 127.0.0.1 "$P" >"$d/r.log" 2>&1 &
rp=$!
trap 'kill -9 $pp $rp 2>/dev/null; rm -rf "$d"' EXIT
for _ in $(seq 100); do
    redis-cli -p "$R" info replication 2>/dev/null | grep -q "master_link_status:up" && break
    sleep 0.1
done
snap() { for t in /proc/"$1"/task/*; do echo "$(cat "$t/comm") $(awk '{print $1}' "$t/schedstat")"; done | sort; }
sets() { redis-cli -p "$P" info commandstats | tr -d '\r' | awk -F'[=,:]' '$1=="cmdstat_set" {print $3}'; }
s0=$(sets)
s0=${s0:-0}
snap $pp >"$d/a0"
snap $rp >"$d/b0"
timeout "$SECS" redis-benchmark -p "$P" -t set -n 100000000 -r 1000000 -d 100 -c 50 -P 16 -q >/dev/null 2>&1 || true
snap $pp >"$d/a1"
snap $rp >"$d/b1"
n=$(($(sets) - s0))
echo "sets=$n per_s=$((n / SECS))"
for side in a b; do
    join <(awk '{c[$1]+=$2} END {for (k in c) print k, c[k]}' "$d/${side}0" | sort) \
        <(awk '{c[$1]+=$2} END {for (k in c) print k, c[k]}' "$d/${side}1" | sort) |
        awk -v n="$n" -v s="$side" '{d=$3-$2; if (d > 0) printf "%s %-22s %7.0f ns/SET\n", s, $1, d/n}'
done
