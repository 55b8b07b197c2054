"""Frozen records of the lineage model. No I/O here."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from segment_lineage.lineage.core.bucket_maps import BucketMap, frozen
from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.lineage.core.names import (
    MAX_SET_ID_BYTES,
    check_root_has_no_secret,
    check_table_name,
    check_text,
)
from segment_lineage.lineage.core.periods import parse_period
from segment_lineage.lineage.core.schema import PastSchema, Schema
from segment_lineage.lineage.core.staged import Staged

MAX_REASON_BYTES = 4096  # UTF-8: a thousand characters of any script

DEFAULT_REFRESH_RETENTION = "1d"
DEFAULT_APPEND_RETENTION = "4h"
DEFAULT_ENTRY_CLEANUP_RETENTION = "1d"
DEFAULT_MAX_SNAPSHOTS = 2
DEFAULT_MIRROR_RETENTION = "7d"  # Delta's own default for deleted files an engine may time-travel to


class TableType(StrEnum):
    REFRESH = "REFRESH"
    APPEND = "APPEND"


class TimeUnit(StrEnum):
    """The unit of an integer time column's values (epoch seconds, milli-,
    micro- or nanoseconds). Timestamp columns carry their own."""

    S = "s"
    MS = "ms"
    US = "us"
    NS = "ns"


class TimeGranularity(StrEnum):
    """The time chunks a push splits its output by: every segment's rows lie
    in one chunk (UTC), so a later replace-range on chunk bounds finds
    segments that fit it."""

    HOUR = "hour"
    DAY = "day"
    MONTH = "month"


MIN_VERSIONS_KEPT = 2
MAX_VERSIONS_KEPT = 100_000
DEFAULT_VERSIONS_KEPT = 64  # past versions each store keeps readable, unless the table says


class MirrorFormat(StrEnum):
    """An open table format a table's versions are published in (``mirror``)."""

    DELTA = "delta"


class EntryState(StrEnum):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    REVERTED = "REVERTED"


class DeletionReason(StrEnum):
    """Why a segment's file is queued for the retention daemon."""

    DELETED = "DELETED"  # an operator deleted the segment
    FORCE_CLEANUP = "FORCE_CLEANUP"  # a stale push was cleaned up by a newer one
    PROACTIVE_CLEANUP = "PROACTIVE_CLEANUP"  # a REFRESH snapshot beyond max_snapshots
    END_SUBSET = "END_SUBSET"  # a `to` segment left out of end_replace's subset
    STRAY = "STRAY"  # a file a push wrote but no segment references (a failed task attempt)
    ABANDONED = "ABANDONED"  # a segment of a push that failed
    REPLACED = "REPLACED"  # a COMPLETED entry's `from`, past replaced_segments_retention
    REVERTED_OUTPUT = "REVERTED_OUTPUT"  # a REVERTED entry's `to`, past the entry cleanup retention
    STALE_PUSH = "STALE_PUSH"  # the `to` of an IN_PROGRESS entry whose pusher is gone
    EXPIRED = "EXPIRED"  # an APPEND segment whose time range ended before the time retention
    ORPHAN = "ORPHAN"  # a file under the root that nothing references, past the orphan grace
    ORPHAN_SEEN = "ORPHAN_SEEN"  # such a file, first seen unreferenced: not condemned (a register takes it)
    PURGED = "PURGED"  # a segment of a table dropped with --purge


class Operation(StrEnum):
    CREATE_TABLE = "CREATE_TABLE"
    REGISTER = "REGISTER"
    DELETE = "DELETE"
    START_REPLACE = "START_REPLACE"
    END_REPLACE = "END_REPLACE"
    REVERT_REPLACE = "REVERT_REPLACE"
    ROLLBACK = "ROLLBACK"
    QUEUE_FILES = "QUEUE_FILES"
    ABANDON_PUSH = "ABANDON_PUSH"
    RETENTION_MARK = "RETENTION_MARK"
    RETENTION_CLEAR = "RETENTION_CLEAR"
    DROP_TABLE = "DROP_TABLE"
    ALTER_TABLE = "ALTER_TABLE"
    PURGE_TABLE = "PURGE_TABLE"  # every file queued for retention; the table goes once they are gone


