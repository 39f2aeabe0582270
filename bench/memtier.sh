#!/usr/bin/env bash
# strata-server vs redis-server under memtier_benchmark, the load generator
# of the published benchmarks Strata reproduces. Each load alternates the
# two servers (A, B, A, B, …) for ROUNDS rounds, each round on freshly
# started servers with empty data directories, and prints the median ops/s
# of each, the ratio, and the median p99 latency.
#
# Loads (LOADS, space-separated):
#   strings-p16     100-byte values, SET:GET 1:1, pipeline 16, no persistence
#   strings-p1      the same at pipeline 1
#   aof-off         10 000-byte SETs, pipeline 25, no persistence
#   aof-everysec    the same, log/AOF with appendfsync everysec
#   aof-always      the same, appendfsync always
#   log-p1          100-byte values, SET:GET 1:1, pipeline 1, log/AOF with
#                   appendfsync everysec (what the log costs a reply)
# STRATA_ARGS adds arguments to strata-server's command line (e.g.
# STRATA_ARGS="--log-direct-io no" to compare the log's two write paths).
# All with 50 connections (2 threads × 25) over a 1 M-key (strings) or
# 100 k-key (10 KB) space, random keys, TEST_TIME seconds per run.
#
# memtier_benchmark: $MEMTIER, else on PATH, else built once from
# github.com/RedisLabs/memtier_benchmark under ~/.cache/strata-bench
# (needs build-essential, autoconf, automake, libtool, pkg-config,
# libevent-dev, libssl-dev, zlib1g-dev).
#
# Usage: bench/memtier.sh
#        LOADS="strings-p16 strings-p1" ROUNDS=5 bench/memtier.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
LOADS=${LOADS:-"strings-p16 strings-p1"}
TEST_TIME=${TEST_TIME:-15}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup memtier

if [ -z "${MEMTIER:-}" ]; then
    if command -v memtier_benchmark >/dev/null; then
        MEMTIER=$(command -v memtier_benchmark)
    else
        CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/strata-bench
        MEMTIER=$CACHE/memtier_benchmark/memtier_benchmark
        if [ ! -x "$MEMTIER" ]; then
            echo "building memtier_benchmark under $CACHE ..." >&2
            mkdir -p "$CACHE"
            rm -rf "$CACHE/memtier_benchmark"
            git clone -q https://github.com/RedisLabs/memtier_benchmark "$CACHE/memtier_benchmark"
            (cd "$CACHE/memtier_benchmark" && autoreconf -ivf && ./configure && make -j"$(nproc)") >&2
        fi
    fi
fi

# Server arguments and memtier arguments of a load.
load_args() {
    case $1 in
    strings-p16 | strings-p1)
        SERVER_REDIS=(--save "" --appendonly no)
        SERVER_STRATA=(--save "" --appendonly no)
        local pipeline=${1#strings-p}
        LOAD=(-d 100 --ratio=1:1 --pipeline="$pipeline" --key-maximum=1000000)
        ;;
    log-p1)
        SERVER_REDIS=(--save "" --appendonly yes --appendfsync everysec)
        SERVER_STRATA=(--save "" --appendonly yes --appendfsync everysec)
        LOAD=(-d 100 --ratio=1:1 --pipeline=1 --key-maximum=1000000)
        ;;
    aof-off)
        SERVER_REDIS=(--save "" --appendonly no)
        SERVER_STRATA=(--save "" --appendonly no)
        LOAD=(-d 10000 --ratio=1:0 --pipeline=25 --key-maximum=100000)
        ;;
    aof-everysec | aof-always)
        local policy=${1#aof-}
        SERVER_REDIS=(--save "" --appendonly yes --appendfsync "$policy")
        SERVER_STRATA=(--save "" --appendonly yes --appendfsync "$policy")
        LOAD=(-d 10000 --ratio=1:0 --pipeline=25 --key-maximum=100000)
        ;;
    *)
        echo "unknown load $1" >&2
        exit 1
        ;;
    esac
}

# "ops/s p99-ms" of one memtier run against PORT.
memtier_run() {
    local port=$1 out=$WORK/memtier.json
    "$MEMTIER" -s 127.0.0.1 -p "$port" --protocol=redis -t 2 -c 25 \
        --key-pattern=R:R --test-time="$TEST_TIME" --hide-histogram \
        --json-out-file="$out" "${LOAD[@]}" >/dev/null 2>&1
    python3 - "$out" <<'PY'
import json, sys
totals = json.load(open(sys.argv[1]))["ALL STATS"]["Totals"]
p99 = totals.get("Percentile Latencies", {}).get("p99.00", 0)
print(f'{totals["Ops/sec"]:.0f} {p99:.3f}')
PY
}

for load in $LOADS; do
    load_args "$load"
    declare -a OPS_REDIS=() OPS_STRATA=() P99_REDIS=() P99_STRATA=()
    for round in $(seq "$ROUNDS"); do
        for kind in redis strata; do
            # Alternate which server goes first, round by round.
            if [ $((round % 2)) = 0 ]; then kind=$([ "$kind" = redis ] && echo strata || echo redis); fi
            name=${kind}_$round
            # shellcheck disable=SC2086 # STRATA_ARGS is split on purpose
            if [ "$kind" = redis ]; then start "$name" redis "${SERVER_REDIS[@]}"; else start "$name" strata "${SERVER_STRATA[@]}" ${STRATA_ARGS:-}; fi
            read -r ops p99 < <(memtier_run "$(port_of "$name")")
            stop "$name"
            rm -rf "${WORK:?}/$name"
            echo "$load round $round $kind: $ops ops/s, p99 $p99 ms" >&2
            if [ "$kind" = redis ]; then OPS_REDIS+=("$ops"); P99_REDIS+=("$p99"); else OPS_STRATA+=("$ops"); P99_STRATA+=("$p99"); fi
        done
    done
    strata=$(printf '%s\n' "${OPS_STRATA[@]}" | median)
    redis=$(printf '%s\n' "${OPS_REDIS[@]}" | median)
    printf '%-13s strata %8.0f ops/s (p99 %s ms)  redis %8.0f ops/s (p99 %s ms)  ratio %s  [strata: %s | redis: %s]\n' \
        "$load" "$strata" "$(printf '%s\n' "${P99_STRATA[@]}" | median)" \
        "$redis" "$(printf '%s\n' "${P99_REDIS[@]}" | median)" "$(ratio "$strata" "$redis")" \
        "${OPS_STRATA[*]}" "${OPS_REDIS[*]}"
done
