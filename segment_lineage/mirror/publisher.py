"""Publishing a table's lineage versions to its mirror, in order, idempotently.

One sync: read the log (what it shows, and the newest lineage version it
published), then the table's head, after it; then, for every retained
lineage version after the published one, oldest first: pin it (a lease, so
retention cannot take its files while it is being published, and a version
retention already took is skipped), plan the step that makes the log show
it, and commit that step against the log version read. A commit another
publisher made first fails ours (no rebase): the sync reads the log again
and recomputes everything, at most ``SYNC_ATTEMPTS`` times. A retried
publish finds its own earlier commit through the log's application
transaction: nothing is published twice.

With no log yet, the first sync publishes the current version only: the
mirror's history starts when it was enabled.

A sync holds the table's mirror (:func:`held`, an ephemeral node in
ZooKeeper) from its read of the log to its last commit, and so do the drop
and the disable that remove the log (:mod:`segment_lineage.mirror.admin`):
a publish under way when the table is dropped finishes before its log is
removed, and never lands in the log of a table created at the root after
it. Before each commit and after it, the sync asks ZooKeeper whether it
still holds the mirror (a session that lapsed lost it): a publisher paused
past its session commits nothing, or says that what it committed may have
landed in a log another process changed.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import (
    AuthError,
    ContentionError,
    LineageError,
    MirrorHeldError,
    TableNotFoundError,
)
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import TableState
from segment_lineage.lineage.core.retry import Attempts
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.mirror.delta import DeltaLog
from segment_lineage.mirror.errors import MirrorConflict, MirrorError, MirrorRefusedError, NoMirrorError
from segment_lineage.mirror.location import location
from segment_lineage.mirror.log_files import LogFiles
from segment_lineage.mirror.publishing import SyncReport, publish, records_of, still_held, to_publish
from segment_lineage.mirror.window import horizon as log_horizon

logger = logging.getLogger("segment_lineage.mirror")

SYNC_ATTEMPTS = 5
HOLD_TRIES = 10_000  # looks at a mirror another holds, within the wait's deadline


@contextlib.contextmanager
def held(
    manager: LineageManager,
    table: str,
    wait_s: float | None = None,
    *,
    refused: str | None = None,
) -> Iterator[None]:
    """Hold ``table``'s mirror for the block: wait while another process
    holds it (for the manager's retry deadline, or ``wait_s``; then
    MirrorHeldError). TableNotFoundError for a table that is not there.
    ``refused``: what an identity without the right is told instead, by a
    caller that holds the mirror on the way to something else (a drop names
    the drop, and who may)."""
    deadline = manager.retry.deadline_s if wait_s is None else wait_s
    # Bounded by time: a publish may hold the mirror for a while.
    attempts = Attempts(dataclasses.replace(manager.retry, max_attempts=HOLD_TRIES, deadline_s=deadline))
    while True:
        try:
            manager.mirror_hold(table).take()
            break
        except MirrorHeldError:
            if not attempts.next():
                raise
            attempts.backoff()
        except AuthError as exc:
            told = refused or (
                f"holding the Delta mirror of table {table!r} was refused: {exc.message} (publishing to "
                "a mirror, and turning it on or off, needs the pusher or retention role, or an admin)"
            )
            raise AuthError(told, remedy=exc.remedy) from None
    try:
        yield
    finally:
        with contextlib.suppress(LineageError):  # it goes with the session anyway
            manager.mirror_hold(table).release()


def sync(
    manager: LineageManager,
    table: str,
    *,
    dry_run: bool = False,
    repair: bool = False,
    clean: bool = False,
    wait_s: float | None = None,
) -> SyncReport:
    """Publish every retained version after the newest published one; with
    ``dry_run``, only say which would be. MirrorRefusedError when the table
    has no mirror or another writer changed its log. With ``repair`` (a log
    another writer committed to, or another table left), the current
    version is published on top of the log as it stands: its version
    numbers go on, and what the other writer added or removed is undone.
    With ``clean``, the log's files no version within the mirror's retention
    needs are removed afterwards (:meth:`DeltaLog.clean`), on the log read.
    All but a dry run hold the table's mirror (:func:`held`, waiting at most
    ``wait_s`` for it) throughout."""
    if dry_run:
        return _attempts(manager, table, dry_run=True, repair=repair, clean=False)
    with held(manager, table, wait_s):
        return sync_holding(manager, table, repair=repair, clean=clean)


def sync_holding(
    manager: LineageManager, table: str, *, repair: bool = False, clean: bool = False
) -> SyncReport:
    """:func:`sync`, by a caller that holds the table's mirror (:func:`held`)."""
    return _attempts(manager, table, dry_run=False, repair=repair, clean=clean)


