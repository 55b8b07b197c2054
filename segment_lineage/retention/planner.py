"""Retention planning: a pure function from a table's state to what may go.

Pinot's lineage cleanup, with our protections:

* a COMPLETED entry's remaining ``from`` go once the entry is older than
  ``replaced_segments_retention``; the entry goes once none of its ``from``
  remain registered;
* a REVERTED entry's remaining ``to`` go once it is older than
  ``lineage_entry_cleanup_retention``, and so do those of an IN_PROGRESS entry
  that old whose pusher is gone; the entry goes once none of its ``to`` remain;
* files queued in ``pending`` go once they have waited ``min_grace`` (unless
  ``force``); so does the file of a condemned segment registered less than
  ``min_grace`` ago (unregistered now, deleted by a later pass);
* on an APPEND table with a time retention, segments whose data ended before
  ``now - time_retention`` go, visible or not;
* orphans: files under the table's root that no segment, pending deletion or
  pinned version names (leftovers of crashed pushes and failed Spark
  attempts). A pass records such a file with ZooKeeper's time
  (``ORPHAN_SEEN``, which a later register takes over); a pass at least
  ``orphan_grace`` later by that clock, that finds it still unreferenced and
  (when known) that old by its storage time too, deletes it. No age comes
  from the file system alone. A marker (a file engines skip as hidden, as
  Spark's ``_SUCCESS``) in a folder holding the table's files is theirs,
  not an orphan; alone in its folder (the last of them went) it goes at
  once, with no grace of its own.

Never planned: a segment visible now (time retention aside), visible in a
version a live reader pinned, or named by a running push (its owner still
holds a session, or, opened by hand, its hold has not ended); no file under
the directory of a running push. Ages come from ``now_ms``, which the caller
takes from ZooKeeper's clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from segment_lineage.lineage.core.model import DeletionReason, TableState
from segment_lineage.retention.rules import (
    DEFAULT_MIN_GRACE_MS,
    DEFAULT_ORPHAN_GRACE_MS,
    Deletion,
    Kept,
    Part,
    Policy,
    entry_lifecycle,
    facts,
    grace,
    merge,
    orphans,
    time_retention,
)

if TYPE_CHECKING:
    from segment_lineage.lineage.storage.deep import FileInfo

__all__ = ["DEFAULT_MIN_GRACE_MS", "DEFAULT_ORPHAN_GRACE_MS", "Deletion", "Kept", "Plan", "Policy", "plan"]


@dataclass(frozen=True)
class Plan:
    """One table's pass as decided, before anything is written: segments to
    condemn, files to delete once the intent is recorded, entries to remove,
    what is kept and why, and the orphans seen, convicted or forgotten."""

    table: str
    condemn: dict[str, DeletionReason]  # registered segments to unregister into pending
    deletions: tuple[Deletion, ...]  # files to delete once the intent is recorded
    remove_entries: tuple[str, ...]
    kept: tuple[Kept, ...]
    orphans: tuple[str, ...] = ()  # unknown files first seen now: recorded as ORPHAN_SEEN, not deleted
    stray_bytes: int = 0  # the size of every unreferenced file listed (new, waiting or convicted)
    convict: tuple[str, ...] = ()  # ORPHAN_SEEN a grace ago, still unreferenced: condemned and deleted
    forget: tuple[str, ...] = ()  # ORPHAN_SEEN whose file is gone


def plan(
    state: TableState,
    policy: Policy,
    pinned: Iterable[TableState] = (),
    live_owners: frozenset[str] = frozenset(),
    files: Iterable[FileInfo] | None = None,
    mirrored: frozenset[str] = frozenset(),
) -> Plan:
    """``files`` is a listing of the table's root, taken before ``state`` was
    read; None skips the orphan scan. ``mirrored``: the locations a version
    of the table's mirror that engines may still read references (read after
    ``state``), kept as a reader's pin keeps its version's.

    The rules run in order over the same facts: time retention, then the
    entries' lifecycle (together: which segments are condemned), then the
    grace of queued files, then the orphans of the listing."""
    f = facts(state, policy, pinned, live_owners, mirrored)
    decided = merge([time_retention(f), entry_lifecycle(f)])
    condemn = dict(decided.condemn)
    whole = merge([decided, grace(f, condemn), orphans(f, files) if files is not None else Part()])
    return Plan(
        state.config.name,
        condemn,
        whole.deletions,
        whole.remove_entries,
        whole.kept,
        whole.orphans,
        whole.stray_bytes,
        whole.convict,
        whole.forget,
    )
