"""A picture of a table's history: versions on a timeline, one lane per push.

Pure: history records, the current state and the readable versions in, SVG
text out. Each push is a bar from its start to its end (or revert),
labelled with its mode, rows and reason; its colour says what its data is
now (:func:`push_kind`): live (some of its segments are visible), replaced
(none visible, still kept for rollback), rolled back or reverted, still
running, or reclaimed (its files are gone). Rollbacks are marked on the
version axis; the band under the axis shows which versions a reader can
still read (time travel, rollback targets).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import EntryState, Operation, TableState
from segment_lineage.lineage.core.visibility import visible_names

COLOURS = {
    "live": "#2e7d32",
    "replaced": "#81c784",
    "reverted": "#c62828",
    "running": "#ef6c00",
    "reclaimed": "#9e9e9e",
    "rollback": "#6a1b9a",
    "retained": "#bbdefb",
}
LANE = 22
LEFT = 260
TOP = 60
LEGEND = (
    ("live", "live"),
    ("replaced", "replaced (kept for rollback)"),
    ("reverted", "rolled back / reverted"),
    ("running", "running"),
    ("reclaimed", "reclaimed"),
    ("rollback", "rollback"),
    ("retained", "readable versions"),
)
LEGEND_ITEM = 200


def push_kind(state: TableState, entry_id: str, visible: set[str], made: dict[str, list[str]]) -> str:
    """What a push's data is now: running, reverted (or rolled back), live
    (a segment it wrote is visible), replaced (none visible, some still
    registered), reclaimed (none left). ``made``: each entry's segments by
    the entry they name (an APPEND push's entry goes once it completed;
    its segments still name it)."""
    entry = state.entries.get(entry_id)
    wrote = made.get(entry_id, [])
    if entry is not None:
        if entry.state is EntryState.IN_PROGRESS:
            return "running"
        if entry.state is EntryState.REVERTED:
            return "reverted"
        wrote = [*wrote, *(n for n in entry.segments_to if n in state.segments)]
    if any(name in visible for name in wrote):
        return "live"
    return "replaced" if wrote else "reclaimed"


@dataclass(frozen=True)
class _Scale:
    """Where a version is drawn."""

    first: int
    step: float

    def x(self, version: int) -> float:
        return LEFT + (version - self.first) * self.step


ENDS = (Operation.END_REPLACE, Operation.REVERT_REPLACE)


@dataclass
class _Lanes:
    """One lane per push (its start and its end or revert), its label, and the rollbacks."""

    spans: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    rollbacks: list[HistoryRecord] = field(default_factory=list)

    @staticmethod
    def of(ordered: Sequence[HistoryRecord]) -> _Lanes:
        lanes = _Lanes()
        for record in ordered:
            entry = record.entry_id
            if record.operation is Operation.ROLLBACK:
                lanes.rollbacks.append(record)
            if entry is None:
                continue
            if record.operation is Operation.START_REPLACE:
                lanes.spans[entry] = (record.version, None)
                lanes.labels[entry] = record.reason or ""
            elif record.operation in ENDS and entry in lanes.spans:
                lanes.spans[entry] = (lanes.spans[entry][0], record.version)
                if record.operation is Operation.END_REPLACE:
                    lanes.labels[entry] = _end_label(record, lanes.labels[entry])
        return lanes


def _end_label(end: HistoryRecord, reason: str) -> str:
    """A completed push's label: its mode, its rows, and the reason its start gave."""
    mode = end.detail.mode if end.detail is not None and end.detail.mode else "push"
    return " ".join(p for p in (mode, _rows(end.rows), reason) if p)


