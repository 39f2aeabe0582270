#!/usr/bin/env bash
# Transactions, scripts and pub/sub next to redis-server, persistence off
# on both, servers alternated for ROUNDS rounds; medians and the ratio:
#
# - EVALSHA of a small script (INCR of its key) on one key, and on keys
#   spread over the keyspace (many shards) — redis-benchmark;
# - MULTI + 5 INCR + EXEC on one key set, and on 5 random keys each time
#   (many shards) — transactions per second, from CONNECTIONS pipelining
#   connections in PROCESSES processes (python below: redis-benchmark has
#   no MULTI);
# - PUBLISH to SUBSCRIBERS subscribers (redis-cli processes) —
#   redis-benchmark, publishes per second.
#
# Besides throughput, each line gives the server's CPU time per operation
# (user + system, from /proc, medians): on a 2-core machine the load
# generator takes a core, so throughput shows which side ran out of CPU,
# and CPU per operation shows what each server spends.
#
# Usage: bench/atomicity.sh      ROUNDS=5 bench/atomicity.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
REQUESTS=${REQUESTS:-300000}
KEYSPACE=${KEYSPACE:-100000}
SUBSCRIBERS=${SUBSCRIBERS:-50}
TX_SECONDS=${TX_SECONDS:-5}
PROCESSES=${PROCESSES:-2}
CONNECTIONS=${CONNECTIONS:-25}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup atomicity

start redis redis --save "" --appendonly no
start strata strata --save "" --appendonly no

SCRIPT='return redis.call("INCR", KEYS[1])'
for server in redis strata; do
    redis-cli -p "$(port_of "$server")" SCRIPT LOAD "$SCRIPT" >/dev/null
done
SHA=$(redis-cli -p "$(port_of strata)" SCRIPT LOAD "$SCRIPT")

bench_cmd() {
    local port=$1
    shift
    redis-benchmark -p "$port" -c "$CLIENTS" -n "$REQUESTS" -r "$KEYSPACE" --csv "$@" 2>/dev/null |
        awk -F'","' 'NR>1 { gsub(/"/, "", $2); print $2; exit }'
}

# Transactions per second: MULTI, 5 INCRs, EXEC; `spread` picks 5 random
# keys per transaction, otherwise the same 5 keys.
transactions() {
    python3 - "$1" "$2" "$TX_SECONDS" "$PROCESSES" "$CONNECTIONS" "$KEYSPACE" <<'PY'
import multiprocessing, random, socket, sys, time
port, spread, seconds, processes, connections, keyspace = sys.argv[1], sys.argv[2] == "spread", float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
BATCH = 50
def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out
def batch(rng):
    out = b""
    for _ in range(BATCH):
        out += resp(b"MULTI")
        for k in range(5):
            key = b"tx:%d" % (rng.randrange(keyspace) if spread else k)
            out += resp(b"INCR", key)
        out += resp(b"EXEC")
    return out
def worker(queue):
    rng = random.Random()
    batches = [batch(rng) for _ in range(20)]
    socks = [socket.create_connection(("127.0.0.1", int(port))) for _ in range(connections)]
    done = 0
    deadline = time.time() + seconds
    while time.time() < deadline:
        for s in socks:
            s.sendall(batches[done % len(batches)])
        for s in socks:
            seen, buf = 0, b""
            while seen < BATCH:
                buf += s.recv(1 << 16)
                seen = buf.count(b"*5\r\n")
            done += 1
    queue.put(done * BATCH)
queue = multiprocessing.Queue()
started = time.time()
procs = [multiprocessing.Process(target=worker, args=(queue,)) for _ in range(processes)]
for p in procs: p.start()
total = sum(queue.get() for _ in procs)
for p in procs: p.join()
print(int(total / (time.time() - started)), total)
PY
}

# Publishes per second to $SUBSCRIBERS subscribers of one channel.
publishes() {
    local port=$1 pids=()
    for _ in $(seq "$SUBSCRIBERS"); do
        redis-cli -p "$port" SUBSCRIBE bench >/dev/null &
        pids+=($!)
    done
    until [ "$(redis-cli -p "$port" PUBSUB NUMSUB bench | tail -1)" = "$SUBSCRIBERS" ]; do sleep 0.1; done
    bench_cmd "$port" PUBLISH bench "message-__rand_int__"
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
}

# CPU seconds (user + system) the server process has used.
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/${PID[$1]}/stat"; }

for test in evalsha_one_key evalsha_spread multi_exec_one_key multi_exec_spread publish_50; do
    declare -A rates=() cpus=()
    for _ in $(seq "$ROUNDS"); do
        for server in redis strata; do
            port=$(port_of "$server")
            before=$(cpu_of "$server")
            ops=$REQUESTS
            case $test in
                evalsha_one_key) v=$(bench_cmd "$port" EVALSHA "$SHA" 1 counter) ;;
                evalsha_spread) v=$(bench_cmd "$port" EVALSHA "$SHA" 1 "counter:__rand_int__") ;;
                multi_exec_one_key) read -r v ops < <(transactions "$port" one) ;;
                multi_exec_spread) read -r v ops < <(transactions "$port" spread) ;;
                publish_50) v=$(publishes "$port") ;;
            esac
            after=$(cpu_of "$server")
            rates[$server]="${rates[$server]:-} $v"
            cpus[$server]="${cpus[$server]:-} $(awk -v a="$before" -v b="$after" -v n="$ops" 'BEGIN { printf "%.2f", (b - a) * 1e6 / n }')"
        done
    done
    r=$(printf '%s\n' ${rates[redis]} | median)
    s=$(printf '%s\n' ${rates[strata]} | median)
    rc=$(printf '%s\n' ${cpus[redis]} | median)
    sc=$(printf '%s\n' ${cpus[strata]} | median)
    printf '%-20s redis %10.0f /s %6.2f us   strata %10.0f /s %6.2f us   strata/redis %s   (rounds: redis%s; strata%s)\n' \
        "$test" "$r" "$rc" "$s" "$sc" "$(ratio "$s" "$r")" "${rates[redis]}" "${rates[strata]}"
done
