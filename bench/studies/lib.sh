# Shared by bench/studies/*.sh (sourced after bench/lib.sh).

# One line saying what this machine is.
study_machine() {
    echo "$(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(free -g | awk '/Mem:/ { print $2 }') GiB, Linux $(uname -r), $(findmnt -no SOURCE,FSTYPE --target "$WORK" | head -1)"
}

# The commit the study measures, taken when it starts (its own plot and
# report make the tree dirty later); "-dirty" if the tree was already.
STUDY_COMMIT=$(git describe --always --dirty)

# study_report ARGS...: runs the Python report on stdin, with
# bench/studies/study.py importable; `study.context()` gives it the day,
# this machine, the commit, and ARGS.
study_report() {
    PYTHONPATH=bench/studies python3 - "$(date -u +%Y-%m-%d)" "$(study_machine)" "$STUDY_COMMIT" "$@"
}

# study_plot JSON...: the study's plot ($OUT/$STUDY.svg) of strata-bench
# result files.
study_plot() {
    mkdir -p "$OUT"
    "$BENCH" report --plot "$OUT/$STUDY.svg" "$@"
}