@dataclass(frozen=True)
class TableConfig:
    name: str
    root: str
    table_type: TableType = TableType.REFRESH
    time_column: str | None = None
    replaced_segments_retention_ms: int = 86_400_000
    lineage_entry_cleanup_retention_ms: int = 86_400_000
    max_snapshots: int = DEFAULT_MAX_SNAPSHOTS
    exclusive_delete: bool = True
    time_retention_ms: int | None = None  # APPEND tables: drop data older than this
    time_unit: TimeUnit | None = None  # an integer time column's unit; None: inferred per push
    schema: Schema | None = None  # recorded at the first push (core.schema); None: none yet
    schema_replaced_at: int | None = None  # the version whose push last replaced the schema
    schema_replaced_by: str | None = None  # that push's entry (never reverted: its data has those columns)
    past_schemas: tuple[PastSchema, ...] = ()  # the schemas earlier retained versions had (schema_versions)
    versions_kept: int | None = None  # past versions kept readable; None: the store's default
    time_granularity: TimeGranularity | None = None  # pushes split their output by it; None: no split
    mirror: MirrorFormat | None = None  # each version published in this format under the root; None: not
    mirror_retention_ms: int | None = None  # how far back the mirror's readers may time-travel; None: default
    purging_ms: int | None = None  # when `table drop --purge` queued its files: nothing else changes it

    @property
    def mirror_window_ms(self) -> int:
        """How long files a mirror version references stay after it is superseded."""
        if self.mirror_retention_ms is not None:
            return self.mirror_retention_ms
        return parse_period(DEFAULT_MIRROR_RETENTION)

    @staticmethod
    def build(
        name: str,
        root: str,
        table_type: TableType | str = TableType.REFRESH,
        *,
        time_column: str | None = None,
        replaced_segments_retention: str | None = None,
        lineage_entry_cleanup_retention: str | None = None,
        max_snapshots: int = DEFAULT_MAX_SNAPSHOTS,
        exclusive_delete: bool = True,
        time_retention: str | None = None,
        time_unit: TimeUnit | str | None = None,
        versions_kept: int | None = None,
        time_granularity: TimeGranularity | str | None = None,
        mirror: MirrorFormat | str | None = None,
        mirror_retention: str | None = None,
    ) -> TableConfig:
        """Validate user input and apply Pinot's defaults per table type."""
        check_table_name(name)
        _check_root(root)
        kind = _table_type(table_type)
        _check_time_column(time_column)
        unit = _time_unit(time_unit, time_column)
        if not isinstance(exclusive_delete, bool):
            raise InvalidInputError(f"invalid exclusive delete {exclusive_delete!r}: true or false")
        _check_max_snapshots(max_snapshots)
        retention_ms = _time_retention(time_retention, kind, name, time_column)
        default_replaced = (
            DEFAULT_REFRESH_RETENTION if kind is TableType.REFRESH else DEFAULT_APPEND_RETENTION
        )
        return TableConfig(
            name=name,
            root=root,
            table_type=kind,
            time_column=time_column,
            replaced_segments_retention_ms=parse_period(
                default_replaced if replaced_segments_retention is None else replaced_segments_retention
            ),
            lineage_entry_cleanup_retention_ms=parse_period(
                DEFAULT_ENTRY_CLEANUP_RETENTION
                if lineage_entry_cleanup_retention is None
                else lineage_entry_cleanup_retention
            ),
            max_snapshots=max_snapshots,
            exclusive_delete=exclusive_delete,
            time_retention_ms=retention_ms,
            time_unit=unit,
            versions_kept=check_versions_kept(versions_kept),
            time_granularity=_granularity(time_granularity, time_column),
            mirror=_mirror(mirror),
            mirror_retention_ms=_mirror_retention(mirror_retention),
        )


