#!/usr/bin/env bash
# Two or more strata-server builds, each a tiered server (`--maxmemory
# BUDGET_MB --maxmemory-policy tiered`) holding KEYS values of SIZE bytes
# (five times the budget by default), under the flash-tiering load:
# strata-bench -t 2 -c 25 --pipeline 16 --ratio 1:4 --key-pattern G:G
# with a standard deviation of SD x KEYS (0.03: ~90 % RAM hits, 0.07:
# ~50 %). Every build is loaded once; then for ROUNDS rounds, for each SD,
# each build in turn gets WARMUP seconds of the load (not measured) and
# TEST_TIME seconds measured. Prints every run (requests/s, p99, the RAM
# hit ratio measured by INFO, server CPU µs per request), then the medians.
#
# Usage: bench/tiered-builds.sh OLD/strata-server NEW/strata-server [MORE...]
#        ROUNDS=4 TEST_TIME=12 SDS="0.03 0.07" bench/tiered-builds.sh A B
set -euo pipefail

[ $# -ge 2 ] || {
    echo "usage: bench/tiered-builds.sh A/strata-server B/strata-server [MORE...]" >&2
    exit 2
}
BUILDS=()
for build in "$@"; do BUILDS+=("$(realpath "$build")"); done
ROUNDS=${ROUNDS:-4}
TEST_TIME=${TEST_TIME:-12}
WARMUP=${WARMUP:-5}
SDS=${SDS:-0.03 0.07}
BUDGET_MB=${BUDGET_MB:-256}
SIZE=${SIZE:-1000}
KEYS=${KEYS:-$((BUDGET_MB * 5 * 1024 * 1024 / SIZE))}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup tiered-builds
TICK_US=$((1000000 / $(getconf CLK_TCK)))
RESULTS=$WORK/results

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

for n in "${!BUILDS[@]}"; do
    STRATA=${BUILDS[$n]} start "b$n" strata --maxmemory "${BUDGET_MB}mb" --maxmemory-policy tiered --save ""
    "$BENCH" -s 127.0.0.1 -p "$(port_of "b$n")" -t 2 -c 25 --pipeline 16 --ratio 1:0 --key-pattern P:P \
        -n allkeys --key-minimum 1 --key-maximum "$KEYS" -d "$SIZE" --hide-histogram >/dev/null 2>&1
done

for round in $(seq "$ROUNDS"); do
    for sd in $SDS; do
        stddev=$(awk -v k="$KEYS" -v f="$sd" 'BEGIN { printf "%d", k * f }')
        for n in "${!BUILDS[@]}"; do
            port=$(port_of "b$n")
            load=(-s 127.0.0.1 -p "$port" -t 2 -c 25 --pipeline 16 --ratio 1:4 --key-pattern G:G
                --key-stddev "$stddev" --key-minimum 1 --key-maximum "$KEYS" -d "$SIZE"
                --distinct-client-seed --randomize --hide-histogram)
            "$BENCH" "${load[@]}" --test-time "$WARMUP" >/dev/null 2>&1
            read -r ram0 disk0 < <(tiering_hits "$port")
            before=$(cpu_ticks "${PID[b$n]}")
            "$BENCH" "${load[@]}" --test-time "$TEST_TIME" --json-out-file "$WORK/run.json" >/dev/null 2>&1
            after=$(cpu_ticks "${PID[b$n]}")
            read -r ram1 disk1 < <(tiering_hits "$port")
            python3 - "$WORK/run.json" "$n" "$sd" "$round" "$((ram1 - ram0))" "$((disk1 - disk0))" \
                "$(((after - before) * TICK_US))" <<'PY' | tee -a "$RESULTS"
import json, sys
path, build, sd, rnd, ram, disk, cpu_us = sys.argv[1:]
totals = json.load(open(path))["ALL STATS"]["Totals"]
ram, disk = int(ram), int(disk)
print(f"round {rnd} sd {sd} build {build} ops/s {totals['Ops/sec']:.0f} p99 {totals['Percentile Latencies']['p99.00']:.2f}"
      f" hits {ram / max(ram + disk, 1):.3f} cpu_us_per_request {int(cpu_us) / max(totals['Count'], 1):.2f}")
PY
        done
    done
done

echo "medians (build: ${BUILDS[*]}):"
python3 - "$RESULTS" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    runs.setdefault((f[3], f[5]), []).append((float(f[7]), float(f[11]), float(f[13])))
for (sd, build), rows in sorted(runs.items()):
    med = lambda i: statistics.median(r[i] for r in rows)
    print(f"sd {sd} build {build}: ops/s {med(0):.0f}  hits {med(1):.3f}  cpu_us_per_request {med(2):.2f}  ({len(rows)} runs)")
PY
