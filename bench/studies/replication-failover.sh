#!/usr/bin/env bash
# Replication and failover: a full synchronisation under writes, and Sentinel's failover after kill -9
#
# Two published pains of Redis replication, measured side by side:
#
# - **A full synchronisation under writes.** KEYS keys of 100 B are
#   loaded into a primary; an open-loop write load (strata-bench, RATE
#   SETs per second over all the keys, latency measured from each
#   request's intended send time) runs for SECONDS_PER_RUN seconds, and at
#   second SYNC_AT an empty server is made its replica (REPLICAOF). Redis
#   forks a child that streams its RDB file (7.x's default diskless sync;
#   `repl-diskless-sync-delay 0` so it starts at once, as Strata's does);
#   Strata writes its copy from the live data one shard at a time, no
#   fork. Both run without persistence (`--appendonly no --save ""`).
#   Measured: how long until the replica's link is up, the primary's
#   requests/s and worst latency before and during the sync, and the
#   memory of the primary and its children.
# - **A failover.** A primary with one replica and three Sentinels
#   (`redis-server --sentinel`, down-after-milliseconds DOWN_AFTER_MS,
#   quorum 2); a client writes every 10 ms to whichever server Sentinel
#   names; the primary is killed with `kill -9`. Measured: when Sentinel
#   names the new primary, and when the first write there succeeds.
#
# ROUNDS rounds of each, servers alternated. Writes
# docs/studies/replication-failover.md, replication-failover.svg (the
# last round's sync: throughput per second and latency percentiles) and
# replication-failover-memory.svg (the primary's memory per second).
#
# Usage: bench/studies/run.sh replication-failover
#        KEYS=2000000 RATE=40000 ROUNDS=3 SECONDS_PER_RUN=30 SYNC_AT=5 bench/studies/run.sh replication-failover
set -euo pipefail
KEYS=${KEYS:-2000000}
RATE=${RATE:-40000}
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-30}
SYNC_AT=${SYNC_AT:-5}
DOWN_AFTER_MS=${DOWN_AFTER_MS:-1000}
STUDY=replication-failover
OUT=docs/studies

source bench/lib.sh
source bench/studies/lib.sh
bench_setup "study-$STUDY"
# Sentinels run as `redis-server --sentinel`; their pids go to a file
# (they are started in command substitutions, which are subshells).
SENTINEL_PIDS=$WORK/sentinel.pids
stop_sentinels() {
    if [ -f "$SENTINEL_PIDS" ]; then
        xargs -r kill -9 <"$SENTINEL_PIDS" 2>/dev/null || true
        rm -f "$SENTINEL_PIDS"
    fi
}
trap 'stop_sentinels; cleanup' EXIT

