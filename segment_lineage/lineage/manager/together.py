"""Several tables at once: one commit that changes every table of a set or
none (a push set's end, a set's rollback in :mod:`.set_rollback`), and a consistent cut (versions
that were current together).

A set commit is the commit loop of :mod:`.commit` over several tables: each
attempt reads every table, applies each table's pure update to its version,
and sends every change in one request (:meth:`Store.write_together`: one
ZooKeeper multi), each fenced as a single commit is (its head's version, its
push's owner claim, its floor, its role). A conflict on any table retries the
whole set; each change's history record carries the set's id. The commit id
is the same in every table, so after an unknown outcome one look finds
whether the set landed (it landed everywhere or nowhere).

A cut reads every table's version twice in a row and keeps the first read
when no version moved in between: at the moment between the two reads,
those versions were all current (a version only ever grows).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from segment_lineage.lineage.core.errors import (
    ClaimLostError,
    ConflictError,
    ContentionError,
    InvalidInputError,
    LineageError,
    NotFoundError,
    OutcomeUnknownError,
    StoreUnavailableError,
)
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Audit, Change, TableState
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.core.retry import Attempts
from segment_lineage.lineage.core.roles import guard_role
from segment_lineage.lineage.core.transitions.purge import refuse_while_purging
from segment_lineage.lineage.manager.commit import Committed, Update
from segment_lineage.lineage.manager.floor import _FloorUse
from segment_lineage.lineage.manager.reads import Reads
from segment_lineage.lineage.store.contract import (
    ReadAgainError,
    RetryableStoreError,
    Snapshot,
    VersionConflict,
    Write,
    WriteOutcomeUnknown,
)

# Tables in one set commit, refused up front past it: 175 tables of 20 columns
# fit in one request (python -m benchmarks.sets); wider tables' heads may
# fit fewer, which the request's size refuses at the commit (nothing applied).
MAX_SET_TABLES = 100
CUT_ATTEMPTS = 20  # double reads of a cut before giving up (the tables kept moving)


@dataclass(frozen=True)
class Together:
    """One table's part of a set commit: its pure update, the entry whose
    owner claim fences it (None: none), and the job it records."""

    table: str
    update: Update
    owner: str | None = None
    job_id: str | None = None


def check_set_tables(tables: Sequence[str]) -> None:
    """InvalidInputError unless ``tables`` are 1 to MAX_SET_TABLES distinct
    table names (case twins are one table to the store)."""
    if not tables:
        raise InvalidInputError("a set names at least one table")
    if len(tables) > MAX_SET_TABLES:
        raise InvalidInputError(f"a set has at most {MAX_SET_TABLES} tables, got {len(tables)}")
    seen: dict[str, str] = {}  # case-folded name -> the name as given
    for table in tables:
        check_table_name(table)
        first = seen.get(table.casefold())
        if first is None:
            seen[table.casefold()] = table
            continue
        if first == table:
            raise InvalidInputError(f"table {table!r} is named twice in the set")
        raise InvalidInputError(f"tables {first!r} and {table!r} differ only in case: one table to the store")


@dataclass
class _SetLoop:
    """One set commit's attempts so far: what the verdict will rest on."""

    parts: Sequence[Together]
    commit_id: str
    attempts: Attempts
    checks: Sequence[Snapshot] = ()  # tables the commit was decided on and leaves as they are
    unknown: dict[str, int] | None = None  # the versions read before an unknown outcome
    cause: str = ""
    unknown_cause: str = ""  # why the first unknown outcome was unknown
    retryable: bool = False  # the last write failed in a way worth retrying

    def unknown_error(self, message: str) -> OutcomeUnknownError:
        """An earlier write may have landed: never report "nothing written"
        (the cause told is the unknown outcome's own, not a later attempt's)."""
        return OutcomeUnknownError(self.parts[0].table, self.commit_id, self.unknown_cause or message)

    def outcome_unknown(self, cause: str, snaps: list[tuple[Snapshot, int]]) -> None:
        """A write whose outcome is unknown: the first keeps the versions it
        was read on (where to look for its commit) and its cause."""
        self.cause = cause
        if self.unknown is None:
            self.unknown_cause = cause
            self.unknown = {p.table: s.state.version for p, (s, _) in zip(self.parts, snaps, strict=True)}


