#!/usr/bin/env bash
# Writes under a RAM budget the keys nearly fill (`tiered`): the values in
# RAM are then mostly the ones just written, still waiting for their log
# write, and eviction must not sweep every shard to find that out on every
# write (docs/tiering.md, "Known limits"). Two strata-server builds side by
# side, alternated, ROUNDS rounds; redis-server is not in it (under a
# budget it deletes keys, Strata keeps them all).
#
# Each round: a fresh server with `--maxmemory BUDGET --maxmemory-policy
# tiered`, then `redis-benchmark -r KEYSPACE -c 10 -P 16 -d 64 -t set` for
# REQUESTS requests; reported: SETs/s, the keys written, and RAM used
# against the budget at the end (INFO used_memory / maxmemory).
#
# Then, over the budget with nothing to evict: `volatile-lru`, 259 k keys
# with no deadline written by `redis-benchmark -r 1000000 -n 300000 -P 16
# -d 64 -t set`, then CONFIG SET maxmemory 15mb (below what they use) and
# `redis-benchmark -c 10 -n GETS -t get`: GETs/s before and after the
# budget is lowered, for redis-server as well (it finds no volatile key at
# once).
#
# Usage: OLD=/tmp/old/target/release/strata-server bench/tight-budget.sh
#        (without OLD, only this tree's build runs)
#        BUDGET=4mb KEYSPACE=30000 REQUESTS=100000 ROUNDS=3 bench/tight-budget.sh
set -euo pipefail

BUDGET=${BUDGET:-4mb}
KEYSPACE=${KEYSPACE:-30000}
REQUESTS=${REQUESTS:-100000}
ROUNDS=${ROUNDS:-3}
OLD=${OLD:-}
GETS=${GETS:-20000}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup tight-budget

# one_run BUILD: prints "sets_per_s keys used_percent".
one_run() {
    STRATA=$1
    start s strata --maxmemory "$BUDGET" --maxmemory-policy tiered
    local port out rps keys used max
    port=$(port_of s)
    out=$(timeout 600 redis-benchmark -p "$port" -r "$KEYSPACE" -c 10 -P 16 -d 64 \
        -n "$REQUESTS" -t set -q 2>/dev/null | tr '\r' '\n' | grep -a 'requests per second' | tail -1)
    rps=$(echo "$out" | awk '{ print $2 }')
    keys=$(redis-cli -p "$port" dbsize)
    used=$(redis-cli -p "$port" info memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }')
    max=$(redis-cli -p "$port" config get maxmemory | tail -1)
    stop s
    rm -rf "$WORK/s"
    echo "$rps $keys $(awk -v u="$used" -v m="$max" 'BEGIN { printf "%.0f", 100 * u / m }')"
}

echo "# SETs under a $BUDGET budget the keys nearly fill"
echo
echo "redis-benchmark -r $KEYSPACE -c 10 -P 16 -d 64 -n $REQUESTS -t set"
echo
echo "| round | build | SETs/s | keys | RAM used / budget |"
echo "|---|---|---|---|---|"
declare -a old_rps new_rps
for round in $(seq "$ROUNDS"); do
    if [ -n "$OLD" ]; then
        read -r rps keys used <<<"$(one_run "$OLD")"
        old_rps+=("$rps")
        echo "| $round | old | $rps | $keys | $used % |"
    fi
    read -r rps keys used <<<"$(one_run "$STRATA_NEW")"
    new_rps+=("$rps")
    echo "| $round | new | $rps | $keys | $used % |"
done
echo
new_m=$(printf '%s\n' "${new_rps[@]}" | median)
if [ -n "$OLD" ]; then
    old_m=$(printf '%s\n' "${old_rps[@]}" | median)
    echo "median SETs/s: old $old_m, new $new_m (new / old $(ratio "$new_m" "$old_m"))"
else
    echo "median SETs/s: $new_m"
fi

# over_budget KIND (of compared_kinds): prints "gets_per_s_under gets_per_s_over".
over_budget() {
    local port under over
    start_compared v "$1" --save "" --appendonly no --maxmemory-policy volatile-lru
    port=$(port_of v)
    redis-benchmark -p "$port" -r 1000000 -n 300000 -P 16 -d 64 -t set -q >/dev/null 2>&1
    gets() {
        timeout 600 redis-benchmark -p "$port" -c 10 -n "$GETS" -r 1000000 -t get -q 2>/dev/null |
            tr '\r' '\n' | grep -a 'requests per second' | tail -1 | awk '{ print $2 }'
    }
    under=$(gets)
    redis-cli -p "$port" config set maxmemory 15mb >/dev/null
    over=$(gets)
    stop v
    rm -rf "$WORK/v"
    echo "$under $over"
}

echo
echo "# GETs over the budget, volatile-lru, no key with a deadline"
echo
echo "| round | server | GETs/s under the budget | GETs/s over it |"
echo "|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
    for kind in $(compared_kinds); do
        read -r under over <<<"$(over_budget "$kind")"
        echo "| $round | $kind | $under | $over |"
    done
done
