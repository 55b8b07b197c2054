"""What a start takes with it, once every entry passed its rules: force
cleanup (``_clean_up``: a stale running entry, or a reverted one whose
names the push reuses, its uploads adopted or queued) and a REFRESH
table's snapshots beyond ``max_snapshots`` (``_queue_old_snapshots``).
Private to the transitions package: :func:`start_replace` is their caller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TypeVar

from segment_lineage.lineage.core.bucket_maps import editable
from segment_lineage.lineage.core.model import (
    DeletionReason,
    EntryState,
    LineageEntry,
    PendingDeletion,
    Segment,
    TableState,
)
from segment_lineage.lineage.core.transitions.common import _queue_for_deletion, _within
from segment_lineage.lineage.core.transitions.overlap_requirements import Overlap

V = TypeVar("V")


def _snapshot_chain(entries: Mapping[str, LineageEntry], current: frozenset[str]) -> list[LineageEntry]:
    """COMPLETED entries that produced ``current``, newest first, and so on back."""
    by_to: dict[frozenset[str], LineageEntry] = {}
    for entry in entries.values():
        if entry.state is EntryState.COMPLETED:
            by_to[frozenset(entry.segments_to)] = entry
    chain: list[LineageEntry] = []
    seen: set[str] = set()
    snapshot = current
    while snapshot and snapshot in by_to:
        entry = by_to[snapshot]
        if entry.entry_id in seen:
            break
        seen.add(entry.entry_id)
        chain.append(entry)
        snapshot = frozenset(entry.segments_from)
    return chain


def _queue_old_snapshots(
    entries: Mapping[str, LineageEntry],
    src: frozenset[str],
    max_snapshots: int,
    segments: dict[str, Segment],
    pending: dict[str, PendingDeletion],
    now_ms: int,
) -> None:
    """A REFRESH table's snapshots beyond ``max_snapshots``, queued for deletion."""
    chain = _snapshot_chain(entries, src)
    # Snapshots kept: the new one, the current one (src), then each
    # chain entry's `from`. Anything past max_snapshots goes.
    for index, entry in enumerate(chain):
        if index + 3 > max_snapshots:
            _queue_for_deletion(
                segments, pending, entry.segments_from, DeletionReason.PROACTIVE_CLEANUP, now_ms
            )


def _cleans(overlap: Overlap, force_cleanup: bool) -> bool:
    """Whether force cleanup takes this entry (its files queued, maybe some
    uploads adopted): a reverted one whose names this push reuses, or a dead
    push's (:func:`_clean_up`)."""
    entry = overlap.entry
    reused = entry.state is EntryState.REVERTED and bool(overlap.to_names)
    return force_cleanup and (reused or overlap.stale or overlap.abandoned)


def _maps_for(
    state: TableState, overlaps: Sequence[Overlap], force_cleanup: bool, trims: bool
) -> tuple[dict[str, Segment], dict[str, PendingDeletion]]:
    """The segments and pending deletions a start writes to: copies when it
    cleans up or ``trims`` old snapshots, else the maps as they are (nothing
    is edited there, so nothing is copied)."""
    if trims or any(_cleans(overlap, force_cleanup) for overlap in overlaps):
        return editable(state.segments), editable(state.pending)
    return _as_is(state.segments), _as_is(state.pending)


def _as_is(records: Mapping[str, V]) -> dict[str, V]:
    """A map a start leaves alone, passed where its edits would go: none is
    made there (``_cleans`` said so), so it needs no copy."""
    return records  # type: ignore[return-value]


def _clean_up(
    overlaps: Sequence[Overlap],
    dst: frozenset[str],
    interval: tuple[int, int] | None,
    force_cleanup: bool,
    segments: dict[str, Segment],
    pending: dict[str, PendingDeletion],
    now_ms: int,
) -> tuple[dict[str, LineageEntry], list[str], list[str]]:
    """Force cleanup, once every entry passed its rules: the entries kept
    (a reverted one without the names reused, a stale running one as a
    REVERTED trace of the names not reused), the ids of the running entries
    cleaned up, and their uploads the new ``to`` reuses. Files no longer
    referenced are queued in ``pending``."""
    entries: dict[str, LineageEntry] = {}
    cleaned: list[str] = []
    adopted: list[str] = []  # uploads of a cleaned-up entry that the new `to` reuses
    for overlap in overlaps:
        entry = overlap.entry
        if not _cleans(overlap, force_cleanup):
            entries[entry.entry_id] = entry
        elif entry.state is EntryState.REVERTED and overlap.to_names:
            _queue_for_deletion(segments, pending, overlap.to_names, DeletionReason.FORCE_CLEANUP, now_ms)
            left = tuple(n for n in entry.segments_to if n not in overlap.to_names)
            if left or entry.segments_from:
                entries[entry.entry_id] = dataclasses.replace(entry, segments_to=left)
        else:  # a dead push's entry
            adopted.extend(_clean_dead(entry, dst, interval, segments, pending, entries, now_ms))
            cleaned.append(entry.entry_id)
    return entries, cleaned, adopted


def _clean_dead(
    entry: LineageEntry,
    dst: frozenset[str],
    interval: tuple[int, int] | None,
    segments: dict[str, Segment],
    pending: dict[str, PendingDeletion],
    entries: dict[str, LineageEntry],
    now_ms: int,
) -> list[str]:
    """A dead push's entry: keep its uploads the new push names again (as
    Pinot does: a retry with the same names reuses them; returned), queue
    the rest, and keep a REVERTED trace of the names not reused."""
    reused = [n for n in entry.segments_to if n in dst and n in segments and _within(segments[n], interval)]
    reuse = set(reused)
    others = [n for n in entry.segments_to if n not in reuse]
    _queue_for_deletion(segments, pending, others, DeletionReason.FORCE_CLEANUP, now_ms)
    leftovers = tuple(n for n in entry.segments_to if n not in dst)
    if leftovers:
        entries[entry.entry_id] = dataclasses.replace(
            entry, segments_to=leftovers, state=EntryState.REVERTED, timestamp_ms=now_ms
        )
    return reused
