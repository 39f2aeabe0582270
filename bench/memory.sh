#!/usr/bin/env bash
# Memory comes back: used_memory and RSS of Strata and Redis before a big
# value or many keys are written, and some seconds after they are gone.
#
# 1. big value: SETRANGE big 536870911 x, SETBIT big 100 1, DEL big.
# 2. big-value commands: SETRANGE, SETBIT, BITFIELD, BITOP, APPEND and LCS
#    near 512 MB, then DEL of everything.
# 3. big values sent whole: ROUNDS × (SET of a BIG_MB value, SET again,
#    APPEND of as much, DEL), every command slow enough for SLOWLOG (which
#    used to keep each request's whole input buffer).
# 4. expired keys: KEYS keys with a 3 s TTL (redis-cli --pipe), all expired.
# 5. overwrites from every connection: OVERWRITE_KEYS keys of 1000 bytes
#    loaded over one connection, then overwritten at random by 4
#    redis-benchmark clients for OVERWRITE_SECONDS ("before" is after the
#    load, "peak" the largest RSS read every 5 s, "after" at the end). The
#    memory stays in use here, so RSS should stay where the load left it.
# 6. the same under a tiered budget (Strata only): a server with
#    `--maxmemory TIERED_BUDGET --maxmemory-policy tiered` loaded with the
#    OVERWRITE_KEYS keys (most values go to disk), then OVERWRITE_SECONDS
#    of random SETs and GETs by 4 clients: RSS against the budget.
#
# Figures are read WAIT seconds after the DEL / after the last key expired.
#
# Usage: bench/memory.sh
#        KEYS=200000 WAIT=10 bench/memory.sh
#        SCENARIOS=overwrite OVERWRITE_KEYS=2000000 bench/memory.sh
set -euo pipefail

KEYS=${KEYS:-1000000}
WAIT=${WAIT:-5}
BIG_MB=${BIG_MB:-256}
ROUNDS=${ROUNDS:-4}
SCENARIOS=${SCENARIOS:-big commands whole ttl overwrite tiered}
TIERED_BUDGET=${TIERED_BUDGET:-200mb}
OVERWRITE_KEYS=${OVERWRITE_KEYS:-500000}
OVERWRITE_SECONDS=${OVERWRITE_SECONDS:-30}
want() { [[ " $SCENARIOS " == *" $1 "* ]]; }

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup memory

# memory PORT: "used_memory_MB rss_MB"
memory() {
    redis-cli -p "$1" info memory | tr -d '\r' |
        awk -F: '$1 == "used_memory" { u = $2 } $1 == "used_memory_rss" { r = $2 }
                 END { printf "%.1f %.1f", u / 1048576, r / 1048576 }'
}

python3 - "$KEYS" >"$WORK/ttl.resp" <<'PY'
import sys
out = sys.stdout.buffer
for i in range(int(sys.argv[1])):
    k = b"key:%d" % i
    v = b"value-%d" % i
    out.write(b"*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$2\r\nEX\r\n$1\r\n3\r\n" % (len(k), k, len(v), v))
PY

# The commands of one big-value round, as RESP (redis-cli -x sends stdin
# as the last argument, but one value through a pipe is simplest).
python3 - "$BIG_MB" >"$WORK/big.resp" <<'PY'
import sys
out = sys.stdout.buffer
value = b"v" * (int(sys.argv[1]) << 20)
def command(*args):
    out.write(b"*%d\r\n" % len(args))
    for arg in args:
        out.write(b"$%d\r\n%s\r\n" % (len(arg), arg))
command(b"SET", b"big", value)
command(b"SET", b"big", value)
command(b"APPEND", b"big", value)
command(b"DEL", b"big")
PY

# churn PORT TESTS: OVERWRITE_SECONDS of redis-benchmark TESTS (4 clients,
# pipeline 1, 1000-byte values, random keys of the load) while memory is
# read every 5 s; sets `peak` to the reading with the largest RSS, from
# `$before` on.
churn() {
    local port=$1 tests=$2 load now
    peak=$before
    timeout "$OVERWRITE_SECONDS" redis-benchmark -p "$port" -t "$tests" -n 1000000000 -r "$OVERWRITE_KEYS" \
        -d 1000 -c 4 -P 1 -q >/dev/null 2>&1 &
    load=$!
    for _ in $(seq $((OVERWRITE_SECONDS / 5))); do
        sleep 5
        now=$(memory "$port")
        if awk -v a="${now#* }" -v b="${peak#* }" 'BEGIN { exit !(a > b) }'; then peak=$now; fi
    done
    wait "$load" || true
}

