"""The visibility rule, Pinot's, as a pure function.

A COMPLETED entry hides its ``from``; an IN_PROGRESS or REVERTED entry hides
its ``to``. Every other registered segment is visible. Each rule only removes,
so the order of entries does not matter.
"""

from __future__ import annotations

from collections.abc import Iterable

from segment_lineage.lineage.core.bucket_maps import BucketMap, changed_keys
from segment_lineage.lineage.core.model import EntryState, LineageEntry, Segment, TableState


def hides(entry: LineageEntry) -> tuple[str, ...]:
    """The names one entry hides: the rule itself."""
    return entry.segments_from if entry.state is EntryState.COMPLETED else entry.segments_to


def hidden_segments(entries: Iterable[LineageEntry]) -> set[str]:
    hidden: set[str] = set()
    for entry in entries:
        hidden.update(hides(entry))
    return hidden


def visible_names(state: TableState) -> set[str]:
    """Names of the segments a reader may see in this version of the table."""
    hidden = hidden_segments(state.entries.values())
    return {name for name in state.segments if name not in hidden}


def visible_segments(state: TableState) -> list[Segment]:
    """The visible segments, sorted by name."""
    hidden = hidden_segments(state.entries.values())
    return [state.segments[n] for n in sorted(state.segments) if n not in hidden]


def visible_locations(state: TableState) -> list[str]:
    """The locations of :func:`visible_segments`, in the same order (by the
    segments' names), read from the segment map's names and locations
    alone: a version read from the store builds no segment for this."""
    hidden = hidden_segments(state.entries.values())
    segments = state.segments
    if isinstance(segments, BucketMap):
        location_of: dict[str, str] = {}
        for names, locations in segments.field("location"):
            location_of.update(zip(names, locations, strict=True))
    else:
        location_of = {name: seg.location for name, seg in segments.items()}
    return [location_of[name] for name in sorted(location_of) if name not in hidden]


def locked_segments(state: TableState) -> dict[str, str]:
    """Segments a plain delete must not touch while lineage-exclusive delete is on.

    IN_PROGRESS locks ``from`` and ``to``; COMPLETED locks ``from``; REVERTED
    locks nothing. Maps each locked name to the entry that locks it.
    """
    locks: dict[str, str] = {}
    for entry in state.entries.values():
        if entry.state is EntryState.IN_PROGRESS:
            for name in (*entry.segments_from, *entry.segments_to):
                locks.setdefault(name, entry.entry_id)
        elif entry.state is EntryState.COMPLETED:
            for name in entry.segments_from:
                locks.setdefault(name, entry.entry_id)
    return locks


def _visible_among(state: TableState, names: set[str]) -> set[str]:
    """Which of ``names`` ``state`` shows: only entries naming them are looked at."""
    hidden: set[str] = set()
    for entry in state.entries.values():
        hidden.update(n for n in hides(entry) if n in names)
    return {n for n in names if n in state.segments and n not in hidden}


def _same_effect(x: LineageEntry, y: LineageEntry) -> bool:
    return (
        x.state is y.state
        and (x.segments_from is y.segments_from or x.segments_from == y.segments_from)
        and (x.segments_to is y.segments_to or x.segments_to == y.segments_to)
    )


def visibility_delta(a: TableState, b: TableState) -> tuple[set[str], set[str]]:
    """The names ``b`` shows and ``a`` does not, and those ``a`` shows and ``b``
    does not, without building either visible set.

    A name can only change visibility if it was registered or removed between
    the two, or an entry naming it differs (added, dropped, or in another
    state). The cost follows what changed and the entries' name lists, not the
    number of segments (the segment maps are compared by identity, then
    bucket by bucket where the store's bucket ids differ: ``changed_keys``).
    """
    touched = changed_keys(a.segments, b.segments)
    touched.update(_named_by_changed_entries(a, b))
    if not touched:
        return set(), set()
    was, now = _visible_among(a, touched), _visible_among(b, touched)
    return now - was, was - now


def _named_by_changed_entries(a: TableState, b: TableState) -> set[str]:
    """The names an entry added, dropped or changed between ``a`` and ``b`` names, before or after."""
    named: set[str] = set()
    for entry_id in a.entries.keys() | b.entries.keys():
        x, y = a.entries.get(entry_id), b.entries.get(entry_id)
        if x is y or (x is not None and y is not None and _same_effect(x, y)):
            continue
        for entry in (x, y):
            if entry is not None:
                named.update(entry.segments_from)
                named.update(entry.segments_to)
    return named
