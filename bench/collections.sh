#!/usr/bin/env bash
# Collections next to redis-server: memory of many small collections and
# of one big one per type, and the collection commands' throughput,
# persistence off on both.
#
# - memory: `used_memory` grown by loading SMALL_COUNT hashes, lists, sets
#   and sorted sets of SMALL_SIZE members each (listpack-sized, as most
#   applications keep), and by one of each of BIG_SIZE members, each on a
#   fresh pair of servers;
# - throughput: redis-benchmark's LPUSH, LPOP, SADD, SPOP, ZADD, ZPOPMIN,
#   LRANGE_100 tests and HSET/HGET over KEYSPACE random keys, at pipeline
#   1 and 16, servers alternated for ROUNDS rounds; medians and the ratio;
# - redis-benchmark's default test list, once, against Strata: it must run
#   to the end.
#
# Usage: bench/collections.sh                (defaults below)
#        ROUNDS=5 BIG_SIZE=200000 bench/collections.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
KEYSPACE=${KEYSPACE:-100000}
REQUESTS_P1=${REQUESTS_P1:-200000}
REQUESTS_P16=${REQUESTS_P16:-2000000}
SMALL_COUNT=${SMALL_COUNT:-100000}
SMALL_SIZE=${SMALL_SIZE:-10}
BIG_SIZE=${BIG_SIZE:-1000000}
TYPES=${TYPES:-hash list set zset}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup collections

used_memory() { redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: '/^used_memory:/ {print $2}'; }

# RESP that builds $2 collections of type $1 with $3 members each, 1 000
# members per command.
load_stream() {
    python3 - "$1" "$2" "$3" <<'PY'
import sys
kind, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = sys.stdout.buffer
def command(args):
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
verb = {"hash": b"HSET", "list": b"RPUSH", "set": b"SADD", "zset": b"ZADD"}[kind]
per_command = min(size, 1000)
for c in range(count):
    key = b"%s:%d" % (kind.encode(), c)
    for start in range(0, size, per_command):
        args = [verb, key]
        for m in range(start, min(size, start + per_command)):
            member = b"member:%d" % m
            if kind == "hash":
                args += [member, b"value-%d-%d" % (c, m)]
            elif kind == "zset":
                args += [b"%d" % (m * 7 % 1000), member]
            else:
                args.append(member)
        command(args)
PY
}

# memory TYPE COUNT SIZE: bytes of used_memory the load adds on each
# server (a fresh pair per measurement).
memory() {
    local kind=$1 count=$2 size=$3 name="$1_$2"
    load_stream "$kind" "$count" "$size" >"$WORK/$name.resp"
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
    rm -f "$WORK/$name.resp"
    r=${redis:?}
    s=${strata:?}
    printf '%-34s redis %8.1f MB   strata %8.1f MB   strata/redis %s\n' \
        "$kind ($count × $size)" "$(echo "$r / 1048576" | bc -l)" \
        "$(echo "$s / 1048576" | bc -l)" "$(ratio "$s" "$r")"
}

for kind in $TYPES; do
    memory "$kind" "$SMALL_COUNT" "$SMALL_SIZE"
    memory "$kind" 1 "$BIG_SIZE"
done

start redis redis --save "" --appendonly no
start strata strata --save "" --appendonly no

# ops/s of one redis-benchmark run: port, pipeline, requests, command…
run_bench() {
    local port=$1 pipeline=$2 requests=$3
    shift 3
    redis-benchmark -p "$port" -c "$CLIENTS" -n "$requests" -r "$KEYSPACE" -P "$pipeline" --csv "$@" 2>/dev/null |
        awk -F'","' 'NR>1 { gsub(/"/, "", $2); print $2; exit }'
}

# ops/s of one redis-benchmark built-in test (-t name) at a pipeline.
run_test() {
    local port=$1 pipeline=$2 requests=$3 test=$4
    redis-benchmark -p "$port" -c "$CLIENTS" -n "$requests" -r "$KEYSPACE" -P "$pipeline" --csv -t "$test" 2>/dev/null |
        awk -F'","' -v want="$5" '{ gsub(/"/, "", $1); gsub(/"/, "", $2) } $1 ~ want { print $2; exit }'
}

for pipeline in 1 16; do
    requests=$REQUESTS_P1
    [ "$pipeline" = 16 ] && requests=$REQUESTS_P16
    for command in HSET HGET LPUSH LPOP SADD SPOP ZADD ZPOPMIN LRANGE_100; do
        rs=()
        ss=()
        for _ in $(seq "$ROUNDS"); do
            for server in redis strata; do
                port=$(port_of "$server")
                case $command in
                    HSET) v=$(run_bench "$port" "$pipeline" "$requests" HSET "h:__rand_int__" "f:__rand_int__" "value-__rand_int__") ;;
                    HGET) v=$(run_bench "$port" "$pipeline" "$requests" HGET "h:__rand_int__" "f:__rand_int__") ;;
                    # LRANGE needs the list LPUSH fills; fewer requests (each moves 100 elements).
                    LRANGE_100) v=$(run_test "$port" "$pipeline" $((requests / 10)) lpush,lrange_100 '^LRANGE_100') ;;
                    *) v=$(run_test "$port" "$pipeline" "$requests" "${command,,}" "^$command\$") ;;
                esac
                if [ "$server" = redis ]; then rs+=("$v"); else ss+=("$v"); fi
            done
        done
        r=$(printf '%s\n' "${rs[@]}" | median)
        s=$(printf '%s\n' "${ss[@]}" | median)
        printf '%-10s pipeline %-2s  redis %10.0f ops/s   strata %10.0f ops/s   strata/redis %s   (rounds: redis %s; strata %s)\n' \
            "$command" "$pipeline" "$r" "$s" "$(ratio "$s" "$r")" "${rs[*]}" "${ss[*]}"
    done
done

# redis-benchmark's default list must run to the end against Strata.
if redis-benchmark -p "$(port_of strata)" -q -n 20000 -r "$KEYSPACE" >"$WORK/default.txt" 2>&1 &&
    ! grep -qi "error" "$WORK/default.txt"; then
    echo "redis-benchmark default tests: all $(grep -c 'requests per second' "$WORK/default.txt") ran"
else
    echo "redis-benchmark default tests: FAILED (see $WORK/default.txt)"
    cat "$WORK/default.txt"
fi