def _set_changes(
    parts: Sequence[Together], snaps: list[tuple[Snapshot, int]], now: int
) -> list[Change] | None:
    """Each table's pure update on its version, loaded before the write
    (nothing is written if that fails); None: read again."""
    try:
        changes = [p.update(s.state, now) for p, (s, _) in zip(parts, snaps, strict=True)]
        for change, (snap, _) in zip(changes, snaps, strict=True):
            change.state.loaded()
            snap.state.loaded()
            refuse_while_purging(snap.state, change)  # judged on the version the write compares
    except ReadAgainError:
        return None
    return changes


def _sized(audit: Audit, size: int) -> Audit:
    """A set's audit with the count of tables its request changes (none: no set)."""
    return audit if audit.set_id is None else dataclasses.replace(audit, set_size=size)


class TogetherOps(Reads):
    """Set commits and cuts."""

    def commit_together(
        self,
        parts: Sequence[Together],
        reason: str | None = None,
        *,
        set_id: str | None = None,
        checks: Sequence[Snapshot] = (),
    ) -> list[Committed]:
        """Apply each part's update to its table, all in one request, with
        bounded retries; every change's record carries ``set_id`` (default:
        a new id). Parts whose update changes nothing are left out; when
        none changes anything, nothing is written. Raises what a single
        commit raises, for the first table refused (its name in the message).
        The request also compares the heads of ``checks`` (tables the commit
        was decided on and leaves as they are) and of every part that changes
        nothing: a table moved since its read fails the attempt."""
        check_set_tables([p.table for p in parts])
        return self._commit_parts(parts, reason, set_id or self.env.text_id(), checks)

    def commit_checked(self, part: Together, reason: str | None, checks: Sequence[Snapshot]) -> Committed:
        """One table's commit whose request also compares the heads of
        ``checks``, tables it was decided on and leaves as they are
        (ChecksMovedError, nothing written, when one moved since its read).
        Its record carries no set: it changes one table."""
        return self._commit_parts([part], reason, None, checks)[0]

    def _commit_parts(
        self, parts: Sequence[Together], reason: str | None, sid: str | None, checks: Sequence[Snapshot]
    ) -> list[Committed]:
        audits = {p.table: Audit(self.actor, p.job_id or self.job_id, reason, sid) for p in parts}
        commit_id = self.env.hex_id()
        floors = {p.table: _FloorUse(self.store, p.table, commit_id, self.retry.clock) for p in parts}
        try:
            done = self._together(parts, audits, commit_id, floors, checks)
        finally:
            for floor in floors.values():
                floor.leave()
        if self.after_commit is not None:
            for part, committed in zip(parts, done, strict=True):
                if committed.applied:
                    self.after_commit(self, part.table, committed)
        return done

    def _together(
        self,
        parts: Sequence[Together],
        audits: dict[str, Audit],
        commit_id: str,
        floors: dict[str, _FloorUse],
        checks: Sequence[Snapshot] = (),
    ) -> list[Committed]:
        """The attempts, each through named steps: the reads (and a look for
        an earlier attempt's commit), the floors, the pure updates, the
        write; then, out of attempts, the verdict."""
        loop = _SetLoop(parts, commit_id, Attempts(self.retry), checks)
        while loop.attempts.next():
            snaps, landed = self._set_reads(loop)
            if landed is not None:
                return landed
            if self._set_floors(loop, snaps, floors):
                continue
            now = max(n for _, n in snaps)
            changes = _set_changes(parts, snaps, now)
            if changes is None:
                continue  # a bucket loaded late was collected: read again
            if not any(c.changed for c in changes):
                return _set_results(snaps, changes, commit_id, iter(()))
            done = self._set_write(loop, snaps, changes, audits, now, floors)
            if done is not None:
                return done
        return self._set_verdict(loop)

    def _set_floors(
        self, loop: _SetLoop, snaps: list[tuple[Snapshot, int]], floors: dict[str, _FloorUse]
    ) -> bool:
        """Every table's floor, waited for or taken: True when the attempt waited."""
        pause = max(
            floors[p.table].wait_or_take(*read) or 0.0 for p, read in zip(loop.parts, snaps, strict=True)
        )
        if pause > 0:
            loop.attempts.refund()  # waited for another writer's floor: not a lost race
            self.retry.sleep(pause)
            return True
        return False

    def _set_reads(self, loop: _SetLoop) -> tuple[list[tuple[Snapshot, int]], list[Committed] | None]:
        """Every table's version and ZooKeeper's time; and, after an unknown
        outcome, the set's commits when an earlier attempt landed."""
        parts, checked = loop.parts, [c.state.config.name for c in loop.checks]
        try:
            # one round trip for all, the tables only checked too
            reads = self.store.read_now_many([*(p.table for p in parts), *checked])
            landed = None if loop.unknown is None else self._set_landed(parts, loop.commit_id, loop.unknown)
        except LineageError as exc:
            if loop.unknown is not None and not isinstance(exc, NotFoundError):
                raise loop.unknown_error(exc.message) from None
            raise
        reads, now = reads[: len(parts)], reads[len(parts) :]
        moved = _moved(loop.checks, now)
        if moved and landed is None:  # decided on versions gone: no retry mends that; decide again
            raise ChecksMovedError(moved)
        return reads, landed

    def _set_write(
        self,
        loop: _SetLoop,
        snaps: list[tuple[Snapshot, int]],
        changes: list[Change],
        audits: dict[str, Audit],
        now: int,
        floors: dict[str, _FloorUse],
    ) -> list[Committed] | None:
        """The one request; the set's commits, or None: try again. Each
        record counts the tables the request changes (a set rollback finds
        out when one of them no longer keeps its record)."""
        writes = _set_request(loop, snaps, changes, audits, now)
        try:
            failpoint("set.before-commit")
            unchanged = [snap for (snap, _), c in zip(snaps, changes, strict=True) if not c.changed]
            states = iter(self.store.write_together(writes, [*loop.checks, *unchanged]))
        except ClaimLostError as exc:
            if loop.unknown is not None:  # an earlier attempt may have landed before the claim went
                return self._set_settled(loop, exc)
            raise
        except VersionConflict:
            for floor in floors.values():
                floor.lost()
            loop.attempts.backoff()
            return None
        except RetryableStoreError as exc:
            loop.cause, loop.retryable = exc.message, True
            loop.attempts.backoff()
            return None
        except WriteOutcomeUnknown as exc:
            loop.outcome_unknown(exc.message, snaps)
            loop.attempts.backoff()
            return None
        failpoint("set.after-commit")
        return _set_results(snaps, changes, loop.commit_id, states)

    def _set_settled(self, loop: _SetLoop, lost: ClaimLostError) -> list[Committed]:
        """An earlier attempt's outcome was unknown, and now a member's claim
        is gone. Every attempt checked that claim in its own request, so that
        one landed before the claim went, or never will: one look after the
        refusal tells which (its commits, or ``lost``: nothing committed)."""
        assert loop.unknown is not None
        try:
            landed = self._set_landed(loop.parts, loop.commit_id, loop.unknown)
        except LineageError:
            raise loop.unknown_error(lost.message) from None
        if landed is not None:
            return landed
        raise lost

    def _set_verdict(self, loop: _SetLoop) -> list[Committed]:
        """Out of attempts: an earlier attempt's commit found at last, or why
        nothing could be committed."""
        if loop.unknown is not None:
            try:
                landed = self._set_landed(loop.parts, loop.commit_id, loop.unknown)
            except LineageError as exc:
                raise loop.unknown_error(loop.cause or exc.message) from None
            if landed is not None:
                return landed
            raise loop.unknown_error(loop.cause)
        if loop.retryable:
            raise StoreUnavailableError(
                f"writing the set's tables kept failing ({loop.cause}); nothing was committed"
            )
        raise ContentionError(
            ", ".join(p.table for p in loop.parts),
            loop.attempts.count,
            loop.attempts.elapsed,
            doing="committing the set",
        )

    def _set_landed(
        self, parts: Sequence[Together], commit_id: str, since: dict[str, int]
    ) -> list[Committed] | None:
        """The set's commits, when an earlier attempt landed (in every table
        or in none: one table's record says)."""
        found: list[HistoryRecord] = []
        for p in parts:
            record = self.store.find_commit(p.table, commit_id, since[p.table])
            if record is None:
                if found:  # one request: a record in one table and not in another cannot be
                    raise OutcomeUnknownError(p.table, commit_id, "the set's record is missing here")
                return None
            found.append(record)
        return [
            self._landed(self.store.read(p.table), record, commit_id, load=True)
            for p, record in zip(parts, found, strict=True)
        ]

    # ---- a consistent cut ---------------------------------------------------

    def cut(self, tables: Sequence[str]) -> dict[str, Snapshot]:
        """One snapshot per table, of versions that were all current at one
        moment (see the module's docstring). ContentionError when the tables
        kept moving for CUT_ATTEMPTS double reads."""
        check_set_tables(tables)
        first = {t: self.store.read(t) for t in tables}
        for _ in range(CUT_ATTEMPTS):
            second = {t: self.store.read(t) for t in tables}
            if all(second[t].state.version == first[t].state.version for t in tables):
                return first
            first = second
        raise ContentionError(", ".join(tables), CUT_ATTEMPTS, 0.0, doing="reading a consistent cut")


