"""The retention rules: pure functions over one table's facts, each deciding
its part of a pass (see :mod:`segment_lineage.retention.planner`, which runs
them in order and merges their parts into one plan)."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from segment_lineage.lineage.core.model import (
    DeletionReason,
    EntryState,
    LineageEntry,
    PendingDeletion,
    TableState,
    TableType,
)
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


def held_names(
    state: TableState, pinned: Iterable[TableState], live_owners: frozenset[str], now_ms: int
) -> set[str]:
    """Segments a live reader pinned or a running push names (a push whose
    owner is alive, or an entry opened by hand whose hold still stands)."""
    names: set[str] = set()
    for version in pinned:
        names |= visible_names(version)
    for entry in state.entries.values():
        if _push_alive(entry, live_owners, now_ms):
            names.update(entry.segments_from)
            names.update(entry.segments_to)
    return names


def _push_alive(entry: LineageEntry, live_owners: frozenset[str], now_ms: int) -> bool:
    """Whether an entry's push still runs: the entry is in progress, and its
    push's owner is alive or (an entry opened by hand) its hold still stands."""
    return entry.state is EntryState.IN_PROGRESS and (entry.entry_id in live_owners or entry.held(now_ms))


MIRRORED = "referenced by a Delta mirror version engines may still read"


@dataclass(frozen=True)
class Facts:
    """What every rule reads: the table, the clock, and what protects a
    segment or a file. Built once per plan by :func:`facts`."""

    state: TableState
    policy: Policy
    pinned: tuple[TableState, ...]
    live_owners: frozenset[str]
    mirrored: frozenset[str]
    readers: frozenset[str]  # segments a live reader pinned or a running push names
    held: frozenset[str]  # readers, and segments a readable mirror version references
    visible: frozenset[str]
    pinned_names: frozenset[str]  # segments visible in a pinned version
    pinned_locations: frozenset[str]  # files of held segments in pinned versions, and mirrored files
    protected: frozenset[str]  # visible now, or held: computed once, every entry's rule reads it


def facts(
    state: TableState,
    policy: Policy,
    pinned: Iterable[TableState] = (),
    live_owners: frozenset[str] = frozenset(),
    mirrored: frozenset[str] = frozenset(),
) -> Facts:
    versions = tuple(pinned)
    readers = held_names(state, versions, live_owners, policy.now_ms)
    held = readers | {seg.name for seg in state.segments.values() if seg.location in mirrored}
    locations = {
        seg.location for version in versions for seg in version.segments.values() if seg.name in held
    }
    visible = frozenset(visible_names(state))
    return Facts(
        state=state,
        policy=policy,
        pinned=versions,
        live_owners=live_owners,
        mirrored=mirrored,
        readers=frozenset(readers),
        held=frozenset(held),
        visible=visible,
        pinned_names=frozenset(name for version in versions for name in visible_names(version)),
        pinned_locations=frozenset(locations | mirrored),
        protected=visible | held,
    )


@dataclass(frozen=True)
class Part:
    """What one rule decides; :func:`merge` joins the parts in rule order."""

    condemn: tuple[tuple[str, DeletionReason], ...] = ()
    deletions: tuple[Deletion, ...] = ()
    remove_entries: tuple[str, ...] = ()
    kept: tuple[Kept, ...] = ()
    orphans: tuple[str, ...] = ()
    stray_bytes: int = 0
    convict: tuple[str, ...] = ()
    forget: tuple[str, ...] = ()


def _why_kept(f: Facts, name: str, visible_keeps: bool) -> str:
    """Why a segment due to go stays: the first of what protects it."""
    if name in f.pinned_names:
        return "pinned by a reader"
    if f.state.segments[name].location in f.mirrored and name in f.held:
        return MIRRORED
    if name in f.visible and visible_keeps:
        return "visible now"
    return "part of a running push"


def _take(f: Facts, names: Iterable[str], reason: DeletionReason, visible_keeps: bool = True) -> Part:
    """Condemn ``names`` still registered, but those protected: held by a
    reader, a running push or the mirror, and visible now when
    ``visible_keeps`` (time retention takes visible segments too)."""
    keep = f.protected if visible_keeps else f.readers
    condemn: list[tuple[str, DeletionReason]] = []
    kept: list[Kept] = []
    for name in names:
        if name not in f.state.segments:
            continue
        if name in keep:
            kept.append(Kept(name, _why_kept(f, name, visible_keeps)))
        else:
            condemn.append((name, reason))
    return Part(condemn=tuple(condemn), kept=tuple(kept))


def time_retention(f: Facts) -> Part:
    """On an APPEND table with a time retention, segments whose data ended
    before the horizon go, visible or not.

    The mirror shows every visible segment, expired ones too, until the
    version without them is published: they are condemned all the same (so
    that version exists), and their files wait in pending while a mirror
    version engines may read references them."""
    config = f.state.config
    if config.table_type is not TableType.APPEND or config.time_retention_ms is None:
        return Part()
    horizon = f.policy.now_ms - config.time_retention_ms
    expired = [
        seg.name for seg in f.state.segments.values() if seg.max_time is not None and seg.max_time < horizon
    ]
    return _take(f, expired, DeletionReason.EXPIRED, visible_keeps=False)