class _Written:
    """The logs this process wrote last, as it left them (a few roots): the
    next publish to one of them starts from it instead of reading the log
    again, if its newest commit file is as it was and no next one is there
    (another writer's commit, a repair, a log removed and begun again would
    each show). Taken out while in use: one publish at a time uses one.
    A log kept loads the version it wrote in the background (a thread that
    ends once it is loaded), which the next publish waits for if need be,
    and so does the process's exit (:meth:`drain`, at most DRAIN_S): no
    load is left inside deltalake while the interpreter shuts down."""

    KEPT = 8
    DRAIN_S = 30.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: dict[str, tuple[DeltaLog, Any]] = {}
        self._roots: dict[str, str] = {}  # table -> the root its log was kept under
        self._loading: list[threading.Thread] = []
        atexit.register(self.drain)

    def drain(self) -> None:
        """Wait for the background loads under way (DRAIN_S at most in all:
        each gets its share, so no clock is read at the process's exit)."""
        with self._lock:
            loading, self._loading = self._loading, []
        for thread in loading:
            thread.join(self.DRAIN_S / len(loading))

    def root_of(self, table: str) -> str | None:
        """The root of the table's log this process kept (None: none kept).
        A guess until the table is read: it may have been made again elsewhere."""
        with self._lock:
            return self._roots.get(table)

    def take(self, root: str) -> DeltaLog:
        with self._lock:
            kept = self._logs.pop(root, None)
        if kept is not None:
            log, mark = kept
            with contextlib.suppress(LineageError):
                if log.mark() == mark:
                    return log
        return DeltaLog.open(root)

    def keep(self, table: str, root: str, log: DeltaLog) -> None:
        mark = log.mark()
        if mark is None or mark[0] is None or mark[1] is not None:
            return  # nothing written yet, or the log moved already
        with self._lock:
            _put_newest(self._logs, root, (log, mark), self.KEPT)
            _put_newest(self._roots, table, root, self.KEPT)
        if log.written_since:  # the version just written loads in the background, off the next publish's path
            self._prefetch(log)

    def _prefetch(self, log: DeltaLog) -> None:
        """Load the version ``log`` wrote in a thread of its own, waited for at exit."""
        thread = threading.Thread(target=log.prefetch, name="lineage-mirror-prefetch", daemon=True)
        with self._lock:
            self._loading = [t for t in self._loading if t.is_alive()]
            self._loading.append(thread)
        thread.start()


_Kept = TypeVar("_Kept")


def _put_newest(kept: dict[str, _Kept], key: str, value: _Kept, most: int) -> None:
    """Put ``key`` last in ``kept``, leaving out the oldest past ``most``."""
    kept.pop(key, None)
    while len(kept) >= most:
        kept.pop(next(iter(kept)))
    kept[key] = value


WRITTEN = _Written()


def _attempts(manager: LineageManager, table: str, *, dry_run: bool, repair: bool, clean: bool) -> SyncReport:
    root = _first_root(manager, table, fresh=dry_run or repair)
    for _ in range(SYNC_ATTEMPTS):
        log = DeltaLog.open(root) if dry_run or repair else WRITTEN.take(root)
        failpoint("mirror.after-log-read")
        snap = manager.snapshot(table)  # read after the log: whatever it published, this is newer
        state = snap.state.loaded()
        if state.config.root != root:  # made again elsewhere since: read its own log, then the table
            root = state.config.root
            continue
        # Whether this attempt repairs: a repair of a log with nothing to
        # repair publishes as a sync, and its next attempt looks again.
        records, repairing = _whose(manager, table, log, state, snap.recent, repair)
        try:
            report = publish(manager, table, log, state, dry_run, repairing, records, snap)
        except MirrorConflict:
            continue  # another publisher's commit landed: read both again
        report = dataclasses.replace(report, repaired=repairing and bool(report.published))
        return report if dry_run else _after_publish(manager, table, state, log, report, clean=clean)
    raise ContentionError(table, SYNC_ATTEMPTS, 0.0, doing="publishing to the Delta mirror")


