"""Segments registered and deleted by hand or by a push: ``register_segments``
and ``delete_segments``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from segment_lineage.lineage.core.bucket_maps import editable
from segment_lineage.lineage.core.errors import (
    InvalidInputError,
    RefusedError,
    SegmentNotFoundError,
)
from segment_lineage.lineage.core.model import (
    Change,
    DeletionReason,
    LineageEntry,
    Operation,
    PendingDeletion,
    Segment,
    TableState,
)
from segment_lineage.lineage.core.names import (
    check_segment_names,
)
from segment_lineage.lineage.core.transitions.common import (
    _queue_for_deletion,
    _shown,
    _totals,
    require,
)
from segment_lineage.lineage.core.transitions.segment_requirements import (
    BindsToRunningEntry,
    DistinctLocations,
    Taken,
    WellFormed,
    segment_rules,
)
from segment_lineage.lineage.core.visibility import locked_segments


def _pending_after(
    state: TableState,
    segments: Mapping[str, Segment],
    taken_over: list[str],
    superseded: list[Segment],
    now_ms: int,
) -> Mapping[str, PendingDeletion]:
    """The pending deletions once a batch is registered: files it took over
    are no longer pending; an earlier upload of a name uploaded again to
    another file leaves that file pending (no longer referenced)."""
    pending: Mapping[str, PendingDeletion] = state.pending
    if taken_over:
        gone = frozenset(taken_over)
        pending = {k: v for k, v in state.pending.items() if k not in gone}
    moved = [old for old in superseded if old.location != segments[old.name].location]
    if moved:
        pending = dict(pending)
        for old in moved:
            pending[old.location] = PendingDeletion(
                old.location, old.name, DeletionReason.STRAY, now_ms, old.entry_id, old.size_bytes
            )
    return pending


def _check_batch(state: TableState, new: Sequence[Segment], entry_id: str | None) -> LineageEntry | None:
    """A batch's own checks (not empty, names, each well formed, locations
    distinct) and, with ``entry_id``, its binding: the running entry it binds to."""
    if not new:
        raise InvalidInputError("no segments to register")
    check_segment_names((s.name for s in new), "the batch")
    require(state, [*(WellFormed(seg) for seg in new), DistinctLocations(new)])
    if entry_id is None:
        return None
    require(state, [BindsToRunningEntry(entry_id)])
    return state.entries[entry_id]


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
    bound = _check_batch(state, new, entry_id)
    taken = Taken.of(state, bound)
    segments = editable(state.segments)
    taken_over: list[str] = []  # files retention saw unreferenced, now a segment's
    superseded: list[Segment] = []  # hidden uploads of a running replacement, uploaded again
    for seg in new:
        require(state, segment_rules(seg, taken))
        existing = taken.registered(seg.name)  # past the rules: itself, a hidden upload again
        if existing is not None:
            superseded.append(state.segments[existing])
        # Past the rules, only files seen unreferenced are queued there (case twins too).
        taken_over.extend(queued.location for queued in taken.queued.all(seg.location.casefold()))
        segments[seg.name] = Segment(
            name=seg.name,
            location=seg.location,
            rows=seg.rows,
            size_bytes=seg.size_bytes,
            checksum=seg.checksum,
            min_time=seg.min_time,
            max_time=seg.max_time,
            entry_id=taken.owner(seg.name),
            created_ms=now_ms,
        )
    count, rows, size = _totals(new)
    pending = _pending_after(state, segments, taken_over, superseded, now_ms)
    return Change(
        state=state.replace(segments=segments, pending=pending),
        operation=Operation.REGISTER,
        entry_id=bound.entry_id if bound is not None else None,
        segments=count,
        rows=rows,
        size_bytes=size,
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
        _check_unlocked(state, wanted)
    segments = editable(state.segments)
    pending = editable(state.pending)
    count, rows, size = _totals(state.segments[n] for n in wanted)
    _queue_for_deletion(segments, pending, wanted, DeletionReason.DELETED, now_ms)
    return Change(
        state=state.replace(segments=segments, pending=pending),
        operation=Operation.DELETE,
        segments=count,
        rows=rows,
        size_bytes=size,
    )


def _check_unlocked(state: TableState, wanted: Sequence[str]) -> None:
    """Lineage-exclusive delete: no segment of the batch is locked by a live entry."""
    locks = locked_segments(state)
    locked = {n: locks[n] for n in wanted if n in locks}
    if locked:
        entries = sorted(set(locked.values()))
        raise RefusedError(
            f"segment(s) {_shown(locked)} are locked by lineage entr"
            f"{'y' if len(entries) == 1 else 'ies'} {', '.join(entries)}",
            table=state.config.name,
            entry_id=entries[0],
            remedy="end or revert the entry first; retention removes replaced segments",
        )
