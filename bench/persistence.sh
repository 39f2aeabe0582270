#!/usr/bin/env bash
# Persistence side by side: strata-server (its log) vs redis-server (AOF or
# RDB), same machine, same load generator, alternating rounds.
#
# Scenarios (issue 3):
#   1. 10 000-byte SETs, 50 connections, pipeline 25, appendfsync everysec
#      (redis-benchmark): Redis AOF vs Strata log vs Strata appendonly no.
#   2. 50/50 GET/SET, values 100-1000 bytes, 100 connections (strata-bench):
#      Strata everysec vs Strata appendonly no (Redis AOF for reference).
#   3. appendfsync always, 50 connections, 100-byte SETs (redis-benchmark).
#   4. Throughput and memory while Strata writes a checkpoint and Redis a
#      BGSAVE, under a random-write load on a preloaded dataset.
#   5. Restart time with N keys of 100 bytes: Strata (checkpoint, and
#      checkpoint + log after kill -9) vs Redis (RDB, and AOF).
#   6. Disk use and throughput of Strata under a long overwrite-heavy load
#      (compaction keeping the log bounded).
#
# Usage: bench/persistence.sh                    (all scenarios)
#        SCENARIOS="1 3" ROUNDS=5 bench/persistence.sh
#        RESTART_KEYS=10000000 bench/persistence.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
SCENARIOS=${SCENARIOS:-"1 2 3 4 5 6"}
OVERWRITE_SECONDS=${OVERWRITE_SECONDS:-60}
CHECKPOINT_KEYS=${CHECKPOINT_KEYS:-3000000}
RESTART_KEYS=${RESTART_KEYS:-10000000}

cd "$(dirname "$0")/.."

source bench/lib.sh
bench_setup persistence

# ops/s of one redis-benchmark run: port, then redis-benchmark options.
rb_ops() {
    local port=$1
    shift
    redis-benchmark -p "$port" "$@" --csv 2>/dev/null | awk -F'","' 'NR>1 { gsub(/"/, "", $2); print $2; exit }'
}

# Runs "measure NAME" for every NAME, ROUNDS times alternating; prints the
# medians as "NAME median" lines and the raw runs to stderr.
alternate() {
    local measure=$1
    shift
    declare -A runs
    for _ in $(seq "$ROUNDS"); do
        for name in "$@"; do runs[$name]+="$($measure "$name") "; done
    done
    for name in "$@"; do
        echo "  raw $name: ${runs[$name]}" >&2
        echo "$name $(printf '%s\n' ${runs[$name]} | median)"
    done
}

echo "# Persistence: strata-server vs redis-server $(redis-server --version | awk '{print $3}')"
echo
echo "$(nproc) cores shared by the servers and the load generator; $ROUNDS alternating rounds, medians."

if [[ " $SCENARIOS " == *" 1 "* ]]; then
    start r1 redis --appendonly yes --appendfsync everysec --save ""
    start s1 strata --appendfsync everysec --save ""
    start n1 strata --appendonly no --save ""
    m1() { rb_ops "$(port_of "$1")" -t set -d 10000 -P 25 -c 50 -n 100000 -r 100000; }
    declare -A S1
    while read -r name value; do S1[$name]=$value; done < <(alternate m1 r1 s1 n1)
    echo
    echo "## 1. 10 000-byte SETs, 50 connections, pipeline 25, everysec"
    echo
    echo "\`redis-benchmark -t set -d 10000 -P 25 -c 50 -n 100000 -r 100000\`"
    echo
    echo "| server | ops/s | vs Redis AOF | vs Strata appendonly no |"
    echo "|---|---|---|---|"
    echo "| Redis, AOF everysec | ${S1[r1]} | 1.00 | |"
    echo "| Strata, log everysec | ${S1[s1]} | $(ratio "${S1[s1]}" "${S1[r1]}") | $(ratio "${S1[s1]}" "${S1[n1]}") |"
    echo "| Strata, appendonly no | ${S1[n1]} | $(ratio "${S1[n1]}" "${S1[r1]}") | 1.00 |"
    stop r1; stop s1; stop n1
fi

