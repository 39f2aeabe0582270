#!/usr/bin/env bash
# Tiering (issue 5): Strata with a RAM budget holding a dataset several
# times larger, against the same Strata holding everything in RAM, same
# load, alternating rounds. Also: the disk's own 4 KiB random-read IOPS
# (fio) next to Strata's cold reads/s. RAM per key whose value is cold:
# bench/ram-per-key.sh.
#
# Load: strata-bench, 50 connections (2 threads x 25), pipeline 16, SET:GET
# 1:1 and 1:4, Gaussian keys (each client its own random sequence) with a
# standard deviation chosen so that about 85 % and 50 % of reads find the
# value in RAM. The table reports the hit ratio measured by INFO tiering
# over each run, not the intended one.
#
# Section "latency": the same tiered server at ~85 % RAM hits (1000 B,
# SET:GET 1:4), first closed loop at pipeline 1 to find its maximum, then
# open loop (strata-bench --rate) at half of it: latency percentiles and
# the slowest reply, measured from each request's intended send time.
#
# Usage: bench/tiering.sh
#        ROUNDS=5 SECONDS_PER_RUN=30 BUDGET_MB=512 bench/tiering.sh
#        SIZES="1000" SECTIONS="load" TARGETS="85" bench/tiering.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-20}
BUDGET_MB=${BUDGET_MB:-256}
SIZES=${SIZES:-"1000 100"}
SECTIONS=${SECTIONS:-"load latency fio"}
TARGETS=${TARGETS:-"85 50"}

cd "$(dirname "$0")/.."
source bench/lib.sh
tiering_defaults
bench_setup tiering


# fill PORT KEYS SIZE: writes every key once, sequentially.
fill() {
    "$BENCH" -s 127.0.0.1 -p "$1" --hide-histogram -t 2 -c 25 --pipeline 16 --ratio 1:0 \
        --key-pattern P:P -n allkeys --key-minimum 1 --key-maximum "$2" -d "$3" >/dev/null 2>&1
}

# measure PORT KEYS SIZE RATIO SD: one timed run; prints
# "ops p50 p99 p99.9 hit_ratio disk_reads_per_s".
measure() {
    local port=$1 keys=$2 size=$3 mix=$4 sd=$5
    local ram0 disk0 reads0 ram1 disk1 reads1 ops
    ram0=$(info_field "$port" tiering ram_hits)
    disk0=$(info_field "$port" tiering disk_hits)
    reads0=$(info_field "$port" tiering disk_reads)
    ops=$(sb_ops "$port" -t 2 -c 25 --pipeline 16 --ratio "$mix" --key-pattern G:G \
        --key-stddev "$sd" --key-minimum 1 --key-maximum "$keys" -d "$size" \
        --test-time "$SECONDS_PER_RUN" --distinct-client-seed --randomize)
    ram1=$(info_field "$port" tiering ram_hits)
    disk1=$(info_field "$port" tiering disk_hits)
    reads1=$(info_field "$port" tiering disk_reads)
    python3 - "$WORK/sb.json" "$ops" "$ram0" "$ram1" "$disk0" "$disk1" "$reads0" "$reads1" "$SECONDS_PER_RUN" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["strata"]["runs"][-1]["ALL STATS"]["Totals"]["Percentile Latencies"]
ops, ram0, ram1, disk0, disk1, r0, r1, secs = map(float, sys.argv[2:])
ram, disk = ram1 - ram0, disk1 - disk0
hit = ram / (ram + disk) if ram + disk else 1.0
print(int(ops), d["p50.00"], d["p99.00"], d["p99.90"], f"{hit:.3f}", int((r1 - r0) / secs))
PY
}

med_col() { awk -v c="$1" '{ print $c }' | median; }

echo "# Tiering: RAM budget vs everything in RAM"
echo
echo "$(nproc) cores shared by the server and strata-bench; RAM budget ${BUDGET_MB} MB;"
echo "$ROUNDS alternating rounds of ${SECONDS_PER_RUN} s, medians (latency in ms)."

