#!/usr/bin/env bash
# AOF on cloud-like disks: 10 KB SETs, 50 connections, pipeline 25, everysec and always
#
# The load of the published measurements of Redis' AOF stalling on slow
# cloud disks (memtier_benchmark: 10 KB values, 50 connections, pipeline
# 25, SETs only): redis-server (appendonly yes) against strata-server (its
# log), with appendfsync everysec and always, SECONDS_PER_RUN seconds each,
# ROUNDS rounds alternated, on this machine's disk and, when run as root,
# on a slow disk: device-mapper's delay target over a loop file, every
# write DELAY_MS late (a cloud volume's latency; this machine's cgroup v1
# blkio throttle would slow only direct I/O, that is Strata's and not
# Redis' buffered AOF, so it is not used).
#
# Writes docs/studies/aof-cloud-disk.md (medians: requests/s, p50, p99,
# p99.9 and max latency, and stalls: seconds whose throughput fell below a
# tenth of the run's median) and aof-cloud-disk.svg (the last round:
# throughput per second and the latency percentile curve of every run).
#
# Usage: bench/studies/run.sh aof-cloud-disk
#        ROUNDS=3 SECONDS_PER_RUN=15 DELAY_MS=2 bench/studies/run.sh aof-cloud-disk
set -euo pipefail
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-15}
DELAY_MS=${DELAY_MS:-2}
STUDY=aof-cloud-disk
OUT=docs/studies

source bench/lib.sh
source bench/studies/lib.sh
bench_setup "study-$STUDY"

SLOW= DM_NAME= LOOP=
cleanup_slow() {
    if [ -n "$SLOW" ]; then umount "$SLOW" 2>/dev/null || true; fi
    if [ -n "$DM_NAME" ]; then dmsetup remove "$DM_NAME" 2>/dev/null || true; fi
    if [ -n "$LOOP" ]; then losetup -d "$LOOP" 2>/dev/null || true; fi
}
trap 'cleanup; cleanup_slow' EXIT

DISKS=local
# The delay target must be in the kernel (`dmsetup targets` lists it).
if [ "$(id -u)" = 0 ] && command -v mkfs.ext4 >/dev/null &&
    dmsetup targets 2>/dev/null | grep -q '^delay'; then
    truncate -s 32G "$WORK/slow.img"
    LOOP=$(losetup -f --show "$WORK/slow.img")
    DM_NAME=strata-study-$$
    dmsetup create "$DM_NAME" --table "0 $(blockdev --getsz "$LOOP") delay $LOOP 0 $DELAY_MS"
    mkfs.ext4 -q -F "/dev/mapper/$DM_NAME"
    SLOW=$WORK/slow-disk
    mkdir -p "$SLOW"
    mount "/dev/mapper/$DM_NAME" "$SLOW"
    DISKS="local slow"
else
    echo "the slow disk needs root, mkfs.ext4 and device-mapper's delay target in the kernel: local disk only" >&2
fi

LOAD=(-t 2 -c 25 --pipeline 25 -d 10000 --ratio 1:0 --key-maximum 20000 --test-time "$SECONDS_PER_RUN")

# run_one ROUND KIND FSYNC DISK: one run; its JSON in $WORK/runs.
run_one() {
    local round=$1 kind=$2 fsync=$3 disk=$4 name base
    name=${kind}_${fsync}_$disk
    base=$WORK
    [ "$disk" = slow ] && base=$SLOW
    if [ "$kind" = redis ]; then
        WORK=$base start "$name" redis --appendonly yes --appendfsync "$fsync" --save ""
    else
        WORK=$base start "$name" strata --appendfsync "$fsync"
    fi
    mkdir -p "$WORK/runs/$round"
    "$BENCH" -s 127.0.0.1 -p "$(port_of "$name")" "${LOAD[@]}" --hide-histogram \
        --json-out-file "$WORK/runs/$round/$kind-$fsync-$disk.json" >/dev/null 2>&1 ||
        echo "round $round: $name failed" >&2
    stop "$name"
    rm -rf "${base:?}/$name" "$base/$name.log"
    echo "round $round: $name done" >&2
}

for round in $(seq "$ROUNDS"); do
    for disk in $DISKS; do
        for fsync in everysec always; do
            for kind in redis strata; do
                run_one "$round" "$kind" "$fsync" "$disk"
            done
        done
    done
done

study_plot "$WORK/runs/$ROUNDS"/*.json
study_report "$WORK/runs" "$OUT/$STUDY.md" "$ROUNDS" "$SECONDS_PER_RUN" "$DELAY_MS" "$DISKS" <<'PY'
from study import context, finish, heading, median_of, round_dirs
import json, os, statistics
(day, machine, commit), (runs, out, rounds, seconds, delay, disks) = context()
figures = {}
for round_dir in round_dirs(runs):
    for file in sorted(os.listdir(round_dir)):
        doc = json.load(open(os.path.join(round_dir, file)))
        totals = doc["ALL STATS"]["Totals"]
        per_second = [e["Count"] for _, e in sorted(totals["Time-Serie"].items(), key=lambda kv: int(kv[0]))]
        median = statistics.median(per_second) if per_second else 0
        stalls = sum(1 for c in per_second if c < median / 10)
        p = totals["Percentile Latencies"]
        row = (totals["Ops/sec"], p.get("p50.00", 0), p.get("p99.00", 0), p.get("p99.90", 0), totals["Max Latency"], stalls)
        figures.setdefault(file[:-5], []).append(row)
med = median_of(figures)
settings = f"ROUNDS={rounds}, SECONDS_PER_RUN={seconds}, DELAY_MS={delay}"
lines = heading("AOF on cloud-like disks", "aof-cloud-disk", day, commit, machine, settings) + [
    "The load, strata-bench (memtier_benchmark's flags):",
    f"`-t 2 -c 25 --pipeline 25 -d 10000 --ratio 1:0 --key-maximum 20000 --test-time {seconds}`.",
    "redis-server runs with `--appendonly yes --appendfsync <policy> --save \"\"`, strata-server with `--appendfsync <policy>`.",
    "The slow disk: device-mapper's delay target over a loop file, every write " + delay + " ms late, ext4."
    if "slow" in disks else "The slow disk was not measured: it needs root and device-mapper's delay target, which this machine's kernel lacks (cgroup v1's blkio throttle would slow only direct I/O, Strata's log and not Redis' buffered AOF).",
    "",
    f"Medians of {rounds} rounds (servers alternated). Stalls: seconds whose throughput fell below a tenth of the run's median.",
    "",
    "| disk | appendfsync | server | requests/s | Strata ÷ Redis | p50 ms | p99 ms | p99.9 ms | max ms | stalls |",
    "|---|---|---|---|---|---|---|---|---|---|",
]
for disk in disks.split():
    for fsync in ("everysec", "always"):
        for kind in ("redis", "strata"):
            name = f"{kind}-{fsync}-{disk}"
            if name not in figures:
                continue
            ratio = ""
            if kind == "strata" and f"redis-{fsync}-{disk}" in figures:
                ratio = f"{med(name, 0) / med(f'redis-{fsync}-{disk}', 0):.2f}"
            lines.append(
                f"| {disk} | {fsync} | {kind} | {med(name, 0):,.0f} | {ratio} | {med(name, 1):.2f} | "
                f"{med(name, 2):.2f} | {med(name, 3):.2f} | {med(name, 4):.1f} | {med(name, 5):.0f} |"
            )
columns = "requests/s, p50, p99, p99.9, max, stalls"
finish(lines, figures, columns, "aof-cloud-disk", out)
PY
