#!/usr/bin/env bash
# Soak: Strata under a RAM budget for minutes, watched from outside.
#
# A dataset several times the budget (default 150 000 keys of 1-4 KB under
# `maxmemory 64mb`), a Gaussian hot set sized to fit in half the budget,
# SET:GET 1:3 from 20 connections. Every INTERVAL seconds it prints
# throughput, latency p50/p99/p99.9/max (strata-bench, one run per
# interval), RSS, used_memory, ram_hit_ratio over the interval and keys
# with their value in RAM (INFO), and at the end draws them over time
# into an SVG.
#
# Usage: bench/soak.sh
#        DURATION=60 INTERVAL=5 bench/soak.sh
#        BUDGET_MB=256 KEYS=600000 SD=12000 bench/soak.sh
#        EXTRA_ARGS="--appendonly no" bench/soak.sh
# Output: a Markdown table on stdout; soak.tsv and soak.svg in OUT_DIR
# (default: the current directory).
set -euo pipefail

DURATION=${DURATION:-300}
INTERVAL=${INTERVAL:-10}
BUDGET_MB=${BUDGET_MB:-64}
KEYS=${KEYS:-150000}
SIZES=${SIZES:-1024-4096}
# Gaussian standard deviation in keys: +-2 SD (95 % of accesses) spans
# 4 x 3000 keys x ~2.5 KB = ~30 MB, half the default budget.
SD=${SD:-3000}
RATIO=${RATIO:-1:3}
THREADS=${THREADS:-2}
CLIENTS=${CLIENTS:-10}
EXTRA_ARGS=${EXTRA_ARGS:-}
OUT_DIR=$(realpath "${OUT_DIR:-.}")

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup soak


# shellcheck disable=SC2086
start soak strata --maxmemory "${BUDGET_MB}mb" --maxmemory-policy tiered $EXTRA_ARGS
port=$(port_of soak)

echo "filling $KEYS keys of $SIZES bytes..." >&2
"$BENCH" -s 127.0.0.1 -p "$port" --hide-histogram -t 2 -c 25 --pipeline 16 --ratio 1:0 \
    --key-pattern P:P -n allkeys --key-minimum 1 --key-maximum "$KEYS" \
    --data-size-range "$SIZES" >/dev/null 2>&1

rounds=$((DURATION / INTERVAL))
echo "soaking for $((rounds * INTERVAL)) s..." >&2
# One strata-bench run per interval (-x): its percentiles and max are the
# interval's. INFO is sampled by this loop at the end of each interval.
"$BENCH" -s 127.0.0.1 -p "$port" --hide-histogram -t "$THREADS" -c "$CLIENTS" \
    --ratio "$RATIO" --key-pattern G:G --key-stddev "$SD" --key-minimum 1 \
    --key-maximum "$KEYS" --data-size-range "$SIZES" --distinct-client-seed --randomize \
    --test-time "$INTERVAL" -x "$rounds" --print-percentiles 50,99,99.9 \
    --json-out-file "$WORK/soak.json" >/dev/null 2>&1 &
bench_pid=$!

: >"$WORK/info.tsv"
ram0=$(info_field "$port" tiering ram_hits)
disk0=$(info_field "$port" tiering disk_hits)
started=$(date +%s.%N)
for round in $(seq "$rounds"); do
    target=$(awk -v s="$started" -v r="$round" -v i="$INTERVAL" 'BEGIN { printf "%.3f", s + r * i }')
    now=$(date +%s.%N)
    sleep "$(awk -v t="$target" -v n="$now" 'BEGIN { d = t - n; print (d > 0 ? d : 0) }')"
    ram1=$(info_field "$port" tiering ram_hits)
    disk1=$(info_field "$port" tiering disk_hits)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" \
        "$(info_field "$port" memory used_memory_rss)" \
        "$(info_field "$port" memory used_memory)" \
        "$(awk -v r="$((ram1 - ram0))" -v d="$((disk1 - disk0))" 'BEGIN { printf "%.3f", (r + d) ? r / (r + d) : 1 }')" \
        "$(info_field "$port" tiering keys_value_in_ram)" \
        "$(info_field "$port" tiering keys_value_on_disk)" >>"$WORK/info.tsv"
    ram0=$ram1
    disk0=$disk1
done
wait "$bench_pid"
# Where RAM went at the end (INFO memory's breakdown).
redis-cli -p "$port" info memory | tr -d '\r' |
    grep -E '^(used_memory|used_memory_rss|mem_keys_index|mem_values_in_ram|mem_log_buffers|mem_clients_normal|mem_other|mem_rss_overhead):' >"$WORK/breakdown.txt"

