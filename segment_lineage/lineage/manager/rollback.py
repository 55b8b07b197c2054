"""A table's rollback: one commit that makes its visible set a past
version's (earlier or later: a rollback is undone by rolling forward).

A push set shows in every table or in none. A rollback of one table that
would undo a set there and not in the set's other tables (or bring one
back there alone) is refused, naming the set, unless the caller splits
sets knowingly (``split_sets``, the CLI's ``--split-sets``). Judging costs
the table's newest history records
(:func:`~segment_lineage.lineage.core.applied.suspects`: usually those the
head holds). Only when a set may flip in the table are the other tables
read and judged (:func:`~segment_lineage.lineage.core.applied.splits`);
the commit then checks, in its own request, that none of them moved since,
and that the table is still at the head judged.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from segment_lineage.lineage.core import applied, transitions
from segment_lineage.lineage.core.acl import PUSHER
from segment_lineage.lineage.core.errors import ConflictError
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Audit, Change, EntryState, Operation, TableState
from segment_lineage.lineage.core.visibility import visibility_delta, visible_segments
from segment_lineage.lineage.manager.commit import Judge
from segment_lineage.lineage.manager.set_rollback import SetRollbackOps, refuse_splits
from segment_lineage.lineage.manager.together import ChecksMovedError, Together
from segment_lineage.lineage.store.contract import Snapshot


@dataclass(frozen=True)
class RollbackPlan:
    """What a rollback does (or did): the target, and the visible set before and after."""

    table: str
    target_version: int
    from_version: int
    restored: tuple[str, ...]  # entries brought back (COMPLETED again)
    reverted: tuple[str, ...]  # entries reverted
    appear: tuple[str, ...]  # segments that become visible
    disappear: tuple[str, ...]  # segments that stop being visible
    rows_appearing: int
    rows_disappearing: int
    committed_version: int | None  # None for a dry run or a no-op
    rows_before: int | None = None  # the whole visible set's rows: dry runs only (linear in the table)
    rows_after: int | None = None
    schema: str | None = None  # what the rollback does to the schema (None: nothing)
    split_sets: tuple[str, ...] = ()  # push sets it splits (only when asked to: refused otherwise)


@dataclass(frozen=True)
class _Judged:
    """What a rollback's set judgement leaves its commit to check."""

    head: int | None = None  # the table's version the sets were judged on (None: not judged)
    checks: tuple[Snapshot, ...] = ()  # the other tables judged, compared again in the commit's request
    splits: tuple[str, ...] = ()  # the sets it splits (allowed: split_sets)


