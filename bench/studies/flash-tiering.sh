#!/usr/bin/env bash
# Flash tiering: values on SSD under a RAM budget at ~85 % and ~50 % RAM hits, against all in RAM
#
# The published flash-tiering measurements (Redis on Flash): 100 B and
# 1000 B values, GET:SET 1:1 and 4:1, reads that find their value in RAM
# about 85 % and about 50 % of the time. strata-server with a RAM budget
# of BUDGET_MB holding a larger dataset (`--maxmemory-policy tiered`:
# cold values on disk) against strata-server and redis-server holding it
# all in RAM. 1000 B values: five times the budget. 100 B values: ten
# times the budget's worth of values, which is only about 1.2 times the
# budget in all, because every key's index entry stays in RAM (at 100 B
# the index takes about 70 % of the budget). Gaussian keys (strata-bench
# `--key-pattern G:G`) with a standard deviation calibrated for each
# target; the table shows the hit ratio measured (INFO tiering), not the
# one aimed at. ROUNDS rounds, the three servers alternated,
# SECONDS_PER_RUN seconds each. Before each of its runs the tiered server
# gets WARMUP_SECONDS of the same load, not measured: the published
# figures are steady states, and the run before (another hit ratio, or
# the loading) leaves other values in RAM than this load's hot set
# (without it, a round's ~85 % run measured 164 000 requests/s at 52 %
# hits where the next rounds had 317 000-378 000 at 79-84 %).
#
# Writes docs/studies/flash-tiering.md, flash-tiering.svg (1000 B, 4:1,
# ~85 %: throughput per second and latency percentiles, the last round)
# and flash-tiering-100.svg (the same for 100 B).
#
# Usage: bench/studies/run.sh flash-tiering
#        ROUNDS=3 SECONDS_PER_RUN=8 WARMUP_SECONDS=4 BUDGET_MB=256 SIZES="1000 100" RATIOS="1:4 1:1" bench/studies/run.sh flash-tiering
set -euo pipefail
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-8}
WARMUP_SECONDS=${WARMUP_SECONDS:-4}
BUDGET_MB=${BUDGET_MB:-256}
SIZES=${SIZES:-1000 100}
# SET:GET, memtier's --ratio.
RATIOS=${RATIOS:-1:4 1:1}
STUDY=flash-tiering
OUT=docs/studies

source bench/lib.sh
source bench/studies/lib.sh
tiering_defaults
bench_setup "study-$STUDY"

for size in $SIZES; do
    keys_var=KEYS_$size
    keys=${!keys_var}
    start tiered strata --maxmemory "${BUDGET_MB}mb" --maxmemory-policy tiered --save ""
    start ram strata --save ""
    start redis redis --appendonly no --save ""
    for server in tiered ram redis; do
        "$BENCH" -s 127.0.0.1 -p "$(port_of "$server")" -t 2 -c 25 --pipeline 16 --ratio 1:0 \
            --key-pattern P:P -n allkeys --key-minimum 1 --key-maximum "$keys" -d "$size" \
            --hide-histogram >/dev/null 2>&1
    done
    for round in $(seq "$ROUNDS"); do
        for ratio in $RATIOS; do
            for target in 85 50; do
                sd_var=SD_${size}_$target
                sd=$(awk -v k="$keys" -v f="${!sd_var}" 'BEGIN { printf "%d", k * f }')
                dir=$WORK/runs/$round/$size-${ratio/:/-}-$target
                mkdir -p "$dir"
                for server in tiered ram redis; do
                    port=$(port_of "$server")
                    load=(-s 127.0.0.1 -p "$port" -t 2 -c 25 --pipeline 16 --ratio "$ratio" --key-pattern G:G
                        --key-stddev "$sd" --key-minimum 1 --key-maximum "$keys" -d "$size"
                        --distinct-client-seed --randomize --hide-histogram)
                    if [ "$server" = tiered ] && [ "$WARMUP_SECONDS" -gt 0 ]; then
                        "$BENCH" "${load[@]}" --test-time "$WARMUP_SECONDS" >/dev/null 2>&1
                    fi
                    before=$(tiering_hits "$port")
                    "$BENCH" "${load[@]}" --test-time "$SECONDS_PER_RUN" \
                        --json-out-file "$dir/$server.json" >/dev/null 2>&1
                    echo "$before $(tiering_hits "$port")" >"$dir/$server.hits"
                    echo "round $round: $server, $size B, $ratio at ~$target % done" >&2
                done
            done
        done
    done
    for server in tiered ram redis; do stop "$server"; done
    rm -rf "${WORK:?}/tiered" "$WORK/ram" "$WORK/redis"
done

