#!/usr/bin/env bash
# Snapshots under writes: Redis' BGSAVE (fork and copy-on-write) against Strata's checkpoint
#
# The published measurement of BGSAVE on a large dataset under a write
# load: the fork stalls the server, and copy-on-write grows its memory
# while the child writes the file. KEYS keys of 100 B are loaded, then a
# random-write load runs (strata-bench: 50 connections, SETs over all the
# keys) for SECONDS_PER_RUN seconds; at second SAVE_AT, BGSAVE is asked of
# redis-server (appendonly no) and of strata-server (a checkpoint, written
# from the live data shard by shard; no fork). ROUNDS rounds, servers
# alternated.
#
# Writes docs/studies/fork-snapshot.md (medians: how long the save took,
# requests/s before and during it, the worst second, the memory of the
# server and its children before and at their peak during the save, and
# Redis' own copy-on-write figure) and fork-snapshot.svg (the last round:
# throughput per second and latency percentiles).
#
# Usage: bench/studies/run.sh fork-snapshot
#        KEYS=3000000 ROUNDS=3 SECONDS_PER_RUN=25 SAVE_AT=8 bench/studies/run.sh fork-snapshot
set -euo pipefail
KEYS=${KEYS:-3000000}
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-25}
SAVE_AT=${SAVE_AT:-8}
STUDY=fork-snapshot
OUT=docs/studies

source bench/lib.sh
source bench/studies/lib.sh
bench_setup "study-$STUDY"

# watch PORT SERVER_PID LOAD_PID OUT_JSON: samples the memory of the
# server and its children every 0.2 s while the load runs, asks BGSAVE at
# SAVE_AT s and notes when the save ran.
watch() {
    python3 - "$@" "$SAVE_AT" <<'PY'
import json, os, subprocess, sys, time
port, server, load, out, save_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(l.split()[1]) for l in status if l.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0
def family_kb():
    children = subprocess.run(["pgrep", "-P", str(server)], capture_output=True, text=True).stdout.split()
    return rss_kb(server) + sum(rss_kb(int(c)) for c in children)
def persistence():
    text = subprocess.run(["redis-cli", "-p", port, "info", "persistence"], capture_output=True, text=True).stdout
    return dict(l.split(":", 1) for l in text.replace("\r", "").splitlines() if ":" in l)
started, samples, save = time.time(), [], {}
while os.path.exists(f"/proc/{load}") and open(f"/proc/{load}/stat").read().split()[2] != "Z":
    t = time.time() - started
    samples.append((round(t, 2), family_kb()))
    if "asked" not in save and t >= save_at:
        subprocess.run(["redis-cli", "-p", port, "bgsave"], capture_output=True)
        save["asked"] = round(time.time() - started, 2)
    elif "asked" in save and "ended" not in save and persistence().get("rdb_bgsave_in_progress") == "0":
        save["ended"] = round(time.time() - started, 2)
    time.sleep(0.2)
save["cow_bytes"] = int(persistence().get("rdb_last_cow_size", "0") or 0)
json.dump({"samples": samples, "save": save}, open(out, "w"))
PY
}

for round in $(seq "$ROUNDS"); do
    for kind in redis strata; do
        name=${kind}_snapshot
        if [ "$kind" = redis ]; then
            start "$name" redis --appendonly no --save ""
        else
            start "$name" strata --save ""
        fi
        port=$(port_of "$name")
        "$BENCH" -s 127.0.0.1 -p "$port" -t 2 -c 25 -n allkeys --key-pattern P:P --ratio 1:0 -d 100 \
            --key-maximum "$KEYS" --hide-histogram >/dev/null 2>&1
        mkdir -p "$WORK/runs/$round"
        "$BENCH" -s 127.0.0.1 -p "$port" -t 2 -c 25 --ratio 1:0 -d 100 --key-maximum "$KEYS" \
            --test-time "$SECONDS_PER_RUN" --hide-histogram \
            --json-out-file "$WORK/runs/$round/$kind.json" >/dev/null 2>&1 &
        load=$!
        watch "$port" "${PID[$name]}" "$load" "$WORK/runs/$round/$kind.watch"
        wait "$load" || echo "round $round: $kind's load failed" >&2
        stop "$name"
        rm -rf "${WORK:?}/$name"
        echo "round $round: $kind done" >&2
    done
