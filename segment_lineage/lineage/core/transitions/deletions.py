"""Files queued for the retention daemon, and what retention records: stray
files (``queue_files``), a failed push (``abandon_push``), retention's marks
(``retention_mark``) and the files it deleted (``clear_pending``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from segment_lineage.lineage.core.bucket_maps import editable
from segment_lineage.lineage.core.errors import (
    InvalidInputError,
    RefusedError,
)
from segment_lineage.lineage.core.lookups import locations_folded
from segment_lineage.lineage.core.model import (
    Change,
    DeletionReason,
    EntryState,
    Operation,
    PendingDeletion,
    Segment,
    TableState,
)
from segment_lineage.lineage.core.names import (
    check_entry_id,
    check_location,
    check_segment_name,
)
from segment_lineage.lineage.core.transitions.common import (
    _queue_for_deletion,
)


def queue_files(
    state: TableState, locations: Sequence[str], now_ms: int, entry_id: str | None = None
) -> Change:
    """Queue files that no segment references (say, outputs of failed task
    attempts) for the retention daemon. Files of registered segments are refused."""
    table = state.config.name
    if not locations:
        raise InvalidInputError("no files to queue")
    registered = locations_folded(state.segments)  # kept with the table: no pass over it
    pending = editable(state.pending)
    for location in locations:
        check_location(location)
        owner = next(iter(registered.all(location.casefold())), None)
        if owner is not None:
            raise RefusedError(
                f"file {location!r} belongs to registered segment {owner!r}",
                table=table,
                remedy="delete the segment instead",
            )
        if location not in pending:
            name = location.rsplit("/", 1)[-1].split(".", 1)[0] or "file"
            pending[location] = PendingDeletion(
                location=location,
                segment=name if _is_name(name) else "file",
                reason=DeletionReason.STRAY,
                marked_ms=now_ms,
                entry_id=entry_id,
            )
    return Change(
        state=state.replace(pending=pending),
        operation=Operation.QUEUE_FILES,
        entry_id=entry_id,
        segments=len(locations),
    )


def _is_name(name: str) -> bool:
    try:
        check_segment_name(name)
    except InvalidInputError:
        return False
    return True


def abandon_push(state: TableState, entry_id: str, files: Mapping[str, int], now_ms: int) -> Change:
    """A failed push, in one commit: revert its entry if it is still
    IN_PROGRESS, unregister the segments it registered, and queue those and
    every other file it wrote (``files``: location -> size in bytes) for the
    retention daemon. A file a retention pass saw unreferenced meanwhile is
    queued now too: it need not wait out the orphan grace, its push says
    what it is.

    A COMPLETED entry is left alone (the push landed). Unlike a revert, nothing
    is kept for a later rollback: a failed push has no snapshot to return to.
    An entry already gone (retention removed it while the push was stopped
    past its session) leaves its files, which only this push knows of:
    they are queued all the same.
    """
    entry = state.entries.get(entry_id)
    if entry is None:
        check_entry_id(entry_id)
    elif entry.state is EntryState.COMPLETED:
        return Change(state=state, operation=Operation.ABANDON_PUSH, entry_id=entry_id, changed=False)
    entries = editable(state.entries)
    if entry is not None and entry.state is EntryState.IN_PROGRESS:
        entries[entry_id] = dataclasses.replace(entry, state=EntryState.REVERTED, timestamp_ms=now_ms)
    segments = editable(state.segments)
    pending = editable(state.pending)
    listed = entry.segments_to if entry is not None else ()
    own = [n for n in listed if n in segments and segments[n].entry_id == entry_id]
    _queue_for_deletion(segments, pending, own, DeletionReason.ABANDONED, now_ms)
    _queue_written(segments, pending, files, entry_id, now_ms)
    return Change(
        state=state.replace(segments=segments, pending=pending, entries=entries),
        operation=Operation.ABANDON_PUSH,
        entry_id=entry_id,
        segments=len(own),
    )


def _queue_written(
    segments: Mapping[str, Segment],
    pending: dict[str, PendingDeletion],
    files: Mapping[str, int],
    entry_id: str,
    now_ms: int,
) -> None:
    """Queue the files a failed push wrote (location -> size) that no segment
    references, and that are not queued already but as seen unreferenced."""
    registered = {seg.location.casefold() for seg in segments.values()}
    for location, size in files.items():
        check_location(location)
        seen = pending.get(location)
        if location.casefold() not in registered and (
            seen is None or seen.reason is DeletionReason.ORPHAN_SEEN
        ):
            pending[location] = PendingDeletion(
                location, "file", DeletionReason.STRAY, now_ms, entry_id, size
            )


def _see_orphans(
    state: TableState, pending: dict[str, PendingDeletion], orphans: Sequence[str], now_ms: int
) -> None:
    """Record files first seen unreferenced, as ORPHAN_SEEN with now; a
    registered segment's file is refused."""
    registered = {seg.location for seg in state.segments.values()} if orphans else set()
    for location in orphans:
        check_location(location)
        if location in registered:
            raise RefusedError(
                f"file {location!r} belongs to a registered segment: not an orphan", table=state.config.name
            )
        pending.setdefault(location, PendingDeletion(location, "file", DeletionReason.ORPHAN_SEEN, now_ms))