# The load of scenario 5, with redis-benchmark's key names.
python3 - "$OVERWRITE_KEYS" >"$WORK/load.resp" <<'PY'
import sys
out = sys.stdout.buffer
value = b"x" * 1000
for i in range(int(sys.argv[1])):
    k = b"key:%012d" % i
    out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1000\r\n%s\r\n" % (len(k), k, value))
PY

echo "# Memory that comes back ($(date -u +%F), $(nproc) cores)"
echo
echo "Figures in MB: used_memory / RSS; 'after' is read ${WAIT} s after the data is gone."
echo
echo "| scenario | server | before | peak | after |"
echo "|---|---|---|---|---|"
for kind in strata redis; do
    if [ "$kind" = strata ]; then
        start s strata --save ""
        port=$(port_of s)
    else
        start r redis --save "" --appendonly no
        port=$(port_of r)
    fi
    if want big; then
        before=$(memory "$port")
        redis-cli -p "$port" setrange big 536870911 x >/dev/null
        redis-cli -p "$port" setbit big 100 1 >/dev/null
        peak=$(memory "$port")
        redis-cli -p "$port" del big >/dev/null
        sleep "$WAIT"
        echo "| 512 MB value, SETRANGE + SETBIT + DEL | $kind | ${before/ / \/ } | ${peak/ / \/ } | $(memory "$port" | sed 's/ / \/ /') |"
    fi

    if want commands; then
        before=$(memory "$port")
        redis-cli -p "$port" setrange a 536870000 x >/dev/null
        redis-cli -p "$port" setbit b 4294967295 1 >/dev/null
        redis-cli -p "$port" bitfield c set u8 4294967280 255 >/dev/null
        redis-cli -p "$port" bitop or d a b >/dev/null
        redis-cli -p "$port" append a yyyyyyyyyy >/dev/null
        redis-cli -p "$port" setrange f 1000000 z >/dev/null
        redis-cli -p "$port" lcs f f len >/dev/null || true
        peak=$(memory "$port")
        redis-cli -p "$port" del a b c d f >/dev/null
        sleep "$WAIT"
        echo "| big-value commands, then DEL | $kind | ${before/ / \/ } | ${peak/ / \/ } | $(memory "$port" | sed 's/ / \/ /') |"
    fi

    if want whole; then
        before=$(memory "$port")
        redis-cli -p "$port" config set slowlog-log-slower-than 0 >/dev/null
        for _ in $(seq "$ROUNDS"); do
            redis-cli -p "$port" --pipe <"$WORK/big.resp" >/dev/null
        done
        peak=$(memory "$port")
        sleep "$WAIT"
        echo "| $ROUNDS × (SET, SET, APPEND of $BIG_MB MB, DEL) | $kind | ${before/ / \/ } | ${peak/ / \/ } | $(memory "$port" | sed 's/ / \/ /') |"
        redis-cli -p "$port" config set slowlog-log-slower-than 10000 >/dev/null
    fi

    if want ttl; then
        before=$(memory "$port")
        redis-cli -p "$port" --pipe <"$WORK/ttl.resp" >/dev/null
        peak=$(memory "$port")
        for _ in $(seq 100); do
            [ "$(redis-cli -p "$port" dbsize)" = 0 ] && break
            sleep 0.2
        done
        sleep "$WAIT"
        echo "| $KEYS keys with a 3 s TTL, all expired | $kind | ${before/ / \/ } | ${peak/ / \/ } | $(memory "$port" | sed 's/ / \/ /') |"
    fi

    if want overwrite; then
        redis-cli -p "$port" flushall >/dev/null
        redis-cli -p "$port" --pipe <"$WORK/load.resp" >/dev/null
        before=$(memory "$port")
        churn "$port" set
        echo "| $OVERWRITE_KEYS keys of 1000 B loaded, then ${OVERWRITE_SECONDS} s of random overwrites by 4 clients | $kind | ${before/ / \/ } | ${peak/ / \/ } | $(memory "$port" | sed 's/ / \/ /') |"
    fi
    if [ "$kind" = strata ]; then stop s; else stop r; fi
done

if want tiered; then
    start t strata --save "" --maxmemory "$TIERED_BUDGET" --maxmemory-policy tiered
    port=$(port_of t)
    redis-cli -p "$port" --pipe <"$WORK/load.resp" >/dev/null
    sleep "$WAIT"
    before=$(memory "$port")
    churn "$port" set,get
    echo "| $OVERWRITE_KEYS keys of 1000 B under a $TIERED_BUDGET tiered budget, then ${OVERWRITE_SECONDS} s of random SETs and GETs by 4 clients | strata | ${before/ / \/ } | ${peak/ / \/ } | $(memory "$port" | sed 's/ / \/ /') |"
    stop t
fi
