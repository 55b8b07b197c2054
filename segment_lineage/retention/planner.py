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

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from segment_lineage.lineage.core.model import DeletionReason, EntryState, TableState, TableType
from segment_lineage.lineage.core.names import push_dir_owner, push_tag
from segment_lineage.lineage.core.periods import format_time
from segment_lineage.lineage.core.visibility import visible_names

if TYPE_CHECKING:
    from segment_lineage.lineage.storage.deep import FileInfo

DEFAULT_MIN_GRACE_MS = 10 * 60_000
DEFAULT_ORPHAN_GRACE_MS = 86_400_000


@dataclass(frozen=True)
class Policy:
    now_ms: int
    min_grace_ms: int = DEFAULT_MIN_GRACE_MS
    force: bool = False  # ignore min_grace for queued files (retention periods still apply)
    orphan_grace_ms: int = DEFAULT_ORPHAN_GRACE_MS


@dataclass(frozen=True)
class Deletion:
    location: str
    segment: str
    reason: DeletionReason
    size_bytes: int
    entry_id: str | None


MARKER = "a marker beside the table's files (Spark's _SUCCESS): goes in the pass after the last of them"


def is_marker(location: str) -> bool:
    """Whether a file is one engines skip as hidden (its name starts with
    ``_`` or ``.``: Spark's ``_SUCCESS``, Hadoop's ``.crc`` side files)."""
    return location.rsplit("/", 1)[-1].startswith(("_", "."))


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
    orphans: tuple[str, ...] = ()  # unknown files first seen now: recorded as ORPHAN_SEEN, not deleted
    stray_bytes: int = 0  # the size of every unreferenced file listed (new, waiting or convicted)
    convict: tuple[str, ...] = ()  # ORPHAN_SEEN a grace ago, still unreferenced: condemned and deleted
    forget: tuple[str, ...] = ()  # ORPHAN_SEEN whose file is gone


def _iso(ms: int) -> str:
    return format_time(ms)