def _first_root(manager: LineageManager, table: str, *, fresh: bool) -> str:
    """The root: the one this process published the table's log under last
    (checked once the table is read), unless the log is to be read ``fresh``;
    else read from the table."""
    kept = None if fresh else WRITTEN.root_of(table)
    return kept or manager.table(table).config.root


def _whose(
    manager: LineageManager,
    table: str,
    log: DeltaLog,
    state: TableState,
    recent: Sequence[HistoryRecord],
    repair: bool,
) -> tuple[dict[int, HistoryRecord], bool]:
    """Refuse a log that is not the table's to publish to (unless repaired),
    reading the records to publish in the same pass over the history; and
    whether to repair still (not when there is nothing to repair: a plain
    sync, and no empty commit)."""
    check_log(state, log, foreign_too=not repair)
    records = records_of(manager, table, to_publish(log, state, repair), recent)
    if repair and log.foreign() is None and owned(manager, state, log, records):
        repair = False
    if not repair:
        check_owner(manager, state, log, records)
    return records, repair


def _after_publish(
    manager: LineageManager, table: str, state: TableState, log: DeltaLog, report: SyncReport, *, clean: bool
) -> SyncReport:
    """Remove the log's old files (with ``clean``), still holding the mirror,
    and keep the log for this process's next publish."""
    if clean:
        horizon = log_horizon(state.config, manager.now_ms())
        still_held(manager, table, "before removing old log files,")
        report = dataclasses.replace(report, cleaned=log.clean(horizon))
    WRITTEN.keep(table, state.config.root, log)  # the root read: the table's own
    return report


def check_log(state: TableState, log: DeltaLog, *, foreign_too: bool = True) -> None:
    """Refuse a table without a mirror, or a log another writer changed."""
    name = state.config.name
    refused = transitions.purging_refusal(state.config, "publishing to its mirror")
    if refused is not None:
        raise refused
    if state.config.mirror is None:
        raise NoMirrorError(
            f"table {name!r} has no mirror",
            table=name,
            remedy=f"enable one with: lineage mirror enable {name}",
        )
    foreign = log.foreign() if foreign_too else None
    if foreign is not None:
        raise MirrorRefusedError(
            f"the Delta log of table {name!r} has a commit another writer made: version "
            f"{foreign.delta_version} ({foreign.operation or 'unknown operation'}); the mirror is "
            "written only by this tool (a VACUUM there deletes files retention still keeps for readers)",
            table=name,
            remedy=f"publish the table's current version over it: lineage mirror repair {name}",
        )


def owned(
    manager: LineageManager,
    state: TableState,
    log: DeltaLog,
    records: Mapping[int, HistoryRecord] | None = None,
) -> bool:
    """Whether this table wrote the log's newest commit of the publisher's
    (or there is none): it names no version the table has not reached, and
    the commit it names is the one the table's history has at that version.
    Another writer's commit on top (a VACUUM, a property set) changes nothing.
    ``records``: history records already read (the one wanted is read
    when it is not among them)."""
    if log.shown.lineage_version > state.version:
        return False
    newest = _newest_published(log)
    if newest is None:
        return True
    wanted, commit_id = newest
    known = records or {}
    if wanted not in known:  # not among those read: read it
        known = records_of(manager, state.config.name, [wanted])
    record = known.get(wanted)
    return record is None or record.commit_id == commit_id


def _newest_published(log: DeltaLog) -> tuple[int, str] | None:
    """The lineage version and the commit the publisher's newest commit
    names (another writer's commit on top looked past); None: none does."""
    newest = log.newest
    if newest is not None and newest.lineage_version is None:  # another writer's on top: look past it
        newest = next((c for c in log.history() if c.lineage_version and c.commit_id), None)
    if newest is None or newest.commit_id is None or not newest.lineage_version:
        return None
    return newest.lineage_version, newest.commit_id


