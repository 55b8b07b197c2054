"""What one lineage version changes in the mirror: pure, no I/O.

The publisher compares what the mirror shows (its newest version's files
and columns) with what a lineage version shows (its visible segments and
recorded schema) and turns the difference into one step: files to add,
files to remove, and what happens to the columns (nothing; columns added,
as the table's schema evolved; or the schema replaced, with every file).
A version that changes neither files nor columns is no step at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Operation, Segment, TableState
from segment_lineage.lineage.core.periods import format_time
from segment_lineage.lineage.core.schema import Schema, SchemaMismatchError, mirror_columns
from segment_lineage.lineage.core.visibility import visibility_delta, visible_segments
from segment_lineage.mirror.errors import MirrorRefusedError

# Commits that never change what a reader sees or the columns: an entry
# opened or abandoned (its uploads stay hidden), files queued or cleared, a
# setting changed, the table created.
SHOWS_NOTHING_NEW = frozenset(
    {
        Operation.CREATE_TABLE,
        Operation.START_REPLACE,
        Operation.ABANDON_PUSH,
        Operation.QUEUE_FILES,
        Operation.RETENTION_CLEAR,
        Operation.ALTER_TABLE,
    }
)


def shows_nothing_new(operation: Operation, entry_id: str | None) -> bool:
    """Whether a commit certainly changed nothing the mirror shows: one of
    SHOWS_NOTHING_NEW, or a registration bound to a running entry (its
    segments stay hidden until the entry completes). The publisher skips
    such a version without reading it."""
    return operation in SHOWS_NOTHING_NEW or (operation is Operation.REGISTER and entry_id is not None)


class Columns(StrEnum):
    SAME = "same"
    ADDED = "added"  # the table gained columns: a metadata update before the files
    REPLACED = "replaced"  # another schema: every file is replaced with it


@dataclass(frozen=True)
class Shown:
    """What the mirror's newest version shows, as the publisher needs it."""

    version: int | None  # the mirror's own version; None: no log yet
    lineage_version: int  # the newest lineage version published; 0: none
    files: frozenset[str]  # segment locations, relative to the root
    fields: tuple[str, ...]  # the published columns, each encoded by the format (name, type, ...)


@dataclass(frozen=True)
class Step:
    """One mirror commit: lineage version ``version`` as the mirror shows it."""

    version: int
    adds: tuple[Segment, ...]
    removes: tuple[str, ...]  # locations
    schema: Schema  # the columns the mirror publishes (null-typed ones left out)
    fields: tuple[str, ...]  # the same, encoded as the format records them
    columns: Columns
    record: HistoryRecord | None  # the commit that made the version (None: no longer in history)
    time_column: str | None = None  # the table's, for a replace-range's predicate

    def metadata(self, published_ms: int) -> dict[str, str]:
        """What the mirror's commit records of the lineage commit it publishes,
        and when it was published by ZooKeeper's clock (``published_ms``):
        retention measures the mirror's retention on it, never on the
        publishing host's own clock."""
        out = {
            "segment_lineage.version": str(self.version),
            "segment_lineage.published_ms": str(published_ms),
        }
        if self.record is not None:
            out["segment_lineage.commit"] = self.record.commit_id
            out["segment_lineage.operation"] = self.record.operation.value
            out["segment_lineage.actor"] = self.record.actor
            if self.record.entry_id is not None:
                out["segment_lineage.entry"] = self.record.entry_id
            if self.record.reason is not None:
                out["segment_lineage.reason"] = self.record.reason
            if self.record.job_id is not None:
                out["segment_lineage.job_id"] = self.record.job_id
            if self.record.set_id is not None:  # a push set's: a reader's consistent cut across tables
                out["segment_lineage.set"] = self.record.set_id
        return out


def removes_all(step: Step, shown: frozenset[str]) -> bool:
    """Whether ``step`` removes every file the mirror shows (a refresh)."""
    return bool(step.removes) and set(step.removes) == shown


def overwrites(step: Step, shown: frozenset[str]) -> bool:
    """Whether ``step`` is written as an overwrite: one replacing the
    columns, and a refresh (it removes every file shown: an overwrite
    removes exactly those, and says mode Overwrite in the history)."""
    return step.columns is Columns.REPLACED or (step.columns is Columns.SAME and removes_all(step, shown))


def described(step: Step, shown: frozenset[str]) -> dict[str, Any]:
    """What a Delta reader should learn of a mirror commit beyond its files,
    in commitInfo's own keys (delta-rs writes every commit as WRITE, and
    sets ``mode`` itself): whether it only appends (``isBlindAppend``:
    streaming readers rely on it), the predicate of a replace-range, the
    version a rollback restores, and in words (``userMetadata``, which
    DESCRIBE HISTORY shows) what the lineage commit did."""
    out: dict[str, Any] = {"isBlindAppend": not step.removes}
    if step.record is None:
        return out
    what, params = _in_words(step, step.record, shown)
    if params:
        out["operationParameters"] = params
    out["userMetadata"] = f"segment_lineage v{step.version}: {what}"
    return out


def _in_words(step: Step, record: HistoryRecord, shown: frozenset[str]) -> tuple[str, dict[str, str]]:
    """What the lineage commit did, in words, and the operation parameters
    that say it to a Delta reader: a restore, a revert, a replace-range, a
    push's mode, else its operation alone."""
    operation = record.operation.value
    detail = record.detail
    if detail is not None and detail.target is not None:
        restored = {"restoredLineageVersion": str(detail.target)}
        return f"RESTORE of lineage version {detail.target} ({operation})", restored
    if operation == "REVERT_REPLACE":
        shown_again = "the rows it replaced shown again (REVERT_REPLACE)"
        return f"DELETE of entry {record.entry_id}'s rows, {shown_again}", {}
    if detail is None:
        return operation, {}
    if detail.interval is not None and step.time_column is not None:
        start, end = (format_time(t) for t in detail.interval)
        column = step.time_column
        predicate = {"predicate": f"{column} >= '{start}' AND {column} < '{end}'"}
        return f"replace-range [{start}, {end}) ({operation})", predicate
    if detail.mode is not None:
        overwrite = removes_all(step, shown)
        return f"{detail.mode}{' (overwrite)' if overwrite else ''} ({operation})", {}
    return operation, {}


