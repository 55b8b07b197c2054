"""A push set: several tables pushed as one, so readers never see one
table's new rows beside another's old ones (a fact table and its
dimensions rebuilt together).

    for each table: hold owner -> start_replace -> write (as a push does)
    then: every entry ends in one commit (one ZooKeeper multi), or none

Each table's entry is started and its files written as a single push's
are; then :meth:`~segment_lineage.lineage.manager.LineageManager.commit_together`
registers every table's files and ends every entry in one request, each
table's part fenced as a push's end is (its owner claim, its head's
version, its job's other attempts, its audit judged again on the version it
lands on). A failure in any table, before or at that commit (bad input, a
refusal, a conflict, a lost claim, Ctrl-C), reverts every entry of the set,
and the error names the table and the reason. After an unknown outcome
nothing is cleaned up: the set landed everywhere or nowhere, and the next
push of each table judges its entry.

Every version the set makes carries the set's id in its history record
(``lineage history``); ``lineage rollback --set ID`` undoes a set in one
commit, and :meth:`segment_lineage.ingest.readers.SnapshotReader.together` reads tables at
versions current together.

A job id (the set's, or one table's own) makes the set idempotent: when
every table's job already completed, nothing is pushed and the earlier
pushes are reported; when only some did, the set is refused (it could not
be applied as one).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from segment_lineage.ingest.audit import judge_push
from segment_lineage.ingest.errors import PushInterrupted, PushRefusedError, PushSetInterrupted
from segment_lineage.ingest.interrupts import signals_as_interrupt
from segment_lineage.ingest.jobs import JobDone, earlier_result, job_end, job_still_open
from segment_lineage.ingest.push import _begin, _claimed, _Ending, _result, _staging, _target
from segment_lineage.ingest.push_dry_run import plan_push
from segment_lineage.ingest.push_failure import PushRun
from segment_lineage.ingest.push_plan import Prepared, PushMode, PushResult, _check_job_id, check_mode
from segment_lineage.ingest.stage import publish_update, stage_hold
from segment_lineage.lineage.core.errors import LineageError, NotFoundError, OutcomeUnknownError
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.model import EntryState, TableType
from segment_lineage.lineage.core.names import check_set_id, resolve_set_id
from segment_lineage.lineage.core.staged import Staged
from segment_lineage.lineage.manager import LineageManager, TableHold
from segment_lineage.lineage.manager.replace import complete_update, stage_update
from segment_lineage.lineage.manager.together import Together, check_set_tables


@dataclass(frozen=True)
class SetResult:
    """What a push set did: its id and each table's push, in the set's order."""

    set_id: str | None  # None: a dry run's (unless given), or a repeated job's not pushed as one set
    pushes: tuple[PushResult, ...]
    seconds: float
    repeated: bool = False  # every table's job had completed: nothing was pushed; set_id is the set it did
    dry_run: bool = False


@dataclass
class _Member:
    """One table of a set under way."""

    prepared: Prepared
    run: PushRun
    ends: _Ending
    hides: bool  # a refresh of an APPEND table: it hides what was appended
    started: tuple[tuple[str, ...], int, tuple[str, ...]] = ((), 0, ())


def push_set(
    manager: LineageManager,
    pushes: Sequence[Prepared],
    *,
    reason: str | None = None,
    job_id: str | None = None,
    dry_run: bool = False,
    owner_wait_s: float = 15.0,
    progress: Callable[[str], None] | None = None,
    set_id: str | None = None,
    stage: bool = False,
    hold: str | None = None,
) -> SetResult:
    """Push every table of ``pushes`` (:func:`~segment_lineage.ingest.arrow_push.prepare_arrow`,
    :func:`~segment_lineage.ingest.spark_job.prepare_dataframe`) as one (the
    module's docstring says how). ``job_id``: every table's job, unless its
    push names its own. ``dry_run``: every check, then what each push would
    do; nothing written. ``set_id``: the id its records carry (default: a
    new one); a caller's own must be new to every table. ``stage``: every
    table's push staged (held for ``hold``) in one commit instead of shown;
    :func:`publish_set` shows them all in one commit."""
    clock, say = manager.env.monotonic, progress or (lambda _msg: None)
    began = clock()
    check_set_tables([p.table for p in pushes])
    jobs = {p.table: _job(p.job_id or job_id) for p in pushes}
    hold_ms = stage_hold(stage, hold, next((j for j in jobs.values() if j is not None), None))
    done, checked = _jobs_done(manager, pushes, jobs)
    if done is not None:
        earlier, results = done
        return SetResult(earlier, results, clock() - began, repeated=True, dry_run=dry_run)
    if dry_run:
        planned = _planned(manager, pushes, jobs, reason)
        return SetResult(set_id, planned, clock() - began, dry_run=True)  # a new id is made at the push
    set_id = set_id or manager.env.text_id()
    members = [_member(manager, p, jobs[p.table], checked.get(p.table, 0), reason, hold_ms) for p in pushes]
    say(f"push set {set_id}: {len(members)} table(s): {', '.join(p.table for p in pushes)}")
    _run(manager, members, set_id, reason, owner_wait_s, say)
    results = tuple(_member_result(m, clock() - began, set_id) for m in members)
    return SetResult(set_id, results, clock() - began)


def _job(job_id: str | None) -> str | None:
    return None if job_id is None else _check_job_id(job_id)


def _jobs_done(
    manager: LineageManager, pushes: Sequence[Prepared], jobs: dict[str, str | None]
) -> tuple[tuple[str | None, tuple[PushResult, ...]] | None, dict[str, int]]:
    """When every table's job completed, the set those pushes ended in (None
    when they did not end in one set) and each table's earlier push (None
    when none did, or no job was named; PushRefusedError when only some
    did); and the version each table's history was searched up to, which
    the set's start and commit search on from."""
    done, sets, checked = _job_ends(manager, pushes, jobs)
    if not done:
        return None, checked
    if len(done) < len(pushes):
        left = [p.table for p in pushes if p.table not in done]
        raise PushRefusedError(
            f"the set's job already completed in {', '.join(sorted(done))} but not in {', '.join(left)}: "
            "it could not be applied as one",
            remedy="push the tables left with a job id of their own, or the whole set with a new job id",
        )
    clock = manager.env.monotonic
    results = tuple(
        earlier_result(manager.for_job(jobs[p.table]), p.table, jobs[p.table] or "", done[p.table], p.mode,
                       clock, clock())
        for p in pushes
    )  # fmt: skip
    return (sets.pop() if len(sets) == 1 else None, results), checked