# plot SIZE FILE: the last round's runs at SIZE B, 4:1 (or the first
# ratio measured), ~85 %.
plot() {
    local ratio=1:4
    [[ " $RATIOS " == *" 1:4 "* ]] || ratio=${RATIOS%% *}
    "$BENCH" report --plot "$OUT/$2" "$WORK/runs/$ROUNDS/$1-${ratio/:/-}-85"/*.json
}
mkdir -p "$OUT"
for size in $SIZES; do
    case $size in
    1000) plot 1000 "$STUDY.svg" ;;
    100) plot 100 "$STUDY-100.svg" ;;
    esac
done
study_report "$WORK/runs" "$OUT/$STUDY.md" "$ROUNDS" "$SECONDS_PER_RUN" "$WARMUP_SECONDS" "$BUDGET_MB" "$KEYS_1000" "$KEYS_100" <<'PY'
from study import context, finish, heading, median_of, round_dirs
import json, os
(day, machine, commit), (runs, out, rounds, seconds, warmup, budget, keys_1000, keys_100) = context()
rows = {}
cases = []
for round_dir in round_dirs(runs):
    # 1000 B before 100 B, 4:1 before 1:1, ~85 % before ~50 %.
    for case in sorted(os.listdir(round_dir), key=lambda c: [-int(c.split("-")[i]) for i in (0, 2, 3)]):
        if case not in cases:
            cases.append(case)
        for server in ("tiered", "ram", "redis"):
            base = os.path.join(round_dir, case, server)
            totals = json.load(open(base + ".json"))["ALL STATS"]["Totals"]
            r0, d0, r1, d1 = map(int, open(base + ".hits").read().split())
            ram, disk = r1 - r0, d1 - d0
            hit = ram / (ram + disk) if ram + disk else 1.0
            p = totals["Percentile Latencies"]
            rows.setdefault(f"{server} {case}", []).append(
                (totals["Ops/sec"], p["p50.00"], p["p99.00"], p["p99.90"], hit))
med = median_of(rows)
settings = f"ROUNDS={rounds}, SECONDS_PER_RUN={seconds}, WARMUP_SECONDS={warmup}, BUDGET_MB={budget}, KEYS_1000={keys_1000}, KEYS_100={keys_100}"
lines = heading("Flash tiering: values on disk under a RAM budget", "flash-tiering", day, commit, machine, settings) + [
    f"Each server holds {keys_1000} keys of 1000 B (five times the budget) or {keys_100} keys of 100 B (ten times the",
    "budget's worth of values; with the keys' index, which always stays in RAM, about 1.2 times the budget in all):",
    f"`strata-server --maxmemory {budget}mb --maxmemory-policy tiered --save \"\"` (tiered), `strata-server --save \"\"` and",
    "`redis-server --appendonly no --save \"\"` (all in RAM). The load: strata-bench `-t 2 -c 25 --pipeline 16 --ratio <SET:GET>",
    f"--key-pattern G:G --key-stddev <keys x SD> --key-minimum 1 --key-maximum <keys> -d <size> --test-time {seconds}",
    "--distinct-client-seed --randomize`.",
    "",
    f"Medians of {rounds} rounds (the three servers alternated). The hit ratio is the tiered server's, measured. Before each",
    f"of its runs the tiered server had {warmup} s of the same load, not measured (a steady state, as the published figures).",
    "",
    "| value | GET:SET | target RAM hits | measured | tiered Strata: requests/s | p50 ms | p99 ms | p99.9 ms | Strata in RAM: requests/s | Redis in RAM: requests/s | p99 ms (Redis) | tiered ÷ Strata in RAM | tiered ÷ Redis |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
]
for case in cases:
    size, sets, gets, target = case.split("-")
    t, r, x = f"tiered {case}", f"ram {case}", f"redis {case}"
    lines.append(
        f"| {size} B | {gets}:{sets} | ~{target} % | {med(t, 4):.3f} | {med(t, 0):,.0f} | {med(t, 1):.2f} | {med(t, 2):.2f} | {med(t, 3):.2f} | "
        f"{med(r, 0):,.0f} | {med(x, 0):,.0f} | {med(x, 2):.2f} | {med(t, 0) / med(r, 0):.2f} | {med(t, 0) / med(x, 0):.2f} |"
    )
finish(lines, rows, "requests/s, p50, p99, p99.9, RAM hit ratio", "flash-tiering", out,
       "1000 B, GET:SET 4:1, ~85 % hits: throughput per second and latency percentiles, the last round")
if any(case.startswith("100-") for case in cases):
    with open(out, "a") as file:
        file.write("![100 B, GET:SET 4:1, ~85 % hits: throughput per second and latency percentiles, the last round](flash-tiering-100.svg)\n")
PY
