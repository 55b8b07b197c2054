"""A set's rollback: every table of a push set back to its version before
the set, in one set commit (:mod:`.together`), so the set's rows leave every
table at once.

It is judged first on every table's history (:mod:`segment_lineage.lineage.core.applied`):
a rollback that would undo a later set in some of its tables and not in
others is refused, naming it. The tables judged are compared again inside
the commit's own request (its ``checks``), so a table rolled forward between
the plan and the commit stops the commit, and the rollback is planned again
(at most SET_PLAN_ATTEMPTS times).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from segment_lineage.lineage.core import applied, transitions
from segment_lineage.lineage.core.acl import PUSHER
from segment_lineage.lineage.core.errors import ContentionError, NotFoundError, RefusedError
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Audit, Change, EntryState, Operation, TableState
from segment_lineage.lineage.core.names import check_set_id, resolve_set_id
from segment_lineage.lineage.manager.commit import Committed, Update
from segment_lineage.lineage.manager.reads import MAX_PREFIX_SEARCH
from segment_lineage.lineage.manager.together import ChecksMovedError, Together, TogetherOps
from segment_lineage.lineage.store.contract import Snapshot

SET_PLAN_ATTEMPTS = 5  # plans of a set rollback whose tables kept moving before giving up
SPLIT_ALONE = "lineage rollback TABLE --to-version V --split-sets"


@dataclass(frozen=True)
class SetRollback:
    """What rolling back a set does (or did), table by table: the version
    before the set's, and the version the rollback made (None: a dry run).
    Tables that already showed their target are absent from ``committed``;
    when none changed, nothing was written and ``rollback_set`` is None."""

    set_id: str
    targets: dict[str, int]
    committed: dict[str, int] | None
    rollback_set: str | None  # the rollback's own set id (None: a dry run, or nothing to do)
    already: tuple[str, ...] = ()  # tables that already show their target (nothing to change there)
    heads: dict[str, int] = field(default_factory=dict)  # each table's version when planned

    def undone_after(self, table: str) -> tuple[int, int] | None:
        """The versions of ``table`` made after the set that the rollback
        undoes too (first, last); None when the set's is its newest."""
        first, last = self.targets[table] + 2, self.heads.get(table, 0)
        return (first, last) if last >= first else None


