"""Consistent push: the protocol around a batch write, whatever writes the files.

    hold owner -> start_replace -> write -> register, queue strays and end (one commit)

The new segments become visible together at that last commit, or never. On any
failure (an exception, a failed Spark job, Ctrl-C, SIGTERM) the entry is
reverted with force, best effort, and the files written are queued for
retention; if even that fails, the next push cleans up (force cleanup of an
entry whose owner's session is gone). After an unknown outcome nothing is
cleaned up: the entry is left for the next push to judge.

The segment writer is a callback (the Spark job in :mod:`segment_lineage.ingest.spark_job`,
or anything else), so this module imports no Spark.

A job id makes a push idempotent (as delta-rs's application transactions):
when a push of that job already completed on the table (its end is among the
history records the table keeps), nothing is written and that push's result
comes back (``repeated``); while another attempt of the job runs, this one
waits for it like for any running push. So a batch job retried after a lost
answer, or after its scheduler crashed, never applies its data twice.

A push reads time only through its ``clock`` (monotonic seconds: how long it
took, the owner wait's deadline), ``sleep`` (the owner wait) and ``wall``
(seconds since the epoch: the stamp in its segment names); by default the
manager's env's (:mod:`segment_lineage.lineage.core.env`), which also makes
its entry id.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from segment_lineage.ingest.audit import Audit, Judgement, judge_push
from segment_lineage.ingest.errors import PushRefusedError
from segment_lineage.ingest.interrupts import signals_as_interrupt
from segment_lineage.ingest.jobs import JobDone, earlier_push, earlier_result, job_end, job_still_open
from segment_lineage.ingest.push_dry_run import plan_push
from segment_lineage.ingest.push_failure import PushRun
from segment_lineage.ingest.push_plan import (
    PushMode,
    PushResult,
    PushTarget,
    Written,
    _check_job_id,
    check_job,
    check_mode,
    check_rows_within,
    parse_interval,
    plan_from,
    push_stamp,
    segment_names,
)
from segment_lineage.ingest.stage import stage_end, stage_hold
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import (
    ClaimLostError,
    LineageError,
    RunningEntryConflict,
)
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.model import (
    Change,
    TableState,
    TableType,
    TimeUnit,
)
from segment_lineage.lineage.core.names import push_dir
from segment_lineage.lineage.core.schema import Schema, SchemaPolicy, resolve
from segment_lineage.lineage.core.staged import Staged
from segment_lineage.lineage.manager import LineageManager

__all__ = [  # what callers take from here; the pure half lives in push_plan
    "PushMode",
    "PushResult",
    "PushTarget",
    "Written",
    "check_rows_within",
    "consistent_push",
    "parse_interval",
    "plan_push",
]

log = logging.getLogger(__name__)


def _start(
    manager: LineageManager,
    table: str,
    mode: PushMode,
    target: PushTarget,
    reason: str | None,
    owner_wait_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    job_id: str | None = None,
    job_checked: int = 0,
) -> tuple[tuple[str, ...], int, tuple[str, ...]]:
    """start_replace with ``from`` computed from the state it commits against;
    returns that ``from``, its rows, and the stale entries force cleanup reverted.

    An overlapping entry whose pusher may have just died keeps its owner node
    until its session expires: wait up to ``owner_wait_s`` for that (on
    ``clock``, looking again every half second with ``sleep``). An entry
    opened by hand is taken only once its hold ended. With ``job_id`` (whose
    history was searched up to version ``job_checked``), JobDone when the
    job completed meanwhile: checked in the commit, so two attempts of one
    job never both start.
    """
    audit = manager.audit(reason)
    planned: list[tuple[tuple[str, ...], int]] = []  # what each attempt replaces, and its rows
    checked = [job_checked]

    def update(state: TableState, now: int) -> Change:
        # Owners are read after the state, on every attempt: a push creates its
        # owner node before its entry, so every entry in this state whose
        # pusher is alive shows up here as live.
        owners = manager.live_owners(table) - {target.entry_id}
        if job_id is not None:
            done = check_job(state, job_id, owners)
            if done is None and state.version > checked[0]:  # ends since the search, maybe removed since
                record, checked[0] = job_end(manager, table, job_id, None, checked[0])
                done = None if record is None else record.entry_id
            if done is not None:
                raise JobDone(done)
        src = plan_from(state, mode, target.interval)
        planned.append((src, sum(state.segments[n].rows for n in src)))
        return transitions.start_replace(
            state,
            src,
            target.names,
            entry_id=target.entry_id,
            audit=audit,
            now_ms=now,
            force_cleanup=True,
            interval=target.interval,
            live_owners=owners,
            whole=mode is PushMode.REFRESH,
        )

    deadline = clock() + owner_wait_s
    while True:
        try:
            done = manager.commit(table, update, reason, owner=target.entry_id)
            src, rows = planned[-1]
            return src, rows, done.change.cleaned
        except RunningEntryConflict as exc:
            if clock() >= deadline:
                raise
            log.info("waiting for entry %s: %s", exc.entry_id, exc.message)
            sleep(0.5)


def consistent_push(
    manager: LineageManager,
    table: str,
    write: Callable[[PushTarget], Written],
    *,
    partitions: int,
    mode: PushMode | str | None = None,
    interval: tuple[int, int] | None = None,
    reason: str | None = None,
    owner_wait_s: float = 15.0,
    progress: Callable[[str], None] | None = None,
    job_id: str | None = None,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
    wall: Callable[[], float] | None = None,
    schema: Schema | None = None,
    schema_policy: SchemaPolicy | str = SchemaPolicy.ENFORCE,
    time_unit: TimeUnit | None = None,
    audit: Audit | None = None,
    stage: bool = False,
    hold: str | None = None,
) -> PushResult:
    """Run ``write`` inside a consistent push of ``table``.

    ``schema`` names the columns ``write`` writes: checked against the
    table's recorded schema under ``schema_policy`` before the push starts,
    and again in its last commit, which records it at the table's first push
    (see :mod:`segment_lineage.lineage.core.schema`). None: no check (files
    whose columns the caller vouches for). ``time_unit``: the unit the writer
    read an integer time column in, recorded by the last commit when the
    table has none (refused there when it has another).

    ``job_id`` makes the push idempotent (the module's docstring says how).
    ``clock``, ``sleep`` and ``wall`` are the only clocks it reads (ditto).
    ``audit``: checks the written data must pass before the entry ends
    (:mod:`segment_lineage.ingest.audit`; AuditFailedError: reverted).
    ``stage``: leave the entry staged instead of ending it, held for ``hold``
    (a period; default the table's lineage entry cleanup retention) until
    :func:`segment_lineage.ingest.stage.publish` ends it or a revert drops it.

    Raises PushRefusedError (nothing written: bad mode, interval or input),
    ConflictError (another push holds the scope), PushError (the write failed;
    the entry was reverted), OutcomeUnknownError (re-read before retrying).
    """
    env = manager.env
    clock, sleep, wall = clock or env.monotonic, sleep or env.sleep, wall or env.wall
    began = clock()
    say = progress or (lambda _msg: None)
    if job_id is not None:
        manager = manager.for_job(_check_job_id(job_id))
    earlier, job_checked = _done_before(manager, table, job_id, mode, say, clock, began)
    if earlier is not None:
        return earlier
    state = manager.table(table)
    mode = PushMode.of(mode, state.config)
    check_mode(state, mode, interval)
    policy = SchemaPolicy.parse(schema_policy)
    target = _target(state, mode, interval, schema, policy, partitions, wall, env.text_id)
    if audit:
        audit.check_before(schema, state.config.schema)
    ends = _Ending(reason, schema, policy, mode, time_unit, job_id, job_checked, audit or None,
                   stage_hold(stage, hold, job_id))  # fmt: skip
    run = PushRun(manager, target)
    with _claimed(manager, target):
        try:
            with signals_as_interrupt():
                try:
                    started = _begin(run, ends, owner_wait_s, clock, sleep, say)
                except JobDone as done:  # completed meanwhile, by another attempt of the job
                    assert job_id is not None
                    say(f"job {job_id!r} completed meanwhile as entry {done.entry_id}: nothing to push")
                    return earlier_result(manager, table, job_id, done.entry_id, mode, clock, began)
                written = _write_and_end(run, write, ends, say)
        except BaseException as exc:
            error = run.failure(exc, job_id)
            if error is exc:
                raise
            raise error from None if isinstance(error, ClaimLostError) else exc  # a lost claim: one line
    hides = mode is PushMode.REFRESH and state.config.table_type is TableType.APPEND
    return _result(run, mode, written, started, clock() - began, job_id, hides)


def _done_before(
    manager: LineageManager,
    table: str,
    job_id: str | None,
    mode: PushMode | str | None,
    say: Callable[[str], None],
    clock: Callable[[], float],
    began: float,
) -> tuple[PushResult | None, int]:
    """The job's earlier completed push, if any (nothing to push again), and
    how far into the history the look went (none without a job)."""
    if job_id is None:
        return None, 0
    earlier, checked = earlier_push(manager, table, job_id, mode, clock, began)
    if earlier is not None:
        say(f"job {job_id!r} already completed as entry {earlier.entry_id}: nothing to push")
    return earlier, checked


@contextlib.contextmanager
def _claimed(manager: LineageManager, target: PushTarget, doing: str = "a push") -> Iterator[None]:
    """The push's owner claim, held while it runs (its session's end lets
    others clean up after it); released at the end, best effort."""
    owner = manager.owner_hold(target.table, target.entry_id, doing=doing)
    failpoint("push.before-start")
    owner.take()
    try:
        yield
    finally:
        with contextlib.suppress(LineageError):
            owner.release()


def _result(
    run: PushRun,
    mode: PushMode,
    written: Written,
    started: tuple[tuple[str, ...], int, tuple[str, ...]],
    seconds: float,
    job_id: str | None,
    hides: bool,
) -> PushResult:
    """What a push did: ``started`` is what its start replaced, those rows,
    and the stale entries it cleaned up; with its audit's verdict and its
    hold when staged."""
    replaced, replaced_rows, cleaned = started
    segments, target = written.segments, run.target
    return PushResult(
        table=target.table, entry_id=target.entry_id, mode=mode, segments=len(segments),
        rows=sum(s.rows for s in segments), size_bytes=sum(s.size_bytes for s in segments),
        replaced=len(replaced), seconds=seconds, cleaned=cleaned, job_id=job_id,
        replaced_rows=replaced_rows, hides_appended=hides,
        audited=None if run.judged is None else run.judged.recorded, staged_until_ms=run.staged_until_ms,
    )  # fmt: skip


def _begin(
    run: PushRun,
    ends: _Ending,
    owner_wait_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    say: Callable[[str], None],
) -> tuple[tuple[str, ...], int, tuple[str, ...]]:
    """Start the push's entry (:func:`_start`), and say so."""
    target = run.target
    replaced, replaced_rows, cleaned = _start(
        run.manager, target.table, ends.mode, target, ends.reason, owner_wait_s, clock, sleep,
        ends.job_id, ends.job_checked,
    )  # fmt: skip
    run.started = True
    replacing = f"replacing {len(replaced)} segment(s) with up to {len(target.names)}"
    say(f"started entry {target.entry_id}: {replacing}")
    for stale in cleaned:
        say(
            f"cleaned up stale entry {stale} (its push's session ended): reverted; what it had "
            "registered is queued for retention, files it wrote but never registered wait out the "
            "orphan grace"
        )
    return replaced, replaced_rows, cleaned


def _target(
    state: TableState,
    mode: PushMode,
    interval: tuple[int, int] | None,
    schema: Schema | None,
    policy: SchemaPolicy,
    partitions: int,
    wall: Callable[[], float],
    new_id: Callable[[], str],
) -> PushTarget:
    """What the push will write, once its schema and partitions were checked
    against the table, its mode and interval already checked (PushRefusedError:
    nothing written)."""
    table = state.config.name
    if schema is not None:
        resolve(state.config.schema, schema, policy, table, full_refresh=mode is PushMode.REFRESH)
    if partitions < 1:
        raise PushRefusedError(f"a push needs at least one partition, got {partitions}")
    stamp = push_stamp(dt.datetime.fromtimestamp(wall(), tz=dt.UTC))
    entry_id = new_id()
    return PushTarget(
        table=table,
        root=state.config.root,
        entry_id=entry_id,
        push_dir=push_dir(stamp, entry_id),
        names=segment_names(table, stamp, entry_id, partitions),
        time_column=state.config.time_column,
        interval=interval,
    )


@dataclass(frozen=True)
class _Ending:
    """What the push's last commit checks and records."""

    reason: str | None
    schema: Schema | None
    policy: SchemaPolicy
    mode: PushMode
    time_unit: TimeUnit | None
    job_id: str | None
    job_checked: int
    audit: Audit | None = None
    stage: int | None = None  # a staged push's hold in ms (0: the table's default); None: not staged


def _write_and_end(
    run: PushRun, write: Callable[[PushTarget], Written], ends: _Ending, say: Callable[[str], None]
) -> Written:
    """Write the files, then register them, queue the strays and end the
    entry in one commit (fenced by the push's claim)."""
    manager, target = run.manager, run.target
    failpoint("push.after-start")
    written = run.written = write(target)
    failpoint("push.after-write")
    if not written.segments:
        raise PushRefusedError("the input has no rows; nothing was pushed")
    rows = sum(s.rows for s in written.segments)
    size = sum(s.size_bytes for s in written.segments)
    say(f"wrote {len(written.segments)} segment(s), {rows} rows, {size} bytes")
    names = [s.name for s in written.segments]
    subset = names if len(names) < len(target.names) else None
    job_check = job_still_open(manager, target.table, ends.job_id, target.entry_id, ends.job_checked)
    audited = run.judged = _judged(run, written, ends.audit, say)
    if ends.stage is not None:
        run.staged_until_ms = stage_end(run, _staging(ends), ends.stage, ends.reason, audited)
        failpoint("push.after-end")
        return written
    manager.complete_replace(
        target.table,
        target.entry_id,
        written.segments,
        strays=written.strays,
        to_subset=subset,
        reason=ends.reason,
        schema=ends.schema,
        schema_policy=ends.policy,
        mode=ends.mode.value,
        time_unit=ends.time_unit,
        owned=True,
        check=job_check,
        audit=audited,
    )
    failpoint("push.after-end")
    return written


def _judged(
    run: PushRun, written: Written, audit: Audit | None, say: Callable[[str], None]
) -> Judgement | None:
    """The audit's verdict on the written files (None: no audit);
    AuditFailedError when they fail it."""
    if audit is None:
        return None
    target = run.target
    state = run.manager.table(target.table)
    judged, passed = judge_push(state, audit, target.table, target.entry_id, written.segments)
    failpoint("push.after-audit")
    say(f"audit {passed}")
    return judged


def _staging(ends: _Ending, set_id: str | None = None, tables: tuple[str, ...] = ()) -> Staged:
    """What a staged push's publish commits with, as its end would have
    (``set_id`` and ``tables``: the push set it was staged in)."""
    audit = None if ends.audit is None else ends.audit.to_text()
    unit = None if ends.time_unit is None else ends.time_unit.value
    return Staged(ends.mode.value, ends.policy.value, ends.schema, unit, audit, set_id, tables)
