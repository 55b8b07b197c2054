"""What the transition families share: the :class:`Requirement` protocol
that their preconditions follow, message formatting, lookups in a table
state, and queuing a segment's file for the retention daemon.

The underscored helpers are private to the transitions package.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from segment_lineage.lineage.core.errors import (
    EntryNotFoundError,
)
from segment_lineage.lineage.core.model import (
    DeletionReason,
    LineageEntry,
    PendingDeletion,
    Segment,
    TableState,
)
from segment_lineage.lineage.core.names import (
    check_entry_id,
)
from segment_lineage.lineage.core.periods import format_time


class Requirement(Protocol):
    """One precondition of a transition, as data (pyiceberg's ``TableRequirement``).

    ``check`` returns when it holds in ``state`` and otherwise raises the error
    that names it: an :class:`InvalidInputError` for bad arguments, else a
    :class:`RefusedError` (or :class:`ConflictError`) that says, where the rule
    knows both, what it ``expected`` and what it ``found``. Nothing changed
    when one fails.
    """

    def check(self, state: TableState) -> None: ...


def require(state: TableState, requirements: Iterable[Requirement]) -> None:
    """Check ``requirements`` in order; the first that fails raises."""
    for requirement in requirements:
        requirement.check(state)


def _shown(names: Iterable[str], limit: int = 5) -> str:
    items = sorted(names)
    text = ", ".join(items[:limit])
    return text + (f" ... ({len(items)} in all)" if len(items) > limit else "")


def _iso(ms: int) -> str:
    return format_time(ms)


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


def _registered_with(state: TableState, entry: LineageEntry, uploads: Sequence[Segment]) -> bool:
    """Whether each of ``uploads`` is one of ``entry``'s, registered where it says
    (a push's last commit landed already: staging or ending again changes nothing)."""
    listed = frozenset(entry.segments_to)
    for upload in uploads:
        seg = state.segments.get(upload.name)
        if upload.name not in listed or seg is None or seg.location != upload.location:
            return False
    return True


def how_to_end(table: str, entry: LineageEntry) -> str:
    """How a running entry that no process ends gets ended: a staged push is
    published (with its set, when a push set staged it), one opened by hand ended."""
    staged = entry.staged
    if staged is None:
        return "end it"
    if staged.set_id is not None:
        return f"publish its set ('lineage publish --set {staged.set_id}')"
    return f"publish it ('lineage publish {table} {entry.entry_id}')"
