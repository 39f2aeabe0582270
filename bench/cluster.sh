#!/usr/bin/env bash
# A 3-primary + 3-replica cluster of Strata nodes against a Redis Cluster
# of the same shape (redis-server with cluster-enabled yes), both made by
# `redis-cli --cluster create --cluster-replicas 1`, on this one machine,
# one cluster at a time, ROUNDS times alternated:
#
# 1. throughput of a cluster-aware load: redis-benchmark --cluster,
#    SET and GET, 50 connections, pipeline 16, 100 000 keys of 100 B;
# 2. a planned failover: CLUSTER FAILOVER on the replica of slot 0's
#    primary -> that replica reports itself a primary and a SET to slot
#    0 through the old primary (following MOVED) succeeds;
#    then failover: kill -9 of the primary of slot 0 -> the first SET to
#    a key of that slot that succeeds through another node
#    (cluster-node-timeout NODE_TIMEOUT on both);
# 3. a move of 4096 slots (MOVE_MB of data first loaded) from one primary
#    to another under a concurrent redis-benchmark --cluster SET load:
#    Strata's by CLUSTER MIGRATION IMPORT (slots whole; STRATA_MOVE=reshard
#    moves them as Redis does), Redis' by `redis-cli --cluster reshard`
#    (MIGRATE key by key). Its duration, how long Strata held writes, the
#    load's error lines, and the load's rate during the move against the
#    3 s before it (median, and the worst 250 ms; from redis-benchmark's
#    progress lines, 250 ms apart).
#
# On 2 cores, with six servers and the load generator sharing them, this
# shows the overhead and correctness of cluster mode, not scaling.
#
# Usage: bench/cluster.sh
#        ROUNDS=3 NODE_TIMEOUT=2000 MOVE_MB=200 bench/cluster.sh
#        KINDS=strata bench/cluster.sh      (one kind only)
#        MIGRATION_RATE=16mb bench/cluster.sh  (Strata's cluster-migration-max-rate)
set -euo pipefail

ROUNDS=${ROUNDS:-3}
NODE_TIMEOUT=${NODE_TIMEOUT:-2000}
MOVE_MB=${MOVE_MB:-200}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup cluster

declare -A RESULTS
record() { RESULTS[$1,$2]+="$3 "; }

# make_cluster KIND: six nodes of KIND made one cluster; sets PORTS.
make_cluster() {
    local kind=$1 i
    PORTS=()
    for i in 1 2 3 4 5 6; do
        rm -rf "${WORK:?}/$kind$i" # a fresh node each round
        # A bus port of its own: the port plus 10 000 may be past 65 535.
        local own=()
        if [ "$kind" = strata ] && [ -n "${MIGRATION_RATE:-}" ]; then
            own=(--cluster-migration-max-rate "$MIGRATION_RATE")
        fi
        start "$kind$i" "$kind" --cluster-enabled yes --cluster-node-timeout "$NODE_TIMEOUT" \
            --cluster-port "$(free_port)" --save "" --appendonly no "${own[@]}"
        PORTS+=("$(port_of "$kind$i")")
    done
    local addresses=()
    for port in "${PORTS[@]}"; do addresses+=("127.0.0.1:$port"); done
    redis-cli --cluster create "${addresses[@]}" --cluster-replicas 1 --cluster-yes >"$WORK/create.log" 2>&1
    until redis-cli --cluster check "127.0.0.1:${PORTS[0]}" 2>&1 | grep -q "All 16384 slots covered"; do
        sleep 0.2
    done
    # Every replica attached.
    until [ "$(redis-cli -p "${PORTS[0]}" cluster nodes | grep -c slave)" = 3 ]; do sleep 0.2; done
}

stop_cluster() {
    local kind=$1 i
    for i in 1 2 3 4 5 6; do
        if [ -n "${PID[$kind$i]:-}" ]; then stop "$kind$i"; fi
    done
}

