"""What registering a batch of segments requires: :func:`register_segments`'s
preconditions, one small object per rule.

Each is frozen data with a ``check(state)`` that returns when the rule holds
and raises the error naming it otherwise (see :class:`Requirement`). First
the batch as a whole (:class:`WellFormed` for each segment,
:class:`DistinctLocations`, :class:`BindsToRunningEntry`), then each segment
in turn against the table (:func:`segment_rules`), so the first segment
that breaks a rule is the one named. What the per-segment rules look up is
indexed once per batch (:class:`Taken`): the cost follows the batch and the
table, not their product.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from segment_lineage.lineage.core.errors import InvalidInputError, RefusedError
from segment_lineage.lineage.core.lookups import Lookup, locations_folded, names_folded, queued_folded
from segment_lineage.lineage.core.model import (
    DeletionReason,
    EntryState,
    LineageEntry,
    Segment,
    TableState,
)
from segment_lineage.lineage.core.names import check_location, check_segment_name, check_text
from segment_lineage.lineage.core.transitions.common import (
    Requirement,
    _entry,
    _iso,
    _live_from,
    _span,
    _within,
)

# ---- the batch -------------------------------------------------------------------


@dataclass(frozen=True)
class WellFormed:
    """A segment's name, location, counts, checksum and time range are valid,
    and it has a time range only when the table has a time column."""

    seg: Segment

    def check(self, state: TableState) -> None:
        seg = self.seg
        check_segment_name(seg.name)
        check_location(seg.location)
        for what, value in (("rows", seg.rows), ("bytes", seg.size_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(f"segment {seg.name!r}: {what} must be a whole number >= 0")
        check_text(f"segment {seg.name!r} checksum", seg.checksum, 128)
        _check_time_range(seg, state.config.time_column)


def _check_time_range(seg: Segment, time_column: str | None) -> None:
    """Both ends of a segment's time range or neither, in order, and only in a table with a time column."""
    if (seg.min_time is None) != (seg.max_time is None):
        raise InvalidInputError(f"segment {seg.name!r}: give both min and max time, or neither")
    if seg.min_time is not None and seg.max_time is not None and seg.min_time > seg.max_time:
        raise InvalidInputError(
            f"segment {seg.name!r}: min time {_iso(seg.min_time)} is after max time {_iso(seg.max_time)}"
        )
    if time_column is None and seg.min_time is not None:
        raise InvalidInputError(f"segment {seg.name!r} has a time range but the table has no time column")


@dataclass(frozen=True)
class DistinctLocations:
    """No two segments of the batch share a location, ignoring case (as a
    segment's location and the table's are compared: :class:`LocationFree`)."""

    new: Sequence[Segment]

    def check(self, state: TableState) -> None:
        locations: dict[str, Segment] = {}
        for seg in self.new:
            other = locations.setdefault(seg.location.casefold(), seg)
            if other is not seg:
                shared = (
                    f"share location {seg.location!r}"
                    if other.location == seg.location
                    else f"have locations {other.location!r} and {seg.location!r}, alike but for case"
                )
                raise InvalidInputError(f"segments {other.name!r} and {seg.name!r} {shared}")


@dataclass(frozen=True)
class BindsToRunningEntry:
    """The entry a batch is bound to exists and is IN_PROGRESS."""

    entry_id: str

    def check(self, state: TableState) -> None:
        bound = _entry(state, self.entry_id)
        if bound.state is not EntryState.IN_PROGRESS:
            raise RefusedError(
                f"entry {bound.entry_id} is {bound.state.value}; segments can only be added to an "
                "IN_PROGRESS entry",
                table=state.config.name,
                entry_id=bound.entry_id,
                expected="IN_PROGRESS",
                found=bound.state.value,
                remedy="start a new replacement",
            )


# ---- each segment against the table ------------------------------------------------


@dataclass(frozen=True)
class Taken:
    """What a batch's names and locations are checked against, indexed once."""

    bound: LineageEntry | None  # the entry the batch is bound to, if any
    bound_to: frozenset[str]  # its `to`, as a set (looked up once per segment)
    folded: Lookup  # casefolded registered name -> the names
    locations: Lookup  # casefolded location of registered segments -> their names
    queued: Lookup  # casefolded location queued for deletion -> the PendingDeletions
    replaced: Mapping[str, str]  # name in a live entry's `from` -> that entry
    running_to: Mapping[str, str]  # name in an IN_PROGRESS entry's `to` -> that entry
    reverted_to: Mapping[str, str]  # name in a REVERTED entry's `to` -> that entry

    @classmethod
    def of(cls, state: TableState, bound: LineageEntry | None) -> Taken:
        running_to: dict[str, str] = {}
        reverted_to: dict[str, str] = {}
        for entry in state.entries.values():
            target = (
                running_to
                if entry.state is EntryState.IN_PROGRESS
                else (reverted_to if entry.state is EntryState.REVERTED else None)
            )
            if target is not None:
                for name in entry.segments_to:
                    target.setdefault(name, entry.entry_id)
        return cls(
            bound=bound,
            bound_to=frozenset(bound.segments_to) if bound is not None else frozenset(),
            folded=names_folded(state.segments),
            locations=locations_folded(state.segments),
            queued=queued_folded(state.pending),
            replaced=_live_from(state),
            running_to=running_to,
            reverted_to=reverted_to,
        )

    def registered(self, name: str) -> str | None:
        """The registered segment ``name`` is: itself, else a case twin of it."""
        names = self.folded.all(name.casefold())
        return name if name in names else next(iter(names), None)

    def reupload(self, state: TableState, name: str) -> bool:
        """Whether registering ``name`` again replaces a hidden upload of a
        running replacement (its ``to``, bound to it) rather than a duplicate."""
        if name not in self.folded.all(name.casefold()):
            return False
        holder = state.entries.get(state.segments[name].entry_id or "")
        if holder is None or holder.state is not EntryState.IN_PROGRESS:
            return False
        if self.bound is not None:
            return self.bound.entry_id == holder.entry_id and name in self.bound_to
        return self.running_to.get(name) == holder.entry_id or name in holder.segments_to

    def owner(self, name: str) -> str | None:
        """The entry a segment of this name is registered for."""
        return self.bound.entry_id if self.bound is not None else self.running_to.get(name)