def held_names(
    state: TableState, pinned: Iterable[TableState], live_owners: frozenset[str], now_ms: int
) -> set[str]:
    """Segments a live reader pinned or a running push names (a push whose
    owner is alive, or an entry opened by hand whose hold still stands)."""
    names: set[str] = set()
    for version in pinned:
        names |= visible_names(version)
    for entry in state.entries.values():
        if entry.state is EntryState.IN_PROGRESS and (entry.entry_id in live_owners or entry.held(now_ms)):
            names.update(entry.segments_from)
            names.update(entry.segments_to)
    return names


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
    ``state``), kept as a reader's pin keeps its version's."""
    pinned = list(pinned)
    config = state.config
    now = policy.now_ms
    readers = held_names(state, pinned, live_owners, now)
    held = readers | {seg.name for seg in state.segments.values() if seg.location in mirrored}
    visible = visible_names(state)
    protected = visible | held
    pinned_locations = {
        seg.location for version in pinned for seg in version.segments.values() if seg.name in held
    }
    pinned_locations |= mirrored
    condemn: dict[str, DeletionReason] = {}
    remove: list[str] = []
    kept: list[Kept] = []

    pinned_names = {name for version in pinned for name in visible_names(version)}

    def why_kept(name: str, keep: set[str]) -> str:
        """Why a segment due to go stays: the first of what protects it."""
        if name in pinned_names:
            return "pinned by a reader"
        if state.segments[name].location in mirrored and name in held:
            return "referenced by a Delta mirror version engines may still read"
        if name in visible and keep is protected:
            return "visible now"
        return "part of a running push"

    def take(names: Iterable[str], reason: DeletionReason, keep: set[str] = protected) -> None:
        for name in names:
            if name not in state.segments:
                continue
            if name in keep:
                kept.append(Kept(name, why_kept(name, keep)))
            else:
                condemn.setdefault(name, reason)

    if config.table_type is TableType.APPEND and config.time_retention_ms is not None:
        horizon = now - config.time_retention_ms
        expired = [
            seg.name for seg in state.segments.values() if seg.max_time is not None and seg.max_time < horizon
        ]
        # The mirror shows every visible segment, expired ones too, until the
        # version without them is published: they are condemned all the same
        # (so that version exists), and their files wait in pending while a
        # mirror version engines may read references them.
        take(expired, DeletionReason.EXPIRED, readers)

    def waiting(names: Iterable[str], why: str) -> None:
        kept.extend(Kept(state.segments[n].location, why) for n in names if n in state.segments)

    for entry in state.entries.values():
        tag = entry.entry_id[:8]
        if entry.state is EntryState.COMPLETED:
            remaining = [n for n in entry.segments_from if n in state.segments]
            due = entry.timestamp_ms + config.replaced_segments_retention_ms
            if not remaining:
                remove.append(entry.entry_id)
            elif due <= now:
                take(remaining, DeletionReason.REPLACED)
            else:
                waiting(remaining, f"replaced by push {tag}: kept for rollback until {_iso(due)}")
            continue
        due = entry.timestamp_ms + config.lineage_entry_cleanup_retention_ms
        old = due <= now
        if entry.state is EntryState.IN_PROGRESS and (
            not old or entry.entry_id in live_owners or entry.held(now)
        ):
            waiting(entry.segments_to, f"written by push {tag}, still running")
            continue
        remaining = [n for n in entry.segments_to if n in state.segments]
        if not remaining:
            if entry.state is EntryState.REVERTED or old:
                remove.append(entry.entry_id)
        elif not old:
            waiting(remaining, f"written by reverted push {tag}: kept for rollback until {_iso(due)}")
        elif old:
            reason = (
                DeletionReason.REVERTED_OUTPUT
                if entry.state is EntryState.REVERTED
                else DeletionReason.STALE_PUSH
            )
            take(remaining, reason)

    deletions: list[Deletion] = []
    young = now - policy.min_grace_ms
    for name, reason in condemn.items():
        seg = state.segments[name]
        if seg.location in mirrored:  # unregistered now; its file waits in pending for the mirror
            kept.append(Kept(seg.location, "referenced by a Delta mirror version engines may still read"))
        elif policy.force or seg.created_ms <= young:
            deletions.append(Deletion(seg.location, name, reason, seg.size_bytes, seg.entry_id))
        else:  # unregistered now; its file waits in pending for the minimum grace
            kept.append(Kept(seg.location, "younger than the minimum grace"))
    for location, queued in state.pending.items():
        if queued.reason is DeletionReason.ORPHAN_SEEN:
            continue  # judged with the listing below
        if location in mirrored:
            kept.append(Kept(location, "referenced by a Delta mirror version engines may still read"))
        elif location in pinned_locations:
            kept.append(Kept(location, "pinned by a reader"))
        elif policy.force or queued.marked_ms <= young:
            deletions.append(
                Deletion(location, queued.segment, queued.reason, queued.size_bytes, queued.entry_id)
            )
        else:
            kept.append(Kept(location, "younger than the minimum grace"))
    orphans: list[str] = []
    stray = 0
    convict: list[str] = []
    forget: list[str] = []
    if files is not None:
        # Two sightings, one clock: a file is recorded when first seen
        # unreferenced (ZooKeeper's time), and deleted only by a pass that
        # finds it still unreferenced a whole grace later by that clock, and
        # (when its storage time is known) that old by the file system too.
        known = {seg.location for seg in state.segments.values()} | set(state.pending)
        known |= {seg.location for version in pinned for seg in version.segments.values()}
        known |= mirrored
        running = {push_tag(owner) for owner in live_owners}
        seen = {loc: p for loc, p in state.pending.items() if p.reason is DeletionReason.ORPHAN_SEEN}
        beside = {
            posixpath.dirname(loc) for loc in known if loc not in seen
        }  # folders holding the table's files
        listed = {info.location: info for info in files}
        # Folders holding a file that is no marker: a marker alone in its folder (its files went)
        # goes at once, with no grace of its own.
        busy = {posixpath.dirname(loc) for loc in listed if not is_marker(loc)}
        horizon = now - policy.orphan_grace_ms
        for location, first in seen.items():
            info = listed.get(location)
            if info is None:
                forget.append(location)
            elif is_marker(location) and posixpath.dirname(location) in beside:
                forget.append(location)  # files of the table came beside it since: a marker of theirs
                kept.append(Kept(location, MARKER))
            elif is_marker(location) and posixpath.dirname(location) not in busy:
                convict.append(location)  # the last file beside it went: it goes too
                deletions.append(Deletion(location, "file", DeletionReason.ORPHAN, info.size, None))
                stray += info.size
            elif location in pinned_locations:
                kept.append(Kept(location, "seen unreferenced, but a reader holds it"))
            elif running and push_dir_owner(location.split("/", 1)[0]) in running:
                kept.append(Kept(location, "seen unreferenced, but a running push writes beside it"))
            elif first.marked_ms <= horizon and (info.mtime_ms is None or info.mtime_ms <= horizon):
                convict.append(location)
                deletions.append(Deletion(location, "file", DeletionReason.ORPHAN, info.size, None))
                stray += info.size
            else:
                kept.append(Kept(location, "seen unreferenced, not yet for the whole orphan grace"))
                stray += info.size
        for info in files:
            if info.location in known:
                continue
            top = info.location.split("/", 1)[0]
            if running and push_dir_owner(top) in running:
                kept.append(Kept(info.location, "written by a running push"))
            elif is_marker(info.location) and posixpath.dirname(info.location) in beside:
                kept.append(Kept(info.location, MARKER))
            elif is_marker(info.location) and posixpath.dirname(info.location) not in busy:
                orphans.append(info.location)  # seen and condemned in one mark: alone, it goes now
                convict.append(info.location)
                deletions.append(Deletion(info.location, "file", DeletionReason.ORPHAN, info.size, None))
                stray += info.size
            else:
                orphans.append(info.location)
                kept.append(Kept(info.location, "unreferenced: seen now, deleted a whole orphan grace later"))
                stray += info.size
    return Plan(
        config.name,
        condemn,
        tuple(deletions),
        tuple(remove),
        tuple(kept),
        tuple(orphans),
        stray,
        tuple(convict),
        tuple(forget),
    )