class SetRollbackOps(TogetherOps):
    """Rolling back a push set in every table it changed."""

    def set_members(self, set_id: str) -> dict[str, int]:
        """Every table with a version of the set ``set_id`` -> that version
        (the newest, when a table has several). NotFoundError when no table
        has it in the history it keeps."""
        check_set_id(set_id)
        histories = {
            t: list(itertools.islice(self.store.iter_history(t), MAX_PREFIX_SEARCH))
            for t in self.store.list_tables()
        }
        return _members(set_id, histories)[1]

    def rollback_set(self, set_id: str, *, dry_run: bool = False, reason: str | None = None) -> SetRollback:
        """Every table of the set ``set_id`` back to its version before the
        set, in one commit (a set of its own): its rows disappear from every
        table at once, and so do later changes of those tables. Refused
        (RefusedError, nothing changed) when that would split a later set,
        undoing it in some of its tables and not in others; planned again
        when a table moved since (bounded)."""
        check_set_id(set_id)
        began, moved = self.env.monotonic(), ""
        for _ in range(SET_PLAN_ATTEMPTS):
            try:
                return self._rollback_set(set_id, dry_run, reason)
            except _Moved as exc:
                moved = str(exc)
            except ChecksMovedError as exc:
                moved = ", ".join(exc.tables)
        raise ContentionError(
            moved, SET_PLAN_ATTEMPTS, self.env.monotonic() - began, doing=f"rolling back set {set_id}"
        )

    def _rollback_set(self, set_id: str, dry_run: bool, reason: str | None) -> SetRollback:
        """One plan of :meth:`rollback_set` and its commit; _Moved when a
        table's head is no longer the one the plan checked."""
        histories = self._histories(f"roll back set {set_id}")
        set_id, members = _members(set_id, histories)  # the whole id, when given a prefix
        self._refuse_staged(set_id, members, histories)
        targets = {table: version - 1 for table, version in sorted(members.items())}
        heads = applied.heads(histories)
        refuse_splits(f"rolling back set {set_id}", applied.splits(histories, heads, targets), _alone)
        others = [t for t in applied.judged(histories, targets) if t not in targets]
        outside = self._still_as_judged(others, heads)  # checked again in the commit's own request
        states = {table: self._as_of(table, version) for table, version in targets.items()}  # kept at all?
        why = reason or f"rollback of set {set_id}"
        rollback_id = self.env.text_id()
        audit = Audit(self.actor, self.job_id, why, rollback_id)
        planned = {table: heads[table] for table in targets}
        if dry_run:
            return SetRollback(set_id, targets, None, None, self._already(states, audit), planned)
        self.require_role(PUSHER, doing="a rollback")
        undo = [Together(t, self._undo(t, heads[t], states[t], audit)) for t in targets]
        done = self.commit_together(undo, why, set_id=rollback_id, checks=outside)
        return _rolled_back(set_id, targets, done, rollback_id, planned)

    def _undo(self, table: str, head: int, target: TableState, audit: Audit) -> Update:
        """The update taking ``table`` from version ``head`` back to
        ``target``; _Moved from any other version."""

        def update(state: TableState, now: int) -> Change:
            if state.version != head:  # the splits were judged on another head
                raise _Moved(table)
            with self._past(target):  # gone, it is gone for every attempt: not read again
                change = transitions.rollback(state, target, now, audit)
                change.state.loaded()  # what it keeps of the target loads here, not after
                return change

        return update

    def _refuse_staged(
        self, set_id: str, members: Mapping[str, int], histories: Mapping[str, Sequence[HistoryRecord]]
    ) -> None:
        """RefusedError when the set is staged, not published (its newest
        record is the staging of a push still staged): nothing of it shows,
        and going back to before it would undo every change made since."""
        staged = self._staged(members, histories)
        if staged:
            drops = "; ".join(f"'lineage revert {table} {entry}'" for table, entry in staged)
            raise RefusedError(
                f"set {set_id} is staged, not published: nothing of it shows in "
                f"{', '.join(t for t, _ in staged)}, and rolling back to before it would undo every "
                "change made there since",
                expected="a published set",
                found="staged",
                remedy=f"publish it ('lineage publish --set {set_id}'), or drop it: {drops}",
            )

    def _staged(
        self, members: Mapping[str, int], histories: Mapping[str, Sequence[HistoryRecord]]
    ) -> list[tuple[str, str]]:
        """The (table, entry) of each member whose set record stages a push still staged."""
        staged: list[tuple[str, str]] = []
        for table, version in sorted(members.items()):
            record = next(r for r in histories[table] if r.version == version)
            if record.operation is not Operation.REGISTER or record.entry_id is None:
                continue
            entry = self.store.read(table).state.entries.get(record.entry_id)
            if entry is not None and entry.state is EntryState.IN_PROGRESS and entry.staged is not None:
                staged.append((table, record.entry_id))
        return staged

    def _histories(self, doing: str) -> dict[str, list[HistoryRecord]]:
        """Every table's history, newest first; RefusedError when a table
        cannot be read (a table of a set judged may be among them: no
        judging blind)."""
        listing = self.store.table_listing()
        if listing.unreadable:
            raise RefusedError(
                f"cannot {doing}: table(s) {', '.join(sorted(listing.unreadable))} cannot be "
                "read, and the push sets over them would be judged without them",
                remedy="mend or drop the unreadable table(s) first ('lineage table list' names them)",
            )
        return {t: list(self.store.iter_history(t)) for t in listing.readable}

    def _still_as_judged(self, tables: Sequence[str], heads: Mapping[str, int]) -> list[Snapshot]:
        """The other tables a rollback judged, read again (their snapshots
        are checked in its commit's request); ChecksMovedError when one moved already."""
        outside = [self.store.read(t) for t in tables]
        moved = [s.state.config.name for s in outside if s.state.version != heads[s.state.config.name]]
        if moved:
            raise ChecksMovedError(moved)
        return outside

    def _already(self, states: dict[str, TableState], audit: Audit) -> tuple[str, ...]:
        """The tables that already show their target's visible set."""
        reads = {t: self.store.read_now(t) for t in states}
        with self._past(*states.values()):
            return tuple(
                t for t, (snap, now) in reads.items()
                if not transitions.rollback(snap.state, states[t], now, audit).changed
            )  # fmt: skip


