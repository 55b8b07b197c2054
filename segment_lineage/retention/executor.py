"""Running a retention pass: plan, record the intent, delete files, clear.

1. List the table's root (for the orphan scan), then plan against the
   current state (pure) and record the intent with one compare-and-set:
   condemned segments and orphan files move into ``pending`` and finished
   entries go, before any file is touched.
2. Re-read the readers' pins (a reader that pinned meanwhile keeps its files),
   then delete the files, checking the fence before each one: a process that
   lost its session (or its leadership) deletes nothing more.
3. Clear the deleted files from ``pending`` with a second compare-and-set,
   and let the store reclaim its own unreferenced metadata.

A crash anywhere is finished by the next pass: ``pending`` is the intent log
and deleting a file is idempotent. After an unknown outcome of a metadata
write, the pass stops for that table and deletes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from segment_lineage.lineage.config import state_dir
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import (
    AuthError,
    CorruptRecordError,
    LineageError,
    OutcomeUnknownError,
    RefusedError,
    TableNotFoundError,
)
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.model import Change, TableState
from segment_lineage.lineage.core.visibility import visible_segments
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.manager.collector import fewer_collections
from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
from segment_lineage.lineage.storage.claims import CLAIM_FILE, check_claim, read_claim, resolve_root
from segment_lineage.lineage.storage.deep import DeepStore, FileInfo
from segment_lineage.lineage.storage.dirs import prune_dirs
from segment_lineage.lineage.storage.errors import LinkUnknownError
from segment_lineage.lineage.storage.folders import Folders
from segment_lineage.mirror.window import readable_files
from segment_lineage.retention.deletes import (
    AGAIN,
    THROUGH_A_LINK,
    UNKNOWN,
    Fence,
    delete_all,
    no_fence,
    not_kept,
)
from segment_lineage.retention.errors import FencedError
from segment_lineage.retention.listing import touchable_files
from segment_lineage.retention.planner import (
    DEFAULT_MIN_GRACE_MS,
    DEFAULT_ORPHAN_GRACE_MS,
    Deletion,
    Kept,
    Plan,
    Policy,
    plan,
)
from segment_lineage.retention.report import TableReport

log = logging.getLogger(__name__)


Progress = Callable[[str], None]
PROGRESS_EVERY_S = 5.0
MAX_VISIBLE_SHARE = 0.5  # of the visible rows, that one pass may condemn without --force


def quiet(_message: str) -> None:
    return None


@dataclass(frozen=True)
class PassOptions:
    """How one retention pass runs: delete or only plan, the graces, the
    orphan scan, the fence every delete checks first, and where progress and
    each deleted location are told."""

    dry_run: bool = False
    force: bool = False  # ignore the minimum grace of queued files; lift the share guard too
    allow_large_cut: bool = False  # lift the share guard only
    min_grace_ms: int = DEFAULT_MIN_GRACE_MS
    orphans: bool = True  # scan the root for files nothing references
    orphan_grace_ms: int = DEFAULT_ORPHAN_GRACE_MS
    fence: Fence = no_fence  # raises FencedError once this process may no longer delete
    progress: Progress = quiet  # told how a long pass is going
    on_deleted: Progress = quiet  # told each location this pass deleted (audits, the fault checker)
    # Monotonic seconds, paces the progress messages; None: the manager's env's.
    clock: Callable[[], float] | None = None


def run_table(
    manager: LineageManager,
    table: str,
    options: PassOptions | None = None,
    report: TableReport | None = None,
) -> TableReport:
    """One pass over one table, counted into ``report`` (a new one when
    None: given, it keeps what the pass did when it raises). Raises
    OutcomeUnknownError and FencedError (the process may no longer delete);
    other per-file failures are reported and retried by the next pass.
    Passes over one table never overlap: PassRunningError (nothing done)
    while another holds it."""
    options = options or PassOptions()
    report = report or TableReport(table, options.dry_run)
    with fewer_collections():  # a pass makes an object or more per file, in no cycle
        return _held(manager, table, options, report)


def _held(manager: LineageManager, table: str, options: PassOptions, report: TableReport) -> TableReport:
    """The pass, holding the table's pass hold (a dry run holds nothing)."""
    if options.dry_run:
        return _run_table(manager, table, options, report)
    hold = manager.pass_hold(table)
    hold.take()
    try:
        return _run_table(manager, table, options, report)
    except FencedError as exc:  # what it deleted before the fence fell is told all the same
        exc.done.append(report)
        raise
    finally:
        try:
            hold.release()
        except LineageError as exc:  # the session's end releases it anyway
            log.warning("releasing the retention pass on %s: %s", table, exc.message)


