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
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

from segment_lineage.lineage.core.errors import (
    ClaimLostError,
    ContentionError,
    LineageError,
    NotFoundError,
    OutcomeUnknownError,
    StoreUnavailableError,
)
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.model import Audit, Change, HistoryRecord, Operation, TableState
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.core.periods import format_time
from segment_lineage.lineage.core.retry import Attempts, RetryPolicy
from segment_lineage.lineage.core.roles import guard_role
from segment_lineage.lineage.core.transitions.purge import purging_refusal, refuse_while_purging
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


def _utc(ms: int) -> str:
    return format_time(ms)


def commit_step(operation: Operation) -> str:
    """The failpoint prefix of a commit: ``END_REPLACE`` -> ``end``,
    ``RETENTION_MARK`` -> ``retention-mark`` (``end.before-commit``,
    ``rollback.after-commit``, ...)."""
    return operation.value.lower().removesuffix("_replace").replace("_", "-")


class ManagerBase:
    """The store, the retry budget and the audit of every commit, and the
    commit loop the operations run through.

    The manager reads no clock of its own: it waits and measures with its
    retry policy's ``sleep`` and ``clock`` (``RetryPolicy(sleep=..., clock=...)``)
    and takes the time of a commit from the store (``now_ms``)."""

    def __init__(
        self,
        store: Store,
        *,
        retry: RetryPolicy | None = None,
        actor: str | None = None,
        job_id: str | None = None,
        claims: ClaimFiles | None = None,
    ) -> None:
        self.store = store
        self.claims = claims  # deep storage, to claim a new table's root (None: roots are not claimed)
        self.retry = retry or RetryPolicy()
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
        ``store.hold_owner``): the commit lands only while that claim stands,
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
    ) -> Committed:
        """:meth:`commit`, its state as the store read it (buckets loaded when
        first wanted) unless ``load``: for callers that look at what changed only."""
        check_table_name(table)
        audit = self.audit(reason)
        commit_id = uuid.uuid4().hex
        floor = _FloorUse(self.store, table, commit_id, self.retry.clock)
        queue = _QueueUse(self.store, table, commit_id, self.retry.sleep, self.retry.clock, self._stuck)
        try:
            done = self._commit(table, update, audit, commit_id, floor, queue, load, owner)
        finally:
            queue.leave()
            floor.leave()
        if self.after_commit is not None and done.applied:
            self.after_commit(self, table, done)
        return done

    def _commit(
        self,
        table: str,
        update: Update,
        audit: Audit,
        commit_id: str,
        floor: _FloorUse,
        queue: _QueueUse,
        load: bool,
        owner: str | None = None,
    ) -> Committed:
        attempts = Attempts(self.retry)
        unknown_since: int | None = None  # version read before an unknown outcome
        read_again = 0  # attempts whose version lost a bucket before it was loaded
        last_cause = ""
        retryable = False
        while attempts.next():
            try:
                snap, now = self.store.read_now(table)
                if unknown_since is not None:
                    landed = self.store.find_commit(table, commit_id, unknown_since)
                    if landed is not None:
                        return self._landed(self.store.read(table), landed, commit_id, load)
                pause = floor.wait_or_take(snap, now)
                if pause is not None:
                    attempts.refund()  # waited for the floor, or took it: not a lost race
                    self.retry.sleep(pause)
                    continue
                if floor.ignored and snap.floor is not None:
                    snap = dataclasses.replace(snap, floor=None)  # the write checks no floor either
                if queue.wait(snap, floor.lost_races, self.retry.deadline_s - attempts.elapsed):
                    attempts.refund()  # waited for its turn: not a lost race
                    continue
            except LineageError as exc:
                if unknown_since is not None and not isinstance(exc, NotFoundError):
                    # Our earlier write may have landed: never report "nothing written".
                    raise OutcomeUnknownError(table, commit_id, exc.message) from None
                raise
            try:
                change = update(snap.state, now)
                if load:  # before the write: nothing is written if this fails
                    change.state.loaded()
                    snap.state.loaded()
            except ReadAgainError:  # a bucket loaded late was collected: the table moved on
                read_again += 1
                if read_again > READ_AGAIN_MAX:  # not the version read now: one the change holds (a target)
                    raise
                continue
            except StoreUnavailableError as exc:  # loading a bucket late
                if unknown_since is not None:
                    raise OutcomeUnknownError(table, commit_id, exc.message) from None
                raise
            except NotFoundError:  # an entry or segment a purge took away: say the purge
                refused = purging_refusal(snap.state.config, "this change")
                if refused is not None:
                    raise refused from None
                raise
            if not change.changed:
                return Committed(snap.state, change, commit_id, applied=False)
            refuse_while_purging(snap.state, change)  # judged on the version the write compares
            retryable = False
            step = commit_step(change.operation)
            failpoint(f"{step}.before-commit")
            try:
                role = guard_role(snap.state, change)
                if owner is None and role is None:
                    state = self.store.write(table, snap, change, audit, commit_id, now)
                else:  # fenced by the push's claim, or by the node only that role may write
                    state = self.store.write(table, snap, change, audit, commit_id, now, owner, role)
            except ClaimLostError as exc:
                if unknown_since is not None:  # an earlier attempt may have landed before the claim went
                    raise OutcomeUnknownError(table, commit_id, exc.message) from None
                raise
            except VersionConflict:
                floor.lost()
                if queue.queued:
                    continue  # our turn came (or waiting ran out): again at once
            except RetryableStoreError as exc:
                last_cause = exc.message
                retryable = True
            except WriteOutcomeUnknown as exc:
                last_cause = exc.message
                if unknown_since is None:
                    unknown_since = snap.state.version
            else:
                failpoint(f"{step}.after-commit")
                return Committed(state, change, commit_id, applied=True)
            attempts.backoff()
        if unknown_since is not None:
            # One last look: did any of our attempts land?
            try:
                landed = self.store.find_commit(table, commit_id, unknown_since)
                if landed is not None:
                    return self._landed(self.store.read(table), landed, commit_id, load)
            except LineageError as exc:
                raise OutcomeUnknownError(table, commit_id, last_cause or exc.message) from None
            raise OutcomeUnknownError(table, commit_id, last_cause)
        if retryable:
            raise StoreUnavailableError(
                f"writing table {table!r} kept failing ({last_cause}); nothing was committed"
            )
        held = floor.waited_on
        raise ContentionError(
            table,
            attempts.count,
            attempts.elapsed,
            waiting=f"commit {held.holder[:8]} held the table's floor until {_utc(held.until_ms)}"
            if held is not None and held.holder is not None
            else queue.waiting,
            floor_wait_s=floor.waited_s,
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
        """The table's current version, every record loaded."""
        return self._read(table).loaded()

    def _read(self, table: str) -> TableState:
        """The current version as the store reads it: a segment or pending
        bucket is loaded only when first wanted, so what looks at a few
        names costs what it looks at, not the table's size."""
        check_table_name(table)
        return self.store.read(table).state
