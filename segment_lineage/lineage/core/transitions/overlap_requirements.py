"""What a new replacement requires of every existing entry it touches
(the third step of :mod:`start_requirements`' order): how it touches one
(:class:`Overlap`), and the rules that entry must pass (:func:`overlap_rules`),
one small object per rule. Force cleanup takes a stale one instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from segment_lineage.lineage.core.errors import ConflictError, RunningEntryConflict
from segment_lineage.lineage.core.model import EntryState, LineageEntry, TableState
from segment_lineage.lineage.core.transitions.common import Requirement, _iso, _shown, _span, how_to_end


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
        return cls(
            entry=entry,
            from_names=src.intersection(entry.segments_from),
            to_names=dst.intersection(entry.segments_to),
            interval=interval if running and _intervals_meet(entry, interval) else None,
            whole=running and _scopes_meet(entry, interval, whole),
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


def _intervals_meet(entry: LineageEntry, interval: tuple[int, int] | None) -> bool:
    """Whether this push's interval and the one ``entry`` replaces overlap."""
    if interval is None or entry.interval is None:
        return False
    return interval[0] < entry.interval[1] and entry.interval[0] < interval[1]


def _scopes_meet(entry: LineageEntry, interval: tuple[int, int] | None, whole: bool) -> bool:
    """Whether a refresh meets the other's scope: a refresh's scope is the
    whole table, so it meets any other scope (an interval, a refresh)."""
    refresh = whole or entry.whole
    return refresh and (whole or interval is not None) and (entry.whole or entry.interval is not None)


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
            raise _held_conflict(state.config.name, entry, entry.held_until_ms)


def _held_conflict(table: str, entry: LineageEntry, held_until_ms: int) -> ConflictError:
    """The error for a running entry held by hand (or staged), with how to end or revert it."""
    staged = entry.staged is not None
    what = "is a staged push" if staged else "was opened by hand"
    end = how_to_end(table, entry)
    revert = f"lineage revert {table} {entry.entry_id}" + ("" if staged else " --force")
    return ConflictError(
        f"entry {entry.entry_id} overlaps this push and {what} "
        f"({entry.audit.actor}); it is held until {_iso(held_until_ms)}",
        table=table,
        entry_id=entry.entry_id,
        expected="an overlapping entry no longer held",
        found=f"held until {_iso(held_until_ms)}",
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
