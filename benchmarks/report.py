"""The benchmark report: Markdown, JSON and one log-log PNG per suite."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from benchmarks.common import OURS, Suite, is_peer
from benchmarks.measure import Case

SHOWN_EXTRA = {"per_s": "per second", "failed": "failed", "retries": "retries"}


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def fmt_ratio(ours: float, peer: float) -> str:
    return f"{ours / peer:.2f}" if peer > 0 else "n/a"


def fmt_mb(mb: float) -> str:
    return f"{mb:,.1f} MB"


def operations(suite: Suite) -> list[str]:
    return list(dict.fromkeys(c.operation for c in suite.cases))


def systems(cases: Iterable[Case]) -> list[str]:
    found = list(dict.fromkeys(c.system for c in cases))
    return sorted(found, key=lambda s: (is_peer(s), found.index(s)))


def find(suite: Suite, operation: str, size: int, system: str) -> Case | None:
    for c in suite.cases:
        if (c.operation, c.size, c.system) == (operation, size, system):
            return c
    return None


def summary_rows(suites: Iterable[Suite]) -> list[dict[str, Any]]:
    """Per suite, operation and size: ours beside each peer, with the ratios."""
    out = []
    for suite in suites:
        for op in operations(suite):
            for size in sorted({c.size for c in suite.cases if c.operation == op}):
                ours = find(suite, op, size, OURS)
                for c in suite.cases:
                    if (c.operation, c.size) != (op, size) or not is_peer(c.system) or ours is None:
                        continue
                    out.append(
                        {
                            "suite": suite.name,
                            "operation": op,
                            "axis": suite.axis,
                            "size": size,
                            "peer": c.system,
                            "ours_s": ours.median_s,
                            "peer_s": c.median_s,
                            "time_ratio": ours.median_s / c.median_s if c.median_s else None,
                            "ours_mb": ours.peak_mb,
                            "peer_mb": c.peak_mb,
                        }
                    )
    return out


def summary_table(suites: Iterable[Suite]) -> list[str]:
    head = [
        "benchmark",
        "size",
        "ours: median",
        "peer: median",
        "time ours ÷ peer",
        "ours: memory",
        "peer: memory",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in summary_rows(suites):
        ratio = "n/a" if r["time_ratio"] is None else f"**{r['time_ratio']:.2f}**"
        cells = [f"{r['suite']} {r['operation']}", f"{r['size']:,} {r['axis']}", fmt_time(r["ours_s"])]
        cells += [f"{r['peer']}: {fmt_time(r['peer_s'])}", ratio, fmt_mb(r["ours_mb"]), fmt_mb(r["peer_mb"])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def operation_table(suite: Suite, op: str) -> list[str]:
    cases = [c for c in suite.cases if c.operation == op]
    extras = [k for k in SHOWN_EXTRA if any(k in c.extra for c in cases)]
    head = ["size", "system", "runs", "median", "p99", "peak memory"]
    head += [SHOWN_EXTRA[k] for k in extras] + ["time ours ÷ this", "memory ours ÷ this"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for size in sorted({c.size for c in cases}):
        ours = find(suite, op, size, OURS)
        for system in systems(c for c in cases if c.size == size):
            c = find(suite, op, size, system)
            assert c is not None
            row = [f"{size:,}", system, str(len(c.times_s)), fmt_time(c.median_s), fmt_time(c.p99_s)]
            row.append(fmt_mb(c.peak_mb))
            for k in extras:
                value = c.extra.get(k)
                row.append(
                    "" if value is None else f"{value:,.1f}" if isinstance(value, float) else str(value)
                )
            if ours is not None and is_peer(system):
                memory = fmt_ratio(ours.peak_mb, c.peak_mb) if c.peak_mb >= 1 else "n/a"
                row += [fmt_ratio(ours.median_s, c.median_s), memory]
            else:
                row += ["", ""]
            lines.append("| " + " | ".join(row) + " |")
    return lines


def profile_lines(suite: Suite, profiles_dir: Path) -> list[str]:
    if not suite.profiles:
        return []
    lines = ["", "### Where ours was slower: profiles", ""]
    lines.append(
        "One more round of ours under cProfile (the calling thread; threads it waits on show as waiting)."
    )
    for p in suite.profiles:
        name = f"{suite.name}-{p.operation}-{p.size}.txt"
        (profiles_dir / name).write_text(p.text)
        areas = ", ".join(f"{area} {share:.0%}" for area, share in p.areas if share >= 0.02)
        lines += [
            "",
            f"**{p.operation} at {p.size:,} {suite.axis}** ({fmt_time(p.total_s)} profiled): {areas}.",
        ]
        lines += ["", "| own time | function |", "|---|---|"]
        lines += [f"| {fmt_time(s)} | `{f}` |" for f, s in p.top]
        lines += ["", f"Full listing: [profiles/{name}](profiles/{name})."]
    return lines


def plot(suite: Suite, path: Path) -> bool:
    """Median (solid) and p99 (dashed) time, peak memory and, where measured, rate, against size (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = operations(suite)
    if not ops:
        return False
    has_rate = any("per_s" in c.extra for c in suite.cases)
    rows = 3 if has_rate else 2
    fig, axes = plt.subplots(rows, len(ops), figsize=(4.2 * len(ops), 3.4 * rows), squeeze=False)
    colours: dict[str, Any] = {}
    for col, op in enumerate(ops):
        cases = [c for c in suite.cases if c.operation == op]
        for system in systems(cases):
            mine = sorted((c for c in cases if c.system == system), key=lambda c: c.size)
            colour = colours.setdefault(system, f"C{len(colours)}")
            xs = [c.size for c in mine]
            style = {"color": colour, "marker": "o", "label": system}
            axes[0][col].plot(xs, [c.median_s for c in mine], **style)
            if any(len(c.times_s) >= 20 for c in mine):
                axes[0][col].plot(xs, [c.p99_s for c in mine], color=colour, linestyle="--", alpha=0.6)
            memory = [(c.size, c.peak_mb) for c in mine if c.peak_mb > 0]
            if memory:
                axes[1][col].plot(*zip(*memory, strict=True), **style)
            if has_rate:
                rate = [(c.size, float(c.extra["per_s"])) for c in mine if "per_s" in c.extra]
                if rate:
                    axes[2][col].plot(*zip(*rate, strict=True), **style)
        axes[0][col].set_title(f"{op}: time")
        axes[0][col].set_ylabel("seconds (median; p99 dashed)")
        axes[1][col].set_title(f"{op}: peak memory added")
        axes[1][col].set_ylabel("MB")
        if has_rate:
            axes[2][col].set_title(f"{op}: per second")
        for row in range(rows):
            ax = axes[row][col]
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(suite.axis)
            ax.grid(True, which="both", alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=7)
            else:
                ax.set_visible(False)  # nothing measured there (a rate for a latency-only operation)
    fig.suptitle(suite.title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def write(out: Path, meta: Mapping[str, Any], suites: list[Suite]) -> Path:
    """Write report.md, report.json, one PNG per suite and the profiles into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    profiles_dir = out / "profiles"
    profiles_dir.mkdir(exist_ok=True)
    lines = ["# Benchmark report", ""]
    lines += [f"- {key}: {value}" for key, value in meta.items()]
    lines += ["", "## Summary", "", *summary_table(suites)]
    for suite in suites:
        lines += ["", f"## {suite.title}", "", suite.about.strip()]
        if suite.error:
            lines += ["", f"**Failed:** `{suite.error}`"]
        if suite.cases and plot(suite, out / f"{suite.name}.png"):
            lines += ["", f"![{suite.title}]({suite.name}.png)"]
        for op in operations(suite):
            lines += ["", f"### {op}", "", *operation_table(suite, op)]
        if suite.notes:
            lines += [""] + [f"- {note}" for note in suite.notes]
        lines += profile_lines(suite, profiles_dir)
    report = out / "report.md"
    report.write_text("\n".join(lines) + "\n")
    document = {
        "meta": dict(meta),
        "summary": summary_rows(suites),
        "suites": [
            {
                "name": s.name,
                "title": s.title,
                "axis": s.axis,
                "error": s.error,
                "notes": s.notes,
                "cases": [c.as_json() for c in s.cases],
                "profiles": [p.as_json() for p in s.profiles],
            }
            for s in suites
        ],
    }
    (out / "report.json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    return report