def _rolled_back(
    set_id: str, targets: dict[str, int], done: Sequence[Committed], rollback_id: str, heads: dict[str, int]
) -> SetRollback:
    """What the set rollback's commit did, table by table."""
    committed = {t: c.state.version for t, c in zip(targets, done, strict=True) if c.applied}
    already = tuple(t for t in targets if t not in committed)
    return SetRollback(set_id, targets, committed, rollback_id if committed else None, already, heads)


class _Moved(Exception):
    """A table (its name, the message) moved between a set rollback's plan
    and its commit (control flow inside rollback_set, never raised out of it)."""


def _members(set_id: str, histories: Mapping[str, Sequence[HistoryRecord]]) -> tuple[str, dict[str, int]]:
    """The set's whole id (``set_id`` may be a prefix of it) and
    :meth:`TogetherOps.set_members` over the histories given. RefusedError
    when the set's records count more tables than keep one: the others'
    were compacted out of their history (or the tables dropped), and a
    rollback of the rest would split the set."""
    found, size = _newest_of(set_id, histories)
    if not found:  # not a whole id: the first digits of one?
        known = (r.set_id for h in histories.values() for r in h[:MAX_PREFIX_SEARCH] if r.set_id is not None)
        whole = resolve_set_id(set_id, known)
        if whole is not None:
            set_id = whole
            found, size = _newest_of(set_id, histories)
    if found and size > len(found):
        raise RefusedError(
            f"set {set_id} changed {size} tables, but only {len(found)} ({', '.join(sorted(found))}) still "
            "keep its record: the others' were compacted out of their history, or the tables were dropped; "
            "rolling back these alone would leave the set in the others",
            remedy=f"roll back each table alone, knowingly ('{SPLIT_ALONE}')",
        )
    if not found:
        raise NotFoundError(
            f"no table has set {set_id!r} in its history",
            remedy="'lineage history TABLE' shows each version's set",
        )
    return set_id, found


def _newest_of(set_id: str, histories: Mapping[str, Sequence[HistoryRecord]]) -> tuple[dict[str, int], int]:
    """Each table's newest version of the set ``set_id``, and the most
    tables one of its records counts."""
    found: dict[str, int] = {}
    size = 0
    for table, history in histories.items():
        for record in history:
            if record.set_id == set_id:
                found[table] = record.version
                size = max(size, record.set_size)
                break
    return found, size


def refuse_splits(doing: str, found: Sequence[applied.Split], remedy: Callable[[applied.Split], str]) -> None:
    """RefusedError naming the first set ``doing`` would split (none found: nothing)."""
    if not found:
        return
    split = found[0]
    verb = "undo" if split.applied else "bring back"
    state = "applied" if split.applied else "not applied"
    later = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    raise RefusedError(
        f"{doing} would {verb} set {split.set_id} in {', '.join(split.flipped)} "
        f"but not in {', '.join(split.kept)}{later}: a set shows in every table or in none",
        expected=f"set {split.set_id} {state} in all its tables or in none",
        found=f"{state} still in {', '.join(split.kept)}",
        remedy=remedy(split),
    )


def _alone(split: applied.Split) -> str:
    """What to do instead of a set rollback that would split ``split``."""
    first = ""
    if split.applied:
        first = f"roll back set {split.set_id} first ('lineage rollback --set {split.set_id}'), or "
    return f"{first}roll back each table alone, knowingly splitting sets ('{SPLIT_ALONE}')"