class RollbackOps(SetRollbackOps):
    """A table's rollback (it judges push sets, hence the set rollback's reads)."""

    def rollback(
        self,
        table: str,
        target_version: int,
        *,
        dry_run: bool = False,
        reason: str | None = None,
        split_sets: bool = False,
    ) -> RollbackPlan:
        """One atomic commit that makes the visible set equal to
        ``target_version``'s. Refused (RefusedError, nothing changed) when
        it would undo a push set in this table and not in its others, or
        bring one back here alone, unless ``split_sets``. The plan is made
        on the commit's own first read."""
        if not dry_run:
            self.require_role(PUSHER, doing="a rollback")
        first: tuple[Snapshot, int] | None = None
        if dry_run or split_sets:
            target = self._as_of(table, target_version)
        else:  # with the commit's first read: one round trip
            target, first = self._as_of_now(table, target_version)
        audit = self.audit(reason or f"rollback to version {target_version}")
        with others_fenced(table):
            if dry_run or split_sets:  # a split knowingly is judged only to say which sets it splits
                judged = self._judge_sets(table, target_version, split_sets)
                if dry_run:
                    return self._dry_run(table, target, judged, audit)
                return self._commit_rollback(table, target, judged, audit)
            return self._commit_judged_on_read(table, target, audit, first)

    def _commit_judged_on_read(
        self, table: str, target: TableState, audit: Audit, first: tuple[Snapshot, int] | None
    ) -> RollbackPlan:
        """The rollback's commit, its sets judged on the commit's own read
        when the history records that needs are at hand; else judged first
        on the history read whole (the table must not have moved since)."""
        try:
            judge = _at_hand_judge(target.version)
            return self._commit_rollback(table, target, _Judged(), audit, judge, first)
        except ReadHistory as read:
            judged = self._judge_sets(table, target.version, False)
            if judged.head is not None and judged.head != read.version:
                raise moved(table, read.version, judged.head) from None
            return self._commit_rollback(table, target, judged, audit)

    def _dry_run(self, table: str, target: TableState, judged: _Judged, audit: Audit) -> RollbackPlan:
        current = self._read(table)
        with self._past(target):  # the target's parts load as the plan wants them
            change = transitions.rollback(current, target, self.store.now_ms(), audit)
            plan = _rollback_plan(current, change, target.version, None)
        rows_before = sum(s.rows for s in visible_segments(current))
        return dataclasses.replace(
            plan,
            rows_before=rows_before,
            rows_after=rows_before + plan.rows_appearing - plan.rows_disappearing,
            split_sets=judged.splits,
        )

    def _commit_rollback(
        self,
        table: str,
        target: TableState,
        judged: _Judged,
        audit: Audit,
        judge: Judge | None = None,
        first: tuple[Snapshot, int] | None = None,
    ) -> RollbackPlan:
        """The rollback's commit: on the head its sets were judged on (and
        with the other tables judged checked in its request), or judged by
        ``judge`` on each attempt's read."""
        planned: list[TableState] = []

        def apply(state: TableState, now: int) -> Change:
            # A rollback is planned on the version its first attempt read (and
            # its sets judged on): if another change lands before it commits
            # (another rollback, say), it gives way instead of planning again.
            if not planned:
                planned.append(state)
            expected = planned[0].version if judged.head is None else judged.head
            if state.version != expected:
                raise moved(table, expected, state.version)
            with self._past(target):  # gone, it is gone for every attempt: not read again
                return transitions.rollback(state, target, now, audit)

        if judged.checks:
            committed = self.commit_checked(Together(table, apply), audit.reason, judged.checks)
        else:  # the plan looks at what changed only
            committed = self._commit_lazy(table, apply, audit.reason, judge=judge, first=first)
        # apply commits only on the version it planned on: that is the one before.
        version = committed.state.version if committed.applied else None
        plan = _rollback_plan(planned[0], committed.change, target.version, version)
        return dataclasses.replace(plan, split_sets=judged.splits)

    def _judge_sets(self, table: str, target: int, split_sets: bool) -> _Judged:
        """The push sets rolling ``table`` back to ``target`` would split:
        RefusedError naming the first (unless ``split_sets``: then named in
        the plan). Other tables are read only when a set may flip here."""
        history = self.store.iter_history(table)
        newest = next(history, None)
        if newest is None:
            return _Judged()
        if not applied.suspects(itertools.chain([newest], history), newest.version, target):
            return _Judged(head=newest.version)
        doing = f"rolling back {table} to version {target}"
        histories = self._histories(f"roll back {table}")
        heads = applied.heads(histories)
        found = applied.splits(histories, heads, {table: target})
        if split_sets:
            return _Judged(splits=tuple(s.set_id for s in found))
        refuse_splits(doing, found, lambda split: _split_remedy(table, target, split, histories[table]))
        others = [t for t in applied.judged(histories, {table: target}) if t != table]
        return _Judged(head=heads[table], checks=tuple(self._still_as_judged(others, heads)))


_PAST = {"rollback": "rolled back", "revert": "reverted"}  # what "nothing was ..." says


def moved(table: str, planned: int, now: int, doing: str = "rollback") -> ConflictError:
    """The table moved under a change judged (or planned) on version ``planned``."""
    return ConflictError(
        f"table {table!r} changed while the {doing} was planned "
        f"(version {planned} -> {now}); nothing was {_PAST[doing]}",
        table=table,
        remedy=f"look at 'lineage history' and run the {doing} again if it still applies",
    )


