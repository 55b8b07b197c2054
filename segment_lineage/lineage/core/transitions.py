"""The lineage state machine: pure functions from one table state to the next.

Each function takes the current :class:`TableState`, the caller's arguments
and ``now_ms`` (the store's single clock), and returns a :class:`Change`, or
raises an error of :mod:`segment_lineage.lineage.core.errors` that names the broken precondition.
Nothing here performs I/O. The store bumps the version and records history.

Differences from Pinot, on purpose:

* No function deletes a file. Where Pinot deletes segments on the caller's
  thread (force cleanup, proactive cleanup), the segment is unregistered and
  its file is queued in ``pending`` for the retention daemon.
* A revert keeps the reverted ``to`` segments registered (hidden), so a later
  rollback can bring them back; retention reclaims them after
  ``lineage_entry_cleanup_retention``.
* A segment whose only lineage is a REVERTED entry cannot be registered again
  (that would resurrect reverted data, Pinot #13968).
* Force cleanup spares an entry whose pusher is alive or that was opened by
  hand and is still held, and names every entry it cleans up.
* A REFRESH table's snapshots beyond ``max_snapshots`` are queued at every
  start, with or without force cleanup; an end with a subset keeps the names
  left out in a REVERTED companion entry.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Iterable, Mapping, Sequence

from segment_lineage.lineage.core.errors import (
    ConflictError,
    EntryNotFoundError,
    InvalidInputError,
    RefusedError,
    RunningEntryConflict,
    SegmentNotFoundError,
)
from segment_lineage.lineage.core.model import (
    Audit,
    Change,
    DeletionReason,
    EntryState,
    LineageEntry,
    Operation,
    PendingDeletion,
    Segment,
    TableState,
    TableType,
)
from segment_lineage.lineage.core.names import (
    check_entry_id,
    check_location,
    check_segment_name,
    check_segment_names,
    check_text,
)
from segment_lineage.lineage.core.visibility import locked_segments, visibility_delta, visible_names


def _shown(names: Iterable[str], limit: int = 5) -> str:
    items = sorted(names)
    text = ", ".join(items[:limit])
    return text + (f" ... ({len(items)} in all)" if len(items) > limit else "")


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat().replace("+00:00", "Z")


def _span(interval: tuple[int, int]) -> str:
    return f"[{_iso(interval[0])}, {_iso(interval[1])})"


def _within(seg: Segment, interval: tuple[int, int] | None) -> bool:
    """Whether ``seg``'s rows lie in ``interval`` (always, without one)."""
    if interval is None:
        return True
    return (
        seg.min_time is not None
        and seg.max_time is not None
        and interval[0] <= seg.min_time
        and seg.max_time < interval[1]
    )


def _totals(segments: Iterable[Segment]) -> tuple[int, int, int]:
    count = rows = size = 0
    for seg in segments:
        count += 1
        rows += seg.rows
        size += seg.size_bytes
    return count, rows, size


def _queue_for_deletion(
    segments: dict[str, Segment],
    pending: dict[str, PendingDeletion],
    names: Iterable[str],
    reason: DeletionReason,
    now_ms: int,
) -> None:
    """Unregister ``names`` (those registered) and queue their files."""
    for name in names:
        seg = segments.pop(name, None)
        if seg is not None:
            pending[seg.location] = PendingDeletion(
                location=seg.location,
                segment=name,
                reason=reason,
                marked_ms=now_ms,
                entry_id=seg.entry_id,
                size_bytes=seg.size_bytes,
            )


def _live_from(state: TableState) -> dict[str, str]:
    """Names in the ``from`` of a live entry, mapped to that entry."""
    out: dict[str, str] = {}
    for entry in state.entries.values():
        if entry.live:
            for name in entry.segments_from:
                out.setdefault(name, entry.entry_id)
    return out


def _entry(state: TableState, entry_id: str) -> LineageEntry:
    check_entry_id(entry_id)
    entry = state.entries.get(entry_id)
    if entry is None:
        raise EntryNotFoundError(state.config.name, entry_id)
    return entry


