#!/usr/bin/env bash
# Collections next to redis-server: memory of many small hashes and of one
# big hash, and HSET/HGET throughput, persistence off on both.
#
# - memory: `used_memory` grown by loading SMALL_HASHES hashes of
#   SMALL_FIELDS fields (listpack-sized, as most applications keep), and
#   by one hash of BIG_FIELDS fields (hashtable), each on a fresh server;
# - throughput: redis-benchmark running `HSET h:<r> f:<r> <value>` and
#   `HGET h:<r> f:<r>` over KEYSPACE random keys and fields, at pipeline 1
#   and 16, servers alternated for ROUNDS rounds; medians and the ratio.
#
# Usage: bench/collections.sh                (defaults below)
#        ROUNDS=5 BIG_FIELDS=200000 bench/collections.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
KEYSPACE=${KEYSPACE:-100000}
REQUESTS_P1=${REQUESTS_P1:-200000}
REQUESTS_P16=${REQUESTS_P16:-2000000}
SMALL_HASHES=${SMALL_HASHES:-100000}
SMALL_FIELDS=${SMALL_FIELDS:-10}
BIG_FIELDS=${BIG_FIELDS:-1000000}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup collections

used_memory() { redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: '/^used_memory:/ {print $2}'; }

# RESP for HSETs of $1 hashes × $2 fields, 1 000 fields per command.
hset_stream() {
    python3 - "$1" "$2" <<'EOF'
import sys
hashes, fields = int(sys.argv[1]), int(sys.argv[2])
out = sys.stdout.buffer
def command(args):
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
per_command = min(fields, 1000)
for h in range(hashes):
    key = b"hash:%d" % h
    for start in range(0, fields, per_command):
        args = [b"HSET", key]
        for f in range(start, min(fields, start + per_command)):
            args += [b"field:%d" % f, b"value-%d-%d" % (h, f)]
        command(args)
EOF
}

# memory NAME HASHES FIELDS: bytes of used_memory the load adds on each
# server (a fresh pair per measurement).
memory() {
    local name=$1 hashes=$2 fields=$3
    hset_stream "$hashes" "$fields" >"$WORK/$name.resp"
    start "redis_$name" redis --save "" --appendonly no
    start "strata_$name" strata --save "" --appendonly no
    local port before after r s
    for server in redis strata; do
        port=$(port_of "${server}_$name")
        before=$(used_memory "$port")
        redis-cli -p "$port" --pipe <"$WORK/$name.resp" >/dev/null
        after=$(used_memory "$port")
        printf -v "$server" '%s' $((after - before))
        stop "${server}_$name"
    done
    r=${redis:?}
    s=${strata:?}
    printf '%-34s redis %8.1f MB   strata %8.1f MB   strata/redis %s\n' \
        "$name ($hashes × $fields fields)" "$(echo "$r / 1048576" | bc -l)" \
        "$(echo "$s / 1048576" | bc -l)" "$(ratio "$s" "$r")"
}

memory small "$SMALL_HASHES" "$SMALL_FIELDS"
memory big 1 "$BIG_FIELDS"

start redis redis --save "" --appendonly no
start strata strata --save "" --appendonly no

# ops/s of one redis-benchmark run: port, pipeline, requests, command…
run_bench() {
    local port=$1 pipeline=$2 requests=$3
    shift 3
    redis-benchmark -p "$port" -c "$CLIENTS" -n "$requests" -r "$KEYSPACE" -P "$pipeline" --csv "$@" 2>/dev/null |
        awk -F'","' 'NR>1 { gsub(/"/, "", $2); print $2; exit }'
}

for pipeline in 1 16; do
    requests=$REQUESTS_P1
    [ "$pipeline" = 16 ] && requests=$REQUESTS_P16
    for command in HSET HGET; do
        args=(HSET "h:__rand_int__" "f:__rand_int__" "value-__rand_int__")
        [ "$command" = HGET ] && args=(HGET "h:__rand_int__" "f:__rand_int__")
        rs=()
        ss=()
        for _ in $(seq "$ROUNDS"); do
            rs+=("$(run_bench "$(port_of redis)" "$pipeline" "$requests" "${args[@]}")")
            ss+=("$(run_bench "$(port_of strata)" "$pipeline" "$requests" "${args[@]}")")
        done
        r=$(printf '%s\n' "${rs[@]}" | median)
        s=$(printf '%s\n' "${ss[@]}" | median)
        printf '%-4s pipeline %-2s  redis %10.0f ops/s   strata %10.0f ops/s   strata/redis %s   (rounds: redis %s; strata %s)\n' \
            "$command" "$pipeline" "$r" "$s" "$(ratio "$s" "$r")" "${rs[*]}" "${ss[*]}"
    done
done
