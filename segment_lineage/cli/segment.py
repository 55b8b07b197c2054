"""``lineage segment`` (add, list, delete) and ``lineage segments``, the visible ones."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from segment_lineage.cli.context import Reason, current, emit, manager
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import InvalidInputError, LineageError, RefusedError
from segment_lineage.lineage.core.model import Segment, TableState
from segment_lineage.lineage.core.schema import Schema, compare
from segment_lineage.lineage.core.views import iso, render_table, segment_view
from segment_lineage.lineage.core.visibility import visible_names, visible_segments
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.files import checked_rows, checked_segments

segment_app = typer.Typer(help="Register, list and delete segments.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(segment_app, name="segment")
    app.command("segments")(segments)


# The fields a segment of a batch file (--file) may have.
BATCH_FIELDS = frozenset({"name", "location", "rows", "bytes", "checksum", "min_time", "max_time"})


def _segments_from_file(path: Path) -> list[Segment]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: bad JSON, or bytes that are not UTF-8
        raise InvalidInputError(f"cannot read segment batch {path}: {exc}") from None
    except RecursionError:
        raise InvalidInputError(f"cannot read segment batch {path}: nested too deeply") from None
    if not isinstance(doc, list) or not all(isinstance(d, dict) for d in doc):
        raise InvalidInputError(f"{path}: expected a JSON list of segment objects")
    return [_batch_segment(path, d) for d in doc]


def _batch_segment(path: Path, d: dict[str, Any]) -> Segment:
    """One object of a batch file as a segment: its name required, no field
    unknown, its location NAME.parquet unless given."""
    if "name" not in d:
        raise InvalidInputError(f"{path}: every segment needs a 'name'")
    unknown = set(d) - BATCH_FIELDS
    if unknown:
        raise InvalidInputError(f"{path}: unknown field(s) {', '.join(sorted(unknown))}")
    return Segment(
        name=d["name"],
        location=d.get("location") or f"{d['name']}.parquet",
        rows=d.get("rows", 0),
        size_bytes=d.get("bytes", 0),
        checksum=d.get("checksum", ""),
        min_time=d.get("min_time"),
        max_time=d.get("max_time"),
    )


def _with_checked_files(
    m: LineageManager, table: str, segments: list[Segment], entry: str | None
) -> list[Segment]:
    """The batch with each file looked at (see segment_lineage.lineage.storage.files). What the
    commit would refuse (names, locations, conflicts) is refused first,
    before any file system call."""
    state = m.table(table)
    transitions.register_segments(state, segments, 0, entry)  # pure: only its refusals matter here
    root = state.config.root
    files = current().files
    sized = checked_segments(table, root, segments, files.sizes(root, [s.location for s in segments]))
    footers = files.footers(root, [s.location for s in sized])  # each file opened once
    counted = checked_rows(table, sized, {loc: None if f is None else f.rows for loc, f in footers.items()})
    if state.config.schema is not None:
        _check_schemas(
            table, state.config.schema, {loc: None if f is None else f.schema for loc, f in footers.items()}
        )
    return counted


def _check_schemas(table: str, recorded: Schema, found: Mapping[str, Any]) -> None:
    """Refuse files whose columns the table's readers could not read as the
    table's: a column the table does not have, or of a type it cannot take
    (a column the file lacks reads as null, as after a push without it)."""
    from segment_lineage.ingest.schemas import schema_of

    misfits = []
    for location, arrow in found.items():
        if arrow is None:
            continue  # not Parquet: checked_rows refused it already
        try:
            diff = compare(recorded, schema_of(arrow))
        except LineageError as exc:
            misfits.append(f"{location}: {exc.message}")
            continue
        if diff.added or diff.changed:
            misfits.append(f"{location}: {replace(diff, missing=()).describe(3)}")
    if misfits:
        more = f"; and {len(misfits) - 3} more" if len(misfits) > 3 else ""
        raise RefusedError(
            f"segment file(s) of {table!r} do not fit its columns: {'; '.join(misfits[:3])}{more}; "
            "nothing was registered",
            remedy=f"'lineage table show {table}' prints the columns; push the data to evolve them",
        )


@segment_app.command("add")
def segment_add(
    table: str,
    names: Annotated[list[str] | None, typer.Argument(help="Segment names (location NAME.parquet).")] = None,
    batch: Annotated[
        Path | None,
        typer.Option(
            "--file",
            help='A JSON list of segments, each {"name", "location" (a path under the root; '
            'default NAME.parquet), "rows", "bytes", "checksum", "min_time", "max_time"}: name required.',
        ),
    ] = None,
    rows: Annotated[
        int,
        typer.Option(
            "--rows", help="Rows in each named segment; checked against, or else read from, its footer."
        ),
    ] = 0,
    size: Annotated[int, typer.Option("--bytes", help="Bytes of each named segment.")] = 0,
    entry: Annotated[str | None, typer.Option("--entry", help="Bind to this IN_PROGRESS entry.")] = None,
    reason: Reason = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="Check that each file exists under the table's root and has the size given (a size "
            "not given is taken from the file). --no-check registers without looking: for object "
            "stores where a look per file costs too much.",
        ),
    ] = True,
) -> None:
    """Register a batch of segments in one commit. Refused, with nothing
    registered, when a file is missing or of another size (unless --no-check)."""
    segments = [Segment(n, f"{n}.parquet", rows=rows, size_bytes=size) for n in names or []]
    if batch is not None:
        segments += _segments_from_file(batch)
    if not segments:
        raise InvalidInputError("name at least one segment, or pass --file")
    with manager() as m:
        if entry is not None:
            entry = m.resolve_entry(table, entry)
        if check:
            segments = _with_checked_files(m, table, segments, entry)
        done = m.register_segments(table, segments, entry_id=entry, reason=reason)
    emit(
        {"registered": [s.name for s in segments], "version": done.state.version},
        f"registered {len(segments)} segment(s) in {table} (version {done.state.version})",
    )


@segment_app.command("list")
def segment_list(table: str) -> None:
    """List every registered segment, visible or hidden."""
    with manager() as m:
        state = m.table(table)
    visible = visible_names(state)
    root = state.config.root
    rows = [
        segment_view(s, s.name in visible, root)
        for s in sorted(state.segments.values(), key=lambda s: s.name)
    ]
    emit(rows, render_table(rows, ["name", "visible", "rows", "bytes", "location", "entry"]))


@segment_app.command("delete")
def segment_delete(
    table: str,
    names: Annotated[list[str], typer.Argument(help="Segment names.")],
    reason: Reason = None,
) -> None:
    """Unregister segments; retention deletes their files."""
    with manager() as m:
        done = m.delete_segments(table, names, reason=reason)
    emit(
        {"deleted": names, "version": done.state.version},
        f"deleted {len(names)} segment(s) from {table}; files queued for retention",
    )


AS_OF_HELP = "A table version (a number), or a time (ISO-8601, or ms:EPOCH_MS): what readers saw then."


def segments(
    table: str,
    as_of: Annotated[str | None, typer.Option("--as-of", help=AS_OF_HELP)] = None,
) -> None:
    """List the visible segments: what a reader sees now (or saw then)."""
    with manager() as m:
        state = _state_as_of(m, table, as_of)
    visible = visible_segments(state)
    rows = [segment_view(s, root=state.config.root) for s in visible]
    emit(rows, _segments_text(rows, visible, state.version))


def _state_as_of(m: LineageManager, table: str, as_of: str | None) -> TableState:
    """The table now, or as it was at ``as_of``."""
    if as_of is None:
        return m.table(table)
    # A past version is listed only while its files can still be read.
    lease = m.pin_readable(table, m.resolve_as_of(table, as_of))
    m.release(lease)
    return lease.state


def _segments_text(rows: list[dict[str, Any]], visible: list[Segment], version: int) -> str:
    """The visible segments as a table, then their count, rows and version."""
    timed = any(s.min_time is not None for s in visible)
    shown, span = _with_time_ranges(rows, visible) if timed else (rows, "")
    columns = ["name", "rows", "bytes", *(["first", "last"] if timed else ["location"]), "entry"]
    return (
        render_table(shown, columns)
        + f"\n{len(rows)} visible segment(s), {sum(s.rows for s in visible)} rows, version {version}"
        + span
    )


def _with_time_ranges(rows: list[dict[str, Any]], visible: list[Segment]) -> tuple[list[dict[str, Any]], str]:
    """A table with a time column: each segment's time range (ISO, UTC) in
    place of its file, and the range of them all."""

    def when(ms: int | None) -> str | None:
        return None if ms is None else iso(ms)

    shown = [{**r, "first": when(r["min_time"]), "last": when(r["max_time"])} for r in rows]
    span = (
        f"\ntime range: {iso(min(s.min_time for s in visible if s.min_time is not None))} to "
        f"{iso(max(s.max_time for s in visible if s.max_time is not None))}"
    )
    return shown, span