def _waiting(f: Facts, names: Iterable[str], why: str) -> Part:
    segments = f.state.segments
    return Part(kept=tuple(Kept(segments[n].location, why) for n in names if n in segments))


def _entry(f: Facts, entry: LineageEntry) -> Part:
    """One lineage entry's due: its replaced or abandoned segments, or the
    entry itself once none of them remain."""
    if entry.state is EntryState.COMPLETED:
        return _completed(f, entry)
    return _unfinished(f, entry)


def _completed(f: Facts, entry: LineageEntry) -> Part:
    """A completed push: the segments it replaced go once kept long enough for rollback."""
    remaining = [n for n in entry.segments_from if n in f.state.segments]
    due = entry.timestamp_ms + f.state.config.replaced_segments_retention_ms
    if not remaining:
        return Part(remove_entries=(entry.entry_id,))
    if due <= f.policy.now_ms:
        return _take(f, remaining, DeletionReason.REPLACED)
    tag = entry.entry_id[:8]
    return _waiting(f, remaining, f"replaced by push {tag}: kept for rollback until {format_time(due)}")


def _unfinished(f: Facts, entry: LineageEntry) -> Part:
    """A running, reverted or abandoned push: what it wrote goes once its
    entry is old, unless its push still runs."""
    now = f.policy.now_ms
    due = entry.timestamp_ms + f.state.config.lineage_entry_cleanup_retention_ms
    if entry.state is EntryState.IN_PROGRESS and (due > now or _push_alive(entry, f.live_owners, now)):
        return _waiting(f, entry.segments_to, f"written by push {entry.entry_id[:8]}, still running")
    return _left_behind(f, entry, due)


def _left_behind(f: Facts, entry: LineageEntry, due: int) -> Part:
    """What a push that no longer runs wrote: kept until ``due`` (a reverted
    push's, for rollback), then taken; the entry goes once none is left."""
    old = due <= f.policy.now_ms
    remaining = [n for n in entry.segments_to if n in f.state.segments]
    reverted = entry.state is EntryState.REVERTED
    if not remaining:
        return Part(remove_entries=(entry.entry_id,) if reverted or old else ())
    if not old:
        why = f"written by reverted push {entry.entry_id[:8]}: kept for rollback until {format_time(due)}"
        return _waiting(f, remaining, why)
    return _take(f, remaining, DeletionReason.REVERTED_OUTPUT if reverted else DeletionReason.STALE_PUSH)


def entry_lifecycle(f: Facts) -> Part:
    """Pinot's lineage cleanup, entry by entry (the module's first two rules)."""
    return merge(_entry(f, entry) for entry in f.state.entries.values())


def grace(f: Facts, condemn: dict[str, DeletionReason]) -> Part:
    """Queued files go once they have waited ``min_grace`` (unless
    ``force``), with the files of the segments condemned now; a file a
    readable mirror version or a reader's pin references waits."""
    young = f.policy.now_ms - f.policy.min_grace_ms
    return merge([_condemned_files(f, condemn, young), _queued_files(f, young)])


def _condemned_files(f: Facts, condemn: dict[str, DeletionReason], young: int) -> Part:
    """The files of the segments condemned now (unregistered by this pass:
    a file kept waits in pending, for the mirror or the minimum grace)."""
    deletions: list[Deletion] = []
    kept: list[Kept] = []
    for name, reason in condemn.items():
        seg = f.state.segments[name]
        if seg.location in f.mirrored:
            kept.append(Kept(seg.location, MIRRORED))
        elif f.policy.force or seg.created_ms <= young:
            deletions.append(Deletion(seg.location, name, reason, seg.size_bytes, seg.entry_id))
        else:
            kept.append(Kept(seg.location, "younger than the minimum grace"))
    return Part(deletions=tuple(deletions), kept=tuple(kept))


def _queued_files(f: Facts, young: int) -> Part:
    """The files already queued, but orphans seen (judged with the listing,
    by the orphan rule)."""
    deletions: list[Deletion] = []
    kept: list[Kept] = []
    for location, queued in f.state.pending.items():
        if queued.reason is DeletionReason.ORPHAN_SEEN:
            continue
        if location in f.mirrored:
            kept.append(Kept(location, MIRRORED))
        elif location in f.pinned_locations:
            kept.append(Kept(location, "pinned by a reader"))
        elif f.policy.force or queued.marked_ms <= young:
            deletions.append(
                Deletion(location, queued.segment, queued.reason, queued.size_bytes, queued.entry_id)
            )
        else:
            kept.append(Kept(location, "younger than the minimum grace"))
    return Part(deletions=tuple(deletions), kept=tuple(kept))


