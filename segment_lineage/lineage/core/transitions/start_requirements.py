"""What a new replacement requires: :func:`start_replace`'s preconditions,
one small object per rule.

Each is frozen data with a ``check(state)`` that returns when the rule holds
and raises the error naming it otherwise (see :class:`Requirement`). They run
in a fixed order, and the first that fails decides the error:

1. the arguments (:class:`ReplacesSomething` ... :class:`HoldNotBeforeStart`);
2. what readers see now (:class:`FromVisible`, :class:`ToNotVisible`);
3. every existing entry this push touches, in entry order (``overlap_requirements``:
   :class:`Overlap` and :func:`overlap_rules`); force cleanup takes a stale one instead;
4. after force cleanup, names still taken (:class:`ToUnregistered`,
   :class:`ToNotReplaced`), checked against the state force cleanup left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from segment_lineage.lineage.core.errors import (
    ConflictError,
    InvalidInputError,
    RefusedError,
)
from segment_lineage.lineage.core.lookups import names_folded
from segment_lineage.lineage.core.model import TableState
from segment_lineage.lineage.core.transitions.common import _live_from, _shown, _span
from segment_lineage.lineage.core.visibility import hidden_segments

# ---- the arguments ---------------------------------------------------------------


@dataclass(frozen=True)
class ReplacesSomething:
    """A replacement names at least one segment, on either side."""

    src: tuple[str, ...]
    dst: tuple[str, ...]

    def check(self, state: TableState) -> None:
        if not self.src and not self.dst:
            raise InvalidInputError("segmentsFrom and segmentsTo cannot both be empty")


@dataclass(frozen=True)
class SidesDisjoint:
    """No segment is both replaced and a replacement."""

    src: tuple[str, ...]
    dst: tuple[str, ...]

    def check(self, state: TableState) -> None:
        both = set(self.src) & set(self.dst)
        if both:
            raise InvalidInputError(f"segment(s) {_shown(both)} are in both segmentsFrom and segmentsTo")


@dataclass(frozen=True)
class EntryIdUnused:
    """The new entry's id names no entry of the table."""

    entry_id: str

    def check(self, state: TableState) -> None:
        existing = state.entries.get(self.entry_id)
        if existing is not None:
            raise RefusedError(
                f"entry id {self.entry_id} is already used",
                table=state.config.name,
                entry_id=self.entry_id,
                expected="an entry id no entry of the table has",
                found=f"entry {self.entry_id} ({existing.state.value})",
            )


@dataclass(frozen=True)
class IntervalNeedsTimeColumn:
    """A time interval is given only for a table with a time column."""

    interval: tuple[int, int] | None

    def check(self, state: TableState) -> None:
        if self.interval is not None and state.config.time_column is None:
            table = state.config.name
            raise InvalidInputError(f"table {table!r} has no time column: a time interval needs one")


@dataclass(frozen=True)
class IntervalNotEmpty:
    """A time interval starts before it ends."""

    interval: tuple[int, int] | None

    def check(self, state: TableState) -> None:
        if self.interval is not None and self.interval[0] >= self.interval[1]:
            raise InvalidInputError(f"interval {_span(self.interval)} is empty: start must be before end")


@dataclass(frozen=True)
class HoldNotBeforeStart:
    """A hand-opened entry's hold ends no earlier than the entry starts."""

    held_until_ms: int | None
    now_ms: int

    def check(self, state: TableState) -> None:
        if self.held_until_ms is not None and self.held_until_ms < self.now_ms:
            raise InvalidInputError("a hold cannot end before the entry starts")


# ---- what readers see now ----------------------------------------------------------


@dataclass(frozen=True)
class FromVisible:
    """Every segment to replace is visible."""

    src: Sequence[str]

    def check(self, state: TableState) -> None:
        if not self.src:
            return
        hidden = hidden_segments(state.entries.values())
        not_visible = [n for n in self.src if n not in state.segments or n in hidden]
        if not_visible:
            table = state.config.name
            raise RefusedError(
                f"segmentsFrom {_shown(not_visible)} are not visible segments of table {table!r}",
                table=table,
                expected="every segmentsFrom visible",
                found=f"{len(not_visible)} not visible",
            )


@dataclass(frozen=True)
class ToNotVisible:
    """No replacement's name is a visible segment."""

    dst: Sequence[str]

    def check(self, state: TableState) -> None:
        if not self.dst:
            return
        hidden = hidden_segments(state.entries.values())
        present = [n for n in self.dst if n in state.segments and n not in hidden]
        if present:
            table = state.config.name
            raise ConflictError(
                f"segmentsTo {_shown(present)} already exist in table {table!r}",
                table=table,
                expected="no segmentsTo visible",
                found=f"{len(present)} visible",
                remedy="use new segment names",
            )


# ---- after force cleanup -----------------------------------------------------------


@dataclass(frozen=True)
class ToUnregistered:
    """No replacement's name is registered, hidden or as a case twin, except
    the uploads of a cleaned-up entry that this push reuses (``adopted``)."""

    dst: Sequence[str]
    adopted: frozenset[str]

    def check(self, state: TableState) -> None:
        folded = names_folded(state.segments)
        still = [n for n in self.dst if any(o not in self.adopted for o in folded.all(n.casefold()))]
        if still:
            table = state.config.name
            raise ConflictError(
                f"segmentsTo {_shown(still)} are registered (hidden, or as a case twin) in table {table!r}",
                table=table,
                expected="segmentsTo not registered",
                found=f"{len(still)} registered",
                remedy="use new segment names",
            )


@dataclass(frozen=True)
class ToNotReplaced:
    """No replacement's name is still listed as replaced by a live entry (a
    segment of that name would stay hidden)."""

    dst: Sequence[str]

    def check(self, state: TableState) -> None:
        replaced = _live_from(state)
        reused = [n for n in self.dst if n in replaced]
        if reused:
            raise ConflictError(
                f"segmentsTo {_shown(reused)} are still listed as replaced by entry "
                f"{replaced[reused[0]]}; segments of those names would stay hidden",
                table=state.config.name,
                entry_id=replaced[reused[0]],
                expected="segmentsTo that no live entry lists as replaced",
                found=f"{len(reused)} listed by entry {replaced[reused[0]]}",
                remedy="use new segment names",
            )