def _holding(manager: LineageManager, table: str) -> None:
    """The pass still holds its table (a session that lapsed lost it, and
    another pass may be running now): else nothing more is deleted."""
    if not manager.pass_hold(table).held():
        raise FencedError(f"the retention pass on {table!r} lost its hold on the table; it stopped")


def check_root_claim(manager: LineageManager, table: str, root: str) -> None:
    """Retention deletes nothing under a root that is not claimed by this very
    table of this very store (the marker a table create writes): another
    lineage's table, or files nobody claimed, may live there."""
    # A root create would refuse (relative, a home, the system's) is never scanned.
    resolve_root(root, state_dir(), walk=False)  # the listing and each delete look below it
    claim = read_claim(RootClaimFiles(), root)
    if claim is None:
        raise RefusedError(
            f"the root {root!r} of table {table!r} carries no claim marker ({CLAIM_FILE}); "
            "retention deletes nothing under it",
            table=table,
            remedy=f"if the table's files are all this lineage's, run 'lineage table claim {table}' "
            "(once, for tables created before roots were claimed)",
        )
    check_claim(claim, manager.store_id(), table, root, live=True)


def _run_table(manager: LineageManager, table: str, options: PassOptions, report: TableReport) -> TableReport:
    config = manager.table(table).config
    check_root_claim(manager, table, config.root)
    root = DeepStore.for_root(config.root)
    files = touchable_files(manager, table, root, report) if options.orphans else None
    computed: list[Plan] = []

    def policy(now: int) -> Policy:
        return Policy(now, options.min_grace_ms, options.force, options.orphan_grace_ms)

    def planned(state: TableState, now: int) -> Plan:
        # Every input of the decision is read in the same attempt as the head
        # it is applied to, after it: a push holds its owner node before its
        # entry exists and a reader its lease before it verifies, so whatever
        # this head shows as running or pinned is in these reads too.
        pinned, owners = manager.pinned_states(table), manager.live_owners(table)
        return plan(state, policy(now), pinned, owners, files, readable_files(state.config, now))

    def mark(state: TableState, now: int) -> Change:
        current = planned(state, now)
        _check_share(state, current, options)
        computed.append(current)
        return transitions.retention_mark(
            state,
            current.condemn,
            current.remove_entries,
            now,
            current.orphans,
            current.convict,
            current.forget,
        )

    if options.dry_run:
        state = manager.table(table)
        current = planned(state, manager.now_ms())
        try:
            _check_share(state, current, options)
        except RefusedError as exc:
            report.errors.append(_told(exc))
            report.note = "refused: a pass would change nothing (the error says what lifts it)"
        _fill(report, current)
        _pending(report, state)
        report.leases_ignored = manager.ignored_leases(table)
        return report

    options.fence()
    marked = manager.commit(table, mark, reason="retention")
    failpoint("retention.after-mark")
    current = computed[-1]
    _fill(report, current)

    folders = Folders()  # each folder resolved and listed once, for the kept check and the deletes
    todo = _still_unreferenced(manager, table, root, current, report, folders)
    deleted = _delete(root, todo, table, options, report, options.clock or manager.env.monotonic, folders)
    if deleted:
        try:
            report.dirs_removed = prune_dirs(root, deleted)
        except LineageError as exc:
            report.errors.append(f"removing empty directories: {exc.message}")
    return _after_deletes(manager, table, marked.state, files, deleted, options, report)


