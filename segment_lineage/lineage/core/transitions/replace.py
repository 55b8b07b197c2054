"""Replacements: ``start_replace`` opens an entry, ``end_replace`` completes
it (its ``to`` visible, its ``from`` hidden, at once), ``revert_replace``
undoes it. ``complete_replace`` registers a push's uploads, queues its stray
files and ends its entry in one change.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence

from segment_lineage.lineage.core.bucket_maps import editable
from segment_lineage.lineage.core.errors import RefusedError
from segment_lineage.lineage.core.model import (
    Audit,
    Change,
    DeletionReason,
    Detail,
    EntryState,
    LineageEntry,
    Operation,
    PendingDeletion,
    Segment,
    TableConfig,
    TableState,
    TableType,
    TimeUnit,
)
from segment_lineage.lineage.core.names import (
    check_entry_id,
    check_segment_names,
)
from segment_lineage.lineage.core.schema import (
    Schema,
    SchemaPolicy,
)
from segment_lineage.lineage.core.transitions.cleanup import _clean_up, _maps_for, _queue_old_snapshots
from segment_lineage.lineage.core.transitions.common import (
    Requirement,
    _entry,
    _queue_for_deletion,
    _registered_with,
    _totals,
    require,
)
from segment_lineage.lineage.core.transitions.deletions import queue_files
from segment_lineage.lineage.core.transitions.end_requirements import (
    ForcedIfRunning,
    FromRegistered,
    HeadOfChain,
    NotRevertedToEnd,
    NotRevertedYet,
    ReplacedStillRegistered,
    SubsetNotEmpty,
    SubsetOfTo,
    ToRegistered,
)
from segment_lineage.lineage.core.transitions.overlap_requirements import Overlap, overlap_rules
from segment_lineage.lineage.core.transitions.segments import register_segments
from segment_lineage.lineage.core.transitions.start_requirements import (
    EntryIdUnused,
    FromVisible,
    HoldNotBeforeStart,
    IntervalNeedsTimeColumn,
    IntervalNotEmpty,
    ReplacesSomething,
    SidesDisjoint,
    ToNotReplaced,
    ToNotVisible,
    ToUnregistered,
)
from segment_lineage.lineage.core.transitions.written import (
    check_only_its_own_left,
    with_time_unit,
    with_written_schema,
)


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
    whole: bool = False,
) -> Change:
    """Open a replacement: ``segments_to`` stay hidden until it completes.

    ``whole`` records a refresh's intent (it replaces every segment): it
    conflicts with another running refresh or replace-range push, even on a
    table with no segment.

    ``interval`` ([start, end) in ms) records a replace-range push's intent:
    another IN_PROGRESS entry with an overlapping interval conflicts, even
    when their segments are disjoint. ``force_cleanup`` cleans up overlapping
    IN_PROGRESS entries that are stale: all of them when ``live_owners`` is
    None (Pinot's rule), else those whose id is not in ``live_owners`` (the
    entries whose pushing process still holds a session), and then the
    abandoned ones that overlap nothing too (an append whose pusher died);
    never one whose hold (``held_until_ms``, given to entries opened by hand)
    still stands.
    The entries cleaned up are named in the change (``cleaned``). Like Pinot,
    a stale entry's uploads that the new ``to`` names again are kept and
    bound to the new entry (a retry with the same names reuses them); only
    the others are queued for deletion.
    """
    check_entry_id(entry_id)
    src = check_segment_names(segments_from, "segmentsFrom")
    dst = check_segment_names(segments_to, "segmentsTo")
    require(state, _start_rules(src, dst, entry_id, interval, held_until_ms, now_ms))
    src_set, dst_set = frozenset(src), frozenset(dst)
    overlaps = [
        Overlap.of(entry, src_set, dst_set, interval, live_owners, now_ms, whole)
        for entry in state.entries.values()
    ]
    require(state, (rule for overlap in overlaps for rule in overlap_rules(overlap, force_cleanup)))

    trims = state.config.table_type is TableType.REFRESH and bool(src)
    segments, pending = _maps_for(state, overlaps, force_cleanup, trims)
    entries, cleaned, adopted = _clean_up(
        overlaps, dst_set, interval, force_cleanup, segments, pending, now_ms
    )
    settled = state.replace(segments=segments, pending=pending, entries=entries)
    require(settled, [ToUnregistered(dst, frozenset(adopted)), ToNotReplaced(dst)])

    if trims:
        _queue_old_snapshots(entries, src_set, state.config.max_snapshots, segments, pending, now_ms)
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
        whole=whole,
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


def _start_rules(
    src: tuple[str, ...],
    dst: tuple[str, ...],
    entry_id: str,
    interval: tuple[int, int] | None,
    held_until_ms: int | None,
    now_ms: int,
) -> list[Requirement]:
    """What a start needs of the table before any overlap is looked at."""
    return [
        ReplacesSomething(src, dst),
        SidesDisjoint(src, dst),
        EntryIdUnused(entry_id),
        IntervalNeedsTimeColumn(interval),
        IntervalNotEmpty(interval),
        HoldNotBeforeStart(held_until_ms, now_ms),
        FromVisible(src),
        ToNotVisible(dst),
    ]


def end_replace(
    state: TableState,
    entry_id: str,
    now_ms: int,
    to_subset: Sequence[str] | None = None,
) -> Change:
    """Complete a replacement: ``to`` becomes visible and ``from`` hidden, at once.

    Idempotent: ending a COMPLETED entry changes nothing.
    """
    entry = _entry(state, entry_id)
    if entry.state is EntryState.COMPLETED:
        return Change(state=state, operation=Operation.END_REPLACE, entry_id=entry_id, changed=False)
    require(state, [NotRevertedToEnd(entry)])
    # The maps are copied only when a subset leaves names out: an end changes
    # no segment (a copy of a table's map is a pass over all of it).
    segments, pending = state.segments, state.pending
    dst: tuple[str, ...] = entry.segments_to
    dropped: list[str] = []
    if to_subset is not None:
        segments, pending = editable(state.segments), editable(state.pending)
        dst, dropped = _end_subset(state, entry, to_subset, segments, pending, now_ms)
    require(state.replace(segments=segments), [ToRegistered(entry_id, dst), FromRegistered(entry)])
    done = dataclasses.replace(entry, segments_to=dst, state=EntryState.COMPLETED, timestamp_ms=now_ms)
    entries = editable(state.entries)
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


def _end_subset(
    state: TableState,
    entry: LineageEntry,
    to_subset: Sequence[str],
    segments: dict[str, Segment],
    pending: dict[str, PendingDeletion],
    now_ms: int,
) -> tuple[tuple[str, ...], list[str]]:
    """The names an end with ``to_subset`` makes visible (the part of the
    entry's ``to`` it names), and those it leaves out (queued for deletion)."""
    subset = check_segment_names(to_subset, "the subset of segmentsTo")
    require(state, [SubsetNotEmpty(entry, subset), SubsetOfTo(entry, subset)])
    keep = set(subset)
    dropped = [n for n in entry.segments_to if n not in keep]
    _queue_for_deletion(segments, pending, dropped, DeletionReason.END_SUBSET, now_ms)
    return tuple(n for n in entry.segments_to if n in keep), dropped


def complete_replace(
    state: TableState,
    entry_id: str,
    uploads: Sequence[Segment],
    now_ms: int,
    strays: Sequence[str] = (),
    to_subset: Sequence[str] | None = None,
    *,
    schema: Schema | None = None,
    policy: SchemaPolicy = SchemaPolicy.ENFORCE,
    mode: str | None = None,
    time_unit: TimeUnit | None = None,
    audit: str | None = None,
) -> Change:
    """A push's last step as one change: register ``uploads`` bound to the
    IN_PROGRESS entry, queue ``strays`` (files no segment references) for
    retention, and end the entry (with ``to_subset``, as :func:`end_replace`).

    Each step's preconditions hold as if the three had committed one after
    the other; there is no state in between, so a reader never sees the
    uploads registered before the entry ends, and a crash leaves either
    nothing of it or all of it. Recorded as the end.

    Idempotent like :func:`end_replace`: completing again an entry that
    completed with these uploads changes nothing. No uploads: only the
    strays and the end (uploads registered earlier, one by one).

    ``schema``: the columns the push wrote, checked against the table's
    recorded schema under ``policy`` (:func:`segment_lineage.lineage.core.schema.resolve`)
    on this state, so two first pushes with different columns never both
    record theirs. ``mode`` (the push's, as the user named it) and the
    entry's interval go in the history record, with what became of the schema
    and ``audit`` (the checks its data passed, in words).
    """
    entry = _entry(state, entry_id)
    require(state, [NotRevertedToEnd(entry)])
    if entry.state is EntryState.COMPLETED and _registered_with(state, entry, uploads):
        return Change(state=state, operation=Operation.END_REPLACE, entry_id=entry_id, changed=False)
    config, note = with_written_schema(state, entry_id, schema, policy, mode)
    config = with_time_unit(config, time_unit, entry_id)
    registered = _before_end(state, entry_id, uploads, strays, config, now_ms)
    ended = end_replace(registered, entry_id, now_ms, to_subset)
    if config.schema_replaced_by == entry_id and config is not state.config:
        check_only_its_own_left(ended.state, entry_id)
    if mode is None and entry.interval is None and note is None and audit is None:
        return ended
    detail = Detail(mode=mode, interval=entry.interval, schema=note, audit=audit)
    return dataclasses.replace(ended, detail=detail)


def _before_end(
    state: TableState,
    entry_id: str,
    uploads: Sequence[Segment],
    strays: Sequence[str],
    config: TableConfig,
    now_ms: int,
) -> TableState:
    """A completion's state before its end: ``uploads`` registered, ``strays``
    queued, and ``config`` (its schema and time unit) in place."""
    registered = register_segments(state, uploads, now_ms, entry_id).state if uploads else state
    if strays:
        registered = queue_files(registered, strays, now_ms, entry_id).state
    if config is not state.config:
        registered = registered.replace(config=config)
    return registered


def revert_replace(state: TableState, entry_id: str, now_ms: int, force: bool = False) -> Change:
    """Mark an entry REVERTED: its ``to`` is hidden and ``from`` shows again.

    Pinot's rules: REVERTED cannot be reverted again; IN_PROGRESS only with
    ``force``; a COMPLETED entry needs all of its ``from``; only the head of a
    chain can be reverted.
    """
    entry = _entry(state, entry_id)
    if entry_id == state.config.schema_replaced_by:
        raise RefusedError(
            f"cannot revert entry {entry_id}: its push replaced the table's schema, and the data it "
            "hid has the old columns",
            table=state.config.name,
            entry_id=entry_id,
            remedy=f"undo it with a rollback (lineage rollback {state.config.name} --entry {entry_id}): "
            "the rows it replaced come back with their schema, and so does every push after it",
        )
    require(
        state,
        [
            NotRevertedYet(entry),
            ForcedIfRunning(entry, force),
            HeadOfChain(entry),
            ReplacedStillRegistered(entry),
        ],
    )
    entries = editable(state.entries)
    entries[entry_id] = dataclasses.replace(entry, state=EntryState.REVERTED, timestamp_ms=now_ms)
    return Change(
        state=state.replace(entries=entries),
        operation=Operation.REVERT_REPLACE,
        entry_id=entry_id,
        segments=len(entry.segments_to),
    )
