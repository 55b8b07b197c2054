"""The commit loop every operation runs through: read one version, apply a
pure update, compare-and-swap; bounded retries, the floor, and the "outcome
unknown" recovery that first looks for an earlier attempt's commit.

:class:`ManagerBase` holds what every operation needs (the store, the retry
budget, who commits); the operations are mixins over it (see
:mod:`segment_lineage.lineage.manager`).
"""

from __future__ import annotations

import copy
import dataclasses
import getpass
import socket
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Self

from segment_lineage.lineage.core.env import SYSTEM, Env
from segment_lineage.lineage.core.errors import (
    ClaimLostError,
    ContentionError,
    LineageError,
    NotFoundError,
    OutcomeUnknownError,
    StoreUnavailableError,
)
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Audit, Change, Operation, TableState
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.core.periods import format_time
from segment_lineage.lineage.core.retry import Attempts, RetryPolicy
from segment_lineage.lineage.core.roles import guard_role
from segment_lineage.lineage.core.transitions.purge import purging_refusal, refuse_while_purging
from segment_lineage.lineage.manager.collector import fewer_collections
from segment_lineage.lineage.manager.floor import StuckTickets, _FloorUse, _QueueUse
from segment_lineage.lineage.storage.claims import ClaimFiles
from segment_lineage.lineage.store.contract import (
    ReadAgainError,
    RetryableStoreError,
    Snapshot,
    Store,
    VersionConflict,
    WriteOutcomeUnknown,
)

Update = Callable[[TableState, int], Change]
Judge = Callable[[Snapshot], None]  # a look at an attempt's snapshot before its update (may raise)
# Called after each commit that changed a table (the mirror's publisher): (manager, table, result).
AfterCommit = Callable[["ManagerBase", str, "Committed"], None]
READ_AGAIN_MAX = 2  # a version losing a bucket before it loads is read again this often, then reported


def default_actor() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True)
class Committed:
    """The result of one operation."""

    state: TableState
    change: Change
    commit_id: str
    applied: bool  # False when the operation was a no-op (idempotent repeat)

    def __post_init__(self) -> None:
        # A version's records are frozen data: the change's own copies, handed
        # back here, now serve the store's look-ups too (a store keeps them);
        # a map a transition built anew is handed back as a frozen copy.
        object.__setattr__(self, "state", self.state.frozen())


def _utc(ms: int) -> str:
    return format_time(ms)


class _Next(Enum):
    """After a failed write: the next attempt at once, or after a backoff."""

    AT_ONCE = "at once"
    BACKOFF = "backoff"


@dataclass
class _Loop:
    """One commit's attempts so far: what the verdict will rest on."""

    table: str
    commit_id: str
    attempts: Attempts
    unknown_since: int | None = None  # version read before an unknown outcome
    read_again: int = 0  # attempts whose version lost a bucket before it was loaded
    last_cause: str = ""
    unknown_cause: str = ""  # why the first unknown outcome was unknown
    retryable: bool = False  # the last write failed in a way worth retrying
    judge: Judge | None = None  # looks at each attempt's snapshot before its update (may raise)
    first: tuple[Snapshot, int] | None = None  # the first attempt's read, read already (with its clock)

    def unknown(self, message: str) -> OutcomeUnknownError:
        """Our earlier write may have landed: never report "nothing written".
        The cause told is the unknown outcome's own (a later attempt's, such
        as "nothing was sent", would read as if nothing had been)."""
        return OutcomeUnknownError(self.table, self.commit_id, self.unknown_cause or message)


def commit_step(operation: Operation) -> str:
    """The failpoint prefix of a commit: ``END_REPLACE`` -> ``end``,
    ``RETENTION_MARK`` -> ``retention-mark`` (``end.before-commit``,
    ``rollback.after-commit``, ...)."""
    return operation.value.lower().removesuffix("_replace").replace("_", "-")


