#!/usr/bin/env bash
# Flash tiering: values on SSD under a RAM budget at ~85 % and ~50 % RAM hits, against all in RAM
#
# The published flash-tiering measurements (Redis on Flash): 1000 B
# values, GET:SET 4:1, reads that find their value in RAM about 85 % and
# about 50 % of the time. strata-server with a RAM budget of BUDGET_MB
# holding a dataset five times larger (`--maxmemory-policy tiered`: cold
# values on disk) against strata-server and redis-server holding it all
# in RAM. Gaussian keys (strata-bench `--key-pattern G:G`) with a
# standard deviation calibrated for each target; the table shows the hit
# ratio measured (INFO tiering), not the one aimed at. ROUNDS rounds, the
# three servers alternated, SECONDS_PER_RUN seconds each.
#
# Writes docs/studies/flash-tiering.md and flash-tiering.svg (the last
# round at ~85 %: throughput per second and latency percentiles).
#
# Usage: bench/studies/run.sh flash-tiering
#        ROUNDS=3 SECONDS_PER_RUN=20 BUDGET_MB=256 bench/studies/run.sh flash-tiering
set -euo pipefail
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-20}
BUDGET_MB=${BUDGET_MB:-256}
KEYS=${KEYS:-$((BUDGET_MB * 5 * 1024 * 1024 / 1000))}
# Standard deviations, as a fraction of the keys, for ~85 % and ~50 %
# RAM hits (calibrated on this machine, as bench/tiering.sh's).
SD_85=${SD_85:-0.03}
SD_50=${SD_50:-0.07}
STUDY=flash-tiering
OUT=docs/studies

source bench/lib.sh
source bench/studies/lib.sh
bench_setup "study-$STUDY"

start tiered strata --maxmemory "${BUDGET_MB}mb" --maxmemory-policy tiered --save ""
start ram strata --save ""
start redis redis --appendonly no --save ""
for server in tiered ram redis; do
    "$BENCH" -s 127.0.0.1 -p "$(port_of "$server")" -t 2 -c 25 --pipeline 16 --ratio 1:0 \
        --key-pattern P:P -n allkeys --key-minimum 1 --key-maximum "$KEYS" -d 1000 \
        --hide-histogram >/dev/null 2>&1
done

# hits PORT: the tiered server's RAM and disk hits so far.
hits() {
    redis-cli -p "$1" info tiering | tr -d '\r' |
        awk -F: '$1 == "ram_hits" { r = $2 } $1 == "disk_hits" { d = $2 } END { print r + 0, d + 0 }'
}

for round in $(seq "$ROUNDS"); do
    for target in 85 50; do
        sd_var=SD_$target
        sd=$(awk -v k="$KEYS" -v f="${!sd_var}" 'BEGIN { printf "%d", k * f }')
        mkdir -p "$WORK/runs/$round/$target"
        for server in tiered ram redis; do
            port=$(port_of "$server")
            before=$(hits "$port")
            "$BENCH" -s 127.0.0.1 -p "$port" -t 2 -c 25 --pipeline 16 --ratio 1:4 --key-pattern G:G \
                --key-stddev "$sd" --key-minimum 1 --key-maximum "$KEYS" -d 1000 \
                --test-time "$SECONDS_PER_RUN" --distinct-client-seed --randomize --hide-histogram \
                --json-out-file "$WORK/runs/$round/$target/$server.json" >/dev/null 2>&1
            echo "$before $(hits "$port")" >"$WORK/runs/$round/$target/$server.hits"
            echo "round $round: $server at ~$target % done" >&2
        done
    done
done

study_plot "$WORK/runs/$ROUNDS/85"/*.json
study_report "$WORK/runs" "$OUT/$STUDY.md" "$ROUNDS" "$SECONDS_PER_RUN" "$BUDGET_MB" "$KEYS" <<'PY'
from study import context, finish, heading, median_of, round_dirs
import json, os
(day, machine, commit), (runs, out, rounds, seconds, budget, keys) = context()
rows = {}
for round_dir in round_dirs(runs):
    for target in ("85", "50"):
        for server in ("tiered", "ram", "redis"):
            base = os.path.join(round_dir, target, server)
            totals = json.load(open(base + ".json"))["ALL STATS"]["Totals"]
            r0, d0, r1, d1 = map(int, open(base + ".hits").read().split())
            ram, disk = r1 - r0, d1 - d0
            hit = ram / (ram + disk) if ram + disk else 1.0
            p = totals["Percentile Latencies"]
            rows.setdefault(f"{server} {target}", []).append(
                (totals["Ops/sec"], p["p50.00"], p["p99.00"], p["p99.90"], hit))
med = median_of(rows)
settings = f"ROUNDS={rounds}, SECONDS_PER_RUN={seconds}, BUDGET_MB={budget}, KEYS={keys}"
lines = heading("Flash tiering: values on disk under a RAM budget", "flash-tiering", day, commit, machine, settings) + [
    f"{keys} keys of 1000 B (five times the budget) in each server: `strata-server --maxmemory {budget}mb",
    "--maxmemory-policy tiered --save \"\"` (tiered), `strata-server --save \"\"` and `redis-server --appendonly no",
    "--save \"\"` (all in RAM). The load: strata-bench `-t 2 -c 25 --pipeline 16 --ratio 1:4 --key-pattern G:G",
    f"--key-stddev <keys x SD> --key-minimum 1 --key-maximum {keys} -d 1000 --test-time {seconds} --distinct-client-seed --randomize`.",
    "",
    f"Medians of {rounds} rounds (the three servers alternated). The hit ratio is the tiered server's, measured.",
    "",
    "| target RAM hits | measured | tiered Strata: requests/s | p50 ms | p99 ms | p99.9 ms | Strata in RAM: requests/s | Redis in RAM: requests/s | p99 ms (Redis) | tiered ÷ Strata in RAM | tiered ÷ Redis |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
]
for target in ("85", "50"):
    t, r, x = f"tiered {target}", f"ram {target}", f"redis {target}"
    lines.append(
        f"| ~{target} % | {med(t, 4):.3f} | {med(t, 0):,.0f} | {med(t, 1):.2f} | {med(t, 2):.2f} | {med(t, 3):.2f} | "
        f"{med(r, 0):,.0f} | {med(x, 0):,.0f} | {med(x, 2):.2f} | {med(t, 0) / med(r, 0):.2f} | {med(t, 0) / med(x, 0):.2f} |"
    )
finish(lines, rows, "requests/s, p50, p99, p99.9, RAM hit ratio", "flash-tiering", out,
       "throughput per second and latency percentiles at ~85 % hits, the last round")
PY