# A small RESP client for the watchers (no client library needed).
RESP_PY='
import socket
def call(port, *args, timeout=1.0):
    """One command to 127.0.0.1:port; its reply (errors raise)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"".join([b"*%d\r\n" % len(args)] + [b"$%d\r\n%s\r\n" % (len(a), a) for a in (str(x).encode() for x in args)]))
        f = s.makefile("rb")
        def read():
            line = f.readline()
            if not line:
                raise ConnectionError("closed")
            kind, rest = line[:1], line[1:-2]
            if kind == b"-":
                raise RuntimeError(rest.decode())
            if kind in (b"+", b":"):
                return rest.decode()
            if kind == b"$":
                n = int(rest)
                return None if n < 0 else f.read(n + 2)[:-2].decode()
            if kind == b"*":
                n = int(rest)
                return None if n < 0 else [read() for _ in range(n)]
            raise RuntimeError(f"unexpected reply {line!r}")
        return read()
def field(port, section, name):
    for line in call(port, "INFO", section).splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return None
'

# watch_sync PRIMARY_PORT PRIMARY_PID REPLICA_PORT LOAD_PID OUT_JSON:
# samples the memory of the primary and its children every 0.2 s while
# the load runs, makes the replica follow at SYNC_AT s and notes when its
# link came up.
watch_sync() {
    python3 - "$@" "$SYNC_AT" <<PY
$RESP_PY
import json, os, subprocess, sys, time
port, server, replica, load, out, sync_at = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], float(sys.argv[6])
def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(l.split()[1]) for l in status if l.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0
def family_kb():
    children = subprocess.run(["pgrep", "-P", str(server)], capture_output=True, text=True).stdout.split()
    return rss_kb(server) + sum(rss_kb(int(c)) for c in children)
def running(pid):
    return os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z"
started, samples, sync = time.time(), [], {}
while running(load):
    t = time.time() - started
    samples.append((round(t, 2), family_kb()))
    if "asked" not in sync and t >= sync_at:
        call(replica, "REPLICAOF", "127.0.0.1", port)
        sync["asked"] = round(time.time() - started, 2)
    elif "asked" in sync and "up" not in sync:
        try:
            if field(replica, "replication", "master_link_status") == "up":
                sync["up"] = round(time.time() - started, 2)
        except (OSError, RuntimeError):
            pass  # a replica loading its copy may answer LOADING
    time.sleep(0.2)
try:
    sync["cow_bytes"] = int(field(port, "persistence", "rdb_last_cow_size") or 0)
    sync["replica_keys"] = int(call(replica, "DBSIZE"))
except (OSError, RuntimeError, ValueError):
    pass
json.dump({"samples": samples, "sync": sync}, open(out, "w"))
PY
}

# sentinel PRIMARY_PORT: starts one Sentinel watching it; prints its port.
sentinel() {
    local port dir
    port=$(free_port)
    dir=$WORK/sentinel-$port
    mkdir -p "$dir"
    cat >"$dir/sentinel.conf" <<EOF
port $port
bind 127.0.0.1
dir $dir
sentinel monitor mymaster 127.0.0.1 $1 2
sentinel down-after-milliseconds mymaster $DOWN_AFTER_MS
sentinel failover-timeout mymaster 5000
sentinel parallel-syncs mymaster 1
EOF
    redis-server "$dir/sentinel.conf" --sentinel >"$dir/log" 2>&1 &
    echo $! >>"$SENTINEL_PIDS"
    wait_ping "$port"
    echo "$port"
}

# failover PRIMARY_PORT PRIMARY_PID SENTINEL_PORTS OUT_JSON: waits until
# the Sentinels know the replica and each other, writes through Sentinel
# every 10 ms, kills the primary after 2 s and notes when Sentinel named
# another primary and when a write there first succeeded.
failover() {
    python3 - "$@" <<PY
$RESP_PY
import json, os, sys, time
primary, pid, sentinels, out = int(sys.argv[1]), int(sys.argv[2]), [int(p) for p in sys.argv[3].split(",")], sys.argv[4]
deadline = time.time() + 60
while True:
    try:
        if len(call(sentinels[0], "SENTINEL", "REPLICAS", "mymaster")) == 1 and len(call(sentinels[0], "SENTINEL", "SENTINELS", "mymaster")) == 2:
            break
    except (OSError, RuntimeError):
        pass
    if time.time() > deadline:
        sys.exit("the Sentinels did not find the replica and each other within 60 s")
    time.sleep(0.2)
started, killed, named, written, n = time.time(), None, None, None, 0
while True:
    t = time.time() - started
    if killed is None and t >= 2:
        os.kill(pid, 9)
        killed = t
    if written is not None or (killed is not None and t - killed > 30):
        break
    try:
        port = int(call(sentinels[0], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster", timeout=0.5)[1])
        if killed is not None and named is None and port != primary:
            named = t
        call(port, "SET", f"failover:{n}", n, timeout=0.5)
        n += 1
        if killed is not None and port != primary:
            written = t
    except (OSError, RuntimeError, TypeError):
        pass
    time.sleep(0.01)
json.dump({"named": None if named is None else named - killed,
           "written": None if written is None else written - killed, "writes": n}, open(out, "w"))
PY
}

REDIS_REPLICATION=(--repl-diskless-sync-delay 0)
for round in $(seq "$ROUNDS"); do
    mkdir -p "$WORK/runs/$round"
    for kind in redis strata; do
        # The sync under writes.
        extra=()
        [ "$kind" = redis ] && extra=("${REDIS_REPLICATION[@]}")
        start "${kind}_p" "$kind" --appendonly no --save "" "${extra[@]}"
        start "${kind}_r" "$kind" --appendonly no --save "" "${extra[@]}"
        port=$(port_of "${kind}_p")
        "$BENCH" -s 127.0.0.1 -p "$port" -t 2 -c 25 -n allkeys --key-pattern P:P --ratio 1:0 -d 100 \
            --key-maximum "$KEYS" --hide-histogram >/dev/null 2>&1
        "$BENCH" -s 127.0.0.1 -p "$port" -t 2 -c 25 --ratio 1:0 -d 100 --key-maximum "$KEYS" \
            --rate "$RATE" --test-time "$SECONDS_PER_RUN" --hide-histogram \
            --json-out-file "$WORK/runs/$round/$kind.json" >/dev/null 2>&1 &
        load=$!
        watch_sync "$port" "${PID[${kind}_p]}" "$(port_of "${kind}_r")" "$load" "$WORK/runs/$round/$kind.watch"
        wait "$load" || echo "round $round: $kind's load failed" >&2
        stop "${kind}_p"
        stop "${kind}_r"
        rm -rf "${WORK:?}/${kind}_p" "${WORK:?}/${kind}_r"

        # The failover.
        start "${kind}_fp" "$kind" --appendonly no --save ""
        start "${kind}_fr" "$kind" --appendonly no --save ""
        redis-cli -p "$(port_of "${kind}_fr")" REPLICAOF 127.0.0.1 "$(port_of "${kind}_fp")" >/dev/null
        ports=()
        for _ in 1 2 3; do ports+=("$(sentinel "$(port_of "${kind}_fp")")"); done
        failover "$(port_of "${kind}_fp")" "${PID[${kind}_fp]}" "$(IFS=,; echo "${ports[*]}")" \
            "$WORK/runs/$round/$kind.failover" || echo "round $round: $kind's failover failed" >&2
        stop_sentinels
        stop "${kind}_fp"
        stop "${kind}_fr"
        rm -rf "${WORK:?}/${kind}_fp" "${WORK:?}/${kind}_fr" "$WORK"/sentinel-*
        echo "round $round: $kind done" >&2
    done
done

study_plot "$WORK/runs/$ROUNDS"/*.json
study_report "$WORK/runs" "$OUT/$STUDY.md" "$ROUNDS" "$SECONDS_PER_RUN" "$SYNC_AT" "$KEYS" "$RATE" "$DOWN_AFTER_MS" <<'PY'
from study import context, finish, heading, line_chart, median_of, round_dirs
import json, os, statistics
(day, machine, commit), (runs, out, rounds, seconds, sync_at, keys, rate, down_after) = context()
rows, failovers, memory = {}, {}, {}
for round_dir in round_dirs(runs):
    for kind in ("redis", "strata"):
        base = os.path.join(round_dir, kind)
        if not os.path.exists(base + ".json") or not os.path.exists(base + ".watch"):
            continue
        serie = json.load(open(base + ".json"))["ALL STATS"]["Totals"]["Time-Serie"]
        per_second = {int(s) + 1: (e["Count"], e["Max Latency"]) for s, e in serie.items()}
        watched = json.load(open(base + ".watch"))
        sync, samples = watched["sync"], watched["samples"]
        asked, up = sync.get("asked", float(sync_at)), sync.get("up", float(seconds))
        before = [v for s, v in per_second.items() if 1 < s <= int(asked)]
        during = [v for s, v in per_second.items() if int(asked) < s <= int(up) + 1] or before
        rss_before = statistics.median([kb for t, kb in samples if t < asked]) / 1024
        rss_peak = max([kb for t, kb in samples if asked <= t <= up + 0.4] or [0]) / 1024
        rows.setdefault(kind, []).append((
            up - asked, statistics.median(c for c, _ in before), statistics.median(c for c, _ in during),
            max(m for _, m in before), max(m for _, m in during), rss_before, rss_peak,
            sync.get("cow_bytes", 0) / 1048576, sync.get("replica_keys", 0),
        ))
        memory[kind] = [max([kb / 1024 for t, kb in samples if s <= t < s + 1] or [0]) for s in range(int(seconds))]
        if os.path.exists(base + ".failover"):
            f = json.load(open(base + ".failover"))
            if f["named"] is not None and f["written"] is not None:
                failovers.setdefault(kind, []).append((f["named"], f["written"]))
med = median_of(rows)
fmed = median_of(failovers)
settings = f"KEYS={keys}, RATE={rate}, ROUNDS={rounds}, SECONDS_PER_RUN={seconds}, SYNC_AT={sync_at}, DOWN_AFTER_MS={down_after}"
title = "Replication and failover: a full synchronisation under writes, and Sentinel's failover"
lines = heading(title, "replication-failover", day, commit, machine, settings) + [
    "",
    "## A full synchronisation under writes",
    "",
    f"{keys} keys of 100 B are loaded into the primary; then strata-bench",
    f"`-t 2 -c 25 --ratio 1:0 -d 100 --key-maximum {keys} --rate {rate} --test-time {seconds}` writes all over them",
    "(open loop: latency from each request's intended send time), and at second "
    f"{sync_at} an empty server is told `REPLICAOF` the primary.",
    "Both run with `--appendonly no --save \"\"`; redis-server also with `--repl-diskless-sync-delay 0`",
    "(its 7.x default streams the RDB from a forked child, after a 5 s delay that waits for more replicas).",
    "",
    f"Medians of {rounds} rounds (servers alternated). Sync: from REPLICAOF until the replica's `master_link_status:up`.",
    "Memory: the RSS of the primary and its children (Redis' child counts the pages it shares with its parent too;",
    "`rdb_last_cow_size` is its real extra).",
    "",
    "| server | sync took (s) | requests/s before | during | max latency before (ms) | during (ms) | primary RSS before (MB) | peak during (MB) | copy-on-write (MB) | replica's keys |",
    "|---|---|---|---|---|---|---|---|---|---|",
]
for kind in ("redis", "strata"):
    if kind in rows:
        lines.append(
            f"| {kind} | {med(kind, 0):.1f} | {med(kind, 1):,.0f} | {med(kind, 2):,.0f} | {med(kind, 3):.1f} | "
            f"{med(kind, 4):.1f} | {med(kind, 5):,.0f} | {med(kind, 6):,.0f} | "
            + (f"{med(kind, 7):,.0f} |" if kind == "redis" else "— |") + f" {med(kind, 8):,.0f} |"
        )
lines += [
    "",
    "## Sentinel's failover after kill -9",
    "",
    f"A primary, one replica and three Sentinels (`redis-server --sentinel`, quorum 2, down-after-milliseconds {down_after},",
    "failover-timeout 5000); a client writes every 10 ms to the server Sentinel names; the primary is killed with `kill -9`.",
    f"Medians of {rounds} rounds, seconds after the kill:",
    "",
    "| server | Sentinel names the new primary | first write there succeeds |",
    "|---|---|---|",
]
for kind in ("redis", "strata"):
    if kind in failovers:
        lines.append(f"| {kind} | {fmed(kind, 0):.2f} | {fmed(kind, 1):.2f} |")
    else:
        lines.append(f"| {kind} | no failover measured | |")
if memory:
    xs = list(range(int(seconds)))
    line_chart(os.path.join(os.path.dirname(out), "replication-failover-memory.svg"),
               "primary's memory (RSS with children, MB) per second, last round", "second",
               xs, {k: memory[k] for k in sorted(memory)}, "MB")
    lines += ["", f"![the primary's memory per second; REPLICAOF at second {sync_at}](replication-failover-memory.svg)"]
columns = "sync s, requests/s before, during, max ms before, during, RSS before, peak, COW MB, replica keys"
finish(lines, rows, columns, "replication-failover", out,
       caption="the sync's last round: throughput per second and latency percentiles")
PY