def _moved(checks: Sequence[Snapshot], now: Sequence[tuple[Snapshot, int]]) -> list[str]:
    """The tables of ``checks`` whose version ``now`` (read again) is another."""
    return [
        c.state.config.name
        for c, (snap, _) in zip(checks, now, strict=True)
        if snap.state.version != c.state.version
    ]


def _set_request(
    loop: _SetLoop,
    snaps: list[tuple[Snapshot, int]],
    changes: list[Change],
    audits: dict[str, Audit],
    now: int,
) -> list[Write]:
    """The writes of the set's one request, one per table it changes, each
    record counting the tables the request changes."""
    size = sum(c.changed for c in changes)
    return [
        Write(p.table, snap, c, _sized(audits[p.table], size), loop.commit_id, now,
              p.owner, guard_role(snap.state, c))
        for p, (snap, _), c in zip(loop.parts, snaps, changes, strict=True)
        if c.changed
    ]  # fmt: skip


def _set_results(
    snaps: list[tuple[Snapshot, int]], changes: list[Change], commit_id: str, states: Iterator[TableState]
) -> list[Committed]:
    """Each table's commit: its new version from ``states`` (the request's,
    in order) where its change changed it, the version read where not."""
    return [
        Committed(next(states), c, commit_id, applied=True)
        if c.changed
        else Committed(s.state, c, commit_id, applied=False)
        for (s, _), c in zip(snaps, changes, strict=True)
    ]


class ChecksMovedError(ConflictError):
    """A table a set commit was decided on (its ``checks``) moved since it
    was read: nothing was written; decide again on what it shows now."""

    def __init__(self, tables: Sequence[str]) -> None:
        super().__init__(
            f"table(s) {', '.join(tables)} changed since the commit was decided on them; nothing was changed",
            remedy="look at 'lineage history' and run it again if it still applies",
        )
        self.tables = tuple(tables)
