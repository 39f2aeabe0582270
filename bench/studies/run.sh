#!/usr/bin/env bash
# The catalogue of published Redis studies, reproduced one command each:
#
#   bench/studies/run.sh NAME      runs bench/studies/NAME.sh, which writes
#                                  docs/studies/NAME.md and NAME.svg
#   bench/studies/run.sh           lists the studies
#
# Each study runs strata-server and redis-server side by side on this
# machine (alternating), with strata-bench (a memtier_benchmark drop-in)
# as the load, and records the date, the machine and the exact commands
# with its table and plot. docs/studies/README.md lists the results.
set -euo pipefail
cd "$(dirname "$0")/../.."
name=${1:-}
if [ -z "$name" ] || [ ! -f "bench/studies/$name.sh" ]; then
    echo "usage: bench/studies/run.sh NAME; the studies:" >&2
    for study in bench/studies/*.sh; do
        [ "$(basename "$study")" = run.sh ] && continue
        printf '  %-20s %s\n' "$(basename "$study" .sh)" "$(sed -n '2s/^# //p' "$study")" >&2
    done
    exit 2
fi
exec bash "bench/studies/$name.sh"
