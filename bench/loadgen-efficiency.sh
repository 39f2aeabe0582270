#!/usr/bin/env bash
# Is strata-bench fast enough not to be the bottleneck? Runs the same load
# against one redis-server with redis-benchmark and with strata-bench,
# alternating, ROUNDS rounds, and reports the median ops/s each tool saw.
#
# Equivalent settings: one load thread each, 50 connections, 100-byte
# values, keys drawn uniformly from 1 M (strata-bench: --distinct-client-seed,
# or every client would repeat the same keys, as memtier does by default),
# SETs then GETs as separate runs,
# at pipeline 1 and 16.
set -euo pipefail
ROUNDS=${ROUNDS:-3}
cd "$(dirname "$0")/.."
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null || {
    echo "needs redis-server and redis-benchmark (Debian: apt-get install redis-server redis-tools)" >&2
    exit 1
}
cargo build --release --bin strata-bench >&2
BENCH=target/release/strata-bench
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
WORK=$(mktemp -d)
redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" --logfile "$WORK/redis.log" &
REDIS=$!
trap 'kill $REDIS 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

redis_benchmark() { # test pipeline requests
    redis-benchmark -p "$PORT" -c 50 -n "$3" -r 1000000 -d 100 -P "$2" -t "$1" --csv 2>/dev/null |
        awk -F'","' 'NR>1 { gsub(/"/, "", $2); print $2; exit }'
}
strata_bench() { # test pipeline requests
    local ratio=1:0
    [ "$1" = get ] && ratio=0:1
    "$BENCH" -p "$PORT" -t 1 -c 50 -n $(($3 / 50)) --key-minimum 0 --key-maximum 999999 -d 100 \
        --pipeline "$2" --ratio "$ratio" --distinct-client-seed --hide-histogram --key-prefix key: |
        awk '/^Totals/ { print $2 }'
}

echo "| test | pipeline | redis-benchmark ops/s | strata-bench ops/s | strata-bench / redis-benchmark |"
echo "|---|---|---|---|---|"
for pipeline in 1 16; do
    requests=200000
    [ "$pipeline" = 16 ] && requests=2000000
    for test in set get; do
        a=()
        b=()
        for _ in $(seq "$ROUNDS"); do
            a+=("$(redis_benchmark "$test" "$pipeline" "$requests")")
            b+=("$(strata_bench "$test" "$pipeline" "$requests")")
        done
        ma=$(printf '%s\n' "${a[@]}" | median)
        mb=$(printf '%s\n' "${b[@]}" | median)
        echo "| ${test^^} | $pipeline | $ma | $mb | $(awk -v a="$ma" -v b="$mb" 'BEGIN { printf "%.2f", b / a }') |"
        echo "  raw $test P$pipeline: redis-benchmark ${a[*]} / strata-bench ${b[*]}" >&2
    done
done