def _check_root(root: str) -> None:
    if not isinstance(root, str) or not root.strip() or root != root.strip():
        raise InvalidInputError(f"invalid deep-store root {root!r}: must be a non-empty URI or path")
    check_text("deep-store root", root, 2048)
    check_root_has_no_secret(root)


def _table_type(value: TableType | str) -> TableType:
    try:
        return TableType(value.upper() if isinstance(value, str) else value)
    except ValueError:
        raise InvalidInputError(f"invalid table type {value!r}: use REFRESH or APPEND") from None


def _check_time_column(time_column: str | None) -> None:
    if time_column is not None and (
        not time_column or not time_column.replace("_", "a").isalnum() or not time_column.isascii()
    ):
        raise InvalidInputError(f"invalid time column {time_column!r}: letters, digits and '_' only")


def _check_max_snapshots(max_snapshots: int) -> None:
    if (
        isinstance(max_snapshots, bool)
        or not isinstance(max_snapshots, int)
        or not 1 <= max_snapshots <= 1000
    ):
        raise InvalidInputError(f"invalid max snapshots {max_snapshots!r}: a whole number from 1 to 1000")


def _time_retention(text: str | None, kind: TableType, name: str, time_column: str | None) -> int | None:
    """An APPEND table's time retention, in ms (None: off)."""
    if text is None:
        return None
    retention_ms = parse_period(text)
    if retention_ms == 0:
        raise InvalidInputError(
            f"time retention {text!r} would condemn every segment at once: "
            "give a period longer than zero, or leave time retention off"
        )
    if kind is not TableType.APPEND:
        raise InvalidInputError(
            f"time retention {text!r} applies to APPEND tables only; {name!r} is {kind.value}"
        )
    if time_column is None:
        raise InvalidInputError(f"time retention {text!r} needs a time column: segments carry no time range")
    return retention_ms


def check_versions_kept(value: int | None) -> int | None:
    """A number of retained versions, or InvalidInputError."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not MIN_VERSIONS_KEPT <= value <= MAX_VERSIONS_KEPT
    ):
        raise InvalidInputError(
            f"invalid versions kept {value!r}: a whole number from {MIN_VERSIONS_KEPT} to {MAX_VERSIONS_KEPT}"
        )
    return value


def _granularity(value: TimeGranularity | str | None, time_column: str | None) -> TimeGranularity | None:
    if value is None:
        return None
    if time_column is None:
        raise InvalidInputError(f"time granularity {value!r} needs a time column")
    try:
        return TimeGranularity(value.lower() if isinstance(value, str) else value)
    except ValueError:
        names = ", ".join(g.value for g in TimeGranularity)
        raise InvalidInputError(f"invalid time granularity {value!r}: use {names}") from None


def _mirror(value: MirrorFormat | str | None) -> MirrorFormat | None:
    if value is None:
        return None
    try:
        return MirrorFormat(value.strip().lower() if isinstance(value, str) else value)
    except ValueError:
        formats = ", ".join(f.value for f in MirrorFormat)
        raise InvalidInputError(f"invalid mirror format {value!r}: use {formats}") from None


def _mirror_retention(value: str | None) -> int | None:
    if value is None:
        return None
    ms = parse_period(value)
    if ms == 0:
        raise InvalidInputError(
            f"invalid mirror retention {value!r}: engines reading the mirror need its files for a while; "
            "give a period longer than zero"
        )
    return ms


def _time_unit(value: TimeUnit | str | None, time_column: str | None) -> TimeUnit | None:
    if value is None:
        return None
    if time_column is None:
        raise InvalidInputError(f"time unit {value!r} needs a time column")
    try:
        return TimeUnit(value.lower() if isinstance(value, str) else value)
    except ValueError:
        units = ", ".join(u.value for u in TimeUnit)
        raise InvalidInputError(f"invalid time unit {value!r}: use {units}") from None


@dataclass(frozen=True)
class Audit:
    """Who asked for a change, and why."""

    actor: str
    job_id: str | None = None
    reason: str | None = None
    set_id: str | None = None  # the push set (or set rollback) the change is part of
    set_size: int = 0  # the tables the set's commit changed (0: unknown, or no set)

    def __post_init__(self) -> None:
        check_text("actor", self.actor, 256)
        check_text("job id", self.job_id, 256)
        check_text("reason", self.reason, MAX_REASON_BYTES)
        check_text("set id", self.set_id, MAX_SET_ID_BYTES)


@dataclass(frozen=True)
class Segment:
    name: str
    location: str  # relative to the table root
    rows: int = 0
    size_bytes: int = 0
    checksum: str = ""
    min_time: int | None = None
    max_time: int | None = None
    entry_id: str | None = None  # the lineage entry that created it
    created_ms: int = 0


@dataclass(frozen=True)
class LineageEntry:
    entry_id: str
    segments_from: tuple[str, ...]
    segments_to: tuple[str, ...]
    state: EntryState
    timestamp_ms: int  # last state change
    created_ms: int
    audit: Audit
    # The time range [start, end) a replace-range push means to replace: the
    # intent two overlapping range pushes conflict on, whatever their segments.
    interval: tuple[int, int] | None = None
    # An entry opened by hand has no pushing process whose session shows it
    # running: it is held (an owner with a TTL, on the store's clock) until
    # then, and neither force cleanup nor retention takes it before.
    held_until_ms: int | None = None
    # A refresh: the entry means to replace every segment of the table, so it
    # conflicts with any other running refresh or replace-range push, even on
    # a table with no segment yet (their ``from`` would share nothing).
    whole: bool = False
    staged: Staged | None = None  # a staged push's, kept for its publish

    @property
    def live(self) -> bool:
        return self.state is not EntryState.REVERTED

    def held(self, now_ms: int) -> bool:
        """Whether a hand-opened entry's hold still stands at ``now_ms``."""
        return self.held_until_ms is not None and now_ms < self.held_until_ms


