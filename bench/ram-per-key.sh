#!/usr/bin/env bash
# RAM per key, the two memory targets of the "log at the disk's speed"
# issue, with memtier's keys (memtier-1 .. memtier-N, written once each by
# strata-bench -n allkeys):
#
# 1. N x 100 B strings in RAM: used_memory of redis-server and of Strata
#    (persistence off on both), and each one's overhead beyond the key and
#    value bytes; target: Strata's overhead <= 0.8x Redis'.
# 2. A key whose value is on disk: Strata under a budget below the data,
#    after every value left RAM; target: <= 32 B + the key. Two figures:
#    used_memory against the empty server's (fixed buffers that grew on
#    the way count as keys' cost), and what FLUSHALL SYNC frees (the keys'
#    own cost).
#
# Usage: bench/ram-per-key.sh
#        HOT_KEYS=1000000 COLD_KEYS="1000000 1500000 10000000" bench/ram-per-key.sh
set -euo pipefail

HOT_KEYS=${HOT_KEYS:-1000000}
COLD_KEYS=${COLD_KEYS:-"1000000 10000000"}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup ram-per-key


# fill PORT KEYS SIZE: writes memtier-1 .. memtier-KEYS once each.
fill() {
    "$BENCH" -s 127.0.0.1 -p "$1" --hide-histogram -t 2 -c 25 --pipeline 16 --ratio 1:0 \
        --key-pattern P:P -n allkeys --key-minimum 1 --key-maximum "$2" -d "$3" >/dev/null 2>&1
    [ "$(redis-cli -p "$1" dbsize)" = "$2" ] || { echo "fill of port $1 incomplete" >&2; exit 1; }
}

# Mean length of memtier-1 .. memtier-N.
key_bytes() { python3 -c "n=$1; print(sum(len('memtier-%d' % i) for i in range(1, n + 1)) / n)"; }

echo "# RAM per key"
echo
echo "## $HOT_KEYS keys x 100 B in RAM (persistence off on both)"
echo
echo "| | used_memory (MB) | overhead per key beyond key and value (B) |"
echo "|---|---|---|"
kb=$(key_bytes "$HOT_KEYS")
declare -A OVER
for kind in redis strata; do
    if [ "$kind" = redis ]; then
        start hot redis --save "" --appendonly no
    else
        start hot strata --save "" --appendonly no
    fi
    port=$(port_of hot)
    base=$(info_field "$port" memory used_memory)
    fill "$port" "$HOT_KEYS" 100
    sleep 2
    used=$(info_field "$port" memory used_memory)
    OVER[$kind]=$(python3 -c "print(($used - $base) / $HOT_KEYS - $kb - 100)")
    printf '| %s | %.1f | %.1f |\n' "$kind" "$(python3 -c "print($used / 1048576)")" "${OVER[$kind]}"
    stop hot
    rm -rf "$WORK/hot"
done
echo
echo "Strata's overhead / Redis': **$(ratio "${OVER[strata]}" "${OVER[redis]}")** (target <= 0.8); keys average $(printf '%.1f' "$kb") B."

echo
echo "## A key whose value is on disk"
echo
echo "| keys | used_memory per key (B) | of which the key | the rest | freed by FLUSHALL per key, beyond the key (B) |"
echo "|---|---|---|---|---|"
for keys in $COLD_KEYS; do
    start cold strata --maxmemory 1gb --maxmemory-policy tiered --save ""
    port=$(port_of cold)
    base=$(info_field "$port" memory used_memory)
    fill "$port" "$keys" 100
    # A budget below the data: every value leaves, keys stay. Each
    # command evicts a bounded amount, so send some until done.
    redis-cli -p "$port" config set maxmemory $((keys * 40)) >/dev/null
    for _ in $(seq 60); do
        redis-benchmark -p "$port" -t ping_mbulk -n 20000 -q >/dev/null 2>&1
        [ "$(info_field "$port" tiering keys_value_in_ram)" -lt $((keys / 1000)) ] && break
    done
    used=$(info_field "$port" memory used_memory)
    buffers=$(info_field "$port" memory mem_not_counted_for_evict)
    # The values still in RAM, by count (INFO's byte count comes from a
    # census that may not have seen the last evictions yet).
    values=$(($(info_field "$port" tiering keys_value_in_ram) * 100))
    redis-cli -p "$port" flushall sync >/dev/null
    sleep 1
    emptied=$(info_field "$port" memory used_memory)
    kb=$(key_bytes "$keys")
    python3 - "$keys" "$used" "$buffers" "$base" "$values" "$emptied" "$kb" <<'PY'
import sys
keys, used, buffers, base, values, emptied = map(int, sys.argv[1:7])
key_bytes = float(sys.argv[7])
per_key = (used - buffers - base - values) / keys
freed = (used - emptied - values) / keys
print(f"| {keys} | {per_key:.1f} | {key_bytes:.1f} | {per_key - key_bytes:.1f} | {freed - key_bytes:.1f} |")
PY
    stop cold
    rm -rf "$WORK/cold"
done
echo
echo "used_memory (allocator, usable sizes) minus the empty server's, the log's unwritten buffers and the bytes of values still in RAM (under 0.1 %), after a budget below the data moved every value out; and what FLUSHALL SYNC then frees, less those values (target <= 32 B + key)."