if [[ " $SCENARIOS " == *" 2 "* ]]; then
    start r2 redis --appendonly yes --appendfsync everysec --save ""
    start s2 strata --appendfsync everysec --save ""
    start n2 strata --appendonly no --save ""
    m2() { sb_ops "$(port_of "$1")" -t 2 -c 50 --ratio 1:1 --data-size-range 100-1000 --key-maximum 200000 --test-time 10; }
    declare -A S2
    while read -r name value; do S2[$name]=$value; done < <(alternate m2 r2 s2 n2)
    echo
    echo "## 2. 50/50 GET/SET, 100-1000-byte values, 100 connections"
    echo
    echo "\`strata-bench -t 2 -c 50 --ratio 1:1 --data-size-range 100-1000 --key-maximum 200000 --test-time 10\`"
    echo
    echo "| server | ops/s | vs Strata appendonly no |"
    echo "|---|---|---|"
    echo "| Strata, log everysec | ${S2[s2]} | $(ratio "${S2[s2]}" "${S2[n2]}") |"
    echo "| Strata, appendonly no | ${S2[n2]} | 1.00 |"
    echo "| Redis, AOF everysec (reference) | ${S2[r2]} | $(ratio "${S2[r2]}" "${S2[n2]}") |"
    stop r2; stop s2; stop n2
fi

if [[ " $SCENARIOS " == *" 3 "* ]]; then
    start r3 redis --appendonly yes --appendfsync always --save ""
    start s3 strata --appendfsync always --save ""
    m3() { rb_ops "$(port_of "$1")" -t set -d 100 -c 50 -n 50000 -r 100000; }
    declare -A S3
    while read -r name value; do S3[$name]=$value; done < <(alternate m3 r3 s3)
    echo
    echo "## 3. appendfsync always, 50 connections, 100-byte SETs"
    echo
    echo "\`redis-benchmark -t set -d 100 -c 50 -n 50000 -r 100000\`"
    echo
    echo "| server | ops/s | vs Redis |"
    echo "|---|---|---|"
    echo "| Redis, AOF always | ${S3[r3]} | 1.00 |"
    echo "| Strata, log always | ${S3[s3]} | $(ratio "${S3[s3]}" "${S3[r3]}") |"
    stop r3; stop s3
fi

# Writes N keys of 100 bytes as a RESP stream into FILE.
gen_keys() {
    awk -v n="$1" 'BEGIN {
        value = sprintf("%100s", ""); gsub(/ /, "x", value)
        for (i = 0; i < n; i++) {
            key = sprintf("key:%012d", i)
            printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$100\r\n%s\r\n", length(key), key, value
        }
    }' >"$2"
}

# Sum of RSS (kB) of a process and its children (Redis' fork shows there).
rss_kb() { ps -o rss= --pid "$1" --ppid "$1" 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }

if [[ " $SCENARIOS " == *" 4 "* ]]; then
    gen_keys "$CHECKPOINT_KEYS" "$WORK/keys4.resp"
    echo
    echo "## 4. Checkpoint (Strata) vs BGSAVE (Redis) under random writes"
    echo
    echo "$CHECKPOINT_KEYS keys × 100 B preloaded; \`strata-bench -t 2 -c 25 --ratio 1:0 -d 100 --key-maximum $CHECKPOINT_KEYS --test-time 20\`;"
    echo "the save starts at second 6. Steady = median ops/s of seconds 1-5; during = median (min) of the seconds the save ran."
    echo "Memory: RSS of the server and its children, peak during the save vs before. A forked child's RSS also counts"
    echo "the pages it shares with its parent, so for Redis the copy-on-write column (rdb_last_cow_size) is the real extra."
    echo
    echo "| server | save took (s) | steady ops/s | during ops/s (min) | during / steady | RSS before (MB) | peak RSS, server + children (MB) | extra RSS | copy-on-write (MB) |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for kind in redis strata; do
        if [ "$kind" = redis ]; then
            start c4 redis --appendonly no --save ""
            save_cmd=BGSAVE
        else
            start c4 strata --appendonly yes --save "" --auto-aof-rewrite-percentage 0
            save_cmd=BGSAVE
        fi
        port=$(port_of c4)
        redis-cli -p "$port" --pipe <"$WORK/keys4.resp" >/dev/null
        sleep 2
        "$BENCH" -s 127.0.0.1 -p "$port" -t 2 -c 25 --ratio 1:0 -d 100 --key-maximum "$CHECKPOINT_KEYS" \
            --test-time 20 --hide-histogram --json-out-file "$WORK/c4.json" >/dev/null 2>&1 &
        bench_pid=$!
        : >"$WORK/rss.txt"
        : >"$WORK/saving.txt"
        start_s=$(date +%s.%N)
        saved=0
        while kill -0 "$bench_pid" 2>/dev/null; do
            now=$(date +%s.%N)
            t=$(awk -v a="$now" -v b="$start_s" 'BEGIN { printf "%.2f", a - b }')
            echo "$t $(rss_kb "${PID[c4]}")" >>"$WORK/rss.txt"
            if [ "$saved" = 0 ] && awk -v t="$t" 'BEGIN { exit !(t >= 6) }'; then
                redis-cli -p "$port" "$save_cmd" >/dev/null
                saved=1
            fi
            if [ "$saved" = 1 ]; then
                busy=$(redis-cli -p "$port" info persistence | tr -d '\r' | awk -F: '$1 == "rdb_bgsave_in_progress" { print $2 }')
                [ "$busy" = 1 ] && echo "$t" >>"$WORK/saving.txt"
            fi
            sleep 0.2
        done
        wait "$bench_pid" || true
        cow=$(redis-cli -p "$port" info persistence | tr -d '\r' | awk -F: '$1 == "rdb_last_cow_size" { print $2 }')
        python3 - "$WORK/c4.json" "$WORK/rss.txt" "$WORK/saving.txt" "$kind" "${cow:-0}" <<'PY'