def published_schema(schema: Schema | None, table: str) -> Schema:
    """The columns a mirror publishes for a recorded schema (those typed null
    left out until a push types them); MirrorRefusedError for a type Delta
    Lake has none for."""
    try:
        return mirror_columns(schema, table)
    except SchemaMismatchError as exc:
        raise MirrorRefusedError(exc.message, table=table, remedy=exc.remedy) from None


def _columns(shown: Shown, fields: tuple[str, ...]) -> Columns:
    """How the columns change. They compare as sets: Delta appends added
    columns at the end, where the table may have them elsewhere (a column
    typed null, left out of the mirror, that a later push types)."""
    if shown.version is None:
        return Columns.REPLACED  # the first version creates the log
    if set(fields) == set(shown.fields):
        return Columns.SAME
    if set(shown.fields) < set(fields):
        return Columns.ADDED
    return Columns.REPLACED


def _replaced_files(shown: Shown, state: TableState, target: Mapping[str, Segment]) -> tuple[str, ...]:
    """Every file shown goes when the schema is replaced; refused when one
    would stay: one Delta commit may not add and remove one path, and the
    schema of files that stay cannot change (only a refresh replaces a schema)."""
    kept = sorted(set(target) & shown.files)
    if kept:
        raise MirrorRefusedError(
            f"version {state.version} of table {state.config.name!r} changes the type of columns "
            f"the mirror shows while file {kept[0]!r} stays: the mirror cannot publish it",
            table=state.config.name,
            remedy=f"rebuild the mirror (its version numbers start again at 0): lineage mirror disable "
            f"{state.config.name}, then lineage mirror enable {state.config.name}",
        )
    return tuple(sorted(shown.files))


def plan_step(
    shown: Shown,
    state: TableState,
    schema: Schema,
    fields: tuple[str, ...],
    record: HistoryRecord | None,
    base: TableState | None = None,
) -> Step | None:
    """The step that makes the mirror show ``state``, or None when it already
    does. ``schema`` is ``published_schema`` of the state's, and ``fields``
    its columns encoded as the format records them (compared with
    ``shown.fields``). ``base``: a version whose visible files are exactly
    ``shown.files`` (the one this process published last): the files then
    come from what changed between the two, not from ``state``'s whole
    visible set (unless the columns were replaced: every file is written again)."""
    columns = _columns(shown, fields)
    if base is not None and columns is not Columns.REPLACED:
        adds, removes = _changed_files(shown, base, state)
    else:
        adds, removes = _target_files(shown, state, replaced=columns is Columns.REPLACED)
    if columns is Columns.SAME and not adds and not removes:
        return None
    return Step(state.version, adds, removes, schema, fields, columns, record, state.config.time_column)


def _target_files(
    shown: Shown, state: TableState, *, replaced: bool
) -> tuple[tuple[Segment, ...], tuple[str, ...]]:
    """The files to add and remove to go from what the mirror shows to
    ``state``'s whole visible set; with ``replaced`` (the columns were),
    every file is written again and every file shown goes."""
    target = {seg.location: seg for seg in visible_segments(state)}
    if replaced:
        adds = tuple(target[loc] for loc in sorted(target))
        return adds, () if shown.version is None else _replaced_files(shown, state, target)
    adds = tuple(target[loc] for loc in sorted(target) if loc not in shown.files)
    removes = tuple(sorted(loc for loc in shown.files if loc not in target))
    return adds, removes


def _changed_files(
    shown: Shown, base: TableState, state: TableState
) -> tuple[tuple[Segment, ...], tuple[str, ...]]:
    """The files to add and remove to go from ``base``'s visible files (what
    the mirror shows) to ``state``'s: from what became visible or hidden
    between them (:func:`visibility_delta`, whose cost follows the change).
    A file hidden under one name and shown under another would stay (the
    rules give a file one segment, but Delta refuses a commit that adds and
    removes one path)."""
    appear, disappear = visibility_delta(base, state)
    added = {state.segments[n].location: state.segments[n] for n in appear}
    gone = {base.segments[n].location for n in disappear}
    both = added.keys() & gone
    adds = tuple(added[loc] for loc in sorted(added) if loc not in both and loc not in shown.files)
    removes = tuple(sorted(loc for loc in gone - both if loc in shown.files))
    return adds, removes


def after(shown: Shown, step: Step, version: int) -> Shown:
    """What the mirror shows once ``step`` committed as its ``version``."""
    if step.columns is Columns.REPLACED:
        files = frozenset(seg.location for seg in step.adds)
    else:
        files = (shown.files - set(step.removes)) | {seg.location for seg in step.adds}
    return Shown(version, step.version, files, step.fields)


def published_ms_of(metadata: Mapping[str, object]) -> int | None:
    """When a mirror commit was published by ZooKeeper's clock (None: not recorded)."""
    raw = metadata.get("segment_lineage.published_ms")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else None


def lineage_of(metadata: Mapping[str, object]) -> int | None:
    """The lineage version a mirror commit's metadata names, or None (not ours)."""
    raw = metadata.get("segment_lineage.version")
    if isinstance(raw, str) and raw.isdigit():
        return int(raw)
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    return None
