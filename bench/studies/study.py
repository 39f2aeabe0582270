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


def finish(lines, rows, columns, study, out,
           caption="throughput per second and latency percentiles of the last round"):
    """The report's last lines (each round's figures, the plot), written
    to `out` and printed."""
    figures = {k: [[round(x, 3) for x in r] for r in v] for k, v in sorted(rows.items())}
    lines = lines + [
        "",
        f"Each round's figures ({columns}): {json.dumps(figures)}",
        "",
        f"![{caption}]({study}.svg)",
        "",
    ]
    with open(out, "w") as file:
        file.write("\n".join(lines))
    print("\n".join(lines))


def line_chart(path, title, x_label, xs, series, y_label):
    """An SVG line chart: `series` maps a label to one y per x."""
    width, height, left, bottom, top, right = 640, 360, 70, 40, 30, 160
    y_max = max((y for ys in series.values() for y in ys), default=1) * 1.1 or 1
    x_min, x_max = min(xs), max(xs)
    def px(x):
        span = (x_max - x_min) or 1
        return left + (x - x_min) / span * (width - left - right)
    def py(y):
        return height - bottom - y / y_max * (height - top - bottom)
    colors = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e"]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
        f'<text x="{left}" y="18" font-weight="bold">{title}</text>',
        f'<line x1="{left}" y1="{py(0)}" x2="{width - right}" y2="{py(0)}" stroke="#333"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{py(0)}" stroke="#333"/>',
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{y_max:,.0f}</text>',
        f'<text x="{left - 6}" y="{py(0)}" text-anchor="end">0</text>',
        f'<text x="{(left + width - right) / 2}" y="{height - 6}" text-anchor="middle">{x_label}</text>',
        f'<text x="14" y="{(top + height - bottom) / 2}" transform="rotate(-90 14 {(top + height - bottom) / 2})" text-anchor="middle">{y_label}</text>',
    ]
    for x in xs:
        out.append(f'<text x="{px(x)}" y="{py(0) + 16}" text-anchor="middle">{x}</text>')
    for i, (label, ys) in enumerate(series.items()):
        color = colors[i % len(colors)]
        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys))
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y in zip(xs, ys):
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}"/>')
        out.append(f'<text x="{width - right + 10}" y="{top + 16 + 18 * i}" fill="{color}">{label}</text>')
    out.append("</svg>")
    with open(path, "w") as file:
        file.write("\n".join(out))


def context():
    """(day, machine, commit) and the study's own arguments, as
    bench/studies/lib.sh's study_report passes them."""
    import sys
    return sys.argv[1:4], sys.argv[4:]


def round_dirs(runs):
    """The rounds' directories under `runs`, in order."""
    import os
    return [os.path.join(runs, name) for name in sorted(os.listdir(runs))]