import json, statistics, sys
series = json.load(open(sys.argv[1]))["strata"]["runs"][-1]["Time series"]
rss = [tuple(map(float, l.split())) for l in open(sys.argv[2]) if l.strip()]
saving = [float(l) for l in open(sys.argv[3]) if l.strip()]
kind = sys.argv[4]
ops = {int(s["second"]): s["ops/sec"] for s in series}
steady = statistics.median([ops[s] for s in range(1, 6) if s in ops])
if saving:
    first, last = min(saving), max(saving)
    secs = [s for s in ops if s >= int(first) and s <= int(last) + 1]
    during = [ops[s] for s in secs] or [steady]
    took = last - first + 0.2
else:
    during, took, first, last = [steady], 0.0, 6.0, 6.0
before = statistics.median([r for t, r in rss if t < first]) / 1024
peak = max([r for t, r in rss if first <= t <= last + 0.4] or [before * 1024]) / 1024
name = "Redis BGSAVE (fork)" if kind == "redis" else "Strata checkpoint"
print(f"| {name} | {took:.1f} | {steady:.0f} | {statistics.median(during):.0f} ({min(during):.0f}) | "
      f"{statistics.median(during) / steady:.2f} | {before:.0f} | {peak:.0f} | {100 * (peak - before) / before:+.0f} % | "
      f"{int(sys.argv[5]) / 1048576:.0f} |")
PY
        stop c4
        rm -rf "$WORK/c4"
    done
    rm -f "$WORK/keys4.resp"
fi

