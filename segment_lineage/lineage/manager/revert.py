"""Reverting a replacement (Pinot's revert) and its dry run's plan, keeping push sets whole.

Reverting one table's completed push of a push set would leave the set
shown in its other tables and not in this one. That is refused (naming the
set, changing nothing) unless the caller splits sets knowingly
(``split_sets``, the CLI's ``--split-sets``). It is judged as a table's
rollback is (:mod:`.rollback`): on the commit's own read, when the
history records it brought hold the entry's end and it carries no set (a
running or staged push's revert needs none: it shows nothing yet); else on
every table's history, as if the revert were committed
(:func:`~segment_lineage.lineage.core.applied.splits`), and the commit
then compares, in its own request, the head judged and the heads of the
other tables judged. A table that moved before it landed has it judged
again, on what the tables show then (a revert undoes one entry, whatever
else landed; at most SET_PLAN_ATTEMPTS judgements).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from segment_lineage.lineage.core import applied, transitions
from segment_lineage.lineage.core.acl import PUSHER
from segment_lineage.lineage.core.errors import ContentionError, EntryNotFoundError
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Change, EntryState, Operation, TableState
from segment_lineage.lineage.core.names import check_entry_id
from segment_lineage.lineage.core.visibility import visibility_delta
from segment_lineage.lineage.manager.commit import Committed, Judge, Update
from segment_lineage.lineage.manager.rollback import ReadHistory, others_fenced
from segment_lineage.lineage.manager.set_rollback import SET_PLAN_ATTEMPTS, SetRollbackOps, refuse_splits
from segment_lineage.lineage.manager.together import ChecksMovedError, Together
from segment_lineage.lineage.store.contract import Snapshot


@dataclass(frozen=True)
class VisibleChange:
    """What a change would do to the visible set (a dry run)."""

    appear: tuple[str, ...]
    disappear: tuple[str, ...]
    rows_appearing: int
    rows_disappearing: int


class RevertOps(SetRollbackOps):
    """Reverting a replacement (it judges push sets, hence the set rollback's reads)."""

    def revert_replace(
        self,
        table: str,
        entry_id: str,
        *,
        force: bool = False,
        reason: str | None = None,
        split_sets: bool = False,
    ) -> Committed:
        """Revert ``entry_id`` (Pinot's rules; ``force`` for a running
        push). Refused (RefusedError, nothing changed) when the entry is one
        table's completed push of a push set shown in every one of its
        tables, unless ``split_sets``."""
        self.require_role(PUSHER, doing="reverting a replacement")

        def update(state: TableState, now: int) -> Change:
            return transitions.revert_replace(state, entry_id, now, force)

        if split_sets:
            return self.commit(table, update, reason)
        try:
            return self._commit_lazy(table, update, reason, load=True, judge=_ended_alone(entry_id))
        except ReadHistory:
            if self._ended_outside_sets(table, entry_id):  # its end is older than the read brought
                return self.commit(table, update, reason)
        return self._revert_judged(table, entry_id, update, reason)

    def _revert_judged(self, table: str, entry_id: str, update: Update, reason: str | None) -> Committed:
        """The revert, judged on every table's history and committed on the
        head judged (the other tables judged checked in its request); judged
        again when one of them moved before it landed, at most
        SET_PLAN_ATTEMPTS times (then ContentionError, nothing changed). A
        table that moved while the histories were read is a move too
        (:meth:`_judgements`)."""
        began, moved_now = self.env.monotonic(), table
        for _ in self._judgements():
            try:
                head, checks = self._judge_revert(table, entry_id)
                fenced = _on_head(table, head, update)
                if checks:
                    return self.commit_checked(Together(table, fenced), reason, checks)
                return self.commit(table, fenced, reason)
            except _HeadMoved:
                moved_now = table
            except ChecksMovedError as exc:
                moved_now = ", ".join(exc.tables)
        raise ContentionError(
            moved_now,
            SET_PLAN_ATTEMPTS,
            self.env.monotonic() - began,
            doing=f"reverting entry {entry_id} of {table}",
        )

    def revert_plan(
        self, table: str, entry_id: str, *, force: bool = False, split_sets: bool = False
    ) -> VisibleChange:
        """What reverting ``entry_id`` would show and hide now; refused, as
        the revert would be, when a rule forbids it or (unless
        ``split_sets``) it would split a push set. Nothing is committed."""
        if not split_sets:
            self.judge_revert(table, entry_id)
        state = self._read(table)
        after = transitions.revert_replace(state, entry_id, self.store.now_ms(), force).state
        appear, disappear = visibility_delta(state, after)
        return VisibleChange(
            appear=tuple(sorted(appear)),
            disappear=tuple(sorted(disappear)),
            rows_appearing=sum(after.segments[n].rows for n in appear),
            rows_disappearing=sum(state.segments[n].rows for n in disappear),
        )

    def judge_revert(self, table: str, entry_id: str) -> None:
        """RefusedError when reverting ``entry_id`` now would split a push
        set (a dry run's judgement: nothing is fenced); EntryNotFoundError
        (or InvalidNameError) for an entry the table does not have."""
        check_entry_id(entry_id)
        state = self._read(table)
        entry = state.entries.get(entry_id)
        if entry is None:
            raise EntryNotFoundError(table, entry_id)
        if entry.state is not EntryState.COMPLETED:
            return
        if self._ended_outside_sets(table, entry_id):
            return
        with others_fenced(table, "revert"):  # judged again when a table moves meanwhile, as the revert is
            moved: ChecksMovedError | None = None
            for _ in self._judgements():
                try:
                    self._judge_revert(table, entry_id)
                    return
                except ChecksMovedError as exc:
                    moved = exc
            assert moved is not None
            raise moved

    def _judgements(self) -> Iterator[int]:
        """A revert's judgements, SET_PLAN_ATTEMPTS at most; each one after
        a move waits a backoff first (a busy table's commits come in bursts)."""
        for attempt in range(SET_PLAN_ATTEMPTS):
            if attempt:
                self.retry.sleep(self.retry.delay(attempt))
            yield attempt

    def _ended_outside_sets(self, table: str, entry_id: str) -> bool:
        """Whether the push ``entry_id`` ended in a commit of its own table
        alone (its end record, found in the table's history, carries no
        set): its revert splits no set, whatever the other tables hold, and
        they need not be read (nor be readable). False when its end is a
        set's, or no longer recorded (then every table is judged)."""
        for record in self.store.iter_history(table):
            if record.entry_id == entry_id and record.operation is Operation.END_REPLACE:
                return record.set_id is None
        return False

    def _judge_revert(self, table: str, entry_id: str) -> tuple[int, list[Snapshot]]:
        """The head ``table`` was judged on, and the other tables judged
        (read again, to be checked in the commit's request); RefusedError
        when the revert would split a set."""
        histories = self._histories(f"revert entry {entry_id} of {table}")
        heads = applied.heads(histories)
        after = heads[table] + 1
        revert = HistoryRecord(after, "", 0, Operation.REVERT_REPLACE, entry_id, "", None, None, 0, 0, 0)
        judged = {**histories, table: [revert, *histories[table]]}  # as if committed
        refuse_splits(
            f"reverting entry {entry_id} of {table}",
            applied.splits(judged, heads, {table: after}),
            lambda split: (
                f"undo the set in every table ('lineage rollback --set {split.set_id}'), or split it "
                f"knowingly ('lineage revert {table} {entry_id} --split-sets')"
            ),
        )
        others = [t for t in applied.judged(judged, {table: after}) if t != table]
        return heads[table], self._still_as_judged(others, heads)


def _ended_alone(entry_id: str) -> Judge:
    """Judges a revert's read: nothing to judge when the entry is not
    completed, or its end is at hand and carries no set; ReadHistory
    otherwise (the histories decide)."""

    def judge(snap: Snapshot) -> None:
        entry = snap.state.entries.get(entry_id)
        if entry is None or entry.state is not EntryState.COMPLETED:
            return  # nothing shown to take away (the transition refuses what it must)
        end = next(
            (r for r in snap.recent if r.entry_id == entry_id and r.operation is Operation.END_REPLACE), None
        )
        if end is None or end.set_id is not None:
            raise ReadHistory(snap.state.version)

    return judge


class _HeadMoved(Exception):
    """The table moved past the head a revert was judged on (control flow
    inside revert_replace, never raised out of it: it is judged again)."""


def _on_head(table: str, head: int, update: Update) -> Update:
    """``update``, only on version ``head`` (the one its sets were judged on)."""

    def fenced(state: TableState, now: int) -> Change:
        if state.version != head:
            raise _HeadMoved(table)
        return update(state, now)

    return fenced
