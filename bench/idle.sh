#!/usr/bin/env bash
# An idle server with many keys, Strata against redis-server side by side
# (the "no pauses" item of the "ahead of Redis" issue):
#
# 1. CPU while idle: both servers hold KEYS keys (DEBUG POPULATE, 100 B
#    values) and get no requests; after SETTLE seconds, their user+system
#    CPU (/proc/PID/stat fields 14 and 15) is read over WINDOW seconds,
#    ROUNDS times, both servers in the same windows. Target: <= 0.5 % of
#    a core.
# 2. SHUTDOWN: from the command to the process's exit, after a checkpoint
#    (BGSAVE) of the idle dataset; both with their default save points.
#
# Usage: bench/idle.sh
#        KEYS=1000000 ROUNDS=3 WINDOW=30 SETTLE=20 bench/idle.sh
set -euo pipefail

KEYS=${KEYS:-1000000}
ROUNDS=${ROUNDS:-3}
WINDOW=${WINDOW:-30}
SETTLE=${SETTLE:-20}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup idle

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
percent() { awk -v t="$1" -v hz="$hz" -v w="$WINDOW" 'BEGIN { printf "%.2f", 100 * t / hz / w }'; }

# Both servers keep their default save points; the dataset is checkpointed
# once before the idle windows, so none falls due during them.
start redis redis --enable-debug-command yes
start strata strata --enable-debug-command yes
for name in redis strata; do
    redis-cli -p "$(port_of $name)" debug populate "$KEYS" key 100 >/dev/null
    redis-cli -p "$(port_of $name)" bgsave >/dev/null
done
for name in redis strata; do
    until [ "$(redis-cli -p "$(port_of $name)" info persistence | tr -d '\r' |
        awk -F: '$1 == "rdb_bgsave_in_progress" { print $2 }')" = 0 ]; do sleep 0.2; done
done
sleep "$SETTLE"

echo "# An idle server with $KEYS keys"
echo
echo "## CPU while idle ($WINDOW s windows, both servers in each)"
echo
echo "| round | redis-server (% of a core) | Strata (% of a core) |"
echo "|---|---|---|"
declare -a redis_p strata_p
for round in $(seq "$ROUNDS"); do
    r0=$(ticks "${PID[redis]}")
    s0=$(ticks "${PID[strata]}")
    sleep "$WINDOW"
    r1=$(ticks "${PID[redis]}")
    s1=$(ticks "${PID[strata]}")
    redis_p+=("$(percent $((r1 - r0)))")
    strata_p+=("$(percent $((s1 - s0)))")
    echo "| $round | ${redis_p[-1]} | ${strata_p[-1]} |"
done
rm=$(printf '%s\n' "${redis_p[@]}" | median)
sm=$(printf '%s\n' "${strata_p[@]}" | median)
echo "| median | $rm | $sm |"
echo

echo "## SHUTDOWN with $KEYS keys, nothing changed since the last checkpoint"
echo
echo "| server | SHUTDOWN to exit (s) |"
echo "|---|---|"
for name in redis strata; do
    pid=${PID[$name]}
    started=$(date +%s.%N)
    redis-cli -p "$(port_of $name)" shutdown >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    ended=$(date +%s.%N)
    unset "PID[$name]"
    echo "| $name | $(awk -v a="$started" -v b="$ended" 'BEGIN { printf "%.3f", b - a }') |"
done