def _job_ends(
    manager: LineageManager, pushes: Sequence[Prepared], jobs: dict[str, str | None]
) -> tuple[dict[str, str], set[str | None], dict[str, int]]:
    """Each table's job's completed entry (tables whose job has none are
    left out), the sets those ends were part of, and how far each table's
    history was searched."""
    done: dict[str, str] = {}
    sets: set[str | None] = set()
    checked: dict[str, int] = {}
    for p in pushes:
        job = jobs[p.table]
        if job is not None:
            record, checked[p.table] = job_end(manager, p.table, job, None, 0)
            if record is not None and record.entry_id is not None:
                done[p.table] = record.entry_id
                sets.add(record.set_id)
    return done, sets, checked


def _planned(
    manager: LineageManager, pushes: Sequence[Prepared], jobs: dict[str, str | None], reason: str | None
) -> tuple[PushResult, ...]:
    """A dry run: what each table's push would do."""
    return tuple(dataclasses.replace(_plan(manager, p, reason), job_id=jobs[p.table]) for p in pushes)


def _plan(manager: LineageManager, p: Prepared, reason: str | None) -> PushResult:
    return plan_push(
        manager, p.table, partitions=p.filled or p.partitions, rows=p.rows or 0, mode=p.mode,
        interval=p.interval, schema=p.schema, schema_policy=p.schema_policy, audit=p.audit, reason=reason,
    )  # fmt: skip


def _member(
    manager: LineageManager, p: Prepared, job_id: str | None, checked: int, reason: str | None,
    hold_ms: int | None,
) -> _Member:  # fmt: skip
    """A table of the set, checked against the table as a push is before it
    starts (nothing of the set is started until every table passed)."""
    state = manager.table(p.table)
    check_mode(state, p.mode, p.interval)
    target = _target(state, p.mode, p.interval, p.schema, p.schema_policy, p.partitions, manager.env.wall,
                     manager.env.text_id)  # fmt: skip
    if p.audit:
        p.audit.check_before(p.schema, state.config.schema)
    ends = _Ending(
        reason, p.schema, p.schema_policy, p.mode, p.time_unit, job_id, checked, p.audit or None, hold_ms
    )
    hides = p.mode is PushMode.REFRESH and state.config.table_type is TableType.APPEND
    return _Member(p, PushRun(manager.for_job(job_id), target), ends, hides)


