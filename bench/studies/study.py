"""What the studies' reports share (bench/studies/*.sh import it)."""
import json
import statistics


def median_of(rows):
    """med(name, i): the median of column i of the rounds of `name`."""
    return lambda name, i: statistics.median(r[i] for r in rows[name])


def heading(title, study, day, commit, machine, settings):
    """The report's first lines: what, when, where, and the command."""
    return [
        f"# {title}",
        "",
        f"Measured {day} at {commit} on {machine}, by `bench/studies/run.sh {study}`",
        f"({settings}).",
    ]


def finish(lines, rows, columns, study, out):
    """The report's last lines (each round's figures, the plot), written
    to `out` and printed."""
    figures = {k: [[round(x, 3) for x in r] for r in v] for k, v in sorted(rows.items())}
    lines = lines + [
        "",
        f"Each round's figures ({columns}): {json.dumps(figures)}",
        "",
        f"![throughput per second and latency percentiles of the last round]({study}.svg)",
        "",
    ]
    with open(out, "w") as file:
        file.write("\n".join(lines))
    print("\n".join(lines))
