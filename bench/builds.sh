#!/usr/bin/env bash
# Two strata-server builds and redis-server, alternated (A, B, Redis, A, B,
# Redis, …) for ROUNDS rounds: strata-bench's strings load (100-byte values,
# SET:GET 1:1, 50 connections, 1 M random keys, persistence off) at
# pipeline 16 and 1, TEST_TIME seconds per run, each run on a fresh server.
# Prints every run, then the median ops/s and the median server CPU per
# request (user + system time of the server process ÷ requests) of each,
# and B's ratios to A and to Redis. For a change that must not move the
# figures (a refactor), A is the build before it.
#
# FSYNC=everysec or FSYNC=always runs all three with the log on (Strata's
# log, Redis' AOF) under that policy instead of with persistence off.
#
# Usage: bench/builds.sh OLD/strata-server NEW/strata-server
#        ROUNDS=5 TEST_TIME=10 FSYNC=always bench/builds.sh A B
set -euo pipefail

A=$(realpath "${1:?usage: bench/builds.sh A/strata-server B/strata-server}")
B=$(realpath "${2:?usage: bench/builds.sh A/strata-server B/strata-server}")
ROUNDS=${ROUNDS:-3}
TEST_TIME=${TEST_TIME:-8}
FSYNC=${FSYNC:-}
PERSIST=(--appendonly no)
if [ -n "$FSYNC" ]; then
    PERSIST=(--appendonly yes --appendfsync "$FSYNC")
fi

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup builds
TICK_US=$((1000000 / $(getconf CLK_TCK)))
RESULTS=$(mktemp)

# One run: prints "name pipeline ops/s cpu-µs-per-request".
run_one() {
    local name=$1 binary=$2 pipeline=$3 port dir pid before after ops
    port=$(free_port)
    dir=$(mktemp -d)
    if [ "$name" = redis ]; then
        redis-server --port "$port" --save "" "${PERSIST[@]}" --dir "$dir" >/dev/null 2>&1 &
    else
        "$binary" --port "$port" --dir "$dir" "${PERSIST[@]}" --save "" >/dev/null 2>&1 &
    fi
    pid=$!
    wait_ping "$port"
    before=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    ops=$("$BENCH" -s 127.0.0.1 -p "$port" -t 1 -c 50 --pipeline="$pipeline" -d 100 \
        --ratio=1:1 --key-maximum=1000000 --test-time="$TEST_TIME" --hide-histogram 2>/dev/null |
        awk '/^Totals/ { print $2 }')
    after=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
    awk -v n="$name" -v p="$pipeline" -v o="$ops" -v t=$((after - before)) -v us="$TICK_US" -v s="$TEST_TIME" \
        'BEGIN { printf "%s %s %.0f %.2f\n", n, p, o, t * us / (o * s) }'
}

for round in $(seq "$ROUNDS"); do
    for pipeline in 16 1; do
        for name in A B redis; do
            binary=$A
            [ "$name" = B ] && binary=$B
            run_one "$name" "$binary" "$pipeline" | tee -a "$RESULTS"
        done
    done
done

echo
declare -A OPS CPU
for pipeline in 16 1; do
    for name in A B redis; do
        OPS[$name]=$(awk -v n="$name" -v p="$pipeline" '$1 == n && $2 == p { print $3 }' "$RESULTS" | median)
        CPU[$name]=$(awk -v n="$name" -v p="$pipeline" '$1 == n && $2 == p { print $4 }' "$RESULTS" | median)
        printf "pipeline %-2s %-5s median %10.0f ops/s  %5.2f µs CPU/request\n" \
            "$pipeline" "$name" "${OPS[$name]}" "${CPU[$name]}"
    done
    echo "pipeline $pipeline: B/A ops $(ratio "${OPS[B]}" "${OPS[A]}"), CPU $(ratio "${CPU[B]}" "${CPU[A]}");" \
        "B/Redis ops $(ratio "${OPS[B]}" "${OPS[redis]}"), CPU $(ratio "${CPU[B]}" "${CPU[redis]}")"
done
rm -f "$RESULTS"