def _still_unreferenced(
    manager: LineageManager, table: str, root: DeepStore, current: Plan, report: TableReport, folders: Folders
) -> list[Deletion]:
    """The planned deletions nothing took back since the plan: readers that
    pinned while we planned keep their files, and so does any location
    registered now (read after the pins, with the pass held) or published by
    the mirror meanwhile."""
    _holding(manager, table)
    # What a pinned version shows (as the plan protects it), not every segment it registered.
    keep = {seg.location for version in manager.pinned_states(table) for seg in visible_segments(version)}
    now_state = manager.table(table)
    keep.update(seg.location for seg in now_state.segments.values())
    keep.update(readable_files(now_state.config, manager.now_ms()))  # a publish that landed meanwhile
    try:
        todo = not_kept(root, current.deletions, keep, folders)
    except LinkUnknownError as exc:  # files stay queued; the next pass looks again
        report.errors.append(exc.message)
        report.keep(Kept(d.location, UNKNOWN) for d in current.deletions)
        return []
    left = {id(d) for d in todo}
    report.keep(
        Kept(d.location, AGAIN if d.location in keep else THROUGH_A_LINK)
        for d in current.deletions
        if id(d) not in left
    )
    return todo


def _delete(
    root: DeepStore,
    todo: list[Deletion],
    table: str,
    options: PassOptions,
    report: TableReport,
    clock: Callable[[], float],
    folders: Folders,
) -> list[str]:
    """Delete ``todo`` under the pass's fence, counting into ``report`` and
    saying how it goes by ``clock`` (``folders``: what the kept check learned
    of their folders); the locations now gone (deleted, or found gone)."""
    deleted: list[str] = []
    last_said = clock()
    for done, (deletion, outcome) in enumerate(delete_all(root, todo, options.fence, folders), 1):
        if isinstance(outcome, str):
            report.errors.append(f"{deletion.location}: {outcome}")
            continue
        deleted.append(deletion.location)
        if outcome:
            report.files_deleted += 1
            report.bytes_deleted += deletion.size_bytes
            options.on_deleted(deletion.location)
        else:
            report.files_already_gone += 1
        if clock() - last_said >= PROGRESS_EVERY_S:
            last_said = clock()
            options.progress(f"{table}: {done}/{len(todo)} file(s) processed, {report.files_deleted} deleted")
    return deleted


def _after_deletes(
    manager: LineageManager,
    table: str,
    final: TableState,
    files: list[FileInfo] | None,
    deleted: list[str],
    options: PassOptions,
    report: TableReport,
) -> TableReport:
    """The deleted files cleared from pending (fenced again), a purge
    finished, and the metadata garbage collected."""
    if deleted:
        failpoint("retention.before-clear")
        options.fence()
        _holding(manager, table)
        final = manager.commit(
            table,
            lambda s, now: transitions.clear_pending(s, deleted, report.bytes_deleted),
            reason="retention",
        ).state
    _pending(report, final)
    if final.config.purging_ms is not None:
        report.note = _finish_purge(manager, final, files, deleted)
        if report.note == PURGE_DONE:
            return report  # its metadata went with it
    try:
        report.metadata_reclaimed = manager.collect_garbage(table)
    except LineageError as exc:
        report.errors.append(f"metadata garbage collection: {exc.message}")
    report.leases_ignored = manager.ignored_leases(table)
    return report


PURGE_DONE = "purged: every file reclaimed, the table dropped"


def _finish_purge(
    manager: LineageManager, state: TableState, files: list[FileInfo] | None, deleted: list[str]
) -> str:
    """Drop a purging table once nothing of it is left: no segment, no file
    queued, and nothing under its root this pass did not delete (a file seen
    unreferenced now waits for the orphan grace first). What became of it."""
    gone = set(deleted)
    left = [f.location for f in files or () if f.location not in gone and f.location not in state.pending]
    if state.segments or state.pending or files is None or left:
        waiting = len(state.pending) + len(left)
        return f"purging: {waiting} file(s) left to reclaim before the table goes"
    return _drop_purged(manager, state.config.name)