def _run(
    manager: LineageManager,
    members: list[_Member],
    set_id: str,
    reason: str | None,
    owner_wait_s: float,
    say: Callable[[str], None],
) -> None:
    """Start, write and end every table; on any failure, revert them all."""
    current: list[str] = []  # the table being worked on (its name names a failure)
    with contextlib.ExitStack() as claims:
        try:
            with signals_as_interrupt():
                _start_all(manager, members, claims, current, owner_wait_s, say)
                failpoint("set.after-start")
                for m in members:
                    current[:] = [m.run.target.table]
                    _write(m, say)
                failpoint("set.after-write")
                current.clear()
                tables = tuple(m.run.target.table for m in members)
                parts = [_ending(m, set_id, tables) for m in members]
                done = manager.commit_together(parts, reason, set_id=set_id)
                failpoint("set.after-end")
        except BaseException as exc:
            error = _failed(members, exc, current, set_id)
            if error is exc:
                raise
            raise error from None
    for m, committed in zip(members, done, strict=True):
        if m.ends.stage is not None:
            m.run.staged_until_ms = committed.state.entries[m.run.target.entry_id].held_until_ms


def _start_all(
    manager: LineageManager,
    members: list[_Member],
    claims: contextlib.ExitStack,
    current: list[str],
    owner_wait_s: float,
    say: Callable[[str], None],
) -> None:
    """Claim and start every table's entry (``current``: the table being
    started), in the tables' name order: two sets of the same tables queue
    behind each other's entries instead of each holding one table the other
    waits for."""
    for m in sorted(members, key=lambda m: m.run.target.table):
        current[:] = [m.run.target.table]
        claims.enter_context(_claimed(m.run.manager, m.run.target, "a push set"))
        told = _told(say, m.run.target.table)
        m.started = _begin(m.run, m.ends, owner_wait_s, manager.env.monotonic, manager.env.sleep, told)


def _told(say: Callable[[str], None], table: str) -> Callable[[str], None]:
    return lambda message: say(f"{table}: {message}")


def _write(m: _Member, say: Callable[[str], None]) -> None:
    run, target = m.run, m.run.target
    written = run.written = m.prepared.write(target)
    if not written.segments:
        raise PushRefusedError("the input has no rows; nothing was pushed")
    rows = sum(s.rows for s in written.segments)
    say(f"{target.table}: wrote {len(written.segments)} segment(s), {rows} rows")
    if m.ends.audit is not None:
        state = run.manager.table(target.table)
        run.judged, passed = judge_push(state, m.ends.audit, target.table, target.entry_id, written.segments)
        say(f"{target.table}: audit {passed}")


def _ending(m: _Member, set_id: str, tables: tuple[str, ...]) -> Together:
    """The table's part of the set's commit: a push's end (or its staging),
    fenced as one."""
    run, target, ends = m.run, m.run.target, m.ends
    written = run.written
    assert written is not None
    if ends.stage is not None:
        staged = _staging(ends, set_id, tables)
        update = stage_update(target.entry_id, written.segments, staged, hold_ms=ends.stage or None,
                              strays=written.strays, audit=run.judged)  # fmt: skip
        return Together(target.table, update, owner=target.entry_id)
    names = [s.name for s in written.segments]
    update = complete_update(
        target.entry_id, written.segments, strays=written.strays,
        to_subset=names if len(names) < len(target.names) else None, schema=ends.schema,
        schema_policy=ends.policy, mode=ends.mode.value, time_unit=ends.time_unit,
        check=job_still_open(run.manager, target.table, ends.job_id, target.entry_id, ends.job_checked),
        audit=run.judged,
    )  # fmt: skip
    return Together(target.table, update, owner=target.entry_id, job_id=ends.job_id)


def _failed(members: list[_Member], exc: BaseException, current: list[str], set_id: str) -> BaseException:
    """Every table of the set cleaned up as a failed push is; the error to
    raise: the failing table's, saying it failed the whole set."""
    failing = current[0] if current else getattr(exc, "table", None)
    if isinstance(exc, JobDone):  # another attempt of a table's job completed meanwhile
        exc = PushRefusedError(
            f"another attempt of the job completed in table {failing!r} meanwhile as entry {exc.entry_id}"
        )
    errors = {m.run.target.table: m.run.failure(exc, m.ends.job_id) for m in members}
    chosen = errors.get(failing or "", next(iter(errors.values())))
    if isinstance(chosen, PushInterrupted):  # the whole set was stopped, not the table it was on
        cleanups = {m.run.target.table: m.run.cleanup or "nothing" for m in members}
        return PushSetInterrupted(set_id, chosen.signum, cleanups)
    if isinstance(chosen, LineageError):
        _say_set_failed(chosen, members, failing, set_id)
    return chosen


