"""What a new replacement requires: :func:`start_replace`'s preconditions,
one small object per rule.

Each is frozen data with a ``check(state)`` that returns when the rule holds
and raises the error naming it otherwise (see :class:`Requirement`). They run
in a fixed order, and the first that fails decides the error:

1. the arguments (:class:`ReplacesSomething` ... :class:`HoldNotBeforeStart`);
2. what readers see now (:class:`FromVisible`, :class:`ToNotVisible`);
3. every existing entry this push touches, in entry order (:class:`Overlap`
   and :func:`overlap_rules`); force cleanup takes a stale one instead;
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
    RunningEntryConflict,
)
from segment_lineage.lineage.core.lookups import names_folded
from segment_lineage.lineage.core.model import EntryState, LineageEntry, TableState
from segment_lineage.lineage.core.transitions.common import Requirement, _iso, _live_from, _shown, _span
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


# ---- the entries this push touches -------------------------------------------------


@dataclass(frozen=True)
class Overlap:
    """How a new replacement touches one existing entry."""

    entry: LineageEntry
    from_names: frozenset[str]  # this push's segmentsFrom that the entry replaces too
    to_names: frozenset[str]  # this push's segmentsTo that the entry names too
    interval: tuple[int, int] | None  # this push's interval, when it overlaps the running entry's
    whole: bool  # this push or the running entry means to replace the whole table, and the other a part
    owned: bool  # the entry's pushing process still holds a session
    held: bool  # the entry was opened by hand and its hold still stands
    owners_known: bool = False  # live owners were given: an unowned entry's pusher is gone

    @classmethod
    def of(
        cls,
        entry: LineageEntry,
        src: frozenset[str],
        dst: frozenset[str],
        interval: tuple[int, int] | None,
        live_owners: frozenset[str] | None,
        now_ms: int,
        whole: bool = False,
    ) -> Overlap:
        """``live_owners`` None: no entry counts as owned (Pinot's rule).
        ``whole``: this push is a refresh (it means to replace every segment)."""
        running = entry.state is EntryState.IN_PROGRESS
        intent = (
            running
            and interval is not None
            and entry.interval is not None
            and interval[0] < entry.interval[1]
            and entry.interval[0] < interval[1]
        )
        # A refresh's scope is the whole table: it meets any other scope (an interval, a refresh).
        whole_overlap = (
            running and (whole or entry.whole) and (whole or interval is not None)
            and (entry.whole or entry.interval is not None)
        )  # fmt: skip
        return cls(
            entry=entry,
            from_names=src.intersection(entry.segments_from),
            to_names=dst.intersection(entry.segments_to),
            interval=interval if intent else None,
            whole=whole_overlap,
            owned=live_owners is not None and entry.entry_id in live_owners,
            held=entry.held(now_ms),
            owners_known=live_owners is not None,
        )

    @property
    def running(self) -> bool:
        """An IN_PROGRESS entry that shares a name or a time with this push."""
        return self.entry.state is EntryState.IN_PROGRESS and bool(
            self.from_names or self.to_names or self.interval or self.whole
        )

    @property
    def stale(self) -> bool:
        """A running overlap that force cleanup takes: nobody pushes it, nobody holds it."""
        return self.running and not self.owned and not self.held

    @property
    def abandoned(self) -> bool:
        """An IN_PROGRESS entry that shares nothing with this push, whose
        pusher is known to be gone (no live owner) and that nobody holds: an
        append that died mid-push. Force cleanup takes it too, so the next
        push cleans it up whatever it replaces."""
        return (
            self.entry.state is EntryState.IN_PROGRESS
            and not self.running
            and self.owners_known
            and not self.owned
            and not self.held
        )


def overlap_rules(overlap: Overlap, force_cleanup: bool) -> tuple[Requirement, ...]:
    """The rules one existing entry must pass, in the order they are checked.
    None for an entry force cleanup takes (a stale running one, or a reverted
    one whose names the push reuses)."""
    if overlap.entry.state is EntryState.REVERTED:
        return () if force_cleanup else (ToNotReverted(overlap),)
    if force_cleanup and overlap.stale:
        return ()
    if force_cleanup:
        return (
            NotHeldByHand(overlap),
            IntervalsDisjoint(overlap),
            PusherGone(overlap),
            FromNotReplaced(overlap),
            ToNotNamed(overlap),
        )
    return (IntervalsDisjoint(overlap), FromNotReplaced(overlap), ToNotNamed(overlap))


@dataclass(frozen=True)
class ToNotReverted:
    """No replacement's name belongs to a reverted entry (kept for rollback)."""

    overlap: Overlap

    def check(self, state: TableState) -> None:
        entry, names = self.overlap.entry, self.overlap.to_names
        if names:
            raise ConflictError(
                f"segmentsTo {_shown(names)} belong to reverted entry "
                f"{entry.entry_id} (kept so a rollback can be undone)",
                table=state.config.name,
                entry_id=entry.entry_id,
                expected="segmentsTo named by no reverted entry",
                found=f"{len(names)} named by entry {entry.entry_id}",
                remedy="use new segment names, or --force-cleanup to discard them",
            )


@dataclass(frozen=True)
class NotHeldByHand:
    """Force cleanup does not take a running entry opened by hand whose hold stands."""

    overlap: Overlap

    def check(self, state: TableState) -> None:
        o = self.overlap
        entry = o.entry
        if o.running and not o.owned and o.held and entry.held_until_ms is not None:
            # Not a RunningEntryConflict: a push waiting for a lapsing
            # owner would wait in vain for a hold of hours.
            table = state.config.name
            staged = entry.staged is not None
            what = "is a staged push" if staged else "was opened by hand"
            end = f"publish it ('lineage publish {table} {entry.entry_id}')" if staged else "end it"
            revert = f"lineage revert {table} {entry.entry_id}" + ("" if staged else " --force")
            raise ConflictError(
                f"entry {entry.entry_id} overlaps this push and {what} "
                f"({entry.audit.actor}); it is held until {_iso(entry.held_until_ms)}",
                table=table,
                entry_id=entry.entry_id,
                expected="an overlapping entry no longer held",
                found=f"held until {_iso(entry.held_until_ms)}",
                remedy=f"{end}, or revert it ('{revert}') if it is abandoned; force cleanup takes it "
                "once its hold ends",
            )


@dataclass(frozen=True)
class IntervalsDisjoint:
    """A push's scope overlaps no running entry's: two replace-range
    intervals that overlap, or a refresh (the whole table) beside another
    refresh or a replace-range push, even when the table holds no segment
    for their ``from`` to share."""

    overlap: Overlap

    def check(self, state: TableState) -> None:
        entry, interval = self.overlap.entry, self.overlap.interval
        if interval is not None and entry.interval is not None:
            raise RunningEntryConflict(
                f"interval {_span(interval)} overlaps interval {_span(entry.interval)} of "
                f"running entry {entry.entry_id}",
                table=state.config.name,
                entry_id=entry.entry_id,
                expected=f"no running entry's interval overlapping {_span(interval)}",
                found=_span(entry.interval),
                remedy="wait for that push to end, or replace a disjoint interval",
            )
        if self.overlap.whole:
            theirs = (
                f"replacing {_span(entry.interval)}"
                if entry.interval is not None and not entry.whole
                else "a refresh of the whole table"
            )
            raise RunningEntryConflict(
                f"running entry {entry.entry_id} is {theirs}, which this push's scope overlaps "
                "(a refresh replaces the whole table)",
                table=state.config.name,
                entry_id=entry.entry_id,
                expected="no running refresh, nor a running replace-range push beside a refresh",
                found=f"running entry {entry.entry_id} ({theirs})",
                remedy="wait for that push to end",
            )


@dataclass(frozen=True)
class PusherGone:
    """Force cleanup does not take a running entry whose pusher is alive."""

    overlap: Overlap

    def check(self, state: TableState) -> None:
        o = self.overlap
        if o.running and o.owned:
            raise RunningEntryConflict(
                f"entry {o.entry.entry_id} overlaps this push and is still running "
                "(its pushing process holds a live session)",
                table=state.config.name,
                entry_id=o.entry.entry_id,
                expected="an overlapping entry whose pushing process is gone",
                found="a live session",
                remedy="wait for that push to end",
            )


@dataclass(frozen=True)
class FromNotReplaced:
    """No segment to replace is being replaced by another entry."""

    overlap: Overlap

    def check(self, state: TableState) -> None:
        entry, names = self.overlap.entry, self.overlap.from_names
        if names:
            raise ConflictError(
                f"segmentsFrom {_shown(names)} are already being replaced by entry "
                f"{entry.entry_id} ({entry.state.value})",
                table=state.config.name,
                entry_id=entry.entry_id,
                expected="segmentsFrom that no other entry replaces",
                found=f"{len(names)} replaced by entry {entry.entry_id}",
                remedy="end or revert that entry first, or use --force-cleanup if it is stale",
            )


@dataclass(frozen=True)
class ToNotNamed:
    """No replacement's name is named by another entry."""

    overlap: Overlap

    def check(self, state: TableState) -> None:
        entry, names = self.overlap.entry, self.overlap.to_names
        if names:
            raise ConflictError(
                f"segmentsTo {_shown(names)} are already named by entry {entry.entry_id} "
                f"({entry.state.value})",
                table=state.config.name,
                entry_id=entry.entry_id,
                expected="segmentsTo that no other entry names",
                found=f"{len(names)} named by entry {entry.entry_id}",
                remedy="use new segment names, or --force-cleanup if that entry is stale",
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
