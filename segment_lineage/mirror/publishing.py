"""Publishing a table's versions to its Delta log, one commit each, under
the mirror's hold (held by the caller, :mod:`segment_lineage.mirror.publisher`):
which versions, with which columns, and what became of each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from segment_lineage.lineage.core.errors import VersionGoneError
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import TableState
from segment_lineage.lineage.core.schema import Schema
from segment_lineage.lineage.core.schema_versions import span_at
from segment_lineage.lineage.manager import LineageManager, Snapshot
from segment_lineage.mirror.delta import DeltaLog, encode_fields
from segment_lineage.mirror.errors import MirrorError, MirrorRefusedError
from segment_lineage.mirror.plan import (
    Columns,
    Shown,
    Step,
    after,
    plan_step,
    published_schema,
    shows_nothing_new,
)

MAX_RECORDS = 100_000  # history records read to describe the versions published


@dataclass(frozen=True)
class SyncReport:
    table: str
    head: int  # the table's version when the sync read it
    published: tuple[tuple[int, int], ...] = ()  # (lineage version, Delta version) committed now
    unchanged: tuple[int, ...] = ()  # versions that changed nothing the mirror shows
    gone: tuple[int, ...] = ()  # versions retention took before they could be published
    lineage_version: int = 0  # the newest lineage version the log shows now
    delta_version: int | None = None
    waiting: str | None = None  # why nothing could be published yet
    pending: tuple[tuple[int, int], ...] = field(default=())  # dry run: (version, its commit time)
    cleaned: int = 0  # log files removed after publishing (``clean``)
    repaired: bool = False  # a repair published over another writer's log (not: nothing to repair)

    def line(self) -> str:
        if self.waiting is not None:
            return f"{self.table}: nothing published: {self.waiting}"
        if self.pending:
            return f"{self.table}: {len(self.pending)} version(s) to publish, the oldest {self.pending[0][0]}"
        if not self.published:
            return (
                f"{self.table}: up to date (version {self.lineage_version} is Delta version "
                f"{self.delta_version})"
            )
        pairs = ", ".join(f"{lv} as Delta {dv}" for lv, dv in self.published)
        return f"{self.table}: published {pairs}"


def still_held(
    manager: LineageManager, table: str, before: str, then: str = "nothing more was written"
) -> None:
    """MirrorError unless this process still holds the table's mirror (its
    ZooKeeper session lapsed: a drop or another publisher may have taken it)."""
    if not manager.mirror_hold(table).held():
        raise _lapsed(table, before, then)


def held_now(manager: LineageManager, table: str, before: str) -> int:
    """:func:`still_held` before a write, and the store's clock for it, asked together."""
    now = manager.mirror_hold(table).held_now()
    if now is None:
        raise _lapsed(table, before, "nothing more was written")
    return now


def _lapsed(table: str, before: str, then: str) -> MirrorError:
    return MirrorError(
        f"{before} the hold on the Delta mirror of table {table!r} lapsed (the ZooKeeper session "
        f"ended); {then}"
    )


def publish(
    manager: LineageManager,
    table: str,
    log: DeltaLog,
    state: TableState,
    dry_run: bool,
    repair: bool = False,
    records: Mapping[int, HistoryRecord] | None = None,
    read: Snapshot | None = None,
) -> SyncReport:
    """Publish every version the log does not show yet (with ``repair``,
    the current one over whatever the log shows), one Delta commit each.
    ``records``: history records already read (the rest are read here);
    ``read``: the table as read for ``state`` (its version's pin builds on it)."""
    run = _Publishing(manager, table, log, state, dry_run, repair, dict(records or {}), read)
    for version in run.versions:
        run.one(version)
    return run.report()


# Versions a publish takes without listing those kept (a push's start and end,
# a few commits more): each is pinned, and one retention took is reported gone.
SHORT_BACKLOG = 4


