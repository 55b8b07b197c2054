"""A table's past: ``lineage history`` (with its SVG graph) and ``lineage export``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from segment_lineage.cli.context import aside, emit, manager
from segment_lineage.lineage.codec.export import to_pinot_znrecord
from segment_lineage.lineage.core.errors import InvalidInputError, LineageError
from segment_lineage.lineage.core.graph import history_svg
from segment_lineage.lineage.core.views import detail_text, history_view, render_table

if TYPE_CHECKING:
    from segment_lineage.lineage.core.history import HistoryRecord
    from segment_lineage.lineage.manager import LineageManager


def register(app: typer.Typer) -> None:
    app.command("history")(history)
    app.command("export")(export)


def history(
    table: str,
    limit: Annotated[int | None, typer.Option("--limit", help="Newest N versions.")] = None,
    graph: Annotated[
        Path | None, typer.Option("--graph", help="Also draw the versions and pushes as SVG into this file.")
    ] = None,
) -> None:
    """The table's versions, newest first: operation, counts, who and why."""
    if graph is not None and graph.suffix.lower() != ".svg":
        raise InvalidInputError(f"invalid graph file {str(graph)!r}: the picture is SVG, name it *.svg")
    with manager() as m:
        records = m.history(table, limit)
        picture = "" if graph is None else _picture(m, table, records)
        rows = [history_view(h) for h in records]
        details = [detail_text(h) for h in records]
        mirrored = m.table(table).config.mirror is not None
        if mirrored:
            _add_delta_versions(m, table, rows)
    if graph is not None:
        _write_graph(graph, picture)
    emit(rows, history_text(rows, details, mirrored))


def _picture(m: LineageManager, table: str, records: list[HistoryRecord]) -> str:
    """The versions and pushes of ``records`` drawn as SVG."""
    span = [r.version for r in records] or [0]
    readable = m.readable_versions(table, min(span), max(span))
    return history_svg(records, m.table(table), readable)


def _add_delta_versions(m: LineageManager, table: str, rows: list[dict[str, Any]]) -> None:
    """Each row given the mirror's Delta version of it (None: not published); a
    mirror that cannot be read leaves them all None, with a warning."""
    from segment_lineage.mirror.views import mirror_commits, published_as

    try:
        delta = published_as(mirror_commits(m, table))
    except LineageError as exc:  # the history stands without the mirror's versions
        aside("warning", f"the mirror's Delta versions are not shown: {exc.message}")
        delta = {}
    for row in rows:
        row["delta_version"] = delta.get(row["version"])


def _write_graph(graph: Path, picture: str) -> None:
    """The picture into ``graph``; a file that cannot be written is bad input."""
    try:
        graph.write_text(picture)
    except OSError as exc:
        raise InvalidInputError(f"cannot write {str(graph)!r}: {exc.strerror}") from None
    typer.echo(f"wrote {graph}", err=True)


HISTORY_KEY = (
    "SEGS: the segments a version names (staged by START_REPLACE, shown by END_REPLACE and ROLLBACK)\n"
    "ROWS: the rows it made visible. ENTRY: the first 8 digits (enough for any command).\n"
    "--json for every field, in full."
)


def history_text(rows: list[dict[str, object]], details: list[str | None], mirrored: bool) -> str:
    """The history in under 100 columns: one line per version, and an
    indented line for what it says beyond its counts (its mode or target,
    its reason, the entries it cleaned up); then what the counts mean."""
    if not rows:
        return "(no versions)"
    shown = [_shown(row, detail) for row, detail in zip(rows, details, strict=True)]
    columns = [
        "version",
        *(["delta_version"] if mirrored else []),
        "at",
        "operation",
        "entry",
        "segs",
        "rows",
    ]
    lines = render_table(shown, [*columns, "actor"]).split("\n")
    out = [lines[0]]
    for line, row in zip(lines[1:], shown, strict=True):
        out.append(line)
        if row["notes"]:
            out.append("    " + str(row["notes"]))
    return "\n".join([*out, "", HISTORY_KEY])


def _shown(row: dict[str, object], detail: str | None) -> dict[str, object]:
    """One version as its line shows it: the time to the second, the entry's
    first 8 digits, and its notes."""
    at = str(row["at"])
    return {
        **row,
        "at": at[:19].replace("T", " ") if len(at) >= 19 else at,
        "entry": str(row["entry"])[:8] if row.get("entry") else None,
        "segs": row["segments"],
        "notes": _notes(row, detail),
    }


def _notes(row: dict[str, object], detail: str | None) -> str:
    """What a version says beyond its counts: its detail, its set, its reason
    and the entries it cleaned up."""
    notes = [detail] if detail else []
    if row.get("set"):
        notes.append(f"set {row['set']}")
    if row.get("reason"):
        notes.append(f"reason: {row['reason']}")
    cleaned = row.get("cleaned") or []
    if isinstance(cleaned, list) and cleaned:
        notes.append("cleaned up " + ", ".join(str(c)[:8] for c in cleaned))
    return "; ".join(notes)


def export(
    table: str,
    fmt: Annotated[str, typer.Option("--format", help="Export format: pinot.")] = "pinot",
) -> None:
    """Export the lineage as Pinot's ZNRecord JSON."""
    if fmt != "pinot":
        raise InvalidInputError(f"unknown export format {fmt!r}: use pinot")
    with manager() as m:
        record = to_pinot_znrecord(m.table(table))
    typer.echo(json.dumps(record, indent=2))
