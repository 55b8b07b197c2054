"""Linear steps, counted: registering and completing a push's segments reads
each entry's name lists a bounded number of times per segment, not once per
segment per name (a lookup into a tuple inside a per-segment rule made a
40,000-segment push take 13-21 s instead of 0.3 s, and livelock beside small
commits). Operations are counted, not timed: the count for 40,000 segments
against 10,000 must grow about four times, not sixteen."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.model import Audit, Segment, TableConfig, TableState, TableType
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.store.memory import MemoryStore

ENTRY = "00000000-0000-4000-8000-000000000001"


class Counted(tuple[str, ...]):
    """A name list that counts the names each scan of it passes over."""

    scanned = 0

    def __contains__(self, item: object) -> bool:
        Counted.scanned += len(self)
        return tuple.__contains__(self, item)

    def __iter__(self) -> Iterator[str]:
        Counted.scanned += len(self)
        return tuple.__iter__(self)

    def index(self, *args: Any) -> int:
        Counted.scanned += len(self)
        return tuple.index(self, *args)


def _opened(n: int) -> tuple[TableState, list[Segment]]:
    m = LineageManager(MemoryStore())
    m.create_table(TableConfig.build("t", "/tmp/scaling-t", table_type=TableType.APPEND))
    names = [f"seg-{i:06d}" for i in range(n)]
    started = transitions.start_replace(m.table("t"), [], names, entry_id=ENTRY, audit=Audit("x"), now_ms=1)
    state = started.state
    entries = dict(state.entries)
    entries[ENTRY] = dataclasses.replace(entries[ENTRY], segments_to=Counted(names))
    segments = [Segment(name=x, location=f"p/{x}.parquet", rows=1, size_bytes=1) for x in names]
    return state.replace(entries=entries), segments


def _scans(n: int, step: str) -> int:
    state, segments = _opened(n)
    Counted.scanned = 0
    if step == "register":
        transitions.register_segments(state, segments, 2, ENTRY)
    else:
        transitions.complete_replace(state, ENTRY, segments, 2)
    return Counted.scanned


def test_registering_a_push_bound_to_its_entry_is_linear() -> None:
    small, large = _scans(10_000, "register"), _scans(40_000, "register")
    assert large / small < 6, (small, large)


def test_completing_a_push_is_linear() -> None:
    small, large = _scans(10_000, "complete"), _scans(40_000, "complete")
    assert large / small < 6, (small, large)


def test_an_end_shares_the_tables_maps_and_an_end_of_a_subset_copies_them() -> None:
    """Ending an entry changes no segment: the ended version shares the
    segment and pending maps it ended on (a copy is a pass over the whole
    table, twice per push before). A subset's end queues the names it
    leaves out, in copies, and the version it ended on keeps its own."""
    state, segments = _opened(1_000)
    registered = transitions.register_segments(state, segments, 2, ENTRY).state
    ended = transitions.end_replace(registered, ENTRY, 3).state
    assert ended.segments is registered.segments and ended.pending is registered.pending
    assert ended.entries[ENTRY].state.value == "COMPLETED"
    kept = [s.name for s in segments[:10]]
    part = transitions.end_replace(registered, ENTRY, 3, to_subset=kept).state
    assert part.segments is not registered.segments and len(part.segments) == 10
    assert len(registered.segments) == 1_000 and not registered.pending
    assert len(part.pending) == 990
