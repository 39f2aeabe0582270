#!/usr/bin/env bash
# Instructions per operation of bench/atomicity.sh's scripts and
# transactions, strata-server against redis-server, counted by valgrind's
# callgrind: a deterministic measure where throughput on this shared
# 2-core machine swings by ±12 % run to run.
#
# Each server runs under callgrind (strata-server with one network thread,
# persistence off on both); a warm-up load runs, callgrind dumps, the
# measured load runs, callgrind dumps again: the second dump counts the
# measured load alone. Strata's figure is its network thread's (the
# census and cron threads count time, not requests); Redis' is its whole
# process (one thread does everything).
#
# - evalsha: EVALSHA of `return redis.call('INCR', KEYS[1])` on keys
#   spread over 100 000, pipelined by 16 (redis-benchmark);
# - multi: MULTI + 5 INCR + EXEC on 5 random keys of 100 000, 50 per
#   batch on one connection (python below).
#
# Usage: bench/atomicity-instructions.sh
#        STRATA_BIN=/tmp/old/strata-server bench/atomicity-instructions.sh
set -euo pipefail

N_EVALSHA=${N_EVALSHA:-32000}
N_MULTI=${N_MULTI:-10000}

cd "$(dirname "$0")/.."
source bench/lib.sh
ensure_redis_tools
ensure_valgrind
cargo build --release --bin strata-server >&2
STRATA=${STRATA_BIN:-target/release/strata-server}
WORK=$(mktemp -d "${WORK_PARENT:-/tmp}/strata-atomicity-instructions.XXXXXX")
trap cleanup EXIT

SCRIPT='return redis.call("INCR", KEYS[1])'

# Pipelined transactions on one connection: port, count.
transactions() {
    python3 - "$1" "$2" <<'PY'
import random, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
def resp(*args):
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
rng = random.Random(1)
s = socket.create_connection(("127.0.0.1", port))
done = 0
while done < n:
    batch = b""
    for _ in range(50):
        batch += resp(b"MULTI")
        for _ in range(5):
            batch += resp(b"INCR", b"tx:%d" % rng.randrange(100000))
        batch += resp(b"EXEC")
    s.sendall(batch)
    seen, buf = 0, b""
    while seen < 50:
        buf += s.recv(1 << 16)
        seen = buf.count(b"*5\r\n")
    done += 50
PY
}

# load KIND PORT COUNT: one of the two workloads.
load() {
    case $1 in
        evalsha) redis-benchmark -p "$2" -c 50 -P 16 -n "$3" -r 100000 -q \
            EVALSHA "$SHA" 1 "counter:__rand_int__" >/dev/null 2>&1 ;;
        multi) transactions "$2" "$3" ;;
    esac
}

for kind in strata redis; do
    for workload in evalsha multi; do
        port=$(free_port)
        dir="$WORK/$kind-$workload"
        mkdir -p "$dir/data"
        if [ "$kind" = strata ]; then
            valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" "$STRATA" \
                --port "$port" --bind 127.0.0.1 --dir "$dir/data" --save "" --appendonly no \
                --threads 1 >"$dir/server.log" 2>&1 &
        else
            valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" redis-server \
                --port "$port" --bind 127.0.0.1 --dir "$dir/data" --save "" --appendonly no \
                >"$dir/server.log" 2>&1 &
        fi
        PID[run]=$!
        wait_ping "$port"
        SHA=$(redis-cli -p "$port" SCRIPT LOAD "$SCRIPT")
        case $workload in evalsha) n=$N_EVALSHA ;; multi) n=$N_MULTI ;; esac
        load "$workload" "$port" $((n / 4))
        callgrind_control -d "${PID[run]}" >/dev/null
        load "$workload" "$port" "$n"
        callgrind_control -d "${PID[run]}" >/dev/null
        kill -TERM "${PID[run]}" 2>/dev/null || true
        wait "${PID[run]}" 2>/dev/null || true
        unset "PID[run]"
        # The second dump holds the measured load.
        second="$dir/cg.out.2"
        if [ "$kind" = strata ]; then
            # Only the network thread's share: its run loop, inclusive.
            total=$(callgrind_annotate --inclusive=yes "$second" 2>/dev/null |
                awk '/Connection::run::\{\{closure\}\} \[/ && !seen { gsub(",", "", $1); print $1; seen = 1 }')
        else
            total=$(callgrind_annotate "$second" 2>/dev/null |
                awk '/PROGRAM TOTALS/ && !seen { gsub(",", "", $1); print $1; seen = 1 }')
        fi
        awk -v t="$total" -v n="$n" -v k="$kind" -v w="$workload" \
            'BEGIN { printf "%-7s %-8s %7.0f instructions per %s\n", k, w, t / n, (w == "multi" ? "transaction" : "request") }'
    done
done
