#!/usr/bin/env bash
# Server CPU per request, Strata against redis-server in the same run (the
# check of "less CPU per request than Redis" in the "ahead of Redis"
# issue). On a 2-core machine the load generator takes a core, so
# throughput alone cannot show a multi-threaded server ahead; the CPU a
# server spends per request it serves can be compared fairly.
#
# Each load runs on a fresh server of each kind, alternated (Redis,
# Strata, Redis, Strata, ...) for ROUNDS rounds: strata-bench with one
# thread and 50 connections for TEST_TIME seconds. CPU is the server
# process's user + system time (/proc/PID/stat fields 14 and 15) over the
# run, divided by the requests strata-bench counted. Persistence is off
# except for the 10 KB load (`appendfsync everysec` on both: Strata's log,
# Redis' AOF). Read loads find their keys: DEBUG POPULATE fills key:0 ..
# key:99999 with 100 B values first.
#
# Prints every run, then per load the medians and Strata ÷ Redis.
# Targets (issue): <= 0.8x Redis at pipeline 1, <= 0.7x at pipeline 16,
# <= 1.0x for every other load.
#
# With OLD set to another strata-server binary, that build runs too, in
# the same alternation (Redis, old, Strata, ...), and the table adds this
# build ÷ the old one: how a change moved CPU per request, with Redis as
# the control for a busy machine.
#
# Usage: bench/cpu-per-request.sh
#        ROUNDS=3 TEST_TIME=8 LOADS="get-p1 set-p1" bench/cpu-per-request.sh
#        OLD=/tmp/old/target/release/strata-server LOADS="get-p1" bench/cpu-per-request.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
TEST_TIME=${TEST_TIME:-8}
ALL_LOADS="get-p1 set-p1 get-p16 set-p16 set10k-everysec evalsha multi-exec hset-hget lpush-lpop zadd xadd"
LOADS=${LOADS:-$ALL_LOADS}
OLD=${OLD:-}
KINDS="redis strata"
[ -n "$OLD" ] && KINDS="redis old strata"
KEYS_FILLED=100000
# return redis.call('GET', KEYS[1]); loaded on each server before its run.
SCRIPT="return redis.call('GET', KEYS[1])"

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup cpu-per-request
TICK_US=$((1000000 / $(getconf CLK_TCK)))
RESULTS=$(mktemp -p "$WORK")

common=(-t 1 -c 50 --test-time="$TEST_TIME" --hide-histogram --key-prefix key:
    --key-maximum=$((KEYS_FILLED - 1)) --key-minimum 0)

# load_args LOAD SHA: the strata-bench options of a load.
load_args() {
    case $1 in
    get-p1) echo --ratio=0:1 -d 100 --pipeline=1 ;;
    set-p1) echo --ratio=1:0 -d 100 --pipeline=1 ;;
    get-p16) echo --ratio=0:1 -d 100 --pipeline=16 ;;
    set-p16) echo --ratio=1:0 -d 100 --pipeline=16 ;;
    set10k-everysec) echo --ratio=1:0 -d 10000 --pipeline=25 ;;
    evalsha) echo --command "'EVALSHA $2 1 __key__'" ;;
    multi-exec) echo --command MULTI --command-ratio 1 --command "'INCR __key__:n'" --command-ratio 5 \
        --command EXEC --command-ratio 1 ;;
    hset-hget) echo -d 100 --command "'HSET __key__:h f __data__'" --command "'HGET __key__:h f'" ;;
    lpush-lpop) echo -d 100 --command "'LPUSH __key__:l __data__'" --command "'LPOP __key__:l'" ;;
    zadd) echo -d 20 --command "'ZADD __key__:z 1 __data__'" ;;
    xadd) echo -d 100 --command "'XADD __key__:x MAXLEN ~ 100 * f __data__'" ;;
    *)
        echo "unknown load $1" >&2
        exit 1
        ;;
    esac
}

# run_one KIND LOAD: prints "kind load ops/s cpu-µs-per-request".
run_one() {
    local kind=$1 load=$2 port dir pid before after ops sha persist=(--appendonly no)
    [ "$load" = set10k-everysec ] && persist=(--appendonly yes --appendfsync everysec)
    port=$(free_port)
    dir=$(mktemp -d -p "$WORK")
    if [ "$kind" = redis ]; then
        redis-server --port "$port" --save "" "${persist[@]}" --dir "$dir" \
            --enable-debug-command yes >/dev/null 2>&1 &
    else
        local binary=$STRATA
        [ "$kind" = old ] && binary=$OLD
        "$binary" --port "$port" --dir "$dir" --save "" "${persist[@]}" \
            --enable-debug-command yes >/dev/null 2>&1 &
    fi
    pid=$!
    PID[run]=$pid
    wait_ping "$port"
    redis-cli -p "$port" debug populate $KEYS_FILLED key 100 >/dev/null
    sha=$(redis-cli -p "$port" script load "$SCRIPT")
    before=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    ops=$(eval "\"$BENCH\" -s 127.0.0.1 -p $port ${common[*]} $(load_args "$load" "$sha")" 2>/dev/null |
        awk '/^Totals/ { print $2 }')
    after=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    unset "PID[run]"
    rm -rf "$dir"
    [ -n "$ops" ] || { echo "no result for $kind $load" >&2; exit 1; }
    awk -v k="$kind" -v l="$load" -v o="$ops" -v t=$((after - before)) -v us="$TICK_US" -v s="$TEST_TIME" \
        'BEGIN { printf "%s %s %.0f %.2f\n", k, l, o, t * us / (o * s) }'
}

echo "| round | load | server | ops/s | CPU µs per request |"
echo "|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
    for load in $LOADS; do
        for kind in $KINDS; do
            line=$(run_one "$kind" "$load")
            echo "$line" >>"$RESULTS"
            read -r k l o c <<<"$line"
            echo "| $round | $l | $k | $o | $c |"
        done
    done
done

# med KIND FIELD: the median of FIELD (3 ops/s, 4 CPU) of $load's runs.
med() { awk -v k="$1" -v l="$load" -v f="$2" '$1 == k && $2 == l { print $f }' "$RESULTS" | median; }

echo
echo "| load | Redis ops/s | Strata ops/s | Redis CPU µs/request | Strata CPU µs/request | Strata ÷ Redis CPU per request |"
echo "|---|---|---|---|---|---|"
for load in $LOADS; do
    ro=$(med redis 3)
    so=$(med strata 3)
    rc=$(med redis 4)
    sc=$(med strata 4)
    echo "| $load | $ro | $so | $rc | $sc | **$(ratio "$sc" "$rc")×** |"
done
if [ -n "$OLD" ]; then
    echo
    echo "| load | old build ops/s | old build CPU µs/request | old ÷ Redis | this build ÷ old |"
    echo "|---|---|---|---|---|"
    for load in $LOADS; do
        oo=$(med old 3)
        oc=$(med old 4)
        echo "| $load | $oo | $oc | $(ratio "$oc" "$(med redis 4)")× | **$(ratio "$(med strata 4)" "$oc")×** |"
    done
fi