@dataclass(frozen=True)
class _Listing:
    """The listing against the table: which files it knows, which folders
    hold its files, which folders hold anything but markers."""

    listed: dict[str, FileInfo]
    known: frozenset[str]
    seen: dict[str, PendingDeletion]
    beside: frozenset[str]  # folders holding the table's files
    busy: frozenset[str]  # folders holding a file that is no marker
    running: frozenset[str]  # push tags of live owners

    def by_running_push(self, location: str) -> bool:
        return bool(self.running) and push_dir_owner(location.split("/", 1)[0]) in self.running


def _known(f: Facts) -> set[str]:
    """Every file the table knows: its segments', those queued, those of the
    segments of pinned versions, and those the mirror references."""
    state = f.state
    known = {seg.location for seg in state.segments.values()} | set(state.pending)
    known |= {seg.location for version in f.pinned for seg in version.segments.values()}
    return known | f.mirrored


def _listing(f: Facts, files: Iterable[FileInfo]) -> _Listing:
    state = f.state
    known = _known(f)
    seen = {loc: p for loc, p in state.pending.items() if p.reason is DeletionReason.ORPHAN_SEEN}
    listed = {info.location: info for info in files}
    return _Listing(
        listed=listed,
        known=frozenset(known),
        seen=seen,
        beside=frozenset(posixpath.dirname(loc) for loc in known if loc not in seen),
        busy=frozenset(posixpath.dirname(loc) for loc in listed if not is_marker(loc)),
        running=frozenset(push_tag(owner) for owner in f.live_owners),
    )


def _orphan(info: FileInfo) -> Deletion:
    return Deletion(info.location, "file", DeletionReason.ORPHAN, info.size, None)


def _second_sighting(f: Facts, at: _Listing, location: str, first: PendingDeletion) -> Part:
    """A file recorded as seen unreferenced, judged again."""
    info = at.listed.get(location)
    folder = posixpath.dirname(location)
    horizon = f.policy.now_ms - f.policy.orphan_grace_ms
    if info is None:
        return Part(forget=(location,))
    if is_marker(location) and folder in at.beside:  # files of the table came beside it since: theirs
        return Part(forget=(location,), kept=(Kept(location, MARKER),))
    if is_marker(location) and folder not in at.busy:  # the last file beside it went: it goes too
        return Part(convict=(location,), deletions=(_orphan(info),), stray_bytes=info.size)
    if location in f.pinned_locations:
        return Part(kept=(Kept(location, "seen unreferenced, but a reader holds it"),))
    if at.by_running_push(location):
        return Part(kept=(Kept(location, "seen unreferenced, but a running push writes beside it"),))
    if first.marked_ms <= horizon and (info.mtime_ms is None or info.mtime_ms <= horizon):
        return Part(convict=(location,), deletions=(_orphan(info),), stray_bytes=info.size)
    why = "seen unreferenced, not yet for the whole orphan grace"
    return Part(kept=(Kept(location, why),), stray_bytes=info.size)


def _first_sighting(at: _Listing, info: FileInfo) -> Part:
    """A listed file nothing references and no pass recorded yet."""
    location = info.location
    folder = posixpath.dirname(location)
    if at.by_running_push(location):
        return Part(kept=(Kept(location, "written by a running push"),))
    if is_marker(location) and folder in at.beside:
        return Part(kept=(Kept(location, MARKER),))
    if is_marker(location) and folder not in at.busy:  # seen and condemned in one mark: alone, it goes now
        return Part(
            orphans=(location,), convict=(location,), deletions=(_orphan(info),), stray_bytes=info.size
        )
    why = "unreferenced: seen now, deleted a whole orphan grace later"
    return Part(orphans=(location,), kept=(Kept(location, why),), stray_bytes=info.size)


def orphans(f: Facts, files: Iterable[FileInfo]) -> Part:
    """Two sightings, one clock: a file is recorded when first seen
    unreferenced (ZooKeeper's time), and deleted only by a pass that finds it
    still unreferenced a whole grace later by that clock, and (when its
    storage time is known) that old by the file system too. A marker alone
    in its folder (its files went) goes at once, with no grace of its own."""
    listing = list(files)
    at = _listing(f, listing)
    again = [_second_sighting(f, at, location, first) for location, first in at.seen.items()]
    new = [_first_sighting(at, info) for info in listing if info.location not in at.known]
    return merge([*again, *new])


def merge(parts: Iterable[Part]) -> Part:
    """The parts joined in order; a segment condemned twice keeps its first reason."""
    condemn: dict[str, DeletionReason] = {}
    deletions: list[Deletion] = []
    remove: list[str] = []
    kept: list[Kept] = []
    found: list[str] = []
    convict: list[str] = []
    forget: list[str] = []
    stray = 0
    for part in parts:
        for name, reason in part.condemn:
            condemn.setdefault(name, reason)
        deletions += part.deletions
        remove += part.remove_entries
        kept += part.kept
        found += part.orphans
        convict += part.convict
        forget += part.forget
        stray += part.stray_bytes
    return Part(
        tuple(condemn.items()),
        tuple(deletions),
        tuple(remove),
        tuple(kept),
        tuple(found),
        stray,
        tuple(convict),
        tuple(forget),
    )
