#!/usr/bin/env bash
# Side-by-side throughput and memory: strata-server vs redis-server.
#
# Both servers run on this machine, on free ports, persistence off, loaded
# by the same redis-benchmark. Each measurement alternates the servers
# (A, B, A, B, …) for ROUNDS rounds and reports the median ops/s of each
# and their ratio, because this machine is shared and one run of either can
# be off by ±12 %.
#
# Usage: bench/compare-redis.sh            (defaults below)
#        ROUNDS=5 DATA_SIZE=1000 bench/compare-redis.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
DATA_SIZE=${DATA_SIZE:-100}
KEYSPACE=${KEYSPACE:-1000000}
REQUESTS_P1=${REQUESTS_P1:-200000}
REQUESTS_P16=${REQUESTS_P16:-2000000}
MEMORY_KEYS=${MEMORY_KEYS:-1000000}

cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    echo "installing redis-server and redis-tools (Debian packages)..." >&2
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi

cargo build --release --bin strata-server >&2
STRATA=target/release/strata-server

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

WORK=$(mktemp -d)
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

REDIS_PORT=$(free_port)
STRATA_PORT=$(free_port)
STRATA1_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" \
    --logfile "$WORK/redis.log" --daemonize no &
PIDS+=($!)
"$STRATA" --port "$STRATA_PORT" --bind 127.0.0.1 --dir "$WORK/strata" --appendonly no --save "" >"$WORK/strata.log" 2>&1 &
PIDS+=($!)
# The same binary with one network thread: on a small machine the load
# generator needs a core too, and this shows what the second thread costs
# or buys there.
"$STRATA" --port "$STRATA1_PORT" --bind 127.0.0.1 --dir "$WORK/strata1" --threads 1 --appendonly no --save "" >"$WORK/strata1.log" 2>&1 &
PIDS+=($!)
for port in "$REDIS_PORT" "$STRATA_PORT" "$STRATA1_PORT"; do
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done

# ops/s of one redis-benchmark run: test, pipeline, requests, port.
run_bench() {
    redis-benchmark -p "$4" -c "$CLIENTS" -n "$3" -r "$KEYSPACE" -d "$DATA_SIZE" -P "$2" -t "$1" --csv 2>/dev/null |
        awk -F'","' 'NR>1 { gsub(/"/, "", $2); print $2; exit }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# strata-server vs redis-server ($(redis-server --version | awk '{print $3}'))"
echo
echo "redis-benchmark -c $CLIENTS -r $KEYSPACE -d $DATA_SIZE, $ROUNDS alternating rounds, median ops/s;"
echo "$(nproc) cores shared by both servers and the load generator; strata threads = default ($(nproc))."
echo
echo "| test | pipeline | redis ops/s | strata ops/s | strata / redis | strata --threads 1 ops/s | ratio |"
echo "|---|---|---|---|---|---|---|"
for pipeline in 1 16; do
    requests=$REQUESTS_P1
    [ "$pipeline" = 16 ] && requests=$REQUESTS_P16
    for test in set get; do
        redis_runs=()
        strata_runs=()
        strata1_runs=()
        for _ in $(seq "$ROUNDS"); do
            redis_runs+=("$(run_bench "$test" "$pipeline" "$requests" "$REDIS_PORT")")
            strata_runs+=("$(run_bench "$test" "$pipeline" "$requests" "$STRATA_PORT")")
            strata1_runs+=("$(run_bench "$test" "$pipeline" "$requests" "$STRATA1_PORT")")
        done
        r=$(printf '%s\n' "${redis_runs[@]}" | median)
        s=$(printf '%s\n' "${strata_runs[@]}" | median)
        s1=$(printf '%s\n' "${strata1_runs[@]}" | median)
        ratio=$(awk -v s="$s" -v r="$r" 'BEGIN { printf "%.2f", s / r }')
        ratio1=$(awk -v s="$s1" -v r="$r" 'BEGIN { printf "%.2f", s / r }')
        echo "| ${test^^} | $pipeline | $r | $s | $ratio | $s1 | $ratio1 |"
        echo "  raw $test P$pipeline: redis ${redis_runs[*]} / strata ${strata_runs[*]} / strata -t1 ${strata1_runs[*]}" >&2
    done
done

# Memory: the same MEMORY_KEYS keys of DATA_SIZE bytes loaded into each.
echo
GEN="$WORK/load.resp"
awk -v n="$MEMORY_KEYS" -v size="$DATA_SIZE" 'BEGIN {
    value = sprintf("%*s", size, ""); gsub(/ /, "x", value)
    for (i = 0; i < n; i++) {
        key = sprintf("key:%012d", i)
        printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(key), key, size, value
    }
}' >"$GEN"
used_memory() { redis-cli -p "$1" info memory | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'; }
echo "| $MEMORY_KEYS keys × $DATA_SIZE B | redis | strata | strata / redis |"
echo "|---|---|---|---|"
declare -A MEM
for port in "$REDIS_PORT" "$STRATA_PORT"; do
    redis-cli -p "$port" flushall >/dev/null
    sleep 1
    redis-cli -p "$port" --pipe <"$GEN" >/dev/null
    [ "$(redis-cli -p "$port" dbsize)" = "$MEMORY_KEYS" ] || { echo "load into port $port incomplete" >&2; exit 1; }
    MEM[$port,used]=$(used_memory "$port" used_memory)
    MEM[$port,rss]=$(used_memory "$port" used_memory_rss)
done
for field in used rss; do
    r=${MEM[$REDIS_PORT,$field]}
    s=${MEM[$STRATA_PORT,$field]}
    echo "| used_memory$([ "$field" = rss ] && echo _rss) (MB) | $(awk -v v="$r" 'BEGIN{printf "%.1f", v/1048576}') | $(awk -v v="$s" 'BEGIN{printf "%.1f", v/1048576}') | $(awk -v s="$s" -v r="$r" 'BEGIN{printf "%.2f", s/r}') |"
done
