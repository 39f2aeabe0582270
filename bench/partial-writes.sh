#!/usr/bin/env bash
# Small changes to one big string: time and log bytes of 20 SETBITs on a
# SIZE_MB value, strata-server and redis-server (AOF on) side by side.
# Each change should cost in proportion to what it changes, not to the
# value (Strata logs a SETRANGE record of the bytes written).
#
# Usage: bench/partial-writes.sh            (SIZE_MB=256)
#        SIZE_MB=64 bench/partial-writes.sh
set -euo pipefail
SIZE_MB=${SIZE_MB:-256}
cd "$(dirname "$0")/.."
source bench/lib.sh
cargo build --release --bin strata-server >&2
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$WORK"' EXIT

measure() { # name port log-size-command
    head -c $((SIZE_MB << 20)) /dev/zero | tr '\0' 'a' | redis-cli -p "$2" -x SET big >/dev/null
    local before after start end
    before=$(eval "$3")
    start=$(date +%s.%N)
    for n in $(seq 0 19); do
        redis-cli -p "$2" SETBIT big $(( n * 3000017 % (SIZE_MB * 8388608) )) 0 >/dev/null
    done
    end=$(date +%s.%N)
    after=$(eval "$3")
    printf '%-14s 20 SETBITs on %d MB: %6.3f s, log grew %d bytes\n' "$1" "$SIZE_MB" \
        "$(echo "$end - $start" | bc)" $((after - before))
}

STRATA_PORT=$(free_port)
target/release/strata-server --port "$STRATA_PORT" --dir "$WORK/strata" >/dev/null 2>&1 &
wait_ping "$STRATA_PORT"
measure strata-server "$STRATA_PORT" \
    "redis-cli -p $STRATA_PORT INFO persistence | tr -d '\r' | awk -F: '/^aof_current_size/ {print \$2}'"

REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --dir "$WORK" --appendonly yes --save "" \
    --auto-aof-rewrite-percentage 0 >/dev/null 2>&1 &
wait_ping "$REDIS_PORT"
measure redis-server "$REDIS_PORT" \
    "du -sb $WORK/appendonlydir | cut -f1"
