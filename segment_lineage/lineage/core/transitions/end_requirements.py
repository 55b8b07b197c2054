"""What ending or reverting a replacement requires: :func:`end_replace`'s and
:func:`revert_replace`'s preconditions, one small object per rule.

Each is frozen data with a ``check(state)`` that returns when the rule holds
and raises the error naming it otherwise (see :class:`Requirement`), in the
order the transition lists them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from segment_lineage.lineage.core.errors import InvalidInputError, RefusedError
from segment_lineage.lineage.core.model import EntryState, LineageEntry, TableState
from segment_lineage.lineage.core.transitions.common import _shown

# ---- end ---------------------------------------------------------------------------


@dataclass(frozen=True)
class NotRevertedToEnd:
    """A reverted entry cannot be completed."""

    entry: LineageEntry

    def check(self, state: TableState) -> None:
        if self.entry.state is EntryState.REVERTED:
            raise RefusedError(
                f"entry {self.entry.entry_id} was reverted and cannot be completed",
                table=state.config.name,
                entry_id=self.entry.entry_id,
                expected="IN_PROGRESS",
                found="REVERTED",
                remedy="start a new replacement",
            )


@dataclass(frozen=True)
class SubsetNotEmpty:
    """Ending with an empty subset of a non-empty ``to`` would be a delete."""

    entry: LineageEntry
    subset: Sequence[str]

    def check(self, state: TableState) -> None:
        if not self.subset and self.entry.segments_to:
            raise InvalidInputError(
                "an empty subset of segmentsTo would turn this replacement into a delete; "
                "revert the entry instead"
            )


@dataclass(frozen=True)
class SubsetOfTo:
    """The subset an entry ends with is part of its ``to``."""

    entry: LineageEntry
    subset: Sequence[str]

    def check(self, state: TableState) -> None:
        listed = frozenset(self.entry.segments_to)
        extra = [n for n in self.subset if n not in listed]
        if extra:
            raise RefusedError(
                f"segment(s) {_shown(extra)} are not in segmentsTo of entry {self.entry.entry_id}",
                table=state.config.name,
                entry_id=self.entry.entry_id,
                expected=f"names among the {len(listed)} of segmentsTo",
                found=f"{len(extra)} not among them",
            )


@dataclass(frozen=True)
class ToRegistered:
    """Every segment the entry ends with (``dst``) is registered."""

    entry_id: str
    dst: Sequence[str]

    def check(self, state: TableState) -> None:
        missing = [n for n in self.dst if n not in state.segments]
        if missing:
            raise RefusedError(
                f"segmentsTo {_shown(missing)} of entry {self.entry_id} are not registered",
                table=state.config.name,
                entry_id=self.entry_id,
                expected="every segmentsTo registered",
                found=f"{len(missing)} missing",
                remedy="register them, or end with the subset that was uploaded",
            )


@dataclass(frozen=True)
class FromRegistered:
    """Every segment the entry replaces is still registered."""

    entry: LineageEntry

    def check(self, state: TableState) -> None:
        missing = [n for n in self.entry.segments_from if n not in state.segments]
        if missing:
            raise RefusedError(
                f"segmentsFrom {_shown(missing)} of entry {self.entry.entry_id} are gone",
                table=state.config.name,
                entry_id=self.entry.entry_id,
                expected="every segmentsFrom registered",
                found=f"{len(missing)} gone",
                remedy="revert this entry with --force and push again",
            )


# ---- revert ------------------------------------------------------------------------


@dataclass(frozen=True)
class NotRevertedYet:
    """A reverted entry cannot be reverted again."""

    entry: LineageEntry

    def check(self, state: TableState) -> None:
        if self.entry.state is EntryState.REVERTED:
            raise RefusedError(
                f"entry {self.entry.entry_id} is already reverted",
                table=state.config.name,
                entry_id=self.entry.entry_id,
                expected="IN_PROGRESS or COMPLETED",
                found="REVERTED",
            )


@dataclass(frozen=True)
class ForcedIfRunning:
    """An IN_PROGRESS entry is reverted only with ``force`` (its push may be
    alive), unless it is staged (its push is done: it waits for a publish)."""

    entry: LineageEntry
    force: bool

    def check(self, state: TableState) -> None:
        if self.entry.state is EntryState.IN_PROGRESS and not self.force and self.entry.staged is None:
            raise RefusedError(
                f"entry {self.entry.entry_id} is IN_PROGRESS; a push may still be running",
                table=state.config.name,
                entry_id=self.entry.entry_id,
                expected="COMPLETED",
                found="IN_PROGRESS",
                remedy="pass --force if the push is known to be dead",
            )


@dataclass(frozen=True)
class HeadOfChain:
    """No live entry replaced this entry's segments again: only the head of a
    chain can be reverted."""

    entry: LineageEntry

    def check(self, state: TableState) -> None:
        entry_id = self.entry.entry_id
        outputs = set(self.entry.segments_to)
        for other in state.entries.values():
            if other.entry_id != entry_id and other.live and outputs.intersection(other.segments_from):
                raise RefusedError(
                    f"cannot revert entry {entry_id}: its segments were replaced again by entry "
                    f"{other.entry_id} ({other.state.value})",
                    table=state.config.name,
                    entry_id=entry_id,
                    expected="no live entry replacing its segmentsTo",
                    found=f"entry {other.entry_id} ({other.state.value})",
                    remedy=f"revert entry {other.entry_id} first",
                )


@dataclass(frozen=True)
class ReplacedStillRegistered:
    """A COMPLETED entry is reverted only while every segment it replaced is
    registered (they show again)."""

    entry: LineageEntry

    def check(self, state: TableState) -> None:
        if self.entry.state is not EntryState.COMPLETED:
            return
        gone = [n for n in self.entry.segments_from if n not in state.segments]
        if gone:
            raise RefusedError(
                f"cannot revert entry {self.entry.entry_id}: its replaced segments {_shown(gone)} "
                "were deleted",
                table=state.config.name,
                entry_id=self.entry.entry_id,
                expected="every segmentsFrom still registered",
                found=f"{len(gone)} deleted",
            )
