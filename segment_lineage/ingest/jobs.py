"""A batch job pushed more than once (a rerun, a retry after a lost reply):
its completed push found in the table's entries or history, its earlier
result reported instead of pushing again, and the last commit's check that
no other attempt of the job ended first, so a job's data lands once."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from segment_lineage.ingest.push_plan import PushMode, PushResult, _check_job_id, check_job
from segment_lineage.lineage.core.errors import ConflictError, LineageError
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Detail, EntryState, LineageEntry, Operation, TableState
from segment_lineage.lineage.manager import LineageManager


class JobDone(Exception):
    """Internal: the push's job completed earlier, as this entry."""

    def __init__(self, entry_id: str) -> None:
        super().__init__(entry_id)
        self.entry_id = entry_id


def job_end(
    manager: LineageManager, table: str, job_id: str | None, entry_id: str | None, above: int
) -> tuple[HistoryRecord | None, int]:
    """The newest END_REPLACE record of ``job_id`` (or of ``entry_id``) among
    the versions after ``above``, and the newest version the history holds."""
    newest = above
    for record in manager.iter_history(table):  # newest first, read only as far as needed
        newest = max(newest, record.version)
        if record.version <= above:
            break
        if record.operation is Operation.END_REPLACE and (
            (job_id is not None and record.job_id == job_id)
            or (entry_id is not None and record.entry_id == entry_id)
        ):
            return record, newest
    return None, newest


def earlier_result(
    manager: LineageManager,
    table: str,
    job_id: str,
    entry_id: str,
    mode: PushMode,
    clock: Callable[[], float],
    began: float,
) -> PushResult:
    """What the job's completed push reported, from its end's history record
    (its mode and audit as recorded there; ``mode`` where the record is gone)."""
    record, _ = job_end(manager, table, None, entry_id, 0)
    detail = record.detail if record is not None else None
    state = manager.table(table)
    entry = state.entries.get(entry_id)
    undone = entry is not None and entry.state is EntryState.REVERTED  # reverted or rolled back since
    if entry is None and record is not None:
        with contextlib.suppress(LineageError):  # the version before its end, while retained
            entry = manager.table_as_of(table, record.version - 1).entries.get(entry_id)
    segments, rows, size = _figures(record, entry, state)
    return PushResult(
        table=table,
        entry_id=entry_id,
        mode=_recorded_mode(detail, mode),
        segments=segments,
        rows=rows,
        size_bytes=size,
        replaced=None if entry is None else len(entry.segments_from),
        seconds=clock() - began,
        job_id=job_id,
        repeated=True,
        undone=undone,
        audited=detail.audit if detail is not None else None,
    )


def _recorded_mode(detail: Detail | None, mode: PushMode) -> PushMode:
    """The mode the push's end recorded, when it recorded one this version
    knows; else ``mode``."""
    if detail is not None and detail.mode:
        with contextlib.suppress(LineageError):
            return PushMode.parse(detail.mode)
    return mode


def _figures(
    record: HistoryRecord | None, entry: LineageEntry | None, state: TableState
) -> tuple[int, int, int]:
    """The push's segments, rows and bytes: as its end's record says, or
    (history compacted away) as what its entry still names."""
    if record is not None:
        return record.segments, record.rows, record.size_bytes
    assert entry is not None
    kept = [state.segments[n] for n in entry.segments_to if n in state.segments]
    return len(kept), sum(x.rows for x in kept), sum(x.size_bytes for x in kept)


def completed_job(
    manager: LineageManager,
    table: str,
    job_id: str,
    mode: PushMode | str | None = None,
    *,
    clock: Callable[[], float] | None = None,
) -> PushResult | None:
    """The result of ``job_id``'s completed push of ``table`` (reported as
    ``mode``), or None when the job has not completed there. ``clock``
    (monotonic seconds; default the manager's env's) times the look-up."""
    clock = clock or manager.env.monotonic
    return earlier_push(manager, table, _check_job_id(job_id), mode, clock, clock())[0]


def earlier_push(
    manager: LineageManager,
    table: str,
    job_id: str,
    mode: PushMode | str | None,
    clock: Callable[[], float],
    began: float,
) -> tuple[PushResult | None, int]:
    """The result of ``job_id``'s completed push of ``table`` (reported as
    ``mode``) or None, and how far into the history the look went."""
    earlier, checked = job_end(manager, table, job_id, None, 0)
    if earlier is None or earlier.entry_id is None:
        return None, checked
    done_as = PushMode.of(mode, manager.table(table).config)
    return earlier_result(manager, table, job_id, earlier.entry_id, done_as, clock, began), checked


def job_still_open(
    manager: LineageManager, table: str, job_id: str | None, entry_id: str, checked: int
) -> Callable[[TableState], None] | None:
    """The last commit's check, on the version it commits against, that no
    other attempt of ``job_id`` completed: one of the table's entries, or an
    end among the versions since ``checked`` (the history searched up to
    there: an attempt whose entry retention removed since) refuses the
    commit, so a job's data lands once whichever attempt ends first."""
    if job_id is None:
        return None
    seen = [checked]

    def check(state: TableState) -> None:
        done = check_job(state, job_id, frozenset())  # no owner is waited on here: its end is
        if done == entry_id:
            done = None
        if done is None and state.version > seen[0]:
            record, seen[0] = job_end(manager, table, job_id, None, seen[0])
            done = None if record is None or record.entry_id == entry_id else record.entry_id
        if done is not None:  # (a push whose claim lapsed meanwhile says that instead)
            raise ConflictError(
                f"job {job_id!r} already completed on table {table!r} as entry {done}; this attempt's "
                f"entry {entry_id} does not end (its data would land twice)",
                table=table,
                entry_id=entry_id,
                remedy="nothing to do: the job's data is there once",
            )

    return check
