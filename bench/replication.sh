#!/usr/bin/env bash
# What a replica costs, Strata next to redis-server (each kind replicates
# to its own kind), persistence off on both:
#
# - SET throughput (redis-benchmark, CLIENTS connections, pipeline 16)
#   of 100-byte and 10 KB values with no replica and with one, rounds
#   alternated between the four set-ups; medians, and the ratio with /
#   without a replica for each server;
# - a full synchronisation of KEYS keys of 1000 bytes: seconds from
#   REPLICAOF to the link up, and how much the primary's memory grew
#   meanwhile (its RSS; for Redis also the forked child's private dirty
#   pages, the copy-on-write cost);
# - a partial resynchronisation: the replica's connection is killed under
#   load, and the primary's sync_full / sync_partial_ok counters say how
#   it came back.
#
# Usage: bench/replication.sh           (defaults below)
#        ROUNDS=5 KEYS=2000000 bench/replication.sh
#        PARTS="sync partial" bench/replication.sh    (some parts only)
set -euo pipefail

ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
REQUESTS=${REQUESTS:-400000}
KEYS=${KEYS:-500000}
PARTS=${PARTS:-throughput sync partial}
SIZES=${SIZES:-100 10000}       # SET value sizes of the throughput part
LOAD_CLIENTS=${LOAD_CLIENTS:-4}
LOAD_PIPELINE=${LOAD_PIPELINE:-1}
SYNC_LIMIT=${SYNC_LIMIT:-90}
SYNC_LOADS=${SYNC_LOADS:-0 1}    # 0: a sync with no writes, 1: with writes
want() { [[ " $PARTS " == *" $1 "* ]]; }

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup replication

