"""Which versions a table's head still applies, and which sets a set
rollback would split.

A version's visible set is its predecessor's with one change applied,
except a rollback's: a rollback to version T shows exactly what T showed.
So the changes a head still applies are the versions on its chain: from the
head down, a rollback jumps to its target, anything else steps to the
version before. A set's change (the END_REPLACE that made its push
visible there; a staged set's REGISTER shows nothing) is applied in a table
when its version there is on that table's chain and no revert of its entry
after it is.

Rolling back a set moves each of its tables to a new chain (its target's)
and leaves every other table's as it is. A later set that changed one of
its tables and another table too would then be undone in one and kept in
the other: :func:`splits` finds those, so that the rollback can refuse
instead of silently breaking "a set shows in every table or in none". A
set already split before (by rolling back one table alone) is not this
rollback's doing and is left out. Only changes count: a rollback's own
record (a set rollback carries a set id too) changes nothing a chain does
not already say.

Pure: history records in, split sets out. A record missing from a history
(collected metadata) counts as a plain change, one step back.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Operation


@dataclass(frozen=True)
class Split:
    """A set the rollback would split: the tables where its change would
    flip (undone, or brought back) and those where it would stay as it is."""

    set_id: str
    flipped: tuple[str, ...]
    kept: tuple[str, ...]
    applied: bool  # whether the set is applied now (in every one of its tables)


def heads(histories: Mapping[str, Iterable[HistoryRecord]]) -> dict[str, int]:
    """Each table's head version: its newest record's (0: none kept)."""
    return {t: max((r.version for r in h), default=0) for t, h in histories.items()}


def chain(records: Mapping[int, HistoryRecord], head: int) -> frozenset[int]:
    """The versions ``head`` still applies (see the module's docstring)."""
    on: set[int] = set()
    version = head
    while version > 0:  # always down: a rollback's target is older than it
        on.add(version)
        version = _below(records.get(version), version)
    return frozenset(on)


def _below(record: HistoryRecord | None, version: int) -> int:
    """The next version down a chain from ``version`` (its record, if kept)."""
    target = record.detail.target if record is not None and record.detail is not None else None
    if record is not None and record.operation is Operation.ROLLBACK and target is not None:
        return min(target, version - 1)
    return version - 1


@dataclass(frozen=True)
class SetChange:
    """Where a set made its push visible in one table: the version, and the entry."""

    version: int
    entry_id: str | None


def set_versions(history: Iterable[HistoryRecord]) -> dict[str, SetChange]:
    """Set id -> the newest version of this table where a set's push ended
    (made its rows visible); staged sets and rollbacks left out."""
    found: dict[str, SetChange] = {}
    for record in history:
        if record.set_id is None or record.operation is not Operation.END_REPLACE:
            continue
        if record.set_id not in found or record.version > found[record.set_id].version:
            found[record.set_id] = SetChange(record.version, record.entry_id)
    return found


def is_applied(records: Mapping[int, HistoryRecord], on: frozenset[int], change: SetChange) -> bool:
    """Whether the chain ``on`` applies ``change``: its version is on it, and
    no revert of its entry after it is."""
    if change.version not in on:
        return False
    return not any(
        v > change.version
        and (r := records.get(v)) is not None
        and r.operation is Operation.REVERT_REPLACE
        and r.entry_id == change.entry_id
        for v in on
    )


def splits(
    histories: Mapping[str, Iterable[HistoryRecord]],
    heads: Mapping[str, int],
    targets: Mapping[str, int],
) -> list[Split]:
    """The sets that moving each table of ``targets`` to its target's chain
    (every other table staying at its head) would leave applied in some of
    their tables and not in others, when they were applied in all or none
    before. ``histories`` holds every table's records, ``heads`` every
    table's head version."""
    records = {t: {r.version: r for r in h} for t, h in histories.items()}
    versions = {t: set_versions(records[t].values()) for t in records}
    touched = sorted({s for t in targets for s in versions.get(t, {})})
    involved = _involved(versions, touched)  # only their chains matter
    before, after = _chains(records, involved, heads, targets)
    found = []
    for s in touched:
        was, now = _applied_in(s, records, versions, before), _applied_in(s, records, versions, after)
        split = _split(s, was, now, _unseen(s, records, versions))
        if split is not None:
            found.append(split)
    return found


def _chains(
    records: Mapping[str, Mapping[int, HistoryRecord]],
    tables: Iterable[str],
    heads: Mapping[str, int],
    targets: Mapping[str, int],
) -> tuple[dict[str, frozenset[int]], dict[str, frozenset[int]]]:
    """Each table's chain before the move (its head's) and after it (its target's, or its head's still)."""
    before = {t: chain(records[t], heads[t]) for t in tables}
    after = {t: chain(records[t], targets[t]) if t in targets else on for t, on in before.items()}
    return before, after


def _unseen(
    set_id: str,
    records: Mapping[str, Mapping[int, HistoryRecord]],
    versions: Mapping[str, Mapping[str, SetChange]],
) -> int:
    """How many of the set's tables no longer keep its record (compacted out
    of their history, or the tables dropped): its records count the tables
    it changed."""
    seen = [records[t][versions[t][set_id].version] for t in versions if set_id in versions[t]]
    return max(0, max((r.set_size for r in seen), default=0) - len(seen))


def _applied_in(
    set_id: str,
    records: Mapping[str, Mapping[int, HistoryRecord]],
    versions: Mapping[str, Mapping[str, SetChange]],
    chains: Mapping[str, frozenset[int]],
) -> dict[str, bool]:
    """Table by table (of ``chains`` whose history has the set), whether
    the set is applied on its chain."""
    return {
        t: is_applied(records[t], on, versions[t][set_id])
        for t, on in chains.items()
        if set_id in versions[t]
    }


def judged(histories: Mapping[str, Iterable[HistoryRecord]], targets: Mapping[str, int]) -> list[str]:
    """The tables whose heads :func:`splits` judges for ``targets``: those of
    every set that ended a push in one of the targets' tables. A rollback
    decided on them must find them unmoved when it commits."""
    versions = {t: set_versions(h) for t, h in histories.items()}
    return _involved(versions, sorted({s for t in targets for s in versions.get(t, {})}))


def _involved(versions: Mapping[str, Mapping[str, SetChange]], touched: Iterable[str]) -> list[str]:
    wanted = set(touched)
    return [t for t, made in versions.items() if wanted & made.keys()]


def _split(set_id: str, was: Mapping[str, bool], now: Mapping[str, bool], unseen: int = 0) -> Split | None:
    """The set's split, when it was whole before (``was``: applied, table by
    table) and is not after (``now``). ``unseen`` of its tables no longer
    keep its record: they cannot follow (nor be judged), so any flip in the
    tables that do splits it."""
    tables = sorted(was)
    if not tables or len(set(was.values())) > 1:
        return None
    flipped = tuple(t for t in tables if now[t] != was[t])
    if not flipped or (len(flipped) == len(tables) and not unseen):
        return None
    kept = tuple(t for t in tables if now[t] == was[t])
    if unseen:
        kept += (f"{unseen} more table(s) whose history no longer keeps its record",)
    return Split(set_id, flipped, kept, applied=was[tables[0]])


def suspects(history: Iterable[HistoryRecord], head: int, target: int) -> frozenset[str]:
    """The sets that moving one table from ``head``'s chain to ``target``'s
    may undo or bring back there: those whose push ended on one chain and
    not on the other, and those whose entry was reverted on one and not the
    other. Never fewer than flip (more, at times): :func:`splits` judges them.

    The two chains share every version below the one where they meet, so
    ``history`` (newest first) is read only down to it, and on only to find
    the ends of entries reverted above it: usually the head's own records.
    A table rollback reads the other tables only when this finds a set."""
    seen = _Reading(iter(history), head)
    found: set[str] = set()
    reverted: set[str] = set()
    for v in _differing(seen, head, target):
        record = seen.records.get(v)
        if record is not None and record.operation is Operation.END_REPLACE and record.set_id is not None:
            found.add(record.set_id)
        elif record is not None and record.operation is Operation.REVERT_REPLACE and record.entry_id:
            reverted.add(record.entry_id)
    return frozenset(found | seen.sets_of(reverted))


def _differing(seen: _Reading, head: int, target: int) -> set[int]:
    """The versions on one of the two chains and not on the other, down to where they meet."""
    a, b, differ = head, target, set()
    while a != b:  # two walks down: each step takes the higher one a version lower
        v = max(a, b)
        differ.add(v)
        below = _below(seen.record(v), v)
        a, b = (below, b) if a == v else (a, below)
    return differ


class _Reading:
    """A history read newest first, only as far as asked."""

    def __init__(self, history: Iterator[HistoryRecord], head: int) -> None:
        self.history = history
        self.records: dict[int, HistoryRecord] = {}
        self.lowest = head + 1  # every record at or above it is read (0: all of them)

    def record(self, version: int) -> HistoryRecord | None:
        """The record of ``version`` (None: not kept)."""
        while self.lowest > version and self._next() is not None:
            pass
        return self.records.get(version)

    def _next(self) -> HistoryRecord | None:
        record = next(self.history, None)
        if record is None:
            self.lowest = 0
            return None
        self.records[record.version] = record
        self.lowest = record.version
        return record

    def sets_of(self, entries: set[str]) -> set[str]:
        """The sets whose pushes ended ``entries``: read down until each
        entry's end (or start: it never ended) is found, or the history ends."""
        pending, sets = set(entries), set()

        def settle(record: HistoryRecord) -> None:
            if record.entry_id not in pending:
                return
            if record.operation is Operation.END_REPLACE:
                pending.discard(record.entry_id)
                if record.set_id is not None:
                    sets.add(record.set_id)
            elif record.operation is Operation.START_REPLACE:
                pending.discard(record.entry_id)

        for version in sorted(self.records, reverse=True):
            settle(self.records[version])
        while pending and (record := self._next()) is not None:
            settle(record)
        return sets
