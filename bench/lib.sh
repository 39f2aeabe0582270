# Shared by the bench/ scripts: source it after `cd` to the repository root.
# Servers run in $WORK (set by the caller before `start`), each on a free
# port, and are killed on exit by `cleanup`.

# Installs Debian's redis-server and redis-tools when missing.
ensure_redis_tools() {
    if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
        echo "installing redis-server and redis-tools (Debian packages)..." >&2
        if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
        $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
    fi
}

# Stops unless valgrind (callgrind) is installed.
ensure_valgrind() {
    command -v valgrind >/dev/null || {
        echo "valgrind is needed (Debian: apt-get install valgrind)" >&2
        exit 1
    }
}

# bench_setup NAME: Redis tools, release binaries ($STRATA, $BENCH) and a
# work directory ($WORK) removed with every server on exit. STRATA_BIN
# runs another strata-server build instead (to compare two builds with
# the same script, e.g. one from `git worktree add /tmp/old REV`).
bench_setup() {
    ensure_redis_tools
    cargo build --release --bin strata-server --bin strata-bench >&2
    STRATA=${STRATA_BIN:-target/release/strata-server}
    STRATA_NEW=$STRATA
    BENCH=target/release/strata-bench
    WORK=$(mktemp -d "${WORK_PARENT:-/tmp}/strata-$1.XXXXXX")
    trap cleanup EXIT
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

wait_ping() {
    for _ in $(seq 6000); do
        [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.05
    done
    echo "server on port $1 did not come up" >&2
    exit 1
}

declare -A PID
cleanup() {
    for pid in "${PID[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "${KEEP_WORK:-}" ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}

# start NAME KIND ARGS...: starts a server (KIND redis|strata) in its own
# directory on a free port; sets PORT_<NAME>.
start() {
    local name=$1 kind=$2
    shift 2
    local port
    port=$(free_port)
    mkdir -p "$WORK/$name"
    if [ "$kind" = redis ]; then
        redis-server --port "$port" --bind 127.0.0.1 --dir "$WORK/$name" --logfile "$WORK/$name.log" "$@" &
    else
        "$STRATA" --port "$port" --bind 127.0.0.1 --dir "$WORK/$name" "$@" >"$WORK/$name.log" 2>&1 &
    fi
    PID[$name]=$!
    printf -v "PORT_$name" '%s' "$port"
    wait_ping "$port"
}

# compared_kinds: the servers a side-by-side run alternates, in order:
# redis-server, the strata-server build $OLD when it is set ("old"), and
# this tree's build ("new").
compared_kinds() { echo redis ${OLD:+old} new; }

# start_compared NAME KIND ARGS...: `start` for a kind of compared_kinds.
start_compared() {
    local name=$1 kind=$2 binary=$STRATA_NEW
    shift 2
    case $kind in
    redis)
        start "$name" redis "$@"
        return
        ;;
    old) binary=$OLD ;;
    esac
    STRATA=$binary start "$name" strata "$@"
}

stop() {
    local name=$1
    kill -9 "${PID[$name]}" 2>/dev/null || true
    wait "${PID[$name]}" 2>/dev/null || true
    unset "PID[$name]"
}

# info_field PORT SECTION FIELD: one field of a server's INFO section.
info_field() { redis-cli -p "$1" info "$2" | tr -d '\r' | awk -F: -v f="$3" '$1 == f { print $2 }'; }

# tiering_hits PORT: a tiered server's RAM hits and disk hits so far (0 0
# from a server without them, e.g. redis-server).
tiering_hits() {
    local ram disk
    ram=$(info_field "$1" tiering ram_hits)
    disk=$(info_field "$1" tiering disk_hits)
    echo "${ram:-0} ${disk:-0}"
}

# tiering_defaults: the datasets and key spreads of the tiering loads
# (bench/tiering.sh, the flash-tiering study, bench/tiered-builds.sh) for
# BUDGET_MB; any of them set beforehand is kept.
tiering_defaults() {
    # 1000 B values make a dataset 5x the budget; with 100 B values the
    # keys' own index (RAM, always) caps the ratio lower.
    KEYS_1000=${KEYS_1000:-$((BUDGET_MB * 5 * 1024 * 1024 / 1000))}
    KEYS_100=${KEYS_100:-$((BUDGET_MB * 10 * 1024 * 1024 / 1000))}
    # Gaussian standard deviation as a fraction of the key count, per size
    # and target RAM hit ratio (calibrated on this machine; tables show
    # the ratio measured).
    SD_1000_85=${SD_1000_85:-0.03}
    SD_1000_50=${SD_1000_50:-0.07}
    SD_100_85=${SD_100_85:-0.07}
    SD_100_50=${SD_100_50:-0.17}
}

port_of() { local v="PORT_$1"; echo "${!v}"; }

# ops/s of one strata-bench run: port, then strata-bench options. The full
# JSON report stays in $WORK/sb.json.
sb_ops() {
    local port=$1
    shift
    "$BENCH" -s 127.0.0.1 -p "$port" --hide-histogram --json-out-file "$WORK/sb.json" "$@" >/dev/null 2>&1
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(round(d["strata"]["runs"][-1]["ALL STATS"]["Totals"]["Ops/sec"]))' "$WORK/sb.json"
}