@contextmanager
def others_fenced(table: str, doing: str = "rollback") -> Iterator[None]:
    """A rollback or a revert of ``table`` judged on other tables (those
    sharing push sets with it): when one of them moved before it landed,
    the error says which change gave way, and why those tables mattered."""
    try:
        yield
    except ChecksMovedError as exc:
        raise ConflictError(
            f"table(s) {', '.join(exc.tables)} changed while the {doing} of {table!r} was judged "
            f"on them (they share push sets with {table!r}); nothing was {_PAST[doing]}",
            table=table,
            remedy=f"run the {doing} again: its push sets are judged on what the tables show now",
        ) from None


class ReadHistory(Exception):
    """A change's sets cannot be judged on the history records its first
    read had at hand, version ``version`` (control flow inside a rollback or
    a revert, never raised out of it)."""

    def __init__(self, version: int) -> None:
        super().__init__(version)
        self.version = version


def _at_hand_judge(target: int) -> Judge:
    """Judges a rollback's first read (a later attempt on another version
    gives way in the update): nothing to do when no set may flip, judged on
    the records the read brought (the common case); ReadHistory when one
    may, or when it needs older records than the read brought."""
    first: list[int] = []

    def judge(snap: Snapshot) -> None:
        version, recent = snap.state.version, snap.recent
        first.append(version)
        if version != first[0]:
            return
        if not recent or recent[0].version != version:
            raise ReadHistory(version)
        if applied.suspects(_then_more(recent), version, target):
            raise ReadHistory(version)

    return judge


def _then_more(recent: tuple[HistoryRecord, ...]) -> Iterator[HistoryRecord]:
    """``recent``, then ReadHistory if older records are asked for and exist."""
    yield from recent
    if recent[-1].version > 1:
        raise ReadHistory(recent[0].version)


def _split_remedy(table: str, target: int, split: applied.Split, history: Sequence[HistoryRecord]) -> str:
    """What to do instead of a table's rollback that would split ``split``:
    undo the set everywhere; bring it back everywhere (by undoing the set
    rollback that took it out, when one did); or split it knowingly."""
    knowingly = f"'lineage rollback {table} --to-version {target} --split-sets'"
    if split.applied:
        every = f"'lineage rollback --set {split.set_id}'"
        return f"undo the set in every table ({every}), or split it knowingly ({knowingly})"
    ended = applied.set_versions(history).get(split.set_id)
    undone = next(
        (
            r.set_id
            for r in history  # newest first
            if r.operation is Operation.ROLLBACK
            and r.set_id
            and ended is not None
            and r.version > ended.version
        ),
        None,
    )
    if undone is not None:
        return (
            f"bring the set back in every table by undoing set rollback {undone} ('lineage rollback --set "
            f"{undone}'), or split it knowingly ({knowingly})"
        )
    return (
        f"bring it back one table at a time, knowingly: {knowingly}, then roll {', '.join(split.kept)} "
        "forward to the set the same way, with --split-sets (the set is whole again after the last)"
    )


def _rollback_plan(before: TableState, change: Change, target: int, committed: int | None) -> RollbackPlan:
    after = change.state
    appear, disappear = visibility_delta(before, after)

    def was(e: str) -> EntryState | None:
        entry = before.entries.get(e)  # None: removed by retention, brought back by the rollback
        return None if entry is None else entry.state

    restored = tuple(
        e
        for e, entry in after.entries.items()
        if entry.state is EntryState.COMPLETED and was(e) is EntryState.REVERTED
    )
    reverted = tuple(
        e
        for e, entry in after.entries.items()
        if entry.state is EntryState.REVERTED and was(e) in (EntryState.COMPLETED, None)
    )
    return RollbackPlan(
        table=before.config.name,
        target_version=target,
        from_version=before.version,
        restored=restored,
        reverted=reverted,
        appear=tuple(sorted(appear)),
        disappear=tuple(sorted(disappear)),
        rows_appearing=sum(after.segments[n].rows for n in appear),
        rows_disappearing=sum(before.segments[n].rows for n in disappear),
        committed_version=committed,
        schema=None if change.detail is None else change.detail.schema,
    )