def _drop_purged(manager: LineageManager, table: str) -> str:
    """Drop a purged table, every file of it reclaimed; what became of it."""
    from segment_lineage.mirror.admin import drop_table

    try:
        drop_table(manager, table, reason="table drop --purge: every file reclaimed")
    except AuthError as exc:
        return (
            f"purging: every file reclaimed; dropping the table takes an admin ({exc.message}): "
            f"lineage table drop {table} --purge"
        )
    except TableNotFoundError:
        pass  # an admin finished it meanwhile
    return PURGE_DONE


def _told(exc: LineageError) -> str:
    """A table's failure as its report says it: the message, and what to do when the error says."""
    return f"{exc.message} (hint: {exc.remedy})" if exc.remedy else exc.message


def _check_share(state: TableState, current: Plan, options: PassOptions) -> None:
    """Refuse a pass that would take more than MAX_VISIBLE_SHARE of the rows
    readers see now (only time retention condemns visible data), unless
    allowed by name (--allow-large-cut; --force, which skips graces, does not
    lift it): a wrong time unit or a mistyped retention reads as 'all of it'."""
    if options.allow_large_cut or not current.condemn:
        return
    visible = visible_segments(state)
    condemned = [seg for seg in visible if seg.name in current.condemn]
    total, taken = sum(seg.rows for seg in visible), sum(seg.rows for seg in condemned)
    # Rows, and segments too: a segment registered by hand may say 0 rows.
    if (taken and taken > MAX_VISIBLE_SHARE * total) or len(condemned) > MAX_VISIBLE_SHARE * len(visible):
        raise RefusedError(
            f"this pass would condemn {len(condemned)} of the {len(visible)} segments visible in "
            f"{state.config.name!r} ({taken} of {total} rows; more than {MAX_VISIBLE_SHARE:.0%}); "
            "nothing was done",
            table=state.config.name,
            remedy="check the table's time retention and time unit ('lineage table show'), "
            "then run with --allow-large-cut if that is what you want",
        )


def _pending(report: TableReport, state: TableState) -> None:
    report.pending_left = len(state.pending)
    report.oldest_pending_ms = min((p.marked_ms for p in state.pending.values()), default=None)


def _fill(report: TableReport, current: Plan) -> None:
    report.condemned = len(current.condemn)
    report.orphans = len(current.orphans)
    report.entries_removed = len(current.remove_entries)
    report.stray_bytes = current.stray_bytes
    report.planned = current.deletions
    report.keep(current.kept)
    if report.dry_run:
        report.bytes_deleted = sum(d.size_bytes for d in current.deletions)


def run_pass(
    manager: LineageManager,
    tables: Sequence[str] | None = None,
    options: PassOptions | None = None,
) -> list[TableReport]:
    """One pass over ``tables`` (all when None). A table that fails is
    reported and skipped, with its error in its report: one whose metadata
    cannot be decoded too (``unreadable``), so an all-tables pass never
    passes over a table in silence. An unknown outcome or a lost fence stops
    the pass."""
    options = options or PassOptions()
    reports = []
    unreadable: Mapping[str, str] = {}
    if tables is None:
        listing = manager.table_listing()
        todo = sorted([*listing.readable, *listing.unreadable])
        unreadable = listing.unreadable
    else:
        todo = list(tables)
    for table in todo:
        if table in unreadable:
            skipped = TableReport(table, options.dry_run, unreadable=True)
            skipped.errors.append(f"skipped, its metadata is unreadable: {unreadable[table]}")
            reports.append(skipped)
            continue
        # A table's report is made here: what its pass deleted before a failure still counts.
        report = TableReport(table, options.dry_run)
        try:
            reports.append(run_table(manager, table, options, report))
        except FencedError as exc:
            exc.done[:0] = reports  # the tables before it, then its own
            raise
        except OutcomeUnknownError:
            raise
        except TableNotFoundError:  # dropped since it was listed (or during its pass): nothing to do
            report.note = "dropped before its pass finished: nothing more to do"
            reports.append(report)
        except LineageError as exc:
            report.unreadable = isinstance(exc, CorruptRecordError)
            report.errors.append(
                f"skipped, its metadata is unreadable: {exc.message}" if report.unreadable else _told(exc)
            )
            reports.append(report)
    return reports