def segment_rules(seg: Segment, taken: Taken) -> tuple[Requirement, ...]:
    """The rules one segment of a batch must pass, in the order they are checked."""
    return (
        NameFree(seg, taken),
        LocationFree(seg, taken),
        LocationNotQueued(seg, taken),
        NameNotReplaced(seg, taken),
        WithinEntryInterval(seg, taken),
        ListedByBoundEntry(seg, taken),
        NotReverted(seg, taken),
    )


@dataclass(frozen=True)
class NameFree:
    """The name is not registered, nor a case twin of a registered name,
    unless it is a running replacement's hidden upload, uploaded again (a
    retry, as Pinot allows): then the new registration takes its place."""

    seg: Segment
    taken: Taken

    def check(self, state: TableState) -> None:
        name = self.seg.name
        existing = self.taken.registered(name)
        if existing is not None and not self.taken.reupload(state, name):
            table = state.config.name
            problem = (
                "is already registered" if existing == name else f"differs only in case from {existing!r}"
            )
            raise RefusedError(
                f"segment {name!r} {problem} in table {table!r}",
                table=table,
                expected="a name no registered segment has",
                found=f"segment {existing!r}",
                remedy="use a new segment name, or replace the segment with start-replace",
            )


@dataclass(frozen=True)
class LocationFree:
    """No other registered segment has the location."""

    seg: Segment
    taken: Taken

    def check(self, state: TableState) -> None:
        seg = self.seg
        holder = next((h for h in self.taken.locations.all(seg.location.casefold()) if h != seg.name), None)
        if holder is not None:
            raise RefusedError(
                f"location {seg.location!r} of segment {seg.name!r} is used by segment {holder!r}",
                table=state.config.name,
                expected="a location no other segment uses",
                found=f"segment {holder!r}",
            )


@dataclass(frozen=True)
class LocationNotQueued:
    """The location is not queued for deletion: retention may be deleting that
    file right now (Pinot #13968). A file only seen unreferenced by retention
    (ORPHAN_SEEN) is not condemned: registering it makes it a segment's file."""

    seg: Segment
    taken: Taken

    def check(self, state: TableState) -> None:
        seg = self.seg
        there = self.taken.queued.all(seg.location.casefold())  # case twins too: any one condemned
        queued = next((q for q in there if q.reason is not DeletionReason.ORPHAN_SEEN), None)
        if queued is not None:
            raise RefusedError(
                f"location {seg.location!r} of segment {seg.name!r} is queued for deletion "
                f"(it held segment {queued.segment!r})",
                table=state.config.name,
                expected="a location not queued for deletion",
                found=f"queued ({queued.reason.value})",
                remedy="write the segment to a new location",
            )


@dataclass(frozen=True)
class NameNotReplaced:
    """The name is not listed as replaced by a live entry (a segment of that
    name would stay hidden)."""

    seg: Segment
    taken: Taken

    def check(self, state: TableState) -> None:
        name = self.seg.name
        entry_id = self.taken.replaced.get(name)
        if entry_id is not None:
            raise RefusedError(
                f"segment name {name!r} is still listed as replaced by entry {entry_id}; "
                "a segment of that name would stay hidden",
                table=state.config.name,
                entry_id=entry_id,
                remedy="use a new segment name",
            )


@dataclass(frozen=True)
class WithinEntryInterval:
    """A segment registered for a replace-range entry holds rows of its interval only."""

    seg: Segment
    taken: Taken

    def check(self, state: TableState) -> None:
        seg = self.seg
        entry = state.entries.get(self.taken.owner(seg.name) or "")
        if entry is None or entry.interval is None or _within(seg, entry.interval):
            return
        rows = (
            "no time range"
            if seg.min_time is None or seg.max_time is None
            else f"times {_iso(seg.min_time)} to {_iso(seg.max_time)}"
        )
        raise RefusedError(
            f"segment {seg.name!r} holds rows outside the interval {_span(entry.interval)} "
            f"of entry {entry.entry_id}",
            table=state.config.name,
            entry_id=entry.entry_id,
            expected=f"rows within {_span(entry.interval)}",
            found=rows,
        )


@dataclass(frozen=True)
class ListedByBoundEntry:
    """A segment bound to an entry is named in that entry's ``to``."""

    seg: Segment
    taken: Taken

    def check(self, state: TableState) -> None:
        bound = self.taken.bound
        if bound is not None and self.seg.name not in self.taken.bound_to:
            raise RefusedError(
                f"segment {self.seg.name!r} is not in segmentsTo of entry {bound.entry_id}",
                table=state.config.name,
                entry_id=bound.entry_id,
            )


@dataclass(frozen=True)
class NotReverted:
    """A segment no running entry claims does not belong to a reverted entry:
    registering it would bring back reverted data (Pinot #13968)."""

    seg: Segment
    taken: Taken

    def check(self, state: TableState) -> None:
        name = self.seg.name
        entry_id = self.taken.reverted_to.get(name)
        if entry_id is not None and self.taken.owner(name) is None:
            raise RefusedError(
                f"segment {name!r} belongs to reverted entry {entry_id}; "
                "registering it would bring back reverted data",
                table=state.config.name,
                entry_id=entry_id,
                remedy="push under new segment names",
            )