{
    echo "# Soak: ${BUDGET_MB} MB budget, $KEYS keys of $SIZES B, Gaussian SD $SD, SET:GET $RATIO, $((THREADS * CLIENTS)) connections, $((rounds * INTERVAL)) s"
    echo
    echo "Server: \`strata-server --maxmemory ${BUDGET_MB}mb --maxmemory-policy tiered $EXTRA_ARGS\`"
    echo "Load: \`strata-bench -t $THREADS -c $CLIENTS --ratio $RATIO --key-pattern G:G --key-stddev $SD --key-minimum 1 --key-maximum $KEYS --data-size-range $SIZES --distinct-client-seed --randomize --test-time $INTERVAL -x $rounds\`"
    echo
    echo "| t (s) | ops/s | p50 ms | p99 ms | p99.9 ms | max ms | RSS MB | used_memory MB | ram_hit_ratio | values in RAM | values on disk |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
} >"$WORK/table.md"
python3 - "$WORK/soak.json" "$WORK/info.tsv" "$INTERVAL" "$BUDGET_MB" "$OUT_DIR/soak.tsv" "$OUT_DIR/soak.svg" >>"$WORK/table.md" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["strata"]["runs"]
info = [line.split("\t") for line in open(sys.argv[2]).read().splitlines()]
interval, budget = float(sys.argv[3]), float(sys.argv[4])
rows = []
for run, fields in zip(runs, info):
    t = run["ALL STATS"]["Totals"]
    p = t["Percentile Latencies"]
    rows.append({
        "t": int(fields[0]) * interval, "ops": t["Ops/sec"],
        "p50": p["p50.00"], "p99": p["p99.00"], "p999": p["p99.90"], "max": t["Max Latency"],
        "rss": int(fields[1]) / 2**20, "used": int(fields[2]) / 2**20,
        "hit": float(fields[3]), "in_ram": int(fields[4]), "on_disk": int(fields[5]),
    })
with open(sys.argv[5], "w") as out:
    out.write("\t".join(rows[0].keys()) + "\n" if rows else "")
    for r in rows:
        out.write("\t".join(str(v) for v in r.values()) + "\n")
for r in rows:
    print(f"| {r['t']:.0f} | {r['ops']:.0f} | {r['p50']:.2f} | {r['p99']:.2f} | {r['p999']:.2f} | {r['max']:.2f} "
          f"| {r['rss']:.1f} | {r['used']:.1f} | {r['hit']:.3f} | {r['in_ram']} | {r['on_disk']} |")
# Five stacked panels over time, in plain SVG.
panels = [("ops/s", ["ops"], None), ("latency ms (p50, p99, p99.9)", ["p50", "p99", "p999"], None),
          ("MB (RSS, used_memory; dashed: budget)", ["rss", "used"], budget),
          ("ram_hit_ratio", ["hit"], None), ("values in RAM", ["in_ram"], None)]
colors = ["#1f77b4", "#d62728", "#2ca02c"]
W, H, L, PAD = 900, 150, 70, 30
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{len(panels) * (H + PAD) + PAD}" font-family="sans-serif" font-size="11">',
       f'<rect width="100%" height="100%" fill="white"/>']
tmax = max((r["t"] for r in rows), default=1)
for i, (title, keys, line) in enumerate(panels):
    y0 = PAD + i * (H + PAD)
    top = max([r[k] for r in rows for k in keys] + [line or 0, 1e-9]) * 1.1
    svg.append(f'<text x="{L}" y="{y0 - 6}" font-weight="bold">{title}</text>')
    svg.append(f'<rect x="{L}" y="{y0}" width="{W - L - 10}" height="{H}" fill="none" stroke="#999"/>')
    svg.append(f'<text x="{L - 4}" y="{y0 + 10}" text-anchor="end">{top:.3g}</text><text x="{L - 4}" y="{y0 + H}" text-anchor="end">0</text>')
    X = lambda t: L + (W - L - 10) * t / tmax
    Y = lambda v: y0 + H - H * v / top
    if line:
        svg.append(f'<line x1="{L}" x2="{W - 10}" y1="{Y(line):.1f}" y2="{Y(line):.1f}" stroke="#555" stroke-dasharray="4 3"/>')
    for k, color in zip(keys, colors):
        points = " ".join(f"{X(r['t']):.1f},{Y(r[k]):.1f}" for r in rows)
        svg.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="1.5"/>')
    svg.append(f'<text x="{W - 10}" y="{y0 + H + 12}" text-anchor="end">{tmax:.0f} s</text>')
svg.append("</svg>")
open(sys.argv[6], "w").write("\n".join(svg))
PY
cat "$WORK/table.md"
echo
echo "RAM at the end (INFO memory, MB):"
awk -F: '{ printf "- %s: %.1f\n", $1, $2 / 1048576 }' "$WORK/breakdown.txt"
echo
echo "Per-interval figures: $OUT_DIR/soak.tsv; chart: $OUT_DIR/soak.svg"
