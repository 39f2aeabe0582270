#!/usr/bin/env bash
# CPU contention: does the server keep a steady load while other
# processes take the cores?
#
# strata-bench sends RATE SETs of 100 B per second (open loop, 50
# connections: latency counted from each request's intended send time)
# for 8 s; from second 3 to 5, HOGS busy loops (`yes > /dev/null`) run
# beside it, as a busy neighbour, a backup or a full sync's copy would.
# redis-server and strata-server (no persistence) alternate, ROUNDS
# rounds. Reported per server: the medians of the requests served in the
# two hogged seconds (the rate is what a server keeping up serves), of
# the highest latency in them, and of their worst average latency.
#
# Usage: ROUNDS=3 RATE=40000 HOGS=2 bench/contention.sh
set -euo pipefail
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-40000}
HOGS=${HOGS:-2}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup contention

hogs() {
    local pids=() i
    for i in $(seq "$HOGS"); do
        yes >/dev/null &
        pids+=($!)
    done
    sleep 2
    kill "${pids[@]}"
    wait "${pids[@]}" 2>/dev/null || true
}

declare -A served=() worst=() average=()
for round in $(seq "$ROUNDS"); do
    for kind in redis strata; do
        start "$kind" "$kind" --appendonly no --save ""
        "$BENCH" -s 127.0.0.1 -p "$(port_of "$kind")" -t 2 -c 25 --ratio 1:0 -d 100 --key-maximum 100000 \
            --rate "$RATE" --test-time 8 --hide-histogram --json-out-file "$WORK/$kind.json" >/dev/null 2>&1 &
        load=$!
        sleep 3
        hogs
        wait "$load"
        stop "$kind"
        read -r n w a < <(python3 - "$WORK/$kind.json" <<'PY'
import json, sys
serie = json.load(open(sys.argv[1]))["ALL STATS"]["Totals"]["Time-Serie"]
hogged = [serie[s] for s in ("4", "5") if s in serie]
print(sum(e["Count"] for e in hogged) / len(hogged), max(e["Max Latency"] for e in hogged),
      max(e["Average Latency"] for e in hogged))
PY
        )
        served[$kind]+="$n "
        worst[$kind]+="$w "
        average[$kind]+="$a "
        echo "round $round $kind: $n requests/s while hogged, max $w ms, worst average $a ms" >&2
    done
done
echo "== $RATE SETs/s (open loop) while $HOGS busy loops run for 2 s; medians of $ROUNDS rounds"
for kind in redis strata; do
    printf '%-6s requests/s %8.0f   max latency %7.1f ms   worst average %7.1f ms\n' "$kind" \
        "$(echo "${served[$kind]}" | tr ' ' '\n' | grep . | median)" \
        "$(echo "${worst[$kind]}" | tr ' ' '\n' | grep . | median)" \
        "$(echo "${average[$kind]}" | tr ' ' '\n' | grep . | median)"
done
