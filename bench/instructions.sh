#!/usr/bin/env bash
# Instructions per command of strata-server builds, counted by valgrind's
# callgrind: a deterministic measure where wall-clock throughput on this
# shared machine swings by ±12 % (and by 2× with a busy neighbour).
#
# Each binary runs with one network thread under callgrind; redis-benchmark
# sends N SETs and N GETs (100-byte values, pipeline 16, 100 000 random
# keys); the busiest thread's instruction count (the network thread) is
# divided by the 2·N commands. Two runs of one binary agree within ~1 %.
#
# Usage: bench/instructions.sh                       (this tree's release build)
#        bench/instructions.sh old/strata-server target/release/strata-server
#        N=50000 bench/instructions.sh …
set -euo pipefail

N=${N:-100000}

cd "$(dirname "$0")/.."
source bench/lib.sh
ensure_redis_tools
ensure_valgrind
if [ $# = 0 ]; then
    cargo build --release --bin strata-server >&2
    set -- target/release/strata-server
fi
WORK=$(mktemp -d "${WORK_PARENT:-/tmp}/strata-instructions.XXXXXX")
trap cleanup EXIT

for binary in "$@"; do
    port=$(free_port)
    rm -rf "$WORK/run"
    mkdir -p "$WORK/run"
    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$WORK/run/cg.out" \
        "$binary" --port "$port" --bind 127.0.0.1 --dir "$WORK/run/data" --save "" \
        --appendonly no --threads 1 --hz 1 >"$WORK/run/server.log" 2>&1 &
    PID[run]=$!
    wait_ping "$port"
    redis-benchmark -p "$port" -c 10 -n "$N" -r 100000 -d 100 -P 16 -t set,get -q >/dev/null 2>&1
    kill -TERM "${PID[run]}"
    wait "${PID[run]}" 2>/dev/null || true
    unset "PID[run]"
    busiest=0
    for out in "$WORK"/run/cg.out-*; do
        total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ && !done { gsub(",", "", $1); print $1; done = 1 }')
        if [ "${total:-0}" -gt "$busiest" ]; then busiest=$total; fi
    done
    awk -v b="$busiest" -v n="$N" -v name="$binary" \
        'BEGIN { printf "%-50s %6.0f instructions per command (network thread, %d commands)\n", name, b / (2 * n), 2 * n }'
done
