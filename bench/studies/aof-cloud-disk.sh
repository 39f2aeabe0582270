#!/usr/bin/env bash
# AOF on cloud-like disks: 10 KB SETs, 50 connections, pipeline 25, everysec and always
#
# The load of the published measurements of Redis' AOF stalling on slow
# cloud disks (memtier_benchmark: 10 KB values, 50 connections, pipeline
# 25, SETs only): redis-server (appendonly yes) against strata-server (its
# log), with appendfsync everysec and always, SECONDS_PER_RUN seconds each,
# ROUNDS rounds alternated, on this machine's disk and, when run as root,
# on a slow disk with a cloud volume's limits: a loop device over a file,
# throttled to SLOW_MBPS MB/s and SLOW_IOPS writes/s (AWS gp3's baseline,
# 125 MB/s and 3 000 IOPS, by default) by the blkio throttle of the root
# cgroup (cgroup v1). Throttling the device in the root cgroup limits every
# write it gets, the kernel's writeback of Redis' buffered AOF as much as
# Strata's direct writes (a child cgroup would not see the writeback).
#
# Writes docs/studies/aof-cloud-disk.md (medians: requests/s, p50, p99,
# p99.9 and max latency, and stalls: seconds whose throughput fell below a
# tenth of the run's median) and aof-cloud-disk.svg (the last round:
# throughput per second and the latency percentile curve of every run).
#
# Usage: bench/studies/run.sh aof-cloud-disk
#        ROUNDS=3 SECONDS_PER_RUN=15 SLOW_MBPS=125 SLOW_IOPS=3000 bench/studies/run.sh aof-cloud-disk
set -euo pipefail
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-15}
SLOW_MBPS=${SLOW_MBPS:-125}
SLOW_IOPS=${SLOW_IOPS:-3000}
STUDY=aof-cloud-disk
OUT=docs/studies

source bench/lib.sh
source bench/studies/lib.sh
bench_setup "study-$STUDY"

SLOW= LOOP= DEVICE=
THROTTLE=/sys/fs/cgroup/blkio
# Stops the servers (their files keep the disk busy), unmounts, detaches
# and lifts the throttle; before bench/lib.sh's cleanup removes $WORK.
cleanup_slow() {
    for pid in "${PID[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "$DEVICE" ]; then
        echo "$DEVICE 0" >"$THROTTLE/blkio.throttle.write_bps_device" || true
        echo "$DEVICE 0" >"$THROTTLE/blkio.throttle.write_iops_device" || true
    fi
    if [ -n "$SLOW" ]; then umount "$SLOW" 2>/dev/null || true; fi
    if [ -n "$LOOP" ]; then losetup -d "$LOOP" 2>/dev/null || true; fi
}
trap 'cleanup_slow; cleanup' EXIT

DISKS=local
if [ "$(id -u)" = 0 ] && command -v mkfs.ext4 >/dev/null && command -v losetup >/dev/null &&
    [ -w "$THROTTLE/blkio.throttle.write_bps_device" ]; then
    # A sparse file; `discard` gives deleted runs' blocks back to it.
    truncate -s 32G "$WORK/slow.img"
    LOOP=$(losetup -f --show --direct-io=on "$WORK/slow.img")
    mkfs.ext4 -q -F "$LOOP"
    SLOW=$WORK/slow-disk
    mkdir -p "$SLOW"
    mount -o discard "$LOOP" "$SLOW"
    DEVICE=$(lsblk -dno MAJ:MIN "$LOOP" | tr -d ' ')
    echo "$DEVICE $((SLOW_MBPS * 1000 * 1000))" >"$THROTTLE/blkio.throttle.write_bps_device"
    echo "$DEVICE $SLOW_IOPS" >"$THROTTLE/blkio.throttle.write_iops_device"
    DISKS="local slow"
else
    echo "the slow disk needs root, mkfs.ext4, losetup and cgroup v1's blkio throttle: local disk only" >&2
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
study_report "$WORK/runs" "$OUT/$STUDY.md" "$ROUNDS" "$SECONDS_PER_RUN" "$SLOW_MBPS" "$SLOW_IOPS" "$DISKS" <<'PY'
from study import context, finish, heading, median_of, round_dirs
import json, os, statistics
(day, machine, commit), (runs, out, rounds, seconds, mbps, iops, disks) = context()
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
settings = f"ROUNDS={rounds}, SECONDS_PER_RUN={seconds}, SLOW_MBPS={mbps}, SLOW_IOPS={iops}"
lines = heading("AOF on cloud-like disks", "aof-cloud-disk", day, commit, machine, settings) + [
    "The load, strata-bench (memtier_benchmark's flags):",
    f"`-t 2 -c 25 --pipeline 25 -d 10000 --ratio 1:0 --key-maximum 20000 --test-time {seconds}`.",
    "redis-server runs with `--appendonly yes --appendfsync <policy> --save \"\"`, strata-server with `--appendfsync <policy>`.",
    f"The slow disk: a loop device over a file on this disk (ext4, `losetup --direct-io=on`), its writes throttled to {mbps} MB/s and {iops} per second "
    "(a cloud volume's baseline, e.g. AWS gp3's) by the root cgroup's blkio throttle, which also holds the kernel's writeback of Redis' buffered AOF."
    if "slow" in disks else "The slow disk was not measured: it needs root, losetup and cgroup v1's blkio throttle.",
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