def not_the_tables(manager: LineageManager, state: TableState | None, log: DeltaLog) -> str | None:
    """Why the log under a table's root is not the table's mirror (None: it
    is): none of it is the publisher's (another writer's Delta table), or it
    publishes another table's versions (an earlier table's left at the root,
    or a root that now leads to another table's). ``state`` None: the
    table's history cannot be read; only the first is checked."""
    ours = log.shown.lineage_version > 0 or any(c.lineage_version is not None for c in log.history())
    if not ours:  # (a checkpoint carries the publisher's application transaction too)
        return "none of it is this project's (another writer's Delta table)"
    if state is not None and not owned(manager, state, log):
        return "it publishes another table's versions"
    return None


def check_owner(
    manager: LineageManager,
    state: TableState,
    log: DeltaLog,
    records: Mapping[int, HistoryRecord] | None = None,
) -> None:
    """Refuse a log this table did not write (:func:`owned`): a dropped
    table's log, under a table created again at its root."""
    name = state.config.name
    newest = log.newest
    published = log.shown.lineage_version
    if not owned(manager, state, log, records):
        raise MirrorRefusedError(
            f"the Delta log under the root of table {name!r} was not written for this table: it "
            f"publishes version {published} (commit {newest.commit_id if newest else '?'}), which "
            f"this table's history does not have (the table is at version {state.version})",
            table=name,
            remedy=f"publish this table's current version over it: lineage mirror repair {name}",
        )


def mirrored_tables(manager: LineageManager, tables: list[str] | None = None) -> list[str]:
    """Of ``tables`` (default: every table), those with a mirror; a table
    whose metadata cannot be read is left out (retention reports it)."""
    out = []
    for table in manager.list_tables() if tables is None else tables:
        with contextlib.suppress(LineageError):
            if manager.table(table).config.mirror is not None:
                out.append(table)
    return out


def sync_many(
    manager: LineageManager,
    tables: list[str],
    *,
    listed: bool = False,
    dry_run: bool = False,
    clean: bool = False,
    stopping: Callable[[], bool] = lambda: False,
) -> list[tuple[str, SyncReport | LineageError]]:
    """Each table synced in turn: a table's failure is its result, and the
    others go on (until ``stopping``). With ``listed`` (the tables were
    listed, not named), a table dropped since is left out."""
    out: list[tuple[str, SyncReport | LineageError]] = []
    for table in tables:
        if stopping():
            break
        try:
            out.append((table, sync(manager, table, dry_run=dry_run, clean=clean)))
        except (TableNotFoundError, NoMirrorError) as exc:
            if not listed:  # listed: dropped, or its mirror turned off, since
                out.append((table, exc))
        except LineageError as exc:
            out.append((table, exc))
        except Exception as exc:  # a bug: told with its traceback; the others go on
            logger.exception("publishing %s to its mirror failed unexpectedly", table)
            out.append((table, MirrorError(f"publishing failed unexpectedly: {type(exc).__name__}: {exc}")))
    return out


def clean_log(manager: LineageManager, table: str) -> int:
    """Delete the mirror log's files no version engines may still read
    needs (:meth:`DeltaLog.clean`, measured on ZooKeeper's clock), holding
    the table's mirror; how many."""
    with held(manager, table):
        config = manager.table(table).config
        if config.mirror is None:
            return 0
        log = DeltaLog.open(config.root)
        return log.clean(log_horizon(config, manager.now_ms()))


def check_root(root: str, *, fresh: bool = False) -> None:
    """MirrorRefusedError for a root the mirror cannot live under; with
    ``fresh`` (a new table), for one that already holds a Delta log."""
    store = DeepStore.for_root(root)
    location(store)
    LogFiles(store).check_unmarked(walk=True)  # a ZooKeeper server's data is no place for a log
    if fresh and DeltaLog.open(root).exists():
        raise MirrorRefusedError(
            f"a Delta log is already under {root!r}: a new table's mirror would take it for its own",
            remedy="give the table another root, or remove that _delta_log/ directory first",
        )
