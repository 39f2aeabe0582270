#!/usr/bin/env bash
# What `cluster-enabled yes` costs one node: Strata and redis-server, each
# standalone and in cluster mode serving every slot (Redis after
# CLUSTER ADDSLOTSRANGE 0 16383), alternated ROUNDS times; SET and GET
# throughput from redis-benchmark at pipeline 1 and 16 (50 connections,
# 100 000 keys, 64 B values). Medians, and cluster ÷ standalone for each
# server.
#
# Usage: bench/cluster-mode.sh
#        ROUNDS=3 REQUESTS=400000 bench/cluster-mode.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-400000}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup cluster-mode

declare -A RESULTS
run_one() {
    local name=$1 port=$2 pipeline=$3 requests=$4
    redis-benchmark -p "$port" -t set,get -n "$requests" -P "$pipeline" -c 50 \
        -r 100000 -d 64 --csv | tr -d '"' | awk -F, -v n="$name" -v p="$pipeline" \
        'NR > 1 { print n, $1, p, $2 }'
}

for round in $(seq "$ROUNDS"); do
    for variant in strata strata_cluster redis redis_cluster; do
        kind=${variant%_cluster}
        args=(--save "" --appendonly no)
        [ "$variant" != "$kind" ] && args+=(--cluster-enabled yes)
        start "$variant" "$kind" "${args[@]}"
        port=$(port_of "$variant")
        if [ "$variant" = redis_cluster ]; then
            redis-cli -p "$port" cluster addslotsrange 0 16383 >/dev/null
            until redis-cli -p "$port" cluster info | grep -q 'cluster_state:ok'; do sleep 0.1; done
        fi
        while read -r name test pipeline rps; do
            RESULTS[$name,$test,$pipeline]+="$rps "
        done < <(run_one "$variant" "$port" 16 "$REQUESTS"; run_one "$variant" "$port" 1 $((REQUESTS / 4)))
        stop "$variant"
    done
done

echo "# One node, standalone and cluster-enabled ($ROUNDS rounds, medians, requests/s)"
echo
echo "| load | Strata | Strata cluster | ratio | Redis | Redis cluster | ratio |"
echo "|---|---|---|---|---|---|---|"
for pipeline in 1 16; do
    for test in SET GET; do
        m() { tr ' ' '\n' <<<"${RESULTS[$1,$test,$pipeline]}" | grep . | median; }
        s=$(m strata) sc=$(m strata_cluster) r=$(m redis) rc=$(m redis_cluster)
        echo "| $test, pipeline $pipeline | $s | $sc | $(ratio "$sc" "$s") | $r | $rc | $(ratio "$rc" "$r") |"
    done
done