COLD_READS_50=""
if [[ " $SECTIONS " == *" load "* ]]; then
    for size in $SIZES; do
        keys_var="KEYS_$size"
        keys=${!keys_var}
        start tiered strata --maxmemory "${BUDGET_MB}mb" --maxmemory-policy tiered --save ""
        start ram strata --save ""
        fill "$(port_of tiered)" "$keys" "$size"
        fill "$(port_of ram)" "$keys" "$size"
        used=$(info_field "$(port_of tiered)" memory used_memory)
        on_disk=$(info_field "$(port_of tiered)" tiering keys_value_on_disk)
        echo
        echo "## ${size}-byte values, $keys keys ($(( keys * (size + 16) / 1024 / 1024 )) MB of keys and values, $(ratio "$(( keys * (size + 16) ))" "$(( BUDGET_MB * 1024 * 1024 ))")x the budget)"
        echo
        echo "After the fill: used_memory $((used / 1024 / 1024)) MB, $on_disk of $keys values on disk."
        echo
        echo "| SET:GET | target hits | measured RAM hit ratio | tiered ops/s | p50 | p99 | p99.9 | in-RAM ops/s | p50 | p99 | p99.9 | tiered / in-RAM | cold reads/s |"
        echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        for mix in 1:1 1:4; do
            for target in $TARGETS; do
                sd_var="SD_${size}_${target}"
                sd=$(awk -v k="$keys" -v f="${!sd_var}" 'BEGIN { printf "%d", k * f }')
                : >"$WORK/t.txt"
                : >"$WORK/r.txt"
                for _ in $(seq "$ROUNDS"); do
                    measure "$(port_of tiered)" "$keys" "$size" "$mix" "$sd" >>"$WORK/t.txt"
                    measure "$(port_of ram)" "$keys" "$size" "$mix" "$sd" >>"$WORK/r.txt"
                done
                echo "  raw tiered $size $mix $target: $(tr '\n' ';' <"$WORK/t.txt")" >&2
                echo "  raw in-RAM $size $mix $target: $(tr '\n' ';' <"$WORK/r.txt")" >&2
                t_ops=$(med_col 1 <"$WORK/t.txt")
                r_ops=$(med_col 1 <"$WORK/r.txt")
                cold=$(med_col 6 <"$WORK/t.txt")
                [ "$target" = 50 ] && COLD_READS_50+="$cold "
                echo "| $mix | ${target} % | $(med_col 5 <"$WORK/t.txt") | $t_ops | $(med_col 2 <"$WORK/t.txt") | $(med_col 3 <"$WORK/t.txt") | $(med_col 4 <"$WORK/t.txt") | $r_ops | $(med_col 2 <"$WORK/r.txt") | $(med_col 3 <"$WORK/r.txt") | $(med_col 4 <"$WORK/r.txt") | $(ratio "$t_ops" "$r_ops") | $cold |"
            done
        done
        echo
        echo "Commands: \`strata-server --maxmemory ${BUDGET_MB}mb --maxmemory-policy tiered --save \"\"\` vs \`strata-server --save \"\"\`;"
        echo "\`strata-bench -t 2 -c 25 --pipeline 16 --ratio <SET:GET> --key-pattern G:G --key-stddev <keys x SD_${size}_<target>> --key-minimum 1 --key-maximum $keys -d $size --test-time $SECONDS_PER_RUN --distinct-client-seed --randomize\`"
        stop tiered
        stop ram
        rm -rf "$WORK/tiered" "$WORK/ram"
    done
fi

if [[ " $SECTIONS " == *" latency "* ]]; then
    keys=$KEYS_1000
    sd=$(awk -v k="$keys" -v f="$SD_1000_85" 'BEGIN { printf "%d", k * f }')
    start lat strata --maxmemory "${BUDGET_MB}mb" --maxmemory-policy tiered --save ""
    port=$(port_of lat)
    fill "$port" "$keys" 1000
    common=(-t 2 -c 25 --pipeline 1 --ratio 1:4 --key-pattern G:G --key-stddev "$sd"
        --key-minimum 1 --key-maximum "$keys" -d 1000 --test-time "$SECONDS_PER_RUN"
        --distinct-client-seed --randomize)
    echo
    echo "## Latency at a fixed rate: 1000 B, SET:GET 1:4, ~85 % RAM hits, 50 connections"
    echo
    echo "| round | closed-loop max ops/s | open-loop rate | achieved ops/s | RAM hits | p50 ms | p99 ms | p99.9 ms | max ms |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for round in $(seq "$ROUNDS"); do
        max=$(sb_ops "$port" "${common[@]}")
        rate=$((max / 2))
        ram0=$(info_field "$port" tiering ram_hits)
        disk0=$(info_field "$port" tiering disk_hits)
        ops=$(sb_ops "$port" "${common[@]}" --rate "$rate")
        ram1=$(info_field "$port" tiering ram_hits)
        disk1=$(info_field "$port" tiering disk_hits)
        python3 - "$WORK/sb.json" "$round" "$max" "$rate" "$ops" "$ram0" "$ram1" "$disk0" "$disk1" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["strata"]["runs"][-1]
p = run["ALL STATS"]["Totals"]["Percentile Latencies"]
worst = max((s.get("max_latency_ms", 0) for s in run.get("Time series", [])), default=0)
r, mx, rate, ops, ram0, ram1, disk0, disk1 = sys.argv[2:]
ram, disk = float(ram1) - float(ram0), float(disk1) - float(disk0)
hit = ram / (ram + disk) if ram + disk else 1.0
print(f"| {r} | {mx} | {rate} | {ops} | {hit:.3f} | {p['p50.00']} | {p['p99.00']} | {p['p99.90']} | {worst} |")
PY
    done
    stop lat
    rm -rf "$WORK/lat"
    echo
    echo "Commands: \`strata-server --maxmemory ${BUDGET_MB}mb --maxmemory-policy tiered --save \"\"\`; \`strata-bench ${common[*]}\` (closed loop), then the same with \`--rate <max / 2>\`."
fi

if [[ " $SECTIONS " == *" fio "* ]]; then
    if ! command -v fio >/dev/null; then
        echo "installing fio (Debian package)..." >&2
        if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio >/dev/null
    fi
    echo
    echo "## The disk itself: 4 KiB random reads, O_DIRECT (fio, 1 GiB file in the bench directory)"
    echo
    echo "| queue depth | IOPS |"
    echo "|---|---|"
    for depth in 1 32; do
        iops=$(fio --name=randread --filename="$WORK/fio.dat" --size=1G --rw=randread --bs=4k \
            --direct=1 --ioengine=psync --numjobs="$depth" --group_reporting --runtime=15 \
            --time_based --output-format=json 2>/dev/null |
            python3 -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["read"]["iops"]))')
        echo "| $depth | $iops |"
    done
    rm -f "$WORK/fio.dat"
    echo
    echo "fio: \`--rw=randread --bs=4k --direct=1 --ioengine=psync --numjobs=<depth>\` (one blocking pread per job, as Strata's reader threads)."
    [ -n "$COLD_READS_50" ] && echo "Strata's cold reads/s in the 50 % runs above: $COLD_READS_50"
fi