class ManagerBase:
    """The store, the retry budget and the audit of every commit, and the
    commit loop the operations run through.

    The manager reads no clock and makes no id of its own: its ``env``
    (:class:`~segment_lineage.lineage.core.env.Env`) gives the ids and the
    clocks, and the features it serves take theirs from it too; it waits and
    measures with its retry policy's ``sleep`` and ``clock`` (the env's,
    unless a ``RetryPolicy`` is given) and takes the time of a commit from
    the store (``now_ms``)."""

    def __init__(
        self,
        store: Store,
        *,
        retry: RetryPolicy | None = None,
        actor: str | None = None,
        job_id: str | None = None,
        claims: ClaimFiles | None = None,
        env: Env = SYSTEM,
    ) -> None:
        self.store = store
        self.claims = claims  # deep storage, to claim a new table's root (None: roots are not claimed)
        self.env = env  # the clocks, the sleep and the ids every feature takes from here
        self.retry = retry or RetryPolicy(sleep=env.sleep, clock=env.monotonic)
        self.actor = actor or default_actor()
        self.job_id = job_id
        self._stuck = StuckTickets()  # queue tickets seen standing still, shared by this manager's commits
        self.after_commit: AfterCommit | None = None

    def for_job(self, job_id: str | None) -> Self:
        """This manager, recording ``job_id`` in the audit of every commit."""
        other = copy.copy(self)
        other.job_id = job_id
        return other

    def require_role(self, *roles: str, doing: str) -> None:
        """AuthError unless this identity is an admin or of one of ``roles``,
        when an ACL policy is in force (no roles: admins only). Checked
        before work that cannot be undone (a Delta log removed); what only an
        admin may commit, ZooKeeper refuses anyway (:mod:`segment_lineage.lineage.core.roles`)."""
        self.store.require_role(*roles, doing=doing)

    def audit(self, reason: str | None = None) -> Audit:
        return Audit(actor=self.actor, job_id=self.job_id, reason=reason)

    # ---- the commit loop ----------------------------------------------------

    def commit(
        self, table: str, update: Update, reason: str | None = None, *, owner: str | None = None
    ) -> Committed:
        """Read, apply ``update`` (pure), compare-and-swap; bounded retries.
        The committed state comes loaded: it needs no store afterwards. It is
        loaded before the write, so a store that fails while loading it fails
        a commit that wrote nothing (after the write, it would report a
        commit that landed as failed).

        ``owner``: the entry whose claim this process holds (a push's,
        ``store.holds("owner")``): the commit lands only while that claim stands,
        checked in the same request as the swap; ClaimLostError (nothing
        committed) once it is gone."""
        return self._commit_lazy(table, update, reason, load=True, owner=owner)

    def _commit_lazy(
        self,
        table: str,
        update: Update,
        reason: str | None = None,
        *,
        load: bool = False,
        owner: str | None = None,
        judge: Judge | None = None,
        first: tuple[Snapshot, int] | None = None,
    ) -> Committed:
        """:meth:`commit`, its state as the store read it (buckets loaded when
        first wanted) unless ``load``: for callers that look at what changed only.
        ``judge`` looks at each attempt's snapshot before its update (its
        history records at hand too), and may raise to stop the commit.
        ``first``: the first attempt's read (``Store.read_now``'s), read
        with what the caller read before (the compare-and-set checks it as any)."""
        check_table_name(table)
        audit = self.audit(reason)
        commit_id = self.env.hex_id()
        floor = _FloorUse(self.store, table, commit_id, self.retry.clock)
        queue = _QueueUse(self.store, table, commit_id, self.retry.sleep, self.retry.clock, self._stuck)
        try:
            loop = _Loop(table, commit_id, Attempts(self.retry), judge=judge, first=first)
            done = self._commit(loop, update, audit, floor, queue, load, owner)
        finally:
            queue.leave()
            floor.leave()
        if self.after_commit is not None and done.applied:
            self.after_commit(self, table, done)
        return done

    def _commit(
        self,
        loop: _Loop,
        update: Update,
        audit: Audit,
        floor: _FloorUse,
        queue: _QueueUse,
        load: bool,
        owner: str | None = None,
    ) -> Committed:
        """The attempts, each through named steps: its turn (a read, a look
        for an earlier attempt's commit, the floor and the queue), the pure
        update, and the write; then, out of attempts, the verdict."""
        while loop.attempts.next():
            turn = self._turn(loop, floor, queue, load)
            if turn is None:
                continue
            if isinstance(turn, Committed):
                return turn
            snap, now = turn
            change = self._apply(loop, snap, now, update, load)
            if change is None:
                continue
            if not change.changed:
                return Committed(snap.state, change, loop.commit_id, applied=False)
            refuse_while_purging(snap.state, change)  # judged on the version the write compares
            done = self._write(loop, snap, now, change, audit, owner, floor, queue, load)
            if isinstance(done, Committed):
                return done
            if done is _Next.BACKOFF:
                loop.attempts.backoff()
        return self._verdict(loop, floor, queue, load)

    def _turn(
        self, loop: _Loop, floor: _FloorUse, queue: _QueueUse, load: bool
    ) -> tuple[Snapshot, int] | Committed | None:
        """The version to write on and ZooKeeper's time; a commit an earlier
        attempt landed; or None: the attempt waited (for the floor or its
        turn in the queue) and the next one starts at once."""
        try:
            snap, now = loop.first or self.store.read_now(loop.table)
            loop.first = None
            landed = None if loop.unknown_since is None else self._earlier(loop, loop.unknown_since, load)
            if landed is not None:
                return landed
            return self._wait_turn(loop, snap, now, floor, queue)
        except StoreUnavailableError as exc:
            if loop.unknown_since is None:
                raise
            # Away after an unknown outcome (a session that expired, the
            # client connecting again): look again within the attempts; the
            # next read settles what the earlier write did, the verdict if none comes.
            loop.last_cause = exc.message
            loop.attempts.backoff()
            return None
        except LineageError as exc:
            if loop.unknown_since is not None and not isinstance(exc, NotFoundError):
                raise loop.unknown(exc.message) from None  # our earlier write may have landed
            raise

    def _wait_turn(
        self, loop: _Loop, snap: Snapshot, now: int, floor: _FloorUse, queue: _QueueUse
    ) -> tuple[Snapshot, int] | None:
        """The floor, then the queue: the version to write on and ZooKeeper's
        time, or None when the attempt waited for either."""
        pause = floor.wait_or_take(snap, now)
        if pause is not None:
            loop.attempts.refund()  # waited for the floor, or took it: not a lost race
            self.retry.sleep(pause)
            return None
        if floor.ignored and snap.floor is not None:
            snap = dataclasses.replace(snap, floor=None)  # the write checks no floor either
        if queue.wait(snap, floor.lost_races, self.retry.deadline_s - loop.attempts.elapsed):
            loop.attempts.refund()  # waited for its turn: not a lost race
            return None
        return snap, now

    def _apply(self, loop: _Loop, snap: Snapshot, now: int, update: Update, load: bool) -> Change | None:
        """The pure update on the version read (loaded before the write when
        ``load``: nothing is written if that fails), after its judge; None: read again."""
        if loop.judge is not None:
            loop.judge(snap)
        try:
            change = update(snap.state, now)
            if load:
                change.state.loaded()
                snap.state.loaded()
        except ReadAgainError:  # a bucket loaded late was collected: the table moved on
            loop.read_again += 1
            if loop.read_again > READ_AGAIN_MAX:  # not the version read now: one the change holds (a target)
                raise
            return None
        except StoreUnavailableError as exc:  # loading a bucket late
            if loop.unknown_since is not None:
                raise loop.unknown(exc.message) from None
            raise
        except NotFoundError:  # an entry or segment a purge took away: say the purge
            refused = purging_refusal(snap.state.config, "this change")
            if refused is not None:
                raise refused from None
            raise
        return change

    def _write(
        self,
        loop: _Loop,
        snap: Snapshot,
        now: int,
        change: Change,
        audit: Audit,
        owner: str | None,
        floor: _FloorUse,
        queue: _QueueUse,
        load: bool,
    ) -> Committed | _Next:
        """The compare-and-swap, fenced by the push's claim (``owner``) or the
        node only the change's role may write; what to do when it fails."""
        loop.retryable = False
        step = commit_step(change.operation)
        failpoint(f"{step}.before-commit")
        try:
            role = guard_role(snap.state, change)
            if owner is None and role is None:
                state = self.store.write(loop.table, snap, change, audit, loop.commit_id, now)
            else:
                state = self.store.write(loop.table, snap, change, audit, loop.commit_id, now, owner, role)
        except ClaimLostError as exc:
            if loop.unknown_since is not None:  # an earlier attempt may have landed before the claim went
                return self._settled(loop, exc, load)
            raise
        except VersionConflict:
            floor.lost()
            return (
                _Next.AT_ONCE if queue.queued else _Next.BACKOFF
            )  # queued: our turn came, or waiting ran out
        except RetryableStoreError as exc:
            loop.last_cause = exc.message
            loop.retryable = True
            return _Next.BACKOFF
        except WriteOutcomeUnknown as exc:
            loop.last_cause = exc.message
            if loop.unknown_since is None:
                loop.unknown_since = snap.state.version
                loop.unknown_cause = exc.message
            return _Next.BACKOFF
        failpoint(f"{step}.after-commit")
        return Committed(state, change, loop.commit_id, applied=True)

    def _settled(self, loop: _Loop, lost: ClaimLostError, load: bool) -> Committed:
        """An earlier attempt's outcome was unknown, and now the claim is
        gone. Every attempt checked the claim in its own request, so that one
        landed before the claim went, or never will: one look after the
        refusal tells which (the commit, or ``lost``: nothing committed)."""
        assert loop.unknown_since is not None
        try:
            landed = self._earlier(loop, loop.unknown_since, load)
        except LineageError:
            raise loop.unknown(lost.message) from None
        if landed is not None:
            return landed
        raise lost

    def _verdict(self, loop: _Loop, floor: _FloorUse, queue: _QueueUse, load: bool) -> Committed:
        """Out of attempts: an earlier attempt's commit found at last, or why
        nothing could be committed (an unknown outcome, a failing store, or
        contention)."""
        table = loop.table
        if loop.unknown_since is not None:
            # One last look: did any of our attempts land?
            try:
                landed = self._earlier(loop, loop.unknown_since, load)
            except LineageError as exc:
                raise loop.unknown(loop.last_cause or exc.message) from None
            if landed is not None:
                return landed
            raise loop.unknown(loop.last_cause)
        if loop.retryable:
            raise StoreUnavailableError(
                f"writing table {table!r} kept failing ({loop.last_cause}); nothing was committed"
            )
        held = floor.waited_on
        raise ContentionError(
            table,
            loop.attempts.count,
            loop.attempts.elapsed,
            waiting=f"commit {held.holder[:8]} held the table's floor until {_utc(held.until_ms)}"
            if held is not None and held.holder is not None
            else queue.waiting,
            floor_wait_s=floor.waited_s,
        )

    def _earlier(self, loop: _Loop, since: int, load: bool) -> Committed | None:
        """The commit an earlier attempt landed (one after version ``since``), if any."""
        landed = self.store.find_commit(loop.table, loop.commit_id, since)
        return (
            None
            if landed is None
            else self._landed(self.store.read(loop.table), landed, loop.commit_id, load)
        )

    def _landed(self, snap: Snapshot, record: HistoryRecord, commit_id: str, load: bool) -> Committed:
        if load:
            snap.state.loaded()  # an error here is reported as an unknown outcome by the caller
        change = Change(
            state=snap.state,
            operation=record.operation,
            entry_id=record.entry_id,
            segments=record.segments,
            rows=record.rows,
            size_bytes=record.size_bytes,
            cleaned=record.cleaned,
        )
        return Committed(snap.state, change, commit_id, applied=True)

    def table(self, table: str) -> TableState:
        """The table's current version, every record loaded (fetched together)."""
        check_table_name(table)
        with fewer_collections():  # an object per record, in no cycle
            return self.store.read(table, whole=True).state.loaded()

    def _read(self, table: str) -> TableState:
        """The current version as the store reads it: a segment or pending
        bucket is loaded only when first wanted, so what looks at a few
        names costs what it looks at, not the table's size."""
        check_table_name(table)
        return self.store.read(table).state
