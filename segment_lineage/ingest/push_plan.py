"""The pure half of a push: what it is (its mode, its target, what the writer
produced, its result), the names of its segments, and the checks and the
plan computed from a table's state before anything is written.

The protocol that runs a push is :mod:`segment_lineage.ingest.push`, which
re-exports every name here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from segment_lineage.ingest.errors import PushInputError, PushRefusedError
from segment_lineage.lineage.core.errors import InvalidInputError, RunningEntryConflict
from segment_lineage.lineage.core.model import (
    EntryState,
    Segment,
    TableConfig,
    TableState,
    TableType,
    TimeUnit,
)
from segment_lineage.lineage.core.names import check_text, push_tag
from segment_lineage.lineage.core.periods import format_time, parse_time
from segment_lineage.lineage.core.schema import Schema, SchemaPolicy
from segment_lineage.lineage.core.visibility import visible_segments

if TYPE_CHECKING:
    from segment_lineage.ingest.audit import Audit

INPUT_FORMATS = ("parquet", "csv", "json")  # what a push reads, with Spark or with Arrow
WRITERS = ("auto", "native", "arrow")  # how Spark writes a push's segments


class PushMode(StrEnum):
    REFRESH = "refresh"
    APPEND = "append"
    REPLACE_RANGE = "replace-range"

    @staticmethod
    def parse(value: PushMode | str) -> PushMode:
        """A mode from user input, in any case; a clear error otherwise."""
        try:
            return PushMode(value.lower().replace("_", "-") if isinstance(value, str) else value)
        except ValueError:
            raise PushInputError(
                f"unknown push mode {value!r}: use refresh, append or replace-range"
            ) from None

    @staticmethod
    def of(value: PushMode | str | None, config: TableConfig) -> PushMode:
        """The mode asked for, or when none was, the one the table's type
        says (as Pinot's push type comes from the table config): an APPEND
        table appends, a REFRESH table refreshes. A refresh of an APPEND
        table, which hides every earlier row, is only ever asked for."""
        if value is not None:
            return PushMode.parse(value)
        return PushMode.APPEND if config.table_type is TableType.APPEND else PushMode.REFRESH


@dataclass(frozen=True)
class PushTarget:
    """What the writer must produce: one segment per partition, named in advance."""

    table: str
    root: str
    entry_id: str
    push_dir: str  # every file of this push lives under it
    names: tuple[str, ...]  # segment i is names[i]
    time_column: str | None
    interval: tuple[int, int] | None


@dataclass(frozen=True)
class Written:
    """What the writer produced: the winning file of each non-empty partition,
    and the locations of any other files it left (failed attempts)."""

    segments: tuple[Segment, ...]
    strays: tuple[str, ...] = ()


@dataclass(frozen=True)
class Prepared:
    """A push checked and shaped, not started: its writer and what its last
    commit checks and records (one table of a push set)."""

    table: str
    write: Callable[[PushTarget], Written]
    partitions: int
    rows: int | None  # None: not counted (a Spark frame is counted only by a dry run)
    mode: PushMode
    interval: tuple[int, int] | None
    schema: Schema | None
    schema_policy: SchemaPolicy
    time_unit: TimeUnit | None
    audit: Audit | None = None
    job_id: str | None = None
    filled: int | None = None  # the partitions with rows, where known before writing


@dataclass(frozen=True)
class PushResult:
    table: str
    entry_id: str
    mode: PushMode
    segments: int
    rows: int
    size_bytes: int
    replaced: int | None  # None: an earlier push's, no longer known (its entry and versions are gone)
    seconds: float
    cleaned: tuple[str, ...] = ()  # stale entries this push's force cleanup reverted
    job_id: str | None = None
    repeated: bool = False  # the job had already completed: this is that push's result, nothing was pushed
    dry_run: bool = False  # what the push would do: nothing was written (size_bytes unknown: 0)
    undone: bool = False  # a repeated job's push was reverted or rolled back since: its rows are hidden
    replaced_rows: int | None = None  # rows of the segments it replaces (would, for a dry run)
    hides_appended: bool = False  # a refresh of an APPEND table: every earlier row is hidden
    schema_note: str | None = None  # a dry run's: what it would do to the schema (None: nothing)
    audited: str | None = None  # the checks its data passed, with their figures (None: no audit)
    staged_until_ms: int | None = None  # staged, not shown: held until then for a publish or a revert
    published: bool = False  # a staged push's publish: its rows are shown now
    staged_set: str | None = None  # staged as one table of this push set: published (or dropped) whole

    def summary(self) -> str:
        if self.dry_run:
            return self._dry_run_summary()
        if self.repeated:
            return self._repeated_summary()
        of_rows = "" if self.replaced_rows is None else f" of {self.replaced_rows} rows"
        verb = "published the staged push to" if self.published else "staged" if self.staged else "pushed"
        text = (
            f"{verb} {self.table} ({self.mode.value}): entry {self.entry_id}, {self.segments} segment(s), "
            f"{self.rows} rows, {self.size_bytes} bytes, replaced {self.replaced} segment(s){of_rows}, "
            f"{self.seconds:.1f}s"
        )
        if self.cleaned:
            text += f"; cleaned up stale entr{'y' if len(self.cleaned) == 1 else 'ies'} " + ", ".join(
                self.cleaned
            )
        if self.audited:
            text += f"; audit {self.audited}"
        return text + (self._held() if self.staged else self._hiding(False))

    def _dry_run_summary(self) -> str:
        return (
            f"dry run: pushing {self.table} ({self.mode.value}) would write {self.segments} segment(s) "
            f"of {self.rows} rows, replacing {self.replaced} segment(s) of {self.replaced_rows} rows; "
            f"schema: {self.schema_note or 'unchanged'}; "
            + self._would_audit()
            + f"nothing was written{self._hiding(True)}"
        )

    def _repeated_summary(self) -> str:
        text = (
            f"job {self.job_id!r} already pushed {self.table}: entry {self.entry_id}, "
            f"{self.segments} segment(s), {self.rows} rows, {self.size_bytes} bytes"
            + (f", audit {self.audited}" if self.audited else "")
            + "; nothing pushed again"
        )
        if self.undone:
            text += (
                "; that push was reverted or rolled back since, so its rows are hidden: push "
                "with another --job-id to push them again"
            )
        return text

    def _held(self) -> str:
        """A staged push's: who sees it when, and until when it is held."""
        entry = self.entry_id[:8]
        reads = f"'lineage read {self.table} --entry {entry}' reads it"
        if self.staged_set is None:  # one table's: published or dropped alone
            until = f"'lineage publish {self.table} {entry}'"
            reads += f"; 'lineage revert {self.table} {entry}' drops it"
        else:  # a set's: published whole
            until = "its set is published"
        held = format_time(self.staged_until_ms or 0)
        return f"; readers see none of it until {until} ({reads}); held until {held}"

    @property
    def staged(self) -> bool:
        return self.staged_until_ms is not None

    def _would_audit(self) -> str:
        return f"audit: {self.audited} (its data checks run on the written rows); " if self.audited else ""

    def _hiding(self, would: bool) -> str:
        """What a refresh of an APPEND table does to its earlier rows."""
        if not self.hides_appended:
            return ""
        if would:
            return f"; a refresh of APPEND table {self.table!r} hides all {self.replaced_rows} earlier rows"
        return (
            f"; a refresh of APPEND table {self.table!r}: its {self.replaced_rows} earlier rows are hidden "
            f"(retention deletes them once the replaced-segments retention passes; undo this push with: "
            f"lineage rollback {self.table} --entry {self.entry_id})"
        )


def push_stamp(now: dt.datetime) -> str:
    """The one timestamp postfix of a push's segment names (UTC, milliseconds):
    ``now`` is the writing host's clock, read by the push."""
    return now.strftime("%Y%m%dT%H%M%S") + f"{now.microsecond // 1000:03d}Z"


def segment_names(table: str, stamp: str, entry_id: str, count: int) -> tuple[str, ...]:
    """``<table>_<stamp>_<entry prefix>_<partition>``: the stamp orders pushes,
    the entry prefix keeps two pushes of the same millisecond apart."""
    return tuple(f"{table}_{stamp}_{push_tag(entry_id)}_{i:05d}" for i in range(count))


def plan_from(state: TableState, mode: PushMode, interval: tuple[int, int] | None) -> tuple[str, ...]:
    """The segments a push replaces, computed from the state it commits against."""
    if mode is PushMode.APPEND:
        return ()
    visible = visible_segments(state)
    if mode is PushMode.REFRESH:
        return tuple(s.name for s in visible)
    assert interval is not None
    return tuple(seg.name for seg in visible if _inside(seg, interval))


def _inside(seg: Segment, interval: tuple[int, int]) -> bool:
    """Whether a replace-range replaces ``seg`` (it lies inside the interval)
    or leaves it (it lies outside); PushRefusedError when that cannot be told
    (no time range) or it straddles the interval's edge."""
    start, end = interval
    if seg.min_time is None or seg.max_time is None:
        raise PushRefusedError(
            f"segment {seg.name!r} has no time range, so replace-range cannot tell whether it "
            "lies in the interval (it was added without times, or pushed before rows without a "
            "time were refused): delete it ('lineage segment delete') or replace the whole table",
        )
    if seg.max_time < start or seg.min_time >= end:
        return False
    if seg.min_time >= start and seg.max_time < end:
        return True
    raise PushRefusedError(
        f"segment {seg.name!r} straddles the interval's edge (its rows span "
        f"{format_time(seg.min_time)} to {format_time(seg.max_time)}, the interval is "
        f"[{format_time(start)}, {format_time(end)}))",
        remedy="widen the interval to cover it, or rewrite that segment first",
    )


def check_rows_within(time_column: str, lo: int | None, hi: int | None, interval: tuple[int, int]) -> None:
    """Refuse input whose time range leaves the interval, before anything is written."""
    if lo is None or hi is None:
        raise PushRefusedError(f"the time column {time_column!r} holds no values")
    if lo < interval[0] or hi >= interval[1]:
        raise PushRefusedError(
            f"the input has rows from {format_time(lo)} to {format_time(hi)}, outside the interval "
            f"[{format_time(interval[0])}, {format_time(interval[1])}); nothing was written"
        )


def check_mode(state: TableState, mode: PushMode, interval: tuple[int, int] | None) -> None:
    table = state.config.name
    if mode is PushMode.APPEND and state.config.table_type is TableType.REFRESH:
        raise PushRefusedError(
            f"append into REFRESH table {table!r}: a REFRESH table holds one whole snapshot at a time, "
            "so appended rows would sit beside the snapshot until its next refresh drops them; "
            "push the whole snapshot (--mode refresh), or keep appends in an APPEND table"
        )
    if mode is PushMode.REPLACE_RANGE:
        _check_range(state, interval)
    elif interval is not None:
        raise PushInputError(f"--interval only goes with --mode replace-range, not {mode.value}")


def _check_range(state: TableState, interval: tuple[int, int] | None) -> None:
    """A replace-range needs an APPEND table with a time column, and an interval that is not empty."""
    if state.config.table_type is not TableType.APPEND or state.config.time_column is None:
        raise PushRefusedError(
            f"replace-range needs an APPEND table with a time column; {state.config.name!r} is "
            f"{state.config.table_type.value}"
            + ("" if state.config.time_column else " without a time column")
        )
    if interval is None:
        raise PushInputError("replace-range needs --interval START/END")
    if interval[0] >= interval[1]:
        raise PushInputError(
            f"the interval [{format_time(interval[0])}, {format_time(interval[1])}) is empty"
        )


def check_job(state: TableState, job_id: str, live_owners: frozenset[str]) -> str | None:
    """The entry of ``job_id`` that completed in ``state`` (None if none).

    RunningEntryConflict while another attempt of the job runs (its owner is
    alive): wait for it, then this push returns its result. An attempt that
    failed (REVERTED) or died (IN_PROGRESS, owner gone) never showed its data:
    the job pushes again.
    """
    for entry in state.entries.values():
        if entry.audit.job_id != job_id:
            continue
        if entry.state is EntryState.COMPLETED:
            return entry.entry_id
        if entry.state is EntryState.IN_PROGRESS and entry.entry_id in live_owners:
            raise RunningEntryConflict(
                f"job {job_id!r} is already running as entry {entry.entry_id}",
                table=state.config.name,
                entry_id=entry.entry_id,
                remedy="wait for it: run again, and this push returns its result",
            )
    return None


def _check_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not job_id.strip() or job_id != job_id.strip():
        raise PushInputError(f"invalid job id {job_id!r}: give a non-empty id without surrounding spaces")
    try:
        check_text("job id", job_id, 256)
    except InvalidInputError as exc:
        raise PushInputError(f"invalid job id: {exc.message}") from None
    return job_id


def parse_interval(text: str) -> tuple[int, int]:
    """``START/END``: the half-open interval [START, END)."""
    start, sep, end = text.partition("/")
    if not sep or not start.strip() or not end.strip():
        raise PushInputError(f"invalid interval {text!r}: use START/END, e.g. 2026-11-01/2026-11-08")
    try:
        lo, hi = parse_time(start), parse_time(end)
    except InvalidInputError as exc:
        raise PushInputError(f"invalid interval {text!r}: {exc.message}") from None
    if lo >= hi:
        raise PushInputError(f"invalid interval {text!r}: START must be before END")
    return lo, hi
