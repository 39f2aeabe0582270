#!/usr/bin/env bash
# What a replica costs, Strata next to redis-server (each kind replicates
# to its own kind), persistence off on both:
#
# - SET throughput (redis-benchmark, CLIENTS connections, pipeline 16)
#   of 100-byte and 10 KB values with no replica and with one, rounds
#   alternated between the four set-ups; medians, and the ratio with /
#   without a replica for each server. The primary's CPU time per SET is
#   measured beside the throughput
#   (all its threads, from /proc/PID/stat): on this 2-core
#   machine the replica and redis-benchmark take CPU from the primary,
#   so throughput alone overstates what a replica costs it;
# - WAIT-acknowledged writes (part "wait"): strata-bench sends, on each of
#   CLIENTS connections, 15 SETs then `WAIT 1 0`, pipeline 16, so every
#   WAIT covers the 15 writes before it; SETs acknowledged per second;
# - a full synchronisation of KEYS keys of 1000 bytes: seconds from
#   REPLICAOF to the link up, and how much the primary's memory grew
#   meanwhile (its RSS; for Redis also the forked child's private dirty
#   pages, the copy-on-write cost);
# - a partial resynchronisation: the replica's connection is killed under
#   load, and the primary's sync_full / sync_partial_ok counters say how
#   it came back;
# - a long cut (part "cut"): the replica reaches its primary through a
#   TCP proxy (bench/tcp_proxy.py); under a paced load of CUT_RATE SETs/s
#   of 100 bytes the proxy is stopped for CUT_SECONDS, then started
#   again: how the replica came back (partial or full), seconds from the
#   proxy's return until the replica holds the primary's offset, and the
#   primary's RSS growth. Redis runs with its default backlog (1 MB) and
#   with `repl-backlog-size 1gb`, Strata with its default (1 GB, on disk).
#
# Usage: bench/replication.sh           (defaults below)
#        ROUNDS=5 KEYS=2000000 bench/replication.sh
#        PARTS="sync partial" bench/replication.sh    (some parts only)
set -euo pipefail

ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
REQUESTS=${REQUESTS:-400000}
KEYS=${KEYS:-500000}
PARTS=${PARTS:-throughput wait sync partial cut}
WAIT_SECONDS=${WAIT_SECONDS:-10}
CUT_SECONDS=${CUT_SECONDS:-60}
CUT_RATE=${CUT_RATE:-20000}       # SETs per second during the cut
SIZES=${SIZES:-100 10000}       # SET value sizes of the throughput part
LOAD_CLIENTS=${LOAD_CLIENTS:-4}
LOAD_PIPELINE=${LOAD_PIPELINE:-1}
SYNC_LIMIT=${SYNC_LIMIT:-90}
SYNC_LOADS=${SYNC_LOADS:-0 1}    # 0: a sync with no writes, 1: with writes
LOAD_SETTLE=${LOAD_SETTLE:-5}    # seconds of writes before a sync's RSS baseline
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

# CPU time of process PID so far (user + system, every thread's, also
# those that have exited: summing /proc/PID/task/*/schedstat lost a
# thread that ended during the run, such as the one a FLUSHALL ASYNC
# frees memory on, and gave negative figures), in nanoseconds; the
# kernel counts it in clock ticks (10 ms).
cpu_ns() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.0f", ($14 + $15) * 1e9 / hz }' /proc/"$1"/stat; }

# One SET run against KIND's primary: "ops/s primary-µs-per-SET".
set_run() {
    local kind=$1 size=$2 before rate after
    before=$(cpu_ns "${PID[${kind}_p]}")
    rate=$(set_rate "$(port_of "${kind}_p")" "$size")
    after=$(cpu_ns "${PID[${kind}_p]}")
    echo "$rate $(awk -v a="$before" -v b="$after" -v n="$REQUESTS" 'BEGIN { printf "%.3f", (b - a) / 1000 / n }')"
}

link_up() { [ "$(info "$1" replication master_link_status)" = up ]; }