@dataclass(frozen=True)
class PendingDeletion:
    """A file queued for the retention daemon. Keyed by its location."""

    location: str
    segment: str
    reason: DeletionReason
    marked_ms: int
    entry_id: str | None = None
    size_bytes: int = 0  # when known (the segment's recorded size)


@dataclass(frozen=True)
class TableState:
    """One version of a table. Entries keep their creation order."""

    config: TableConfig
    version: int = 0
    segments: Mapping[str, Segment] = field(default_factory=dict)
    entries: Mapping[str, LineageEntry] = field(default_factory=dict)
    pending: Mapping[str, PendingDeletion] = field(default_factory=dict)

    def replace(self, **changes: object) -> TableState:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def frozen(self) -> TableState:
        """This version with maps nobody can edit (``bucket_maps.frozen``): itself
        when they are already, else a state with frozen copies where needed."""
        segments, entries, pending = frozen(self.segments), frozen(self.entries), frozen(self.pending)
        if segments is self.segments and entries is self.entries and pending is self.pending:
            return self
        return dataclasses.replace(self, segments=segments, entries=entries, pending=pending)

    def loaded(self) -> TableState:
        """This version with every record at hand. A store may hand out maps
        that load a bucket of records when first wanted (``BucketMap``), which
        needs the store open; a state given to a caller is loaded first."""
        for records in (self.segments, self.entries, self.pending):
            if isinstance(records, BucketMap):
                records.load_all()
        return self


@dataclass(frozen=True)
class Change:
    """What a pure transition returns: the new state and what to record."""

    state: TableState
    operation: Operation
    entry_id: str | None = None
    segments: int = 0
    rows: int = 0
    size_bytes: int = 0
    changed: bool = True
    cleaned: tuple[str, ...] = ()  # entries force cleanup reverted (or removed) in this change
    detail: Detail | None = None  # what the history records beyond the counts


@dataclass(frozen=True)
class Detail:
    """What a commit's history record says beyond its counts: a push's mode
    and interval, a rollback's target, what a push did to the schema, which
    settings an alter changed, the checks a push's data passed (its audit)."""

    mode: str | None = None
    interval: tuple[int, int] | None = None
    target: int | None = None
    schema: str | None = None
    settings: str | None = None
    audit: str | None = None
