"""A picture of a table's history: versions on a timeline, one lane per push.

Pure: history records, the current state and the retained versions in, SVG
text out. Each push is a bar from its start to its end (or revert); its
colour says what it is now: live (COMPLETED), rolled back or reverted,
still running, or reclaimed (its entry is gone). Rollbacks are marked on the
version axis; the band under the axis shows which versions are still
readable (time travel, rollback targets).
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape

from segment_lineage.lineage.core.model import EntryState, HistoryRecord, Operation, TableState

COLOURS = {
    "live": "#2e7d32",
    "reverted": "#c62828",
    "running": "#ef6c00",
    "reclaimed": "#9e9e9e",
    "rollback": "#6a1b9a",
    "retained": "#bbdefb",
}
LANE = 22
LEFT = 150
TOP = 60


def history_svg(records: Sequence[HistoryRecord], state: TableState, retained: Sequence[int]) -> str:
    """``records`` in any order; drawn oldest to newest."""
    ordered = sorted(records, key=lambda r: r.version)
    if not ordered:
        return _svg(400, 80, [_text(10, 40, f"table {state.config.name}: no history")])
    first, last = ordered[0].version, ordered[-1].version
    span = max(1, last - first)
    width = LEFT + max(400, min(1600, 14 * (span + 1))) + 40
    step = (width - LEFT - 40) / span

    def x(version: int) -> float:
        return LEFT + (version - first) * step

    lanes: dict[str, tuple[int, int | None]] = {}  # entry -> its start and end (or revert)
    rollbacks = []
    for record in ordered:
        entry = record.entry_id
        if record.operation is Operation.ROLLBACK:
            rollbacks.append(record)
        if entry is None:
            continue
        if record.operation is Operation.START_REPLACE:
            lanes[entry] = (record.version, None)
        elif record.operation in (Operation.END_REPLACE, Operation.REVERT_REPLACE) and entry in lanes:
            lanes[entry] = (lanes[entry][0], record.version)
    height = TOP + LANE * (len(lanes) + 1) + 90
    out = [
        _text(10, 20, f"table {state.config.name}: versions {first} to {last}", size=14, weight="bold"),
        _line(LEFT, TOP - 10, width - 40, TOP - 10, "#424242"),
    ]
    kept = [v for v in retained if first <= v <= last]
    if kept:
        out.append(
            f'<rect x="{x(kept[0]) - 3:.1f}" y="{TOP - 16}" width="{x(kept[-1]) - x(kept[0]) + 6:.1f}" '
            f'height="12" fill="{COLOURS["retained"]}"><title>readable versions {kept[0]} to '
            f"{kept[-1]}</title></rect>"
        )
    for version in range(first, last + 1, max(1, span // 20 or 1)):
        out.append(_text(x(version) - 6, TOP - 22, str(version), size=10))
    for record in rollbacks:
        cx = x(record.version)
        out.append(
            f'<polygon points="{cx:.1f},{TOP - 16} {cx + 5:.1f},{TOP - 10} {cx:.1f},{TOP - 4} '
            f'{cx - 5:.1f},{TOP - 10}" fill="{COLOURS["rollback"]}"><title>version {record.version}: '
            f"rollback by {escape(record.actor)}: {escape(record.reason or '')}</title></polygon>"
        )
    for row, (entry_id, (start, end)) in enumerate(lanes.items()):
        y = TOP + row * LANE
        kind = _kind(state, entry_id)
        stop = end if end is not None else last
        title = f"entry {entry_id}: versions {start} to {end if end is not None else 'now'}, {kind}"
        out.append(_text(10, y + 13, entry_id[:8] + "…", size=11))
        out.append(
            f'<rect x="{x(start):.1f}" y="{y + 3}" width="{max(4.0, x(stop) - x(start)):.1f}" height="14" '
            f'rx="3" fill="{COLOURS[kind]}"><title>{escape(title)}</title></rect>'
        )
    live_x = x(state.version) if first <= state.version <= last else x(last)
    out.append(_line(live_x, TOP - 10, live_x, TOP + LANE * max(1, len(lanes)), "#000000", dash=True))
    legend_y = TOP + LANE * (len(lanes) + 1) + 20
    for i, (kind, label) in enumerate(
        (
            ("live", "live"),
            ("reverted", "rolled back / reverted"),
            ("running", "running"),
            ("reclaimed", "reclaimed"),
            ("rollback", "rollback"),
            ("retained", "readable versions"),
        )
    ):
        lx = 10 + i * 150
        out.append(f'<rect x="{lx}" y="{legend_y}" width="12" height="12" fill="{COLOURS[kind]}"/>')
        out.append(_text(lx + 18, legend_y + 11, label, size=11))
    out.append(_text(10, legend_y + 40, f"dashed line: the current version ({state.version})", size=11))
    return _svg(int(width), height, out)


def _kind(state: TableState, entry_id: str) -> str:
    entry = state.entries.get(entry_id)
    if entry is None:
        return "reclaimed"
    if entry.state is EntryState.COMPLETED:
        return "live"
    if entry.state is EntryState.IN_PROGRESS:
        return "running"
    return "reverted"


def _svg(width: int, height: int, parts: list[str]) -> str:
    body = "\n".join(parts)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">\n'
        f'<rect width="100%" height="100%" fill="white"/>\n{body}\n</svg>\n'
    )


def _text(x: float, y: float, text: str, size: int = 12, weight: str = "normal") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" font-weight="{weight}">{escape(text)}</text>'


def _line(x1: float, y1: float, x2: float, y2: float, colour: str, dash: bool = False) -> str:
    style = ' stroke-dasharray="4 3"' if dash else ""
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}"{style}/>'