def _say_set_failed(error: LineageError, members: list[_Member], failing: str | None, set_id: str) -> None:
    """``error``'s message made the set's: the set, the failing table (unless
    it names it already) and what became of the other tables' entries."""
    where = f"table {failing!r}: " if failing and repr(failing) not in error.message else ""
    after = "" if isinstance(error, OutcomeUnknownError) else _others_said(members, failing)
    error.args = (f"push set {set_id} failed: {where}{error.message}{after}", *error.args[1:])


def _others_said(members: list[_Member], failing: str | None) -> str:
    """What became of the set's other started entries (every started entry,
    when no one table failed): reverted, or left for the next push's cleanup."""
    which = "other entries" if failing else "entries"
    others = [m.run for m in members if m.run.started and m.run.target.table != failing]
    reverted = [r.target.table for r in others if r.cleanup == "reverted"]
    left = [r.target.table for r in others if r.cleanup == "left"]
    said = f"; the set's {which} ({', '.join(reverted)}) were reverted with it" if reverted else ""
    if left:
        said += (
            f"; the set's {which} in {', '.join(left)} could not be cleaned up "
            "(the next push there cleans them up)"
        )
    return said


def _member_result(m: _Member, seconds: float, set_id: str) -> PushResult:
    written = m.run.written
    assert written is not None
    result = _result(m.run, m.ends.mode, written, m.started, seconds, m.ends.job_id, m.hides)
    return dataclasses.replace(result, staged_set=set_id) if result.staged else result


def staged_set(manager: LineageManager, set_id: str) -> dict[str, str]:
    """Table -> entry of every push the set ``set_id`` staged; NotFoundError
    when no table has one, PushRefusedError when the set is no longer whole
    (one of its staged pushes was reverted, cleaned up or published)."""
    return _staged_set(manager, set_id)[1]


def _staged_set(manager: LineageManager, set_id: str) -> tuple[str, dict[str, str]]:
    """:func:`staged_set`, and the set's whole id (``set_id`` may be a prefix of it)."""
    check_set_id(set_id)
    staged = _staged_pushes(manager)
    set_id = resolve_set_id(set_id, (s.set_id for _, _, s in staged if s.set_id is not None)) or set_id
    found: dict[str, str] = {}
    tables: tuple[str, ...] = ()
    for table, entry_id, s in staged:
        if s.set_id == set_id:
            found[table], tables = entry_id, s.set_tables
    return set_id, _whole_set(set_id, found, tables)


def _staged_pushes(manager: LineageManager) -> list[tuple[str, str, Staged]]:
    """Table, entry id and staging of every staged push of every table."""
    return [
        (table, entry.entry_id, entry.staged)
        for table in manager.list_tables()
        for entry in manager.table(table).entries.values()
        if entry.state is EntryState.IN_PROGRESS and entry.staged is not None
    ]


def _whole_set(set_id: str, found: dict[str, str], tables: tuple[str, ...]) -> dict[str, str]:
    """Table -> entry of the set, in the set's order, once every one of its
    ``tables`` is among the staged pushes ``found``."""
    if not found:
        raise NotFoundError(
            f"no table has a staged push of set {set_id!r}",
            remedy="'lineage entries TABLE' shows a table's staged pushes",
        )
    missing = [t for t in tables if t not in found]
    if missing:
        raise PushRefusedError(
            f"push set {set_id} is no longer whole: its staged push in {', '.join(missing)} was reverted, "
            "cleaned up or published; nothing was published",
            remedy="revert its other staged pushes ('lineage revert TABLE ENTRY'), then push the set again",
        )
    return {t: found[t] for t in tables}


def publish_set(
    manager: LineageManager,
    set_id: str,
    *,
    reason: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> SetResult:
    """Publish every table a staged push set staged, in one commit: each
    table's audit runs again under its entry's owner claim (one publisher at
    a time), then one request ends every entry, or none (a failing audit or
    any refusal leaves them all staged)."""
    began = manager.env.monotonic()
    say = progress or (lambda _msg: None)
    set_id, entries = _staged_set(manager, set_id)  # the whole id, when given a prefix
    with contextlib.ExitStack() as claims:
        for table, entry_id in entries.items():
            owner = manager.owner_hold(table, entry_id, doing="publishing a staged push set")
            owner.take()
            claims.callback(_release, owner)
        endings = {t: publish_update(manager, t, e, (), say) for t, e in entries.items()}
        parts = [Together(t, endings[t].update, owner=e) for t, e in entries.items()]
        manager.commit_together(parts, reason, set_id=set_id)
    seconds = manager.env.monotonic() - began
    return SetResult(set_id, tuple(e.done(seconds) for e in endings.values()), seconds)


def _release(owner: TableHold) -> None:
    with contextlib.suppress(LineageError):
        owner.release()
