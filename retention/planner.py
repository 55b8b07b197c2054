"""Retention planning: a pure function from a table's state to what may go.

Pinot's lineage cleanup, with our protections:

* a COMPLETED entry's remaining ``from`` go once the entry is older than
  ``replaced_segments_retention``; the entry goes once none of its ``from``
  remain registered;
* a REVERTED entry's remaining ``to`` go once it is older than
  ``lineage_entry_cleanup_retention``, and so do those of an IN_PROGRESS entry
  that old whose pusher is gone; the entry goes once none of its ``to`` remain;
* files queued in ``pending`` go once they have waited ``min_grace`` (unless
  ``force``).

Never planned: a segment visible now, visible in a version a live reader
pinned, or named by a running push (its owner still holds a session). Ages
come from ``now_ms``, which the caller takes from ZooKeeper's clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lineage.model import DeletionReason, EntryState, TableState
from lineage.visibility import visible_names

DEFAULT_MIN_GRACE_MS = 10 * 60_000


@dataclass(frozen=True)
class Policy:
    now_ms: int
    min_grace_ms: int = DEFAULT_MIN_GRACE_MS
    force: bool = False  # ignore min_grace for queued files (retention periods still apply)


@dataclass(frozen=True)
class Deletion:
    location: str
    segment: str
    reason: DeletionReason
    size_bytes: int
    entry_id: str | None


@dataclass(frozen=True)
class Kept:
    what: str
    why: str


@dataclass(frozen=True)
class Plan:
    table: str
    condemn: dict[str, DeletionReason]  # registered segments to unregister into pending
    deletions: tuple[Deletion, ...]  # files to delete once the intent is recorded
    remove_entries: tuple[str, ...]
    kept: tuple[Kept, ...]

    @property
    def empty(self) -> bool:
        return not (self.condemn or self.deletions or self.remove_entries)


def protected_names(state: TableState, pinned: Iterable[TableState], live_owners: frozenset[str]) -> set[str]:
    names = visible_names(state)
    for version in pinned:
        names |= visible_names(version)
    for entry in state.entries.values():
        if entry.state is EntryState.IN_PROGRESS and entry.entry_id in live_owners:
            names.update(entry.segments_from)
            names.update(entry.segments_to)
    return names


def plan(
    state: TableState,
    policy: Policy,
    pinned: Iterable[TableState] = (),
    live_owners: frozenset[str] = frozenset(),
) -> Plan:
    pinned = list(pinned)
    config = state.config
    now = policy.now_ms
    protected = protected_names(state, pinned, live_owners)
    pinned_locations = {
        seg.location for version in pinned for seg in version.segments.values() if seg.name in protected
    }
    condemn: dict[str, DeletionReason] = {}
    remove: list[str] = []
    kept: list[Kept] = []

    def take(names: Iterable[str], reason: DeletionReason) -> None:
        for name in names:
            if name not in state.segments:
                continue
            if name in protected:
                kept.append(Kept(name, "visible, pinned by a reader, or part of a running push"))
            else:
                condemn.setdefault(name, reason)

    for entry in state.entries.values():
        if entry.state is EntryState.COMPLETED:
            remaining = [n for n in entry.segments_from if n in state.segments]
            if not remaining:
                remove.append(entry.entry_id)
            elif entry.timestamp_ms <= now - config.replaced_segments_retention_ms:
                take(remaining, DeletionReason.REPLACED)
            continue
        old = entry.timestamp_ms <= now - config.lineage_entry_cleanup_retention_ms
        if entry.state is EntryState.IN_PROGRESS and (not old or entry.entry_id in live_owners):
            continue
        remaining = [n for n in entry.segments_to if n in state.segments]
        if not remaining:
            if entry.state is EntryState.REVERTED or old:
                remove.append(entry.entry_id)
        elif old:
            reason = (
                DeletionReason.REVERTED_OUTPUT
                if entry.state is EntryState.REVERTED
                else DeletionReason.STALE_PUSH
            )
            take(remaining, reason)

    deletions: list[Deletion] = []
    for name, reason in condemn.items():
        seg = state.segments[name]
        deletions.append(Deletion(seg.location, name, reason, seg.size_bytes, seg.entry_id))
    for location, queued in state.pending.items():
        if location in pinned_locations:
            kept.append(Kept(location, "pinned by a reader"))
        elif policy.force or queued.marked_ms <= now - policy.min_grace_ms:
            deletions.append(Deletion(location, queued.segment, queued.reason, 0, queued.entry_id))
        else:
            kept.append(Kept(location, "younger than the minimum grace"))
    return Plan(config.name, condemn, tuple(deletions), tuple(remove), tuple(kept))
