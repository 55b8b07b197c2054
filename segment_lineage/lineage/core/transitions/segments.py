"""Segments registered and deleted by hand or by a push: ``register_segments``
and ``delete_segments``.
"""

from __future__ import annotations

from collections.abc import Sequence

from segment_lineage.lineage.core.errors import (
    InvalidInputError,
    RefusedError,
    SegmentNotFoundError,
)
from segment_lineage.lineage.core.model import (
    Change,
    DeletionReason,
    EntryState,
    LineageEntry,
    Operation,
    PendingDeletion,
    Segment,
    TableState,
)
from segment_lineage.lineage.core.names import (
    check_location,
    check_segment_name,
    check_segment_names,
    check_text,
)
from segment_lineage.lineage.core.transitions.common import (
    _entry,
    _live_from,
    _queue_for_deletion,
    _shown,
    _span,
    _totals,
)
from segment_lineage.lineage.core.visibility import locked_segments


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