# Starts a server and sets T to the seconds from process start until PING
# answers PONG (not in a subshell: the server must outlive it).
time_start() {
    local name=$1 kind=$2
    shift 2
    local port t0
    port=$(free_port)
    t0=$(date +%s.%N)
    if [ "$kind" = redis ]; then
        redis-server --port "$port" --bind 127.0.0.1 --dir "$WORK/$name" --logfile "$WORK/$name.log" "$@" >/dev/null 2>&1 &
    else
        "$STRATA" --port "$port" --bind 127.0.0.1 --dir "$WORK/$name" "$@" >>"$WORK/$name.log" 2>&1 &
    fi
    PID[$name]=$!
    printf -v "PORT_$name" '%s' "$port"
    until [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; do sleep 0.02; done
    T=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')
}

if [[ " $SCENARIOS " == *" 5 "* ]]; then
    gen_keys "$RESTART_KEYS" "$WORK/keys5.resp"
    echo
    echo "## 5. Restart with $RESTART_KEYS keys × 100 B"
    echo
    echo "Seconds from process start until PING answers (Redis and Strata both answer -LOADING meanwhile)."
    echo
    echo "| server | what it loads | data on disk (MB) | restart (s) |"
    echo "|---|---|---|---|"
    disk_mb() { du -sm "$WORK/$1" | awk '{ print $1 }'; }

    start r5 redis --appendonly no --save ""
    redis-cli -p "$(port_of r5)" --pipe <"$WORK/keys5.resp" >/dev/null
    redis-cli -p "$(port_of r5)" save >/dev/null
    redis-cli -p "$(port_of r5)" shutdown nosave >/dev/null 2>&1 || true
    wait "${PID[r5]}" 2>/dev/null || true; unset "PID[r5]"
    time_start r5 redis --appendonly no --save ""
    echo "| Redis | RDB (SAVE) | $(disk_mb r5) | $T |"
    stop r5; rm -rf "$WORK/r5"

    start a5 redis --appendonly yes --save ""
    redis-cli -p "$(port_of a5)" --pipe <"$WORK/keys5.resp" >/dev/null
    redis-cli -p "$(port_of a5)" shutdown >/dev/null 2>&1 || true
    wait "${PID[a5]}" 2>/dev/null || true; unset "PID[a5]"
    time_start a5 redis --appendonly yes --save ""
    echo "| Redis | AOF (with its automatic rewrites) | $(disk_mb a5) | $T |"
    stop a5; rm -rf "$WORK/a5"

    start s5 strata --save ""
    redis-cli -p "$(port_of s5)" --pipe <"$WORK/keys5.resp" >/dev/null
    stop s5
    time_start s5 strata --save ""
    echo "| Strata | after kill -9: checkpoint + log replay | $(disk_mb s5) | $T |"
    redis-cli -p "$(port_of s5)" shutdown >/dev/null 2>&1 || true
    wait "${PID[s5]}" 2>/dev/null || true; unset "PID[s5]"
    time_start s5 strata --save ""
    echo "| Strata | after SHUTDOWN: one checkpoint | $(disk_mb s5) | $T |"
    stop s5
    rm -f "$WORK/keys5.resp"
fi

if [[ " $SCENARIOS " == *" 6 "* ]]; then
    start o6 strata --save "" ${O6_ARGS:-}
    port=$(port_of o6)
    "$BENCH" -s 127.0.0.1 -p "$port" -t 1 -c 10 --ratio 1:0 -d 1000 --key-pattern P:P -n allkeys \
        --key-maximum 100000 --hide-histogram >/dev/null 2>&1
    "$BENCH" -s 127.0.0.1 -p "$port" -t 2 -c 25 --ratio 1:0 -d 1000 --key-maximum 100000 \
        --test-time "$OVERWRITE_SECONDS" --hide-histogram --json-out-file "$WORK/o6.json" >/dev/null 2>&1 &
    bench_pid=$!
    : >"$WORK/du.txt"
    while kill -0 "$bench_pid" 2>/dev/null; do
        { du -sb "$WORK/o6" 2>/dev/null || true; } | awk '{ print $1 }' >>"$WORK/du.txt"
        sleep 0.5
    done
    wait "$bench_pid" || true
    redis-cli -p "$port" save >/dev/null
    live=$(redis-cli -p "$port" info persistence | tr -d '\r' | awk -F: '$1 == "aof_base_size" { print $2 }')
    rewrites=$(redis-cli -p "$port" info persistence | tr -d '\r' | awk -F: '$1 == "rdb_saves" { print $2 }')
    echo
    echo "## 6. Strata under $OVERWRITE_SECONDS s of random overwrites (disk bound, compaction)"
    echo
    echo "100 000 keys × 1000 B, then \`strata-bench -t 2 -c 25 --ratio 1:0 -d 1000 --key-maximum 100000 --test-time $OVERWRITE_SECONDS\`;"
    echo "defaults (everysec, auto-aof-rewrite-percentage 100, min size 64 MB, 64 MB segments). Live data = size of a checkpoint taken at the end."
    echo
    python3 - "$WORK/o6.json" "$WORK/du.txt" "$live" "$rewrites" <<'PY'
import json, statistics, sys
series = json.load(open(sys.argv[1]))["strata"]["runs"][-1]["Time series"]
disk = [int(l) for l in open(sys.argv[2]) if l.strip()]
live = int(sys.argv[3])
ops = [s["ops/sec"] for s in series][1:-1]
median = statistics.median(ops)
below = sum(1 for o in ops if o < 0.9 * median)
print("| live data (MB) | peak disk (MB) | peak / live | final disk (MB) | checkpoints | median ops/s | min ops/s | seconds below 90 % of median |")
print("|---|---|---|---|---|---|---|---|")
print(f"| {live / 1e6:.0f} | {max(disk) / 1e6:.0f} | {max(disk) / live:.2f} | {disk[-1] / 1e6:.0f} | {sys.argv[4]} | "
      f"{median:.0f} | {min(ops):.0f} | {below} of {len(ops)} |")
PY
    stop o6
fi
