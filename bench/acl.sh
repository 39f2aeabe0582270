#!/usr/bin/env bash
# The cost of ACL checks: the default user (unrestricted, checks nothing)
# against a restricted one (`~key:* +@all -@dangerous`: the command bitmap
# and a key pattern checked on every command), on Strata and on
# redis-server (persistence off), with redis-benchmark: SET and GET of
# 64-byte values from CLIENTS connections pipelined by 16. Users and
# servers alternate for ROUNDS rounds; medians, and restricted as a
# fraction of default.
#
# Usage: bench/acl.sh      ROUNDS=5 bench/acl.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
REQUESTS=${REQUESTS:-1000000}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup acl

start redis redis --save "" --appendonly no
start strata strata --save "" --appendonly no
for server in redis strata; do
    redis-cli -p "$(port_of $server)" ACL SETUSER bench on '>pw' '~key:*' '+@all' '-@dangerous' >/dev/null
done

# requests/s of `test` (set|get) on port $2 as user $3.
rps() {
    local test=$1 port=$2 user=$3
    local login=()
    [ "$user" = restricted ] && login=(--user bench -a pw)
    redis-benchmark -p "$port" "${login[@]}" -c "$CLIENTS" -n "$REQUESTS" -P 16 -d 64 -t "$test" --csv 2>/dev/null |
        awk -F'","' 'NR>1 { gsub(/"/, "", $2); print $2; exit }'
}

declare -A RESULTS
for round in $(seq "$ROUNDS"); do
    for test in set get; do
        for server in redis strata; do
            for user in default restricted; do
                RESULTS[$test,$server,$user]+="$(rps "$test" "$(port_of $server)" "$user") "
            done
        done
    done
    echo "round $round done" >&2
done

printf "%-8s %14s %14s %9s %14s %14s %9s\n" test "redis default" "redis acl" "acl/def" "strata default" "strata acl" "acl/def"
for test in set get; do
    row=()
    for server in redis strata; do
        default=$(echo "${RESULTS[$test,$server,default]}" | tr ' ' '\n' | grep . | median)
        restricted=$(echo "${RESULTS[$test,$server,restricted]}" | tr ' ' '\n' | grep . | median)
        row+=("$default" "$restricted" "$(ratio "$restricted" "$default")")
    done
    printf "%-8s %14s %14s %9s %14s %14s %9s\n" "${test^^}" "${row[@]}"
done