wait_link() {
    for _ in $(seq 12000); do
        link_up "$1" && return 0
        sleep 0.01
    done
    echo "replica on port $1 did not come up; the logs end:" >&2
    tail -n 15 "$WORK"/*.log >&2
    exit 1
}

for kind in redis strata; do
    start "${kind}_p" "$kind" --save "" --appendonly no
    start "${kind}_r" "$kind" --save "" --appendonly no
done

want throughput && echo "== SET throughput, pipeline 16, $CLIENTS clients (ops/s and the primary's CPU µs per SET; medians of $ROUNDS rounds)"
want throughput && for size in $SIZES; do
    declare -A runs=() cpus=() dropped=()
    for round in $(seq "$ROUNDS"); do
        for kind in redis strata; do
            p=$(port_of "${kind}_p")
            r=$(port_of "${kind}_r")
            redis-cli -p "$r" REPLICAOF NO ONE >/dev/null
            redis-cli -p "$p" FLUSHALL >/dev/null
            read -r rate cpu < <(set_run "$kind" "$size")
            runs[$kind,0]+="$rate "
            cpus[$kind,0]+="$cpu "
            # An empty primary: the sync before the second run is quick
            # (a 10 KB run leaves gigabytes a fork would take minutes on).
            redis-cli -p "$p" FLUSHALL >/dev/null
            redis-cli -p "$r" REPLICAOF 127.0.0.1 "$p" >/dev/null
            wait_link "$r"
            full=$(info "$p" stats sync_full)
            read -r rate cpu < <(set_run "$kind" "$size")
            runs[$kind,1]+="$rate "
            cpus[$kind,1]+="$cpu "
            # A replica that fell behind further than its primary keeps
            # was dropped during the run (and synchronises again).
            dropped[$kind]=$((${dropped[$kind]:-0} + $(info "$p" stats sync_full) - full))
        done
    done
    for kind in redis strata; do
        none=$(echo "${runs[$kind,0]}" | tr ' ' '\n' | grep . | median)
        one=$(echo "${runs[$kind,1]}" | tr ' ' '\n' | grep . | median)
        cpu0=$(echo "${cpus[$kind,0]}" | tr ' ' '\n' | grep . | median)
        cpu1=$(echo "${cpus[$kind,1]}" | tr ' ' '\n' | grep . | median)
        printf -v "none_$kind" '%s' "$none"
        printf -v "one_$kind" '%s' "$one"
        printf '%-6s %5d B: no replica %10.0f (%s µs)   one replica %10.0f (%s µs)   with/without: ops %s, CPU per SET %s   replica dropped in %d of %d runs\n' \
            "$kind" "$size" "$none" "$cpu0" "$one" "$cpu1" "$(ratio "$one" "$none")" "$(ratio "$cpu1" "$cpu0")" \
            "${dropped[$kind]:-0}" "$ROUNDS"
    done
    printf '        %5d B: strata/redis with one replica %s, without %s\n' "$size" \
        "$(ratio "$one_strata" "$one_redis")" "$(ratio "$none_strata" "$none_redis")"
done

# WAIT after every 15 SETs (part "wait"): SETs acknowledged per second.
if want wait; then
    echo "== SETs of 100 B acknowledged by WAIT 1 0 after every 15 (pipeline 16, $CLIENTS clients, ${WAIT_SECONDS} s; medians of $ROUNDS rounds)"
    declare -A acked=()
    for round in $(seq "$ROUNDS"); do
        for kind in redis strata; do
            p=$(port_of "${kind}_p")
            r=$(port_of "${kind}_r")
            link_up "$r" || { redis-cli -p "$r" REPLICAOF 127.0.0.1 "$p" >/dev/null; wait_link "$r"; }
            redis-cli -p "$p" FLUSHALL >/dev/null
            ops=$(sb_ops "$p" -t 2 -c $((CLIENTS / 2)) --test-time "$WAIT_SECONDS" --pipeline 16 -d 100 \
                --key-maximum 1000000 --command "SET __key__ __data__" --command-ratio 15 \
                --command "WAIT 1 0" --command-ratio 1)
            errors=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(d["strata"]["runs"][-1]["Errors"].values()))' "$WORK/sb.json" 2>/dev/null || echo "?")
            [ "$errors" = 0 ] || echo "$kind: $errors errors in the WAIT run" >&2
            acked[$kind]+="$((ops * 15 / 16)) "
        done
    done
    for kind in redis strata; do
        printf -v "w_$kind" '%s' "$(echo "${acked[$kind]}" | tr ' ' '\n' | grep . | median)"
        printf '%-6s acknowledged SETs/s %s   (rounds: %s)\n' "$kind" "$(eval echo "\$w_$kind")" "${acked[$kind]}"
    done
    printf '        strata/redis %s\n' "$(ratio "$w_strata" "$w_redis")"
fi

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
    child_peak=0
    if [ "$loaded" = 1 ]; then
        redis-benchmark -p "$p" -c "$LOAD_CLIENTS" -n 100000000 -r "$KEYS" -P "$LOAD_PIPELINE" -d 1000 -t set >/dev/null 2>&1 &
        load=$!
        # The writes alone grow a primary's RSS (values replaced, pages
        # the allocator keeps): the sync's growth is counted from a
        # primary already under them.
        sleep "$LOAD_SETTLE"
    fi
    before=$(rss_kb "$pid")
    peak=$before
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

# A long cut (part "cut"): SETUP is redis (default backlog), redis-1gb or
# strata. Prints "how seconds rss_growth_MB": how the replica came back
# (partial / full), seconds from the proxy's return until the replica
# holds the offset the primary had then, and the primary's peak RSS
# growth over the whole cut.
cut_once() {
    local setup=$1 kind=${1%%-*}
    local p r pid proxy_port proxy before peak load full0 part0 healed_at target took
    p=$(port_of "${kind}_p")
    r=$(port_of "${kind}_r")
    pid=${PID[${kind}_p]}
    case "$setup" in
        redis) redis-cli -p "$p" CONFIG SET repl-backlog-size 1mb >/dev/null ;;
        redis-1gb) redis-cli -p "$p" CONFIG SET repl-backlog-size 1gb >/dev/null ;;
    esac
    proxy_port=$(free_port)
    python3 bench/tcp_proxy.py "$proxy_port" "$p" &
    proxy=$!
    sleep 0.3
    redis-cli -p "$r" REPLICAOF NO ONE >/dev/null
    redis-cli -p "$p" FLUSHALL >/dev/null
    redis-cli -p "$r" REPLICAOF 127.0.0.1 "$proxy_port" >/dev/null
    wait_link "$r"
    "$BENCH" -s 127.0.0.1 -p "$p" -t 1 -c 4 --rate "$CUT_RATE" --test-time $((CUT_SECONDS + 30)) \
        --ratio 1:0 -d 100 --key-maximum 1000000 --hide-histogram >/dev/null 2>&1 &
    load=$!
    sleep 5
    full0=$(info "$p" stats sync_full)
    part0=$(info "$p" stats sync_partial_ok)
    before=$(rss_kb "$pid")
    peak=$before
    kill "$proxy"
    wait "$proxy" 2>/dev/null || true
    for _ in $(seq $((CUT_SECONDS * 4))); do
        sleep 0.25
        now=$(rss_kb "$pid")
        [ "$now" -gt "$peak" ] && peak=$now
    done
    python3 bench/tcp_proxy.py "$proxy_port" "$p" &
    proxy=$!
    healed_at=$(date +%s.%N)
    target=$(info "$p" replication master_repl_offset)
    took=timeout
    for _ in $(seq 1200); do
        now=$(rss_kb "$pid")
        [ "$now" -gt "$peak" ] && peak=$now
        if link_up "$r" && [ "$(info "$r" replication slave_repl_offset)" -ge "$target" ]; then
            took=$(awk -v a="$(date +%s.%N)" -v b="$healed_at" 'BEGIN { printf "%.2f", a - b }')
            break
        fi
        sleep 0.05
    done
    kill "$load" 2>/dev/null || true
    wait "$load" 2>/dev/null || true
    local how=none
    [ $(($(info "$p" stats sync_partial_ok) - part0)) -gt 0 ] && how=partial
    [ $(($(info "$p" stats sync_full) - full0)) -gt 0 ] && how=full
    redis-cli -p "$r" REPLICAOF NO ONE >/dev/null
    kill "$proxy"
    wait "$proxy" 2>/dev/null || true
    printf '%s %s %d\n' "$how" "$took" $(((peak - before) / 1024))
}

if want cut; then
    echo "== a ${CUT_SECONDS} s cut under $CUT_RATE SETs/s of 100 B (medians of $ROUNDS rounds)"
    declare -A how=() took=() grew=()
    for round in $(seq "$ROUNDS"); do
        for setup in redis redis-1gb strata; do
            read -r h t g < <(cut_once "$setup")
            how[$setup]+="$h "
            took[$setup]+="$t "
            grew[$setup]+="$g "
        done
    done
    for setup in redis redis-1gb strata; do
        printf '%-9s came back by: %s  catch-up %s s  primary RSS growth %s MB\n' "$setup" "${how[$setup]}" \
            "$(echo "${took[$setup]}" | tr ' ' '\n' | grep . | median)" \
            "$(echo "${grew[$setup]}" | tr ' ' '\n' | grep . | median)"
    done
fi