def history_svg(records: Sequence[HistoryRecord], state: TableState, readable: Sequence[int]) -> str:
    """``records`` in any order; drawn oldest to newest. ``readable``: the
    versions a reader can still read."""
    ordered = sorted(records, key=lambda r: r.version)
    if not ordered:
        return _svg(400, 80, [_text(10, 40, f"table {state.config.name}: no history")])
    first, last = ordered[0].version, ordered[-1].version
    span = max(1, last - first)
    width = LEFT + max(400, min(1600, 14 * (span + 1))) + 40
    scale = _Scale(first, (width - LEFT - 40) / span)
    lanes = _Lanes.of(ordered)
    legend_rows = -(-len(LEGEND) // max(1, (width - 10) // LEGEND_ITEM))
    height = TOP + LANE * (len(lanes.spans) + 1) + 60 + 20 * legend_rows
    out = [
        _text(10, 20, f"table {state.config.name}: versions {first} to {last}", size=14, weight="bold"),
        _line(LEFT, TOP - 10, width - 40, TOP - 10, "#424242"),
    ]
    out += _axis(scale, first, last, readable, lanes.rollbacks)
    out += _bars(scale, last, state, lanes)
    live_x = scale.x(state.version) if first <= state.version <= last else scale.x(last)
    out.append(_line(live_x, TOP - 10, live_x, TOP + LANE * max(1, len(lanes.spans)), "#000000", dash=True))
    out += _legend(int(width), TOP + LANE * (len(lanes.spans) + 1) + 20, legend_rows, state.version)
    return _svg(int(width), height, out)


def _axis(
    scale: _Scale, first: int, last: int, readable: Sequence[int], rollbacks: Sequence[HistoryRecord]
) -> list[str]:
    """The versions axis: the readable versions' runs, numbers, and a mark per rollback."""
    x, out = scale.x, []
    for lo, hi in _runs([v for v in readable if first <= v <= last]):
        out.append(
            f'<rect x="{x(lo) - 3:.1f}" y="{TOP - 16}" width="{x(hi) - x(lo) + 6:.1f}" '
            f'height="12" fill="{COLOURS["retained"]}"><title>readable versions {lo} to '
            f"{hi}</title></rect>"
        )
    span = max(1, last - first)
    for version in range(first, last + 1, max(1, span // 20 or 1)):
        out.append(_text(x(version) - 6, TOP - 22, str(version), size=10))
    for record in rollbacks:
        cx = x(record.version)
        out.append(
            f'<polygon points="{cx:.1f},{TOP - 16} {cx + 5:.1f},{TOP - 10} {cx:.1f},{TOP - 4} '
            f'{cx - 5:.1f},{TOP - 10}" fill="{COLOURS["rollback"]}"><title>version {record.version}: '
            f"rollback by {escape(record.actor)}: {escape(record.reason or '')}</title></polygon>"
        )
    return out


def _bars(scale: _Scale, last: int, state: TableState, lanes: _Lanes) -> list[str]:
    """One bar per push, coloured by what became of its segments."""
    visible = visible_names(state)
    made: dict[str, list[str]] = {}
    for name, seg in state.segments.items():
        if seg.entry_id is not None:
            made.setdefault(seg.entry_id, []).append(name)
    x, out = scale.x, []
    for row, (entry_id, (start, end)) in enumerate(lanes.spans.items()):
        y = TOP + row * LANE
        kind = push_kind(state, entry_id, visible, made)
        stop = end if end is not None else last
        label = lanes.labels.get(entry_id, "")
        title = f"entry {entry_id}: versions {start} to {end if end is not None else 'now'}, {kind}"
        title += f": {label}" if label else ""
        out.append(_text(10, y + 13, _cut(f"{entry_id[:8]} {label}".strip(), 40), size=11))
        out.append(
            f'<rect x="{x(start):.1f}" y="{y + 3}" width="{max(4.0, x(stop) - x(start)):.1f}" height="14" '
            f'rx="3" fill="{COLOURS[kind]}"><title>{escape(title)}</title></rect>'
        )
    return out


def _legend(width: int, legend_y: int, legend_rows: int, version: int) -> list[str]:
    out = []
    per_row = max(1, (width - 10) // LEGEND_ITEM)
    for i, (kind, label) in enumerate(LEGEND):
        lx = 10 + (i % per_row) * LEGEND_ITEM
        ly = legend_y + (i // per_row) * 20
        out.append(f'<rect x="{lx}" y="{ly}" width="12" height="12" fill="{COLOURS[kind]}"/>')
        out.append(_text(lx + 18, ly + 11, label, size=11))
    legend_y += 20 * (legend_rows - 1)
    out.append(_text(10, legend_y + 40, f"dashed line: the current version ({version})", size=11))
    return out


def _rows(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}M rows"
    return f"{count / 1000:.1f}k rows" if count >= 10_000 else f"{count} rows"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _runs(versions: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive versions as (first, last) runs."""
    runs: list[tuple[int, int]] = []
    for v in sorted(versions):
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


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
