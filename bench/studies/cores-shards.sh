#!/usr/bin/env bash
# All cores against shards: one strata-server against N redis-servers sharded by the client, N = 1..cores
#
# The published comparison of a multi-threaded store against Redis
# sharded over the same cores: for N = 1 … (cores), N redis-server
# processes, each given one Nth of the keys, against one strata-server
# given all of them. The load is the same for both: N strata-bench
# processes at once, the i-th on the i-th slice of the keys (for Redis,
# to the i-th shard), CONNECTIONS connections in all, GET:SET 1:1, 100 B
# values, SECONDS_PER_RUN seconds; ROUNDS rounds, servers alternated.
# Measured: requests/s in all, and the servers' CPU time (user + system)
# per request. On a machine where the load generator shares the cores,
# CPU per request is the fair comparison; the script runs as it is on a
# bigger machine.
#
# Writes docs/studies/cores-shards.md and cores-shards.svg (requests/s
# against N).
#
# Usage: bench/studies/run.sh cores-shards
#        ROUNDS=3 SECONDS_PER_RUN=10 CONNECTIONS=50 bench/studies/run.sh cores-shards
set -euo pipefail
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
CONNECTIONS=${CONNECTIONS:-50}
KEYS=${KEYS:-1000000}
CORES=$(nproc)
STUDY=cores-shards
OUT=docs/studies

source bench/lib.sh
source bench/studies/lib.sh
bench_setup "study-$STUDY"

# CPU ticks (user + system) of the processes given.
ticks() { for pid in "$@"; do awk '{ print $14 + $15 }' "/proc/$pid/stat"; done | awk '{ s += $1 } END { print s + 0 }'; }

# run_one ROUND KIND N: one run; prints "requests cpu_seconds".
run_one() {
    local round=$1 kind=$2 n=$3 i pids=() ports=() loads=()
    if [ "$kind" = redis ]; then
        for i in $(seq "$n"); do
            start "shard$i" redis --appendonly no --save ""
            pids+=("${PID[shard$i]}")
            ports+=("$(port_of "shard$i")")
        done
    else
        start single strata --appendonly no --save ""
        pids+=("${PID[single]}")
        for i in $(seq "$n"); do ports+=("$(port_of single)"); done
    fi
    local before slice=$((KEYS / n)) per=$((CONNECTIONS / n))
    before=$(ticks "${pids[@]}")
    for i in $(seq 0 $((n - 1))); do
        "$BENCH" -s 127.0.0.1 -p "${ports[$i]}" -t 1 -c "$per" --ratio 1:1 -d 100 \
            --key-minimum $((i * slice)) --key-maximum $(((i + 1) * slice - 1)) \
            --test-time "$SECONDS_PER_RUN" --hide-histogram \
            --json-out-file "$WORK/$round-$kind-$n-$i.json" >/dev/null 2>&1 &
        loads+=($!)
    done
    for load in "${loads[@]}"; do wait "$load"; done
    local cpu
    cpu=$(( $(ticks "${pids[@]}") - before ))
    if [ "$kind" = redis ]; then
        for i in $(seq "$n"); do stop "shard$i"; rm -rf "${WORK:?}/shard$i"; done
    else
        stop single
        rm -rf "${WORK:?}/single"
    fi
    python3 -c '
import json, sys
total = sum(json.load(open(f))["ALL STATS"]["Totals"]["Count"] for f in sys.argv[3:])
print(total, int(sys.argv[1]) / int(sys.argv[2]))' "$cpu" "$(getconf CLK_TCK)" "$WORK/$round-$kind-$n"-*.json
}

: >"$WORK/results.txt"
for round in $(seq "$ROUNDS"); do
    for n in $(seq "$CORES"); do
        for kind in redis strata; do
            echo "$round $kind $n $(run_one "$round" "$kind" "$n")" >>"$WORK/results.txt"
            echo "round $round: $kind with $n done" >&2
        done
    done
done

mkdir -p "$OUT"
study_report "$WORK/results.txt" "$OUT/$STUDY.md" "$OUT/$STUDY.svg" "$ROUNDS" "$SECONDS_PER_RUN" "$CONNECTIONS" "$KEYS" <<'PY'
from study import context, finish, heading, line_chart, median_of
(day, machine, commit), (results, out, svg, rounds, seconds, connections, keys) = context()
rows = {}
for line in open(results):
    round_, kind, n, requests, cpu = line.split()
    rate = int(requests) / int(seconds)
    rows.setdefault(f"{kind} {n}", []).append((rate, float(cpu) / int(requests) * 1e6))
med = median_of(rows)
ns = sorted({int(k.split()[1]) for k in rows})
settings = f"ROUNDS={rounds}, SECONDS_PER_RUN={seconds}, CONNECTIONS={connections}, KEYS={keys}"
lines = heading("All cores against shards", "cores-shards", day, commit, machine, settings) + [
    f"N strata-bench processes at once (`-t 1 -c {connections}/N --ratio 1:1 -d 100`, each on one Nth of {keys} keys,",
    f"`--test-time {seconds}`), to N redis-servers (`--appendonly no --save \"\"`) or to one strata-server (the same).",
    "CPU: the servers' user + system time per request (all shards together for Redis).",
    "",
    f"Medians of {rounds} rounds (servers alternated).",
    "",
    "| N | Redis shards: requests/s | Strata: requests/s | Strata ÷ Redis | Redis CPU µs/request | Strata CPU µs/request | Strata ÷ Redis |",
    "|---|---|---|---|---|---|---|",
]
for n in ns:
    r, s = f"redis {n}", f"strata {n}"
    lines.append(
        f"| {n} | {med(r, 0):,.0f} | {med(s, 0):,.0f} | {med(s, 0) / med(r, 0):.2f} | "
        f"{med(r, 1):.2f} | {med(s, 1):.2f} | {med(s, 1) / med(r, 1):.2f} |"
    )
line_chart(svg, "Requests/s: one Strata against N Redis shards", "N (shards, load processes)", ns,
           {"Redis, N shards": [med(f"redis {n}", 0) for n in ns], "Strata, one process": [med(f"strata {n}", 0) for n in ns]},
           "requests/s")
finish(lines, rows, "requests/s, CPU µs/request", "cores-shards", out, "requests/s against N (medians)")
PY