# The port of the primary that owns slot $1.
owner_of() {
    redis-cli -p "${PORTS[0]}" cluster nodes |
        awk -v slot="$1" '$3 ~ /master/ { for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1]; if (slot >= r[1] && slot <= r[2]) { split($2, a, "[:@]"); print a[2] } } }'
}

throughput() {
    local kind=$1
    redis-benchmark --cluster -p "${PORTS[0]}" -t set,get -n 400000 -P 16 -c 50 -r 100000 -d 100 --csv 2>/dev/null |
        tr -d '"' | awk -F, '$1 == "SET" || $1 == "GET" { print $1, $2 }' |
        while read -r test rps; do echo "$kind $test $rps"; done
}

planned() {
    local kind=$1 owner owner_id replica start now
    owner=$(owner_of 0)
    owner_id=$(redis-cli -p "$owner" cluster myid)
    replica=$(redis-cli -p "${PORTS[0]}" cluster nodes |
        awk -v id="$owner_id" '$4 == id { split($2, a, "[:@]"); print a[2]; exit }')
    start=$(date +%s%N)
    redis-cli -p "$replica" cluster failover >/dev/null
    until [ "$(redis-cli -p "$replica" role | head -1)" = master ] &&
        [ "$(redis-cli -c -p "$owner" set '{06S}planned' 1 2>/dev/null)" = OK ]; do
        now=$(date +%s%N)
        if [ $(((now - start) / 1000000)) -gt 30000 ]; then echo "$kind planned-failover-ms 30000+"; return; fi
        sleep 0.005
    done
    now=$(date +%s%N)
    echo "$kind planned-failover-ms $(((now - start) / 1000000))"
    # Every node's view names the new owner before the next measurement.
    until [ "$(owner_of 0)" = "$replica" ]; do sleep 0.05; done
}

failover() {
    local kind=$1 victim survivor start now
    victim=$(owner_of 0)
    for port in "${PORTS[@]}"; do
        [ "$port" != "$victim" ] && survivor=$port && break
    done
    local name
    for i in 1 2 3 4 5 6; do
        [ "$(port_of "$kind$i")" = "$victim" ] && name=$kind$i
    done
    start=$(date +%s%N)
    stop "$name"
    # "{06S}" is in slot 0.
    until [ "$(redis-cli -c -p "$survivor" set '{06S}failover' 1 2>/dev/null)" = OK ]; do
        now=$(date +%s%N)
        if [ $(((now - start) / 1000000)) -gt 60000 ]; then echo "$kind failover-ms 60000+"; return; fi
        sleep 0.02
    done
    now=$(date +%s%N)
    echo "$kind failover-ms $(((now - start) / 1000000))"
}