def _check_segment(seg: Segment, time_column: str | None) -> None:
    check_segment_name(seg.name)
    check_location(seg.location)
    for what, value in (("rows", seg.rows), ("bytes", seg.size_bytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"segment {seg.name!r}: {what} must be a whole number >= 0")
    check_text(f"segment {seg.name!r} checksum", seg.checksum, 128)
    if (seg.min_time is None) != (seg.max_time is None):
        raise InvalidInputError(f"segment {seg.name!r}: give both min and max time, or neither")
    if seg.min_time is not None and seg.max_time is not None and seg.min_time > seg.max_time:
        raise InvalidInputError(f"segment {seg.name!r}: min time {seg.min_time} > max time {seg.max_time}")
    if time_column is None and seg.min_time is not None:
        raise InvalidInputError(f"segment {seg.name!r} has a time range but the table has no time column")


def register_segments(
    state: TableState,
    new: Sequence[Segment],
    now_ms: int,
    entry_id: str | None = None,
) -> Change:
    """Register a batch of segments in one commit.

    A segment named in the ``to`` of an IN_PROGRESS entry is bound to that
    entry (and stays hidden until the entry completes). With ``entry_id`` the
    binding is checked: the entry must be IN_PROGRESS and list the segment.
    """
    table = state.config.name
    if not new:
        raise InvalidInputError("no segments to register")
    check_segment_names((s.name for s in new), "the batch")
    for seg in new:
        _check_segment(seg, state.config.time_column)
    locations: dict[str, str] = {}
    for seg in new:
        if seg.location in locations:
            raise InvalidInputError(
                f"segments {locations[seg.location]!r} and {seg.name!r} share location {seg.location!r}"
            )
        locations[seg.location] = seg.name

    bound: LineageEntry | None = _entry(state, entry_id) if entry_id is not None else None
    if bound is not None and bound.state is not EntryState.IN_PROGRESS:
        raise RefusedError(
            f"entry {bound.entry_id} is {bound.state.value}; segments can only be added to an "
            "IN_PROGRESS entry",
            table=table,
            entry_id=bound.entry_id,
            expected="IN_PROGRESS",
            found=bound.state.value,
            remedy="start a new replacement",
        )

    bound_to = frozenset(bound.segments_to) if bound is not None else frozenset()
    folded = {name.casefold(): name for name in state.segments}
    in_progress_to: dict[str, str] = {}
    reverted_to: dict[str, str] = {}
    for entry in state.entries.values():
        target = (
            in_progress_to
            if entry.state is EntryState.IN_PROGRESS
            else (reverted_to if entry.state is EntryState.REVERTED else None)
        )
        if target is not None:
            for name in entry.segments_to:
                target.setdefault(name, entry.entry_id)
    replaced = _live_from(state)
    taken_locations = {seg.location.casefold(): seg.name for seg in state.segments.values()}
    pending_locations = {loc.casefold(): p for loc, p in state.pending.items()}

    segments = dict(state.segments)
    taken_over: list[str] = []
    superseded: list[Segment] = []
    for seg in new:
        existing = folded.get(seg.name.casefold())
        if existing is not None and _reupload(state, existing, seg.name, bound):
            # A hidden upload of a running replacement, uploaded again (a
            # retry, as Pinot allows): the new registration takes its place.
            superseded.append(state.segments[existing])
        elif existing is not None:
            problem = (
                "is already registered" if existing == seg.name else f"differs only in case from {existing!r}"
            )
            raise RefusedError(
                f"segment {seg.name!r} {problem} in table {table!r}",
                table=table,
                remedy="use a new segment name, or replace the segment with start-replace",
            )
        if taken_locations.get(seg.location.casefold(), seg.name) != seg.name:
            raise RefusedError(
                f"location {seg.location!r} of segment {seg.name!r} is used by segment "
                f"{taken_locations[seg.location.casefold()]!r}",
                table=table,
            )
        queued = pending_locations.get(seg.location.casefold())
        if queued is not None and queued.reason is DeletionReason.ORPHAN_SEEN:
            # Seen unreferenced by retention, not condemned: registering it
            # makes it a segment's file (an upload registered after a pass).
            taken_over.append(queued.location)
        elif queued is not None:
            # Retention may be deleting that file right now (Pinot #13968).
            raise RefusedError(
                f"location {seg.location!r} of segment {seg.name!r} is queued for deletion "
                f"(it held segment {queued.segment!r})",
                table=table,
                remedy="write the segment to a new location",
            )
        if seg.name in replaced:
            raise RefusedError(
                f"segment name {seg.name!r} is still listed as replaced by entry {replaced[seg.name]}; "
                "a segment of that name would stay hidden",
                table=table,
                entry_id=replaced[seg.name],
                remedy="use a new segment name",
            )
        owner = in_progress_to.get(seg.name)
        owner_entry = state.entries.get(bound.entry_id if bound is not None else owner or "")
        if owner_entry is not None and owner_entry.interval is not None:
            start, end = owner_entry.interval
            if seg.min_time is None or seg.max_time is None or seg.min_time < start or seg.max_time >= end:
                raise RefusedError(
                    f"segment {seg.name!r} holds rows outside the interval {_span(owner_entry.interval)} "
                    f"of entry {owner_entry.entry_id}",
                    table=table,
                    entry_id=owner_entry.entry_id,
                )
        if bound is not None:
            if seg.name not in bound_to:
                raise RefusedError(
                    f"segment {seg.name!r} is not in segmentsTo of entry {bound.entry_id}",
                    table=table,
                    entry_id=bound.entry_id,
                )
            owner = bound.entry_id
        elif owner is None and seg.name in reverted_to:
            raise RefusedError(
                f"segment {seg.name!r} belongs to reverted entry {reverted_to[seg.name]}; "
                "registering it would bring back reverted data",
                table=table,
                entry_id=reverted_to[seg.name],
                remedy="push under new segment names",
            )
        segments[seg.name] = Segment(
            name=seg.name,
            location=seg.location,
            rows=seg.rows,
            size_bytes=seg.size_bytes,
            checksum=seg.checksum,
            min_time=seg.min_time,
            max_time=seg.max_time,
            entry_id=owner,
            created_ms=now_ms,
        )
    count, rows, size = _totals(new)
    pending = state.pending
    if taken_over:
        gone = frozenset(taken_over)
        pending = {k: v for k, v in state.pending.items() if k not in gone}
    moved = [old for old in superseded if old.location != segments[old.name].location]
    if moved:
        pending = dict(pending)
        for old in moved:  # the earlier upload's file, no longer referenced
            pending[old.location] = PendingDeletion(
                old.location, old.name, DeletionReason.STRAY, now_ms, old.entry_id, old.size_bytes
            )
    return Change(
        state=state.replace(segments=segments, pending=pending),
        operation=Operation.REGISTER,
        entry_id=bound.entry_id if bound is not None else None,
        segments=count,
        rows=rows,
        size_bytes=size,
    )


def _reupload(state: TableState, existing: str, name: str, bound: LineageEntry | None) -> bool:
    """Whether registering ``name`` again replaces a hidden upload of a
    running replacement (its ``to``, bound to it) rather than a duplicate."""
    if existing != name:
        return False
    holder = state.entries.get(state.segments[existing].entry_id or "")
    return (
        holder is not None
        and holder.state is EntryState.IN_PROGRESS
        and name in holder.segments_to
        and (bound is None or bound.entry_id == holder.entry_id)
    )


def delete_segments(state: TableState, names: Sequence[str], now_ms: int) -> Change:
    """Unregister segments and queue their files for retention.

    With lineage-exclusive delete on, segments locked by a live entry are
    refused (the whole batch), naming the entry and the remedy.
    """
    table = state.config.name
    wanted = check_segment_names(names, "the delete")
    if not wanted:
        raise InvalidInputError("no segments to delete")
    missing = [n for n in wanted if n not in state.segments]
    if missing:
        raise SegmentNotFoundError(table, missing)
    if state.config.exclusive_delete:
        locks = locked_segments(state)
        locked = {n: locks[n] for n in wanted if n in locks}
        if locked:
            entries = sorted(set(locked.values()))
            raise RefusedError(
                f"segment(s) {_shown(locked)} are locked by lineage entr"
                f"{'y' if len(entries) == 1 else 'ies'} {', '.join(entries)}",
                table=table,
                entry_id=entries[0],
                remedy="end or revert the entry first; retention removes replaced segments",
            )
    segments = dict(state.segments)
    pending = dict(state.pending)
    count, rows, size = _totals(state.segments[n] for n in wanted)
    _queue_for_deletion(segments, pending, wanted, DeletionReason.DELETED, now_ms)
    return Change(
        state=state.replace(segments=segments, pending=pending),
        operation=Operation.DELETE,
        segments=count,
        rows=rows,
        size_bytes=size,
    )


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


def start_replace(
    state: TableState,
    segments_from: Sequence[str],
    segments_to: Sequence[str],
    *,
    entry_id: str,
    audit: Audit,
    now_ms: int,
    force_cleanup: bool = False,
    interval: tuple[int, int] | None = None,
    live_owners: frozenset[str] | None = None,
    held_until_ms: int | None = None,
) -> Change:
    """Open a replacement: ``segments_to`` stay hidden until it completes.

    ``interval`` ([start, end) in ms) records a replace-range push's intent:
    another IN_PROGRESS entry with an overlapping interval conflicts, even
    when their segments are disjoint. ``force_cleanup`` cleans up overlapping
    IN_PROGRESS entries that are stale: all of them when ``live_owners`` is
    None (Pinot's rule), else those whose id is not in ``live_owners`` (the
    entries whose pushing process still holds a session); never one whose
    hold (``held_until_ms``, given to entries opened by hand) still stands.
    The entries cleaned up are named in the change (``cleaned``). Like Pinot,
    a stale entry's uploads that the new ``to`` names again are kept and
    bound to the new entry (a retry with the same names reuses them); only
    the others are queued for deletion.
    """
    table = state.config.name
    check_entry_id(entry_id)
    src = check_segment_names(segments_from, "segmentsFrom")
    dst = check_segment_names(segments_to, "segmentsTo")
    if not src and not dst:
        raise InvalidInputError("segmentsFrom and segmentsTo cannot both be empty")
    both = set(src) & set(dst)
    if both:
        raise InvalidInputError(f"segment(s) {_shown(both)} are in both segmentsFrom and segmentsTo")
    if entry_id in state.entries:
        raise RefusedError(f"entry id {entry_id} is already used", table=table, entry_id=entry_id)
    if interval is not None:
        if state.config.time_column is None:
            raise InvalidInputError(f"table {table!r} has no time column: a time interval needs one")
        if interval[0] >= interval[1]:
            raise InvalidInputError(f"interval {_span(interval)} is empty: start must be before end")
    if held_until_ms is not None and held_until_ms < now_ms:
        raise InvalidInputError("a hold cannot end before the entry starts")

    visible = visible_names(state)
    not_visible = [n for n in src if n not in visible]
    if not_visible:
        raise RefusedError(
            f"segmentsFrom {_shown(not_visible)} are not visible segments of table {table!r}",
            table=table,
            expected="every segmentsFrom visible",
            found=f"{len(not_visible)} not visible",
        )
    present = [n for n in dst if n in visible]
    if present:
        raise ConflictError(
            f"segmentsTo {_shown(present)} already exist in table {table!r}",
            table=table,
            remedy="use new segment names",
        )

    src_set, dst_set = set(src), set(dst)
    segments = dict(state.segments)
    pending = dict(state.pending)
    entries: dict[str, LineageEntry] = {}
    cleaned: list[str] = []
    adopted: list[str] = []  # uploads of a cleaned-up entry that the new `to` reuses
    for entry in state.entries.values():
        overlap_from = src_set.intersection(entry.segments_from)
        overlap_to = dst_set.intersection(entry.segments_to)
        if entry.state is EntryState.REVERTED:
            if overlap_to:
                if not force_cleanup:
                    raise ConflictError(
                        f"segmentsTo {_shown(overlap_to)} belong to reverted entry "
                        f"{entry.entry_id} (kept so a rollback can be undone)",
                        table=table,
                        entry_id=entry.entry_id,
                        remedy="use new segment names, or --force-cleanup to discard them",
                    )
                _queue_for_deletion(segments, pending, overlap_to, DeletionReason.FORCE_CLEANUP, now_ms)
                left = tuple(n for n in entry.segments_to if n not in overlap_to)
                if not left and not entry.segments_from:
                    continue
                entries[entry.entry_id] = dataclasses.replace(entry, segments_to=left)
            else:
                entries[entry.entry_id] = entry
            continue
        overlap_intent = (
            entry.state is EntryState.IN_PROGRESS
            and interval is not None
            and entry.interval is not None
            and interval[0] < entry.interval[1]
            and entry.interval[0] < interval[1]
        )
        if entry.state is EntryState.IN_PROGRESS and (overlap_from or overlap_to or overlap_intent):
            owned = live_owners is not None and entry.entry_id in live_owners
            held = entry.held(now_ms)
            stale = not owned and not held
            if force_cleanup and stale:
                # A dead push: keep its uploads the new push names again (as
                # Pinot does: a retry with the same names reuses them), queue
                # the rest, and keep a REVERTED trace of the names not reused.
                reused = [
                    n
                    for n in entry.segments_to
                    if n in dst_set and n in segments and _within(segments[n], interval)
                ]
                adopted.extend(reused)
                reuse = set(reused)
                _queue_for_deletion(
                    segments,
                    pending,
                    [n for n in entry.segments_to if n not in reuse],
                    DeletionReason.FORCE_CLEANUP,
                    now_ms,
                )
                leftovers = tuple(n for n in entry.segments_to if n not in dst_set)
                if leftovers:
                    entries[entry.entry_id] = dataclasses.replace(
                        entry, segments_to=leftovers, state=EntryState.REVERTED, timestamp_ms=now_ms
                    )
                cleaned.append(entry.entry_id)
                continue
            if force_cleanup and not owned and entry.held_until_ms is not None and held:
                # Not a RunningEntryConflict: a push waiting for a lapsing
                # owner would wait in vain for a hold of hours.
                raise ConflictError(
                    f"entry {entry.entry_id} overlaps this push and was opened by hand "
                    f"({entry.audit.actor}); it is held until {_iso(entry.held_until_ms)}",
                    table=table,
                    entry_id=entry.entry_id,
                    remedy=f"end it, or revert it ('lineage revert --force {entry.entry_id}') if it is "
                    "abandoned; force cleanup takes it once its hold ends",
                )
            if overlap_intent and interval is not None and entry.interval is not None:
                raise RunningEntryConflict(
                    f"interval {_span(interval)} overlaps interval {_span(entry.interval)} of "
                    f"running entry {entry.entry_id}",
                    table=table,
                    entry_id=entry.entry_id,
                    remedy="wait for that push to end, or replace a disjoint interval",
                )
            if force_cleanup:
                raise RunningEntryConflict(
                    f"entry {entry.entry_id} overlaps this push and is still running "
                    "(its pushing process holds a live session)",
                    table=table,
                    entry_id=entry.entry_id,
                    remedy="wait for that push to end",
                )
        if overlap_from:
            raise ConflictError(
                f"segmentsFrom {_shown(overlap_from)} are already being replaced by entry "
                f"{entry.entry_id} ({entry.state.value})",
                table=table,
                entry_id=entry.entry_id,
                remedy="end or revert that entry first, or use --force-cleanup if it is stale",
            )
        if overlap_to:
            raise ConflictError(
                f"segmentsTo {_shown(overlap_to)} are already named by entry {entry.entry_id} "
                f"({entry.state.value})",
                table=table,
                entry_id=entry.entry_id,
                remedy="use new segment names, or --force-cleanup if that entry is stale",
            )
        entries[entry.entry_id] = entry

    taken = set(adopted)
    folded = {name.casefold() for name in segments if name not in taken}
    still = [n for n in dst if n.casefold() in folded]
    if still:
        raise ConflictError(
            f"segmentsTo {_shown(still)} are registered (hidden, or as a case twin) in table {table!r}",
            table=table,
            remedy="use new segment names",
        )

    replaced: dict[str, str] = {}
    for kept in entries.values():
        if kept.live:
            for name in kept.segments_from:
                replaced.setdefault(name, kept.entry_id)
    reused = [n for n in dst if n in replaced]
    if reused:
        raise ConflictError(
            f"segmentsTo {_shown(reused)} are still listed as replaced by entry "
            f"{replaced[reused[0]]}; segments of those names would stay hidden",
            table=table,
            entry_id=replaced[reused[0]],
            remedy="use new segment names",
        )

    if state.config.table_type is TableType.REFRESH and src:
        chain = _snapshot_chain(entries, frozenset(src))
        # Snapshots kept: the new one, the current one (src), then each
        # chain entry's `from`. Anything past max_snapshots goes.
        for index, entry in enumerate(chain):
            if index + 3 > state.config.max_snapshots:
                _queue_for_deletion(
                    segments, pending, entry.segments_from, DeletionReason.PROACTIVE_CLEANUP, now_ms
                )

    entries[entry_id] = LineageEntry(
        entry_id=entry_id,
        segments_from=src,
        segments_to=dst,
        state=EntryState.IN_PROGRESS,
        timestamp_ms=now_ms,
        created_ms=now_ms,
        audit=audit,
        interval=interval,
        held_until_ms=held_until_ms,
    )
    for name in adopted:
        segments[name] = dataclasses.replace(segments[name], entry_id=entry_id)
    return Change(
        state=state.replace(segments=segments, pending=pending, entries=entries),
        operation=Operation.START_REPLACE,
        entry_id=entry_id,
        segments=len(dst),
        cleaned=tuple(cleaned),
    )


def end_replace(
    state: TableState,
    entry_id: str,
    now_ms: int,
    to_subset: Sequence[str] | None = None,
) -> Change:
    """Complete a replacement: ``to`` becomes visible and ``from`` hidden, at once.

    Idempotent: ending a COMPLETED entry changes nothing.
    """
    table = state.config.name
    entry = _entry(state, entry_id)
    if entry.state is EntryState.COMPLETED:
        return Change(state=state, operation=Operation.END_REPLACE, entry_id=entry_id, changed=False)
    if entry.state is EntryState.REVERTED:
        raise RefusedError(
            f"entry {entry_id} was reverted and cannot be completed",
            table=table,
            entry_id=entry_id,
            expected="IN_PROGRESS",
            found="REVERTED",
            remedy="start a new replacement",
        )
    segments = dict(state.segments)
    pending = dict(state.pending)
    dst = entry.segments_to
    dropped: list[str] = []
    if to_subset is not None:
        subset = check_segment_names(to_subset, "the subset of segmentsTo")
        if not subset and entry.segments_to:
            raise InvalidInputError(
                "an empty subset of segmentsTo would turn this replacement into a delete; "
                "revert the entry instead"
            )
        listed = frozenset(entry.segments_to)
        extra = [n for n in subset if n not in listed]
        if extra:
            raise RefusedError(
                f"segment(s) {_shown(extra)} are not in segmentsTo of entry {entry_id}",
                table=table,
                entry_id=entry_id,
            )
        keep = set(subset)
        dropped = [n for n in entry.segments_to if n not in keep]
        _queue_for_deletion(segments, pending, dropped, DeletionReason.END_SUBSET, now_ms)
        dst = tuple(n for n in entry.segments_to if n in keep)
    missing_to = [n for n in dst if n not in segments]
    if missing_to:
        raise RefusedError(
            f"segmentsTo {_shown(missing_to)} of entry {entry_id} are not registered",
            table=table,
            entry_id=entry_id,
            expected="every segmentsTo registered",
            found=f"{len(missing_to)} missing",
            remedy="register them, or end with the subset that was uploaded",
        )
    missing_from = [n for n in entry.segments_from if n not in segments]
    if missing_from:
        raise RefusedError(
            f"segmentsFrom {_shown(missing_from)} of entry {entry_id} are gone",
            table=table,
            entry_id=entry_id,
            remedy="revert this entry with --force and push again",
        )
    done = dataclasses.replace(entry, segments_to=dst, state=EntryState.COMPLETED, timestamp_ms=now_ms)
    entries = dict(state.entries)
    entries[entry_id] = done
    if dropped:
        # The left-out names stay reserved by a REVERTED companion entry, so a
        # late upload under one of them (a slow task attempt) is refused.
        companion = str(uuid.uuid5(uuid.NAMESPACE_URL, f"segment-lineage:dropped:{entry_id}"))
        entries[companion] = LineageEntry(
            companion, (), tuple(dropped), EntryState.REVERTED, now_ms, now_ms, entry.audit
        )
    count, rows, size = _totals(segments[n] for n in dst)
    return Change(
        state=state.replace(segments=segments, pending=pending, entries=entries),
        operation=Operation.END_REPLACE,
        entry_id=entry_id,
        segments=count,
        rows=rows,
        size_bytes=size,
    )


def revert_replace(state: TableState, entry_id: str, now_ms: int, force: bool = False) -> Change:
    """Mark an entry REVERTED: its ``to`` is hidden and ``from`` shows again.

    Pinot's rules: REVERTED cannot be reverted again; IN_PROGRESS only with
    ``force``; a COMPLETED entry needs all of its ``from``; only the head of a
    chain can be reverted.
    """
    table = state.config.name
    entry = _entry(state, entry_id)
    if entry.state is EntryState.REVERTED:
        raise RefusedError(
            f"entry {entry_id} is already reverted",
            table=table,
            entry_id=entry_id,
            expected="IN_PROGRESS or COMPLETED",
            found="REVERTED",
        )
    if entry.state is EntryState.IN_PROGRESS and not force:
        raise RefusedError(
            f"entry {entry_id} is IN_PROGRESS; a push may still be running",
            table=table,
            entry_id=entry_id,
            expected="COMPLETED",
            found="IN_PROGRESS",
            remedy="pass --force if the push is known to be dead",
        )
    outputs = set(entry.segments_to)
    for other in state.entries.values():
        if other.entry_id != entry_id and other.live and outputs.intersection(other.segments_from):
            raise RefusedError(
                f"cannot revert entry {entry_id}: its segments were replaced again by entry "
                f"{other.entry_id} ({other.state.value})",
                table=table,
                entry_id=entry_id,
                remedy=f"revert entry {other.entry_id} first",
            )
    if entry.state is EntryState.COMPLETED:
        gone = [n for n in entry.segments_from if n not in state.segments]
        if gone:
            raise RefusedError(
                f"cannot revert entry {entry_id}: its replaced segments {_shown(gone)} were deleted",
                table=table,
                entry_id=entry_id,
                expected="every segmentsFrom still registered",
                found=f"{len(gone)} deleted",
            )
    entries = dict(state.entries)
    entries[entry_id] = dataclasses.replace(entry, state=EntryState.REVERTED, timestamp_ms=now_ms)
    return Change(
        state=state.replace(entries=entries),
        operation=Operation.REVERT_REPLACE,
        entry_id=entry_id,
        segments=len(entry.segments_to),
    )


def queue_files(
    state: TableState, locations: Sequence[str], now_ms: int, entry_id: str | None = None
) -> Change:
    """Queue files that no segment references (say, outputs of failed task
    attempts) for the retention daemon. Files of registered segments are refused."""
    table = state.config.name
    if not locations:
        raise InvalidInputError("no files to queue")
    registered = {seg.location.casefold(): seg.name for seg in state.segments.values()}
    pending = dict(state.pending)
    for location in locations:
        check_location(location)
        owner = registered.get(location.casefold())
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


def abandon_push(state: TableState, entry_id: str, files: Sequence[str], now_ms: int) -> Change:
    """A failed push, in one commit: revert its entry if it is still
    IN_PROGRESS, unregister the segments it registered, and queue those and
    every other file it wrote (``files``) for the retention daemon.

    A COMPLETED entry is left alone (the push landed). Unlike a revert, nothing
    is kept for a later rollback: a failed push has no snapshot to return to.
    """
    entry = _entry(state, entry_id)
    if entry.state is EntryState.COMPLETED:
        return Change(state=state, operation=Operation.ABANDON_PUSH, entry_id=entry_id, changed=False)
    entries = dict(state.entries)
    if entry.state is EntryState.IN_PROGRESS:
        entries[entry_id] = dataclasses.replace(entry, state=EntryState.REVERTED, timestamp_ms=now_ms)
    segments = dict(state.segments)
    pending = dict(state.pending)
    own = [n for n in entry.segments_to if n in segments and segments[n].entry_id == entry_id]
    _queue_for_deletion(segments, pending, own, DeletionReason.ABANDONED, now_ms)
    registered = {seg.location.casefold() for seg in segments.values()}
    for location in files:
        check_location(location)
        if location.casefold() not in registered and location not in pending:
            pending[location] = PendingDeletion(location, "file", DeletionReason.STRAY, now_ms, entry_id)
    return Change(
        state=state.replace(segments=segments, pending=pending, entries=entries),
        operation=Operation.ABANDON_PUSH,
        entry_id=entry_id,
        segments=len(own),
    )


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
    whose file went, and drop entries with nothing left."""
    if not condemn and not remove_entries and not orphans and not convict and not forget:
        return Change(state=state, operation=Operation.RETENTION_MARK, changed=False)
    segments = dict(state.segments)
    pending = dict(state.pending)
    for name, reason in condemn.items():
        _queue_for_deletion(segments, pending, [name], reason, now_ms)
    registered = {seg.location for seg in state.segments.values()} if orphans else set()
    for location in orphans:
        check_location(location)
        if location in registered:
            raise RefusedError(
                f"file {location!r} belongs to a registered segment: not an orphan", table=state.config.name
            )
        pending.setdefault(location, PendingDeletion(location, "file", DeletionReason.ORPHAN_SEEN, now_ms))
    for location in convict:
        seen = pending.get(location)
        if seen is None or seen.reason is not DeletionReason.ORPHAN_SEEN:
            raise RefusedError(
                f"file {location!r} is no longer an orphan seen unreferenced (registered meanwhile?)",
                table=state.config.name,
            )
        pending[location] = dataclasses.replace(seen, reason=DeletionReason.ORPHAN)
    for location in forget:
        if location in pending and pending[location].reason is DeletionReason.ORPHAN_SEEN:
            del pending[location]
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


def _completed_at(entry: LineageEntry, target: TableState) -> bool:
    """Whether ``entry`` had completed at ``target``: COMPLETED there, or gone
    from there (retention removed it, nothing being left to reclaim) while
    the segments it created are registered there as its own."""
    then = target.entries.get(entry.entry_id)
    if then is not None:
        return then.state is EntryState.COMPLETED
    return any(
        (seg := target.segments.get(name)) is not None and seg.entry_id == entry.entry_id
        for name in entry.segments_to
    )


def _restore_removed(
    state: TableState,
    target: TableState,
    entries: dict[str, LineageEntry],
    extra: set[str],
    now_ms: int,
    audit: Audit,
) -> list[str]:
    """Bring back, as REVERTED, the entries retention removed whose segments
    ``target`` does not show: an APPEND push's entry goes once it completed
    (its ``from`` is empty), yet its segments still name it. Returns their ids."""
    removed: dict[str, list[str]] = {}
    for name in sorted(extra):
        owner = state.segments[name].entry_id
        if owner is not None and owner not in entries:
            removed.setdefault(owner, []).append(name)
    for entry_id, names in removed.items():
        then = target.entries.get(entry_id)
        if then is not None:  # running or reverted at the target: its own record
            to = tuple(n for n in then.segments_to if n in state.segments) or tuple(names)
            entries[entry_id] = dataclasses.replace(
                then, segments_to=to, state=EntryState.REVERTED, timestamp_ms=now_ms
            )
        else:  # created after the target: rebuilt from the segments that name it
            created = min(state.segments[n].created_ms for n in names)
            entries[entry_id] = LineageEntry(
                entry_id, (), tuple(names), EntryState.REVERTED, now_ms, created, audit
            )
    return list(removed)


def rollback(state: TableState, target: TableState, now_ms: int, audit: Audit | None = None) -> Change:
    """Make the visible set equal to ``target``'s (an earlier or a later
    retained version) in one commit, by setting entry states.

    Entries COMPLETED at the target and REVERTED now are restored; entries
    COMPLETED now but not at the target (created after it, reverted or still
    running there) are reverted. Entries that retention removed since (a
    finished push with nothing left to reclaim, as every APPEND push) are
    judged by their segments, which still name them: one the target does not
    show comes back as a REVERTED entry (``audit`` says who, for one created
    after the target). Nothing is deleted, so a rollback is undone by rolling
    forward to a version after it. Refused, changing nothing, when a segment
    the target shows was reclaimed, when segments changed outside pushes since
    the target, or when a running push touches what would change.
    """
    table = state.config.name
    entries = dict(state.entries)
    changed: list[str] = []
    for entry_id, entry in state.entries.items():
        if entry.state is EntryState.IN_PROGRESS:
            continue
        want = EntryState.COMPLETED if _completed_at(entry, target) else EntryState.REVERTED
        if entry.state is not want:
            entries[entry_id] = dataclasses.replace(entry, state=want, timestamp_ms=now_ms)
            changed.append(entry_id)
    after = state.replace(entries=entries)
    # Only what differs is looked at (visibility_delta): the cost follows the
    # entries and segments that changed, not the size of the table.
    extra, hidden = visibility_delta(target, after)
    if extra:
        restored = _restore_removed(state, target, entries, extra, now_ms, audit or Audit("rollback"))
        if restored:
            changed += restored
            after = state.replace(entries=entries)
            extra, hidden = visibility_delta(target, after)
    reclaimed = sorted(n for n in hidden if n not in state.segments)
    if reclaimed:
        raise RefusedError(
            f"cannot roll back to version {target.version}: segment(s) {_shown(reclaimed)} it shows were "
            "reclaimed (by retention, or a REFRESH table's cleanup beyond max snapshots)",
            table=table,
            remedy="pick a later version ('lineage history' lists them)",
        )
    if extra or hidden:
        parts = [f"{_shown(sorted(extra))} would stay visible"] if extra else []
        parts += [f"{_shown(sorted(hidden))} would stay hidden"] if hidden else []
        raise RefusedError(
            f"cannot roll back to version {target.version}: segments changed outside pushes since then "
            f"({'; '.join(parts)})",
            table=table,
            remedy="add or delete those segments by hand, or pick another version",
        )
    moving = {n for e in changed for n in (*entries[e].segments_from, *entries[e].segments_to)}
    for entry in state.entries.values():
        if entry.state is EntryState.IN_PROGRESS and moving.intersection(
            (*entry.segments_from, *entry.segments_to)
        ):
            raise RefusedError(
                f"cannot roll back to version {target.version}: push {entry.entry_id} is IN_PROGRESS on "
                "segments the rollback would change",
                table=table,
                entry_id=entry.entry_id,
                remedy="wait for the push to finish, or revert it ('lineage revert --force') if it is dead",
            )
    if not changed:
        return Change(state=state, operation=Operation.ROLLBACK, changed=False)
    appearing = [state.segments[n] for n in visibility_delta(state, after)[0]]  # what comes back
    return Change(
        state=after,
        operation=Operation.ROLLBACK,
        segments=len(appearing),
        rows=sum(seg.rows for seg in appearing),
        size_bytes=sum(seg.size_bytes for seg in appearing),
    )
