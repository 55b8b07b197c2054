"""The visibility rule, Pinot's, as a pure function.

A COMPLETED entry hides its ``from``; an IN_PROGRESS or REVERTED entry hides
its ``to``. Every other registered segment is visible. Each rule only removes,
so the order of entries does not matter.
"""

from __future__ import annotations

from collections.abc import Iterable

from lineage.model import EntryState, LineageEntry, Segment, TableState


def hidden_segments(entries: Iterable[LineageEntry]) -> set[str]:
    hidden: set[str] = set()
    for entry in entries:
        if entry.state is EntryState.COMPLETED:
            hidden.update(entry.segments_from)
        else:
            hidden.update(entry.segments_to)
    return hidden


def visible_names(state: TableState) -> set[str]:
    """Names of the segments a reader may see in this version of the table."""
    hidden = hidden_segments(state.entries.values())
    return {name for name in state.segments if name not in hidden}


def visible_segments(state: TableState) -> list[Segment]:
    """The visible segments, sorted by name."""
    hidden = hidden_segments(state.entries.values())
    return [state.segments[n] for n in sorted(state.segments) if n not in hidden]


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