# The SET load's rate in 250 ms samples (redis-benchmark's progress
# lines), the first taken at $1 (ns): "median before ÷ median during" of
# the move from $2 to $3 (ns), and the worst sample during it ÷ median before.
load_dip() {
    tr '\r' '\n' <"$WORK/load.log" | sed -n 's/.*SET: rps=\([0-9.]*\).*/\1/p' |
        awk -v t0="$1" -v s="$2" -v e="$3" '
            { t = t0 + (NR - 1) * 250000000
              if (t >= s - 3000000000 && t < s) before[++nb] = $1
              if (t >= s && t <= e) { during[++nd] = $1; if (nd == 1 || $1 < worst) worst = $1 } }
            function med(a, n,   i, j, x) { for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j > 0 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
                return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
            END { if (nb && nd) { b = med(before, nb); printf "%.2f %.2f\n", med(during, nd) / b, worst / b } }'
}

# Strata moves slots whole (CLUSTER MIGRATION IMPORT on the target; with
# STRATA_MOVE=reshard, as Redis does); Redis 7.0 by redis-cli reshard
# (MIGRATE key by key).
move_slots() {
    local kind=$1 from to keys
    from=$(owner_of 0)
    to=$(owner_of 16383)
    keys=$((MOVE_MB * 1024 * 1024 / 1000))
    redis-benchmark --cluster -p "${PORTS[0]}" -t set -n "$keys" -r "$keys" -d 1000 -P 16 -c 20 -q >/dev/null 2>&1
    local from_id to_id
    from_id=$(redis-cli -p "$from" cluster myid)
    to_id=$(redis-cli -p "$to" cluster myid)
    local load_start=$(date +%s%N)
    redis-benchmark --cluster -p "$to" -t set -n 100000000 -r 100000 -d 100 -c 10 >"$WORK/load.log" 2>&1 &
    local load=$! start end
    sleep 4
    start=$(date +%s%N)
    if [ "$kind" = strata ] && [ "${STRATA_MOVE:-}" != reshard ]; then
        local id state
        id=$(redis-cli -p "$to" cluster migration import 0 4095)
        until state=$(redis-cli -p "$to" cluster migration status id "$id" | sed -n '/^state$/{n;p}') &&
            [ "$state" != connecting ] && [ "$state" != copying ] && [ "$state" != streaming ] && [ "$state" != switching ]; do
            sleep 0.01
        done
        [ "$state" = completed ] || echo "$kind reshard-failed 1"
        redis-cli -p "$from" cluster migration status id "$id" >"$WORK/reshard.log"
        echo "$kind move-pause-ms $(sed -n '/^write_pause_ms$/{n;p}' "$WORK/reshard.log")"
    else
        redis-cli --cluster reshard "127.0.0.1:$from" --cluster-from "$from_id" --cluster-to "$to_id" \
            --cluster-slots 4096 --cluster-yes --cluster-pipeline 100 >"$WORK/reshard.log" 2>&1 ||
            echo "$kind reshard-failed 1"
    fi
    end=$(date +%s%N)
    sleep 2
    kill "$load" 2>/dev/null || true
    wait "$load" 2>/dev/null || true
    echo "$kind move-ms $(((end - start) / 1000000))"
    echo "$kind move-errors $(grep -ci 'error' "$WORK/load.log" || true)"
    local dip
    dip=$(load_dip "$load_start" "$start" "$end")
    if [ -n "$dip" ]; then
        echo "$kind move-load-median ${dip% *}"
        echo "$kind move-load-worst ${dip#* }"
    fi
    # Each move's logs stay in $WORK (KEEP_WORK=1 keeps it).
    mv "$WORK/load.log" "$WORK/$kind-load-$start.log"
    mv "$WORK/reshard.log" "$WORK/$kind-reshard-$start.log"
}

for round in $(seq "$ROUNDS"); do
    for kind in ${KINDS:-strata redis}; do
        make_cluster "$kind"
        while read -r name what value; do
            echo "round $round: $name $what $value" >&2
            record "$name" "$what" "$value"
        done < <(throughput "$kind"; move_slots "$kind"; planned "$kind"; failover "$kind")
        stop_cluster "$kind"
    done
done

m() { tr ' ' '\n' <<<"${RESULTS[$1,$2]:-}" | { grep . || true; } | median; }
echo "# A 3 + 3 cluster on one machine ($ROUNDS rounds, medians; cluster-node-timeout $NODE_TIMEOUT ms)"
echo
echo "| what | Strata | Redis | Strata ÷ Redis |"
echo "|---|---|---|---|"
for what in SET GET; do
    s=$(m strata "$what") r=$(m redis "$what")
    echo "| $what, pipeline 16 (requests/s) | $s | $r | $([ -n "$r" ] && [ -n "$s" ] && ratio "$s" "$r") |"
done
for what in planned-failover-ms failover-ms move-ms move-pause-ms move-errors move-load-median move-load-worst reshard-failed; do
    s=$(m strata "$what") r=$(m redis "$what")
    echo "| $what | $s | $r | |"
done
echo
echo "Raw: $(for k in "${!RESULTS[@]}"; do echo "$k=[${RESULTS[$k]}]"; done | sort | tr '\n' ' ')"