done

study_plot "$WORK/runs/$ROUNDS"/*.json
study_report "$WORK/runs" "$OUT/$STUDY.md" "$ROUNDS" "$SECONDS_PER_RUN" "$SAVE_AT" "$KEYS" <<'PY'
from study import context, finish, heading, median_of, round_dirs
import json, os, statistics
(day, machine, commit), (runs, out, rounds, seconds, save_at, keys) = context()
rows = {}
for round_dir in round_dirs(runs):
    for kind in ("redis", "strata"):
        base = os.path.join(round_dir, kind)
        if not os.path.exists(base + ".json"):
            continue
        serie = json.load(open(base + ".json"))["ALL STATS"]["Totals"]["Time-Serie"]
        per_second = {int(s) + 1: e["Count"] for s, e in serie.items()}
        watched = json.load(open(base + ".watch"))
        save, samples = watched["save"], watched["samples"]
        asked, ended = save.get("asked", float(save_at)), save.get("ended", float(seconds))
        before = [c for s, c in per_second.items() if 1 < s <= int(asked)]
        during = [c for s, c in per_second.items() if int(asked) < s <= int(ended) + 1] or before
        rss_before = statistics.median([kb for t, kb in samples if t < asked]) / 1024
        rss_peak = max([kb for t, kb in samples if asked <= t <= ended + 0.4] or [0]) / 1024
        rows.setdefault(kind, []).append((
            ended - asked, statistics.median(before), statistics.median(during), min(during),
            rss_before, rss_peak, save.get("cow_bytes", 0) / 1048576,
        ))
med = median_of(rows)
settings = f"KEYS={keys}, ROUNDS={rounds}, SECONDS_PER_RUN={seconds}, SAVE_AT={save_at}"
title = "Snapshots under writes: BGSAVE's fork against Strata's checkpoint"
lines = heading(title, "fork-snapshot", day, commit, machine, settings) + [
    f"{keys} keys of 100 B are loaded,",
    f"then strata-bench `-t 2 -c 25 --ratio 1:0 -d 100 --key-maximum {keys} --test-time {seconds}` writes all over them;",
    f"BGSAVE is asked at second {save_at}: redis-server (`--appendonly no --save \"\"`) forks a child that writes the RDB file,",
    "strata-server (`--save \"\"`, its log on) writes a checkpoint from the live data, one shard locked at a time.",
    "Strata logs every write and Redis, without AOF, none: the rates before the save compare that too.",
    "",
    f"Medians of {rounds} rounds (servers alternated). Memory: the RSS of the server and its children (Redis' child counts",
    "the pages it shares with its parent too, so Redis' own copy-on-write figure, `rdb_last_cow_size`, is the real extra).",
    "",
    "| server | save took (s) | requests/s before | during | worst second during | during ÷ before | RSS before (MB) | peak RSS during (MB) | copy-on-write (MB) |",
    "|---|---|---|---|---|---|---|---|---|",
]
for kind in ("redis", "strata"):
    if kind in rows:
        lines.append(
            f"| {kind} | {med(kind, 0):.1f} | {med(kind, 1):,.0f} | {med(kind, 2):,.0f} | {med(kind, 3):,.0f} | "
            f"{med(kind, 2) / med(kind, 1):.2f} | {med(kind, 4):,.0f} | {med(kind, 5):,.0f} | "
            + (f"{med(kind, 6):,.0f} |" if kind == "redis" else "— |")
        )
columns = "save s, requests/s before, during, worst, RSS before, peak, COW"
finish(lines, rows, columns, "fork-snapshot", out)
PY
