"""Plain-dict views of records for the CLI's tables and ``--json`` output."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import EntryState, LineageEntry, Segment, TableConfig, TableState
from segment_lineage.lineage.core.periods import format_period, format_time
from segment_lineage.lineage.core.roots import file_uri
from segment_lineage.lineage.core.schema import render
from segment_lineage.lineage.core.visibility import hidden_segments


def human_size(size: int) -> str:
    """A size as people read it: bytes, KB, MB, GB or TB (binary multiples)."""
    if size < 1024:
        return f"{size} bytes"
    value = float(size)
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1024
        if value < 1024 or unit == "TB":
            break
    return f"{value:.1f} {unit}"


def iso(ms: int) -> str:
    return format_time(ms)


def table_view(state: TableState) -> dict[str, Any]:
    hidden = hidden_segments(state.entries.values())
    visible = [s for n, s in state.segments.items() if n not in hidden]
    by_state: dict[str, int] = {}
    for entry in state.entries.values():
        by_state[entry.state.value] = by_state.get(entry.state.value, 0) + 1
    return {
        **_config_view(state.config),
        "version": state.version,
        "segments_registered": len(state.segments),
        "segments_visible": len(visible),
        "rows_visible": sum(s.rows for s in visible),
        "bytes_visible": sum(s.size_bytes for s in visible),
        "entries": by_state,
        "pending_deletions": len(state.pending),
    }


def _config_view(c: TableConfig) -> dict[str, Any]:
    """A table's settings, for :func:`table_view`."""
    return {
        "name": c.name,
        "root": c.root,
        "type": c.table_type.value,
        "time_column": c.time_column,
        "time_unit": _value(c.time_unit),
        "replaced_segments_retention": format_period(c.replaced_segments_retention_ms),
        "lineage_entry_cleanup_retention": format_period(c.lineage_entry_cleanup_retention_ms),
        "max_snapshots": c.max_snapshots,
        "time_retention": None if c.time_retention_ms is None else format_period(c.time_retention_ms),
        "exclusive_delete": c.exclusive_delete,
        "versions_kept": c.versions_kept,
        "time_granularity": _value(c.time_granularity),
        "schema": None if c.schema is None else render(c.schema),
        "mirror": _value(c.mirror),
        "mirror_retention": format_period(c.mirror_window_ms),
        **({} if c.purging_ms is None else {"purging": f"dropped with --purge at {iso(c.purging_ms)}"}),
    }


def _value(setting: StrEnum | None) -> str | None:
    """A setting's value as printed (None: not set)."""
    return None if setting is None else setting.value


def segment_view(seg: Segment, visible: bool | None = None, root: str | None = None) -> dict[str, Any]:
    """A segment for printing; with the table's ``root``, its file's absolute ``uri`` too."""
    view: dict[str, Any] = {
        "name": seg.name,
        "location": seg.location,
        **({} if root is None else {"uri": file_uri(root, seg.location)}),
        "rows": seg.rows,
        "bytes": seg.size_bytes,
        "checksum": seg.checksum,
        "min_time": seg.min_time,
        "max_time": seg.max_time,
        "entry": seg.entry_id,
        "created": iso(seg.created_ms),
    }
    if visible is not None:
        view["visible"] = visible
    return view


def entry_view(entry: LineageEntry) -> dict[str, Any]:
    return {
        "id": entry.entry_id,
        "state": entry.state.value,
        "from": list(entry.segments_from),
        "to": list(entry.segments_to),
        "timestamp": iso(entry.timestamp_ms),
        "created": iso(entry.created_ms),
        "actor": entry.audit.actor,
        "job_id": entry.audit.job_id,
        "reason": entry.audit.reason,
        "held_until": None if entry.held_until_ms is None else iso(entry.held_until_ms),
        "staged": entry.staged is not None and entry.state is EntryState.IN_PROGRESS,
    }


def history_view(record: HistoryRecord) -> dict[str, Any]:
    return {
        "version": record.version,
        "at": iso(record.at_ms),
        "operation": record.operation.value,
        "entry": record.entry_id,
        "actor": record.actor,
        "job_id": record.job_id,
        "reason": record.reason,
        "segments": record.segments,
        "rows": record.rows,
        "bytes": record.size_bytes,
        "cleaned": list(record.cleaned),
        "set": record.set_id,
        **detail_view(record),
    }


def detail_view(record: HistoryRecord) -> dict[str, Any]:
    """What a history record says beyond its counts, for printing."""
    d = record.detail
    if d is None:
        return {}
    out: dict[str, Any] = {f.name: getattr(d, f.name) for f in dataclasses.fields(d)}
    if d.interval is not None:
        out["interval"] = [iso(d.interval[0]), iso(d.interval[1])]
    return {k: v for k, v in out.items() if v is not None}


def detail_text(record: HistoryRecord) -> str | None:
    """The detail of a history record in a few words: ``append``,
    ``replace-range [2013-02-01T00:00:00Z, 2013-03-01T00:00:00Z)``, ``to v12``, a schema note."""
    d = record.detail
    if d is None:
        return None
    parts = []
    if d.mode is not None:
        parts.append(
            d.mode if d.interval is None else f"{d.mode} [{iso(d.interval[0])}, {iso(d.interval[1])})"
        )
    if d.target is not None:
        parts.append(f"to v{d.target}")
    parts += [text for text in (d.schema, d.settings) if text is not None]
    if d.audit is not None:
        parts.append(f"audit {d.audit}")
    return "; ".join(parts) or None


def _datum(value: Any, width: int = 60) -> str:
    """One value of a table's row, as printed by ``lineage read``."""
    if value is None:
        return "null"
    if isinstance(value, list):
        text = "[" + ", ".join("null" if v is None else str(v) for v in value) + "]"
    else:
        text = str(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _cell(value: Any, width: int = 60) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        text = ",".join(str(v) for v in value) if len(value) <= 4 else f"{len(value)} segments"
    else:
        text = str(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def render_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], *, data: bool = False) -> str:
    """A plain text table with a header row. ``data``: a table's own rows,
    printed as they are: column names in their own case, and a null as
    ``null`` (a listing's headers are upper case, its missing values ``-``)."""
    show = _datum if data else _cell
    cells = [[show(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    header = columns if data else [c.upper() for c in columns]
    return "\n".join(_row(values, widths) for values in [header, *cells])


def _row(values: Sequence[str], widths: Sequence[int]) -> str:
    """One line of a plain text table: each value padded to its column's width."""
    return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()


def render_pairs(view: dict[str, Any]) -> str:
    width = max(len(k) for k in view)
    return "\n".join(
        f"{k.ljust(width)}  {_lines(v, width + 2) if k == 'schema' else _cell(v, 200)}"
        for k, v in view.items()
    )


def _lines(value: Any, indent: int) -> str:
    """A list printed one item per line, the later ones indented."""
    if not isinstance(value, list) or not value:
        return _cell(value, 200)
    return ("\n" + " " * indent).join(_cell(v, 200) for v in value)
