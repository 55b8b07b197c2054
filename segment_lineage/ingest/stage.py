"""Staged pushes: written and audited now, shown later (write-audit-publish).

``push --stage`` runs a push up to its last commit, which registers its files
and keeps its entry IN_PROGRESS (:func:`stage_end`): held for a while (no
other push's force cleanup and no retention pass takes it before the hold
ends), with what its publish needs (:class:`~segment_lineage.lineage.core.staged.Staged`),
and its owner claim released, so the pushing process may exit. Readers see
none of it. Then:

- :func:`staged_segments` is the snapshot readers would see once it is
  published (``lineage read T --entry ID``);
- :func:`publish` ends the entry, after running its audit again (its stored
  checks, and any Python checks the caller gives), under the entry's owner
  claim as a push's end is: one publisher at a time, and a publisher paused
  past its session commits nothing;
- ``lineage revert T ID`` drops it (its files are reclaimed by retention).

A staged entry left alone is cleaned up like an entry opened by hand: once
its hold ends, by the next overlapping push's force cleanup or by retention.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from segment_lineage.ingest.audit import Audit, Check, Judgement, judge_push
from segment_lineage.ingest.errors import PushInputError, PushRefusedError
from segment_lineage.ingest.push_failure import PushRun
from segment_lineage.ingest.push_plan import PushMode, PushResult
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import EntryNotFoundError, InvalidInputError, LineageError
from segment_lineage.lineage.core.model import EntryState, LineageEntry, Segment, TableState, TimeUnit
from segment_lineage.lineage.core.periods import parse_period
from segment_lineage.lineage.core.schema import SchemaPolicy
from segment_lineage.lineage.core.staged import Staged
from segment_lineage.lineage.core.visibility import visible_segments
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.manager.commit import Update
from segment_lineage.lineage.manager.replace import complete_update


def stage_hold(stage: bool, hold: str | None, job_id: str | None) -> int | None:
    """A staged push's hold in ms (0: the table's lineage entry cleanup
    retention), or None: not staged. PushInputError for a hold without
    ``stage``, a hold that is not a positive period, or a job id."""
    if not stage:
        if hold is not None:
            raise PushInputError("--hold goes only with --stage")
        return None
    if job_id is not None:
        raise PushInputError(
            "--stage does not go with --job-id: a staged push becomes the job's only once published; "
            "publish it ('lineage publish') rather than pushing the job again"
        )
    if hold is None:
        return 0
    try:
        held = parse_period(hold)
    except InvalidInputError as exc:
        raise PushInputError(f"invalid --hold {hold!r}: {exc.message}") from None
    if held <= 0:
        raise PushInputError(f"invalid --hold {hold!r}: a staged push is held for some time")
    return held


def stage_end(
    run: PushRun, staged: Staged, hold_ms: int, reason: str | None, judged: Judgement | None
) -> int:
    """A staged push's last commit, fenced by its claim as an end is: its
    files registered, its entry kept with ``staged`` for ``hold_ms`` (0: the
    table's default). Returns the time its hold ends (store clock, ms)."""
    table, entry_id, written = run.target.table, run.target.entry_id, run.written
    assert written is not None
    done = run.manager.stage_replace(
        table, entry_id, written.segments, staged=staged, hold_ms=hold_ms or None, strays=written.strays,
        reason=reason, audit=judged,
    )  # fmt: skip
    held = done.state.entries[entry_id].held_until_ms
    assert held is not None
    return held


def staged_entry(state: TableState, entry_id: str) -> tuple[LineageEntry, Staged]:
    """The staged push ``entry_id`` of ``state``; EntryNotFoundError when the
    table has no such entry, PushRefusedError (saying what it is instead)
    when it is no staged push, or one whose files were reclaimed."""
    entry = state.entries.get(entry_id)
    table = state.config.name
    if entry is None:
        raise EntryNotFoundError(table, entry_id)
    if entry.state is EntryState.IN_PROGRESS and entry.staged is not None:
        if not _registered(state, entry):
            raise PushRefusedError(
                f"staged push {entry_id} of table {table!r} has no file left: its hold ended and "
                "retention reclaimed them",
                remedy=f"drop it ('lineage revert {table} {entry_id}') and push again",
            )
        return entry, entry.staged
    if entry.state is EntryState.COMPLETED:
        what = "COMPLETED: it was published (or was never staged)"
    elif entry.state is EntryState.REVERTED:
        what = "REVERTED: it was dropped, or its hold ended and it was cleaned up"
    else:
        what = "a push still running, or a replacement opened by hand (end it with 'lineage end-replace')"
    raise PushRefusedError(f"entry {entry_id} of table {table!r} is not a staged push: it is {what}")


def _registered(state: TableState, entry: LineageEntry) -> list[Segment]:
    return [state.segments[n] for n in entry.segments_to if n in state.segments]


def nothing_new_in_scope(entry: LineageEntry) -> Callable[[TableState], None]:
    """The publish's check on the version it commits on: a staged refresh or
    replace-range hides only what it named when it started, so a segment
    pushed into its scope since (an append) would stay visible beside its
    rows: refused, naming them."""

    def check(state: TableState) -> None:
        own = set(entry.segments_from) | set(entry.segments_to)
        if entry.whole:
            new = [s for s in visible_segments(state) if s.name not in own]
        elif entry.interval is not None:
            start, end = entry.interval
            new = [
                s for s in visible_segments(state)
                if s.name not in own and (s.min_time is None or s.max_time is None
                                          or (s.max_time >= start and s.min_time < end))
            ]  # fmt: skip
        else:
            return
        if new:
            table = state.config.name
            named = ", ".join(s.name for s in new[:3]) + (", ..." if len(new) > 3 else "")
            raise PushRefusedError(
                f"staged push {entry.entry_id} of table {table!r} would leave {len(new)} segment(s) pushed "
                f"since it was staged ({named}) visible beside its rows: it hides only what the table held "
                "when it was staged",
                remedy=f"revert it ('lineage revert {table} {entry.entry_id}') and push again",
            )

    return check


def _subset(entry: LineageEntry, segments: Sequence[Segment]) -> list[str] | None:
    return [s.name for s in segments] if len(segments) < len(entry.segments_to) else None


def staged_segments(state: TableState, entry_id: str, now_ms: int) -> list[Segment]:
    """What readers of ``state`` would see once the staged push ``entry_id`` is published."""
    entry, _ = staged_entry(state, entry_id)
    nothing_new_in_scope(entry)(state)
    ended = transitions.end_replace(state, entry_id, now_ms, _subset(entry, _registered(state, entry)))
    return visible_segments(ended.state)


def publish(
    manager: LineageManager,
    table: str,
    entry: str,
    *,
    reason: str | None = None,
    checks: Sequence[Check] = (),
    progress: Callable[[str], None] | None = None,
) -> PushResult:
    """End the staged push ``entry`` (an id or a unique prefix): its audit
    runs again (the checks it was staged with, and ``checks``), then one
    commit shows its rows and hides what it replaces, recording the schema,
    the audit's figures and who published. An audit that fails leaves it
    staged (AuditFailedError); PushRefusedError when it is not staged, or
    when a push set staged it (:func:`segment_lineage.ingest.push_set.publish_set`
    publishes a set whole)."""
    began = manager.env.monotonic()
    say = progress or (lambda _msg: None)
    entry_id = manager.resolve_entry(table, entry)
    before = manager.table(table)  # refused before the claim is taken, when it cannot be published
    found, staged = staged_entry(before, entry_id)
    if staged.set_id is not None:
        raise PushRefusedError(
            f"staged push {entry_id} of table {table!r} is part of push set {staged.set_id} "
            f"({', '.join(staged.set_tables)}): a set is published whole",
            remedy=f"lineage publish --set {staged.set_id}",
        )
    nothing_new_in_scope(found)(before)
    owner = manager.owner_hold(table, entry_id, doing="publishing a staged push")  # one publisher, fenced
    owner.take()
    try:
        ending = publish_update(manager, table, entry_id, checks, say)
        manager.commit(table, ending.update, reason, owner=entry_id)
    finally:
        with contextlib.suppress(LineageError):
            owner.release()
    return ending.done(manager.env.monotonic() - began)


@dataclass(frozen=True)
class Ending:
    """A staged push's publish, judged on the table as read under its claim:
    the commit's update, and what the push did once it lands."""

    update: Update
    result: PushResult  # but its audit and time: done() gives them once the update committed
    judged: Judgement | None

    def done(self, seconds: float) -> PushResult:
        audited = None if self.judged is None else self.judged.recorded  # judged again at the commit
        return dataclasses.replace(self.result, seconds=seconds, audited=audited)


def publish_update(
    manager: LineageManager, table: str, entry_id: str, checks: Sequence[Check], say: Callable[[str], None]
) -> Ending:
    """The publish of ``entry_id`` (its claim held): its audit run again on
    the table now, and the update that ends the entry (which judges the row
    checks once more, on the version it commits on)."""
    state = manager.table(table)
    found, staged = staged_entry(state, entry_id)
    segments = _registered(state, found)
    audit = Audit.from_text(staged.audit, checks)
    judged = None
    if audit:
        remedy = "it stays staged: revert it, or fix the check"
        judged, passed = judge_push(state, audit, table, entry_id, segments, remedy=remedy)
        say(f"{table}: audit {passed}" if staged.set_id else f"audit {passed}")
    unit = None if staged.time_unit is None else TimeUnit(staged.time_unit)
    update = complete_update(
        entry_id, [], to_subset=_subset(found, segments), schema=staged.schema,
        schema_policy=SchemaPolicy(staged.policy), mode=staged.mode, time_unit=unit,
        check=nothing_new_in_scope(found), audit=judged,
    )  # fmt: skip
    return Ending(update, _published(state, table, entry_id, found, staged, segments), judged)


def _published(
    state: TableState,
    table: str,
    entry_id: str,
    found: LineageEntry,
    staged: Staged,
    segments: Sequence[Segment],
) -> PushResult:
    """What the publish does, but its audit and time (:meth:`Ending.done`)."""
    hidden = [state.segments[n] for n in found.segments_from if n in state.segments]
    return PushResult(
        table=table, entry_id=entry_id, mode=PushMode.parse(staged.mode or "refresh"),
        segments=len(segments), rows=sum(s.rows for s in segments),
        size_bytes=sum(s.size_bytes for s in segments), replaced=len(found.segments_from),
        replaced_rows=sum(s.rows for s in hidden), seconds=0.0, published=True,
    )  # fmt: skip
