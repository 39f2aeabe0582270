#!/usr/bin/env bash
# Streams next to redis-server, persistence off on both:
#
# - memory: `used_memory` grown by ENTRIES entries of one field with a
#   100-byte value, added with explicit IDs 1-0, 2-0, …; bytes per entry;
# - throughput (redis-benchmark, CLIENTS connections, servers alternated
#   for ROUNDS rounds, medians and the ratio):
#   XADD of a 100-byte field at pipeline 1 and 16; XRANGE of 100 entries;
#   XREADGROUP of 10 new entries per call (a group consuming the loaded
#   stream); XACK of random pending entries (after that consumption).
#
# Usage: bench/streams.sh                 (defaults below)
#        ROUNDS=5 ENTRIES=2000000 bench/streams.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
ENTRIES=${ENTRIES:-1000000}
REQUESTS_P1=${REQUESTS_P1:-200000}
REQUESTS_P16=${REQUESTS_P16:-1000000}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup streams

used_memory() { redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: '/^used_memory:/ {print $2}'; }

# RESP adding ENTRIES entries to stream `s` with IDs n-0.
python3 - "$ENTRIES" >"$WORK/load.resp" <<'PY'
import sys
count = int(sys.argv[1])
out = sys.stdout.buffer
value = b"v" * 100
for n in range(1, count + 1):
    ident = b"%d-0" % n
    out.write(b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$%d\r\n%s\r\n$5\r\nfield\r\n$100\r\n%s\r\n" % (len(ident), ident, value))
PY

start redis redis --save "" --appendonly no
start strata strata --save "" --appendonly no
for server in redis strata; do
    port=$(port_of "$server")
    before=$(used_memory "$port")
    redis-cli -p "$port" --pipe <"$WORK/load.resp" >/dev/null
    after=$(used_memory "$port")
    printf -v "mem_$server" '%s' $((after - before))
done
rm -f "$WORK/load.resp"
printf 'memory of %d entries (100-byte value): redis %.1f B/entry   strata %.1f B/entry   strata/redis %s\n' \
    "$ENTRIES" "$(echo "$mem_redis / $ENTRIES" | bc -l)" "$(echo "$mem_strata / $ENTRIES" | bc -l)" \
    "$(ratio "$mem_strata" "$mem_redis")"

# ops/s of one redis-benchmark run: port, pipeline, requests, command…
run_bench() {
    local port=$1 pipeline=$2 requests=$3
    shift 3
    redis-benchmark -p "$port" -c "$CLIENTS" -n "$requests" -r "$ENTRIES" -P "$pipeline" --csv "$@" 2>/dev/null |
        awk -F'","' 'NR>1 { gsub(/"/, "", $2); print $2; exit }'
}

value=$(printf 'v%.0s' $(seq 100))
# One measurement per round and server; prints the medians and the ratio.
measure() {
    local name=$1 pipeline=$2 requests=$3
    shift 3
    local rs=() ss=() v port
    for _ in $(seq "$ROUNDS"); do
        for server in redis strata; do
            port=$(port_of "$server")
            v=$(run_bench "$port" "$pipeline" "$requests" "$@")
            if [ "$server" = redis ]; then rs+=("$v"); else ss+=("$v"); fi
        done
    done
    local r s
    r=$(printf '%s\n' "${rs[@]}" | median)
    s=$(printf '%s\n' "${ss[@]}" | median)
    printf '%-22s pipeline %-2s  redis %10.0f ops/s   strata %10.0f ops/s   strata/redis %s   (rounds: redis %s; strata %s)\n' \
        "$name" "$pipeline" "$r" "$s" "$(ratio "$s" "$r")" "${rs[*]}" "${ss[*]}"
}

measure "XRANGE 100 entries" 1 $((REQUESTS_P1 / 4)) XRANGE s "__rand_int__" + COUNT 100
# Each XREADGROUP takes 10 new entries: ROUNDS × requests × 10 must not
# pass ENTRIES, or later rounds read nothing.
for server in redis strata; do
    redis-cli -p "$(port_of "$server")" XGROUP CREATE s g 0 >/dev/null
done
measure "XREADGROUP COUNT 10" 1 $((ENTRIES / 10 / ROUNDS)) XREADGROUP GROUP g c COUNT 10 STREAMS s ">"
measure "XACK (random pending)" 1 "$REQUESTS_P1" XACK s g "__rand_int__-0"
for pipeline in 1 16; do
    requests=$REQUESTS_P1
    [ "$pipeline" = 16 ] && requests=$REQUESTS_P16
    measure "XADD 100 B" "$pipeline" "$requests" XADD x "*" field "$value"
done
