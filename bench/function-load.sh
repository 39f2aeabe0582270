#!/usr/bin/env bash
# FUNCTION LOAD of many libraries, one by one on one connection, Strata
# against redis-server side by side (Redis' own "Verify Lua performs GC
# correctly after script loading" loads 50 000): the time for each block
# of BLOCK loads, and the bytes Strata's log took for all of them
# (strata_log_bytes_written). Servers alternated, ROUNDS rounds, each on
# a fresh server.
#
# Usage: bench/function-load.sh
#        LIBRARIES=50000 BLOCK=10000 ROUNDS=3 bench/function-load.sh
#        REDIS_SERVER=/tmp/redis-7.4.1/src/redis-server bench/function-load.sh
set -euo pipefail

LIBRARIES=${LIBRARIES:-50000}
BLOCK=${BLOCK:-10000}
ROUNDS=${ROUNDS:-3}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup function-load
if [ -n "${REDIS_SERVER:-}" ]; then
    # exec: `start` runs it in the background and kills that process.
    redis-server() { exec "$REDIS_SERVER" "$@"; }
fi

# loads PORT: one line per block, "loaded seconds".
loads() {
    python3 - "$1" "$LIBRARIES" "$BLOCK" <<'EOF'
import socket, sys, time
port, total, block = (int(a) for a in sys.argv[1:4])
s = socket.create_connection(('127.0.0.1', port))
f = s.makefile('rb')
start = time.time()
for i in range(total):
    code = ("#!lua name=lib%d\n-- xxxxxxxxxx\n"
            "redis.register_function('f%d', function() return %d end)" % (i, i, i)).encode()
    args = [b'FUNCTION', b'LOAD', code]
    s.sendall(b'*3\r\n' + b''.join(b'$%d\r\n%s\r\n' % (len(a), a) for a in args))
    line = f.readline()
    if not line.startswith(b'$'):
        sys.exit('FUNCTION LOAD answered %r' % line)
    f.read(int(line[1:]) + 2)
    if (i + 1) % block == 0:
        print(i + 1, round(time.time() - start, 2), flush=True)
EOF
}

for round in $(seq "$ROUNDS"); do
    for kind in redis strata; do
        # A fresh directory each round: Strata would load the last
        # round's libraries back.
        name=$kind$round
        start "$name" "$kind" --save ""
        port=$(port_of "$name")
        before=$(redis-cli -p "$port" info persistence | tr -d '\r' | awk -F: '$1 == "strata_log_bytes_written" { print $2 }')
        loads "$port" | while read -r loaded seconds; do
            echo "round $round $kind: $loaded libraries in $seconds s"
        done
        if [ "$kind" = strata ]; then
            after=$(redis-cli -p "$port" info persistence | tr -d '\r' | awk -F: '$1 == "strata_log_bytes_written" { print $2 }')
            echo "round $round strata: the log took $((after - before)) bytes"
        fi
        stop "$name"
    done
done