@dataclass
class _Publishing:
    """One publish under way: the versions to publish, what the log shows
    after each, and what became of each version."""

    manager: LineageManager
    table: str
    log: DeltaLog
    state: TableState
    dry_run: bool
    repair: bool
    records: dict[int, HistoryRecord] = field(default_factory=dict)
    read: Snapshot | None = None  # the table as read for ``state``
    versions: list[int] = field(default_factory=list)
    published: list[tuple[int, int]] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)
    gone: list[int] = field(default_factory=list)
    pending: list[tuple[int, int]] = field(default_factory=list)
    waiting: str | None = None

    def __post_init__(self) -> None:
        self.shown = self.log.shown
        self.base = None if self.repair else self.log.base  # a version showing exactly shown.files
        self.versions = self._versions()
        unread = [v for v in self.versions if v not in self.records]
        self.records.update(records_of(self.manager, self.table, unread))

    def _versions(self) -> list[int]:
        """The versions to publish: the current one alone (a first publish,
        a repair), every one after the log's newest (a short backlog, with no
        listing: a pin finds one gone), else those the table still keeps."""
        shown, current = self.shown, self.state.version
        if shown.version is None or self.repair:
            return [current]
        if current - shown.lineage_version <= SHORT_BACKLOG:
            return list(range(shown.lineage_version + 1, current + 1))
        kept = [v for v in self.manager.versions(self.table) if shown.lineage_version < v <= current]
        return kept if current in kept else [*kept, current]

    def one(self, version: int) -> None:
        """Publish ``version``, read under a pin (gone: it was reclaimed)."""
        record = self.records.get(version)
        if (
            self.shown.version is not None
            and not self.repair
            and record is not None
            and shows_nothing_new(record.operation, record.entry_id)
        ):
            self.unchanged.append(version)
            return
        try:
            lease = self.manager.pin_readable(self.table, version, read=self.read)
        except VersionGoneError:
            self.gone.append(version)
            return
        try:
            self._pinned(version, lease.state)
        finally:
            self.manager.release(lease)

    def _pinned(self, version: int, then: TableState) -> None:
        schema = published_schema(then.config.schema, self.table)
        if not schema:  # (core.schema refuses a push leaving a mirrored table none)
            self._no_columns(version)
            return
        fields, delta_schema = self._columns(version, schema)
        record = self.records.get(version)
        step = self._step(version, then, schema, fields, delta_schema, record)
        if step is None:
            self.unchanged.append(version)
        elif self.dry_run:
            self.pending.append((version, 0 if record is None else record.at_ms))
            self.shown = after(self.shown, step, (self.shown.version or 0) + 1)
        else:
            self._commit(version, step, delta_schema)
        self.base = then.loaded()  # what shown.files are now: the next step plans from the change
        if not self.dry_run:
            self.log.base = self.base

    def _no_columns(self, version: int) -> None:
        """A version with no column Delta Lake can hold: the mirror waits
        for one before its log exists, and is refused one after."""
        self.waiting = "the table has no columns yet (its first push records them)"
        if self.shown.version is not None:
            raise MirrorRefusedError(
                f"version {version} of table {self.table!r} has no column Delta Lake can hold "
                "(every column is still typed null): the mirror cannot publish it",
                table=self.table,
            )

    def _step(
        self,
        version: int,
        then: TableState,
        schema: Schema,
        fields: tuple[str, ...],
        delta_schema: Any,
        record: HistoryRecord | None,
    ) -> Step | None:
        """The step that publishes ``version`` (None: it changes nothing the
        mirror shows). A repair first resets columns another writer changed,
        and always makes one: the newest commit must be ours."""
        if self.repair and self.shown.version is not None and not set(self.shown.fields) <= set(fields):
            self._reset(self.shown.version + 1, then, schema, fields, delta_schema, record)
        step = plan_step(self.shown, then, schema, fields, record, self.base)
        if step is None and self.repair:  # one with nothing else
            return Step(version, (), (), schema, fields, Columns.SAME, record)
        return step

    def _columns(self, version: int, schema: Schema) -> tuple[tuple[str, ...], Any]:
        """The Delta columns ``version`` is published with: its own, or (a
        past version whose schema is no longer recorded) the log's current
        ones, so that columns added since come with the newest version."""
        fields, delta_schema = encode_fields(schema)
        known = span_at(self.state.config, version) is not None
        if version != self.state.version and self.shown.version is not None and not known:
            return self.shown.fields, self.log.schema()
        return fields, delta_schema

    def _reset(
        self,
        number: int,
        then: TableState,
        schema: Schema,
        fields: tuple[str, ...],
        delta_schema: Any,
        record: HistoryRecord | None,
    ) -> None:
        """Another writer's columns: a commit that shows no file first, with
        the table's columns, then the table's files (numbers go on)."""
        emptied = Shown(number, self.shown.lineage_version, frozenset(), fields)
        if self.dry_run:
            self.shown = emptied
            return
        first = plan_step(emptied, then, schema, fields, record)
        if first is not None:
            self.log.check_files(first)  # every file there before anything is written
        doing = f"before resetting the columns of table {self.table!r}'s mirror,"
        self.log.reset(delta_schema, fields, held_now(self.manager, self.table, doing))
        self.shown, self.base = self.log.shown, None

    def _commit(self, version: int, step: Step, delta_schema: Any) -> None:
        manager, table = self.manager, self.table
        failpoint("mirror.before-commit")
        now = held_now(manager, table, f"before publishing version {version},")
        delta_version = self.log.commit(step, delta_schema, now)
        failpoint("mirror.after-commit")
        still_held(
            manager,
            table,
            f"published version {version} of table {table!r} as Delta version {delta_version}, but",
            f"if the table was dropped or its mirror removed, that commit may be in a log another "
            f"process changed; check with: lineage mirror status {table}",
        )
        self.shown = self.log.shown
        self.published.append((version, delta_version))

    def report(self) -> SyncReport:
        shown = self.log.shown
        return SyncReport(
            self.table,
            self.state.version,
            tuple(self.published),
            tuple(self.unchanged),
            tuple(self.gone),
            shown.lineage_version,
            shown.version,
            self.waiting if not self.published and shown.version is None else None,
            tuple(self.pending),
        )


def to_publish(log: DeltaLog, state: TableState, repair: bool) -> list[int]:
    """The versions a sync may publish, whose records it reads in one pass:
    from the one the log shows (whose record says whose log it is) to the
    table's current one."""
    if log.shown.version is None or repair:
        return [state.version, *([log.shown.lineage_version] if log.shown.lineage_version else [])]
    return list(range(max(1, log.shown.lineage_version), state.version + 1))


def records_of(
    manager: LineageManager, table: str, versions: list[int], at_hand: Sequence[HistoryRecord] = ()
) -> dict[int, HistoryRecord]:
    """The history records of ``versions``: from ``at_hand`` (those a read of
    the table brought) when they hold them all, else read from the history
    (newest first, only as far as needed)."""
    if not versions:
        return {}
    wanted = set(versions)
    out = {r.version: r for r in at_hand if r.version in wanted}
    if len(out) == len(wanted):
        return out
    oldest = min(versions)
    for count, record in enumerate(manager.iter_history(table)):
        if record.version < oldest or count >= MAX_RECORDS:
            break
        if record.version in wanted:
            out[record.version] = record
    return out