def _convict_orphans(state: TableState, pending: dict[str, PendingDeletion], convict: Sequence[str]) -> None:
    """Condemn orphans seen a grace ago (ORPHAN: never registered again);
    one no longer seen as an orphan is refused."""
    for location in convict:
        seen = pending.get(location)
        if seen is None or seen.reason is not DeletionReason.ORPHAN_SEEN:
            raise RefusedError(
                f"file {location!r} is no longer an orphan seen unreferenced (registered meanwhile?)",
                table=state.config.name,
            )
        pending[location] = dataclasses.replace(seen, reason=DeletionReason.ORPHAN)


def _forget_orphans(pending: dict[str, PendingDeletion], forget: Sequence[str]) -> None:
    """Forget files seen unreferenced whose file went (a file queued otherwise stays)."""
    for location in forget:
        if location in pending and pending[location].reason is DeletionReason.ORPHAN_SEEN:
            del pending[location]


def retention_mark(
    state: TableState,
    condemn: Mapping[str, DeletionReason],
    remove_entries: Sequence[str],
    now_ms: int,
    orphans: Sequence[str] = (),
    convict: Sequence[str] = (),
    forget: Sequence[str] = (),
) -> Change:
    """Retention's intent, recorded before any file is touched: unregister the
    condemned segments into ``pending``, record files first seen unreferenced
    (``orphans``, as ORPHAN_SEEN, with now), condemn those seen so a grace ago
    (``convict``: ORPHAN, from then on never registered again), forget those
    whose file went, and drop entries with nothing left. A condemned name
    no longer registered is passed over (its segment went meanwhile)."""
    condemn = {name: reason for name, reason in condemn.items() if name in state.segments}
    if not any((condemn, remove_entries, orphans, convict, forget)):
        return Change(state=state, operation=Operation.RETENTION_MARK, changed=False)
    segments = editable(state.segments)
    pending = editable(state.pending)
    for name, reason in condemn.items():
        _queue_for_deletion(segments, pending, [name], reason, now_ms)
    _see_orphans(state, pending, orphans, now_ms)
    _convict_orphans(state, pending, convict)
    _forget_orphans(pending, forget)
    removed = set(remove_entries)
    entries = {k: v for k, v in state.entries.items() if k not in removed}
    return Change(
        state=state.replace(segments=segments, pending=pending, entries=entries),
        operation=Operation.RETENTION_MARK,
        segments=len(condemn) + len(convict),
    )


def clear_pending(state: TableState, locations: Sequence[str], size_bytes: int = 0) -> Change:
    """Forget pending deletions whose files are gone."""
    gone = [loc for loc in locations if loc in state.pending]
    if not gone:
        return Change(state=state, operation=Operation.RETENTION_CLEAR, changed=False)
    cleared = set(gone)
    pending = {k: v for k, v in state.pending.items() if k not in cleared}
    return Change(
        state=state.replace(pending=pending),
        operation=Operation.RETENTION_CLEAR,
        segments=len(gone),
        size_bytes=size_bytes,
    )