info() { redis-cli -p "$1" INFO "$2" | tr -d '\r' | awk -F: -v k="$3" '$1 == k {print $2}'; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# ops/s of one redis-benchmark SET run: port, value size.
set_rate() {
    redis-benchmark -p "$1" -c "$CLIENTS" -n "$REQUESTS" -r 1000000 -P 16 -d "$2" -t set --csv 2>/dev/null |
        awk -F'","' 'NR>1 { gsub(/"/, "", $2); print $2; exit }'
}

link_up() { [ "$(info "$1" replication master_link_status)" = up ]; }

wait_link() {
    for _ in $(seq 12000); do
        link_up "$1" && return 0
        sleep 0.01
    done
    echo "replica on port $1 did not come up" >&2
    exit 1
}

for kind in redis strata; do
    start "${kind}_p" "$kind" --save "" --appendonly no
    start "${kind}_r" "$kind" --save "" --appendonly no
done

want throughput && echo "== SET throughput, pipeline 16, $CLIENTS clients (ops/s; medians of $ROUNDS rounds)"
want throughput && for size in $SIZES; do
    declare -A runs=()
    for round in $(seq "$ROUNDS"); do
        for kind in redis strata; do
            p=$(port_of "${kind}_p")
            r=$(port_of "${kind}_r")
            redis-cli -p "$r" REPLICAOF NO ONE >/dev/null
            redis-cli -p "$p" FLUSHALL >/dev/null
            runs[$kind,0]+="$(set_rate "$p" "$size") "
            redis-cli -p "$r" REPLICAOF 127.0.0.1 "$p" >/dev/null
            wait_link "$r"
            runs[$kind,1]+="$(set_rate "$p" "$size") "
        done
    done
    for kind in redis strata; do
        none=$(echo "${runs[$kind,0]}" | tr ' ' '\n' | grep . | median)
        one=$(echo "${runs[$kind,1]}" | tr ' ' '\n' | grep . | median)
        printf -v "none_$kind" '%s' "$none"
        printf -v "one_$kind" '%s' "$one"
        printf '%-6s %5d B: no replica %10.0f   one replica %10.0f   with/without %s\n' \
            "$kind" "$size" "$none" "$one" "$(ratio "$one" "$none")"
    done
    printf '        %5d B: strata/redis with one replica %s, without %s\n' "$size" \
        "$(ratio "$one_strata" "$one_redis")" "$(ratio "$none_strata" "$none_redis")"
done

# One full synchronisation of KIND's pair, writes going on meanwhile when
# LOADED is 1 (LOAD_CLIENTS connections, pipeline LOAD_PIPELINE, 1000-byte
# SETs over the same keys): prints "seconds growth_MB child_dirty_MB";
# seconds is "loop" when the replica was not in step within SYNC_LIMIT s
# (dropped at its output buffer limit and starting over).
sync_once() {
    local kind=$1 loaded=$2
    local p r pid before peak child_peak started load=
    p=$(port_of "${kind}_p")
    r=$(port_of "${kind}_r")
    redis-cli -p "$r" REPLICAOF NO ONE >/dev/null
    redis-cli -p "$r" FLUSHALL >/dev/null
    pid=${PID[${kind}_p]}
    before=$(rss_kb "$pid")
    peak=$before
    child_peak=0
    if [ "$loaded" = 1 ]; then
        redis-benchmark -p "$p" -c "$LOAD_CLIENTS" -n 100000000 -r "$KEYS" -P "$LOAD_PIPELINE" -d 1000 -t set >/dev/null 2>&1 &
        load=$!
    fi
    started=$(date +%s.%N)
    redis-cli -p "$r" REPLICAOF 127.0.0.1 "$p" >/dev/null
    local looped=
    while ! link_up "$r"; do
        if [ "$(echo "$(date +%s.%N) - $started > $SYNC_LIMIT" | bc -l)" = 1 ]; then
            looped=1
            break
        fi
        now=$(rss_kb "$pid")
        [ "$now" -gt "$peak" ] && peak=$now
        for child in $(pgrep -P "$pid" || true); do
            dirty=$(awk '/^Private_Dirty:/ {print $2}' "/proc/$child/smaps_rollup" 2>/dev/null || echo 0)
            [ "${dirty:-0}" -gt "$child_peak" ] && child_peak=$dirty
        done
        sleep 0.02
    done
    if [ -n "$looped" ]; then
        echo -n "loop "
        redis-cli -p "$r" REPLICAOF NO ONE >/dev/null
    else
        echo "$(date +%s.%N) - $started" | bc -l | tr '\n' ' '
    fi
    [ -n "$load" ] && { kill "$load"; wait "$load" 2>/dev/null || true; }
    echo "$(((peak - before) / 1024)) $((child_peak / 1024))"
}

if want sync; then
    echo "== full synchronisation of $KEYS keys of 1000 bytes (medians of $ROUNDS rounds)"
    for kind in redis strata; do
        p=$(port_of "${kind}_p")
        r=$(port_of "${kind}_r")
        redis-cli -p "$r" REPLICAOF NO ONE >/dev/null
        redis-cli -p "$r" FLUSHALL >/dev/null
        redis-cli -p "$p" FLUSHALL >/dev/null
        # KEYS distinct keys, named as redis-benchmark -r KEYS names them
        # (key:000000000000 …), so the writes during a sync overwrite them
        # and the dataset does not grow meanwhile.
        python3 - "$KEYS" <<'PY' | redis-cli -p "$p" --pipe >/dev/null
import sys
out = sys.stdout.buffer
value = b"v" * 1000
for n in range(int(sys.argv[1])):
    key = b"key:%012d" % n
    out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1000\r\n%s\r\n" % (len(key), key, value))
PY
        printf '%-6s primary RSS %d MB\n' "$kind" $(($(rss_kb "${PID[${kind}_p]}") / 1024))
    done
    for loaded in $SYNC_LOADS; do
        declare -A took=() grew=() dirty=()
        for round in $(seq "$ROUNDS"); do
            for kind in redis strata; do
                read -r t g d < <(sync_once "$kind" "$loaded")
                took[$kind]+="$t "
                grew[$kind]+="$g "
                dirty[$kind]+="$d "
            done
        done
        for kind in redis strata; do
            m() {
                local loops
                loops=$(echo "$1" | tr ' ' '\n' | grep -c loop || true)
                if [ "$loops" -gt 0 ]; then echo "loop($loops/$ROUNDS)"; else echo "$1" | tr ' ' '\n' | grep . | median; fi
            }
            printf -v "t_$kind" '%s' "$(m "${took[$kind]}")"
            printf '%-6s writes during sync: %s   sync %s s   primary RSS growth %s MB   forked child dirty %s MB\n' \
                "$kind" "$([ "$loaded" = 1 ] && echo "$LOAD_CLIENTS x P$LOAD_PIPELINE" || echo no)" "$(m "${took[$kind]}")" \
                "$(m "${grew[$kind]}")" "$(m "${dirty[$kind]}")"
        done
        case "$t_redis$t_strata" in
            *loop*) ;;
            *) printf '        sync speed strata/redis %s\n' "$(ratio "$t_redis" "$t_strata")" ;;
        esac
    done
fi

want partial && echo "== partial resynchronisation after the link breaks under load"
want partial && for kind in redis strata; do
    p=$(port_of "${kind}_p")
    r=$(port_of "${kind}_r")
    link_up "$r" || { redis-cli -p "$r" REPLICAOF 127.0.0.1 "$p" >/dev/null; wait_link "$r"; }
    full_before=$(info "$p" stats sync_full)
    redis-benchmark -p "$p" -c 20 -n 200000 -r 100000 -P 16 -d 100 -t set >/dev/null 2>&1 &
    load=$!
    sleep 0.5
    redis-cli -p "$p" CLIENT KILL TYPE replica >/dev/null 2>&1 || redis-cli -p "$p" CLIENT KILL TYPE slave >/dev/null
    wait "$load"
    wait_link "$(port_of "${kind}_r")"
    sleep 1
    printf '%-6s sync_full +%d   sync_partial_ok %s   offsets primary %s replica %s\n' "$kind" \
        $(($(info "$p" stats sync_full) - full_before)) "$(info "$p" stats sync_partial_ok)" \
        "$(info "$p" replication master_repl_offset)" "$(info "$(port_of "${kind}_r")" replication slave_repl_offset)"
done
