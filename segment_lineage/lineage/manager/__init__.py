"""The lineage manager: Pinot's operations over any :class:`Store`.

Each operation reads one consistent version, applies a pure transition from
:mod:`segment_lineage.lineage.core.transitions`, and compare-and-swaps the result, re-reading and
recomputing on conflict within a bounded budget.

Errors and what they mean for the caller:

* validation errors, :class:`RefusedError`, :class:`ConflictError`: definitely
  not applied; fix the input or the state, then retry;
* :class:`ContentionError`: not applied, the retry budget ran out; retry later;
* :class:`OutcomeUnknownError`: the last write may have landed; re-read before
  doing anything else, and never clean up after it.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime as dt
import getpass
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from segment_lineage.lineage import codec
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import (
    AuthError,
    ConflictError,
    ContentionError,
    CorruptRecordError,
    InvalidInputError,
    LineageError,
    NotFoundError,
    OutcomeUnknownError,
    RefusedError,
    StoreUnavailableError,
    TableExistsError,
    TableNotFoundError,
    VersionGoneError,
)
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.model import (
    Audit,
    Change,
    EntryState,
    HistoryRecord,
    LineageEntry,
    Operation,
    Segment,
    TableConfig,
    TableState,
)
from segment_lineage.lineage.core.names import check_entry_id, check_table_name
from segment_lineage.lineage.core.periods import parse_period, parse_version_or_time
from segment_lineage.lineage.core.retry import Attempts, RetryPolicy
from segment_lineage.lineage.core.roots import (
    Claim,
    ClaimFiles,
    canonical_root,
    check_claim,
    check_no_claim_around,
    read_claim,
    resolve_root,
)
from segment_lineage.lineage.core.visibility import visibility_delta, visible_segments
from segment_lineage.lineage.store.contract import (
    Floor,
    Lease,
    RetryableStoreError,
    Snapshot,
    Store,
    TableListing,
    VersionConflict,
    WriteOutcomeUnknown,
)

Update = Callable[[TableState, int], Change]

# A reader whose current version is condemned between its read and its lease
# pins again at the newest: each retry needs another retention mark meanwhile.
PIN_ATTEMPTS = 5


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


@dataclass(frozen=True)
class RollbackPlan:
    """What a rollback does (or did): the target, and the visible set before and after."""

    table: str
    target_version: int
    from_version: int
    restored: tuple[str, ...]  # entries brought back (COMPLETED again)
    reverted: tuple[str, ...]  # entries reverted
    appear: tuple[str, ...]  # segments that become visible
    disappear: tuple[str, ...]  # segments that stop being visible
    rows_appearing: int
    rows_disappearing: int
    committed_version: int | None  # None for a dry run or a no-op
    rows_before: int | None = None  # the whole visible set's rows: dry runs only (linear in the table)
    rows_after: int | None = None


FLOOR_AFTER = 3  # races lost in a row before a writer takes the table's floor
FLOOR_MS = 30_000  # how long a floor holds the other writers at most (ZooKeeper's clock)
FLOOR_POLL_S = 0.5  # a waiting writer looks again at least this often


class _FloorUse:
    """One commit's use of the table's floor (see :class:`segment_lineage.lineage.store.contract.Floor`).

    A writer that lost the race FLOOR_AFTER times in a row (a big change
    among small ones) takes the floor; the others, reading it in the same
    attempt as the head, wait until it is left or lapses instead of
    committing, and a commit of theirs already under way fails its check of
    the floor and waits too. Liveness only: every commit still
    compares-and-sets the head. A floor is never waited on for longer than
    FLOOR_MS from when this writer first saw it (on its own monotonic clock),
    whatever its deadline says; a take that fails or is refused only means
    going on without it."""

    def __init__(self, store: Store, table: str, commit_id: str, clock: Callable[[], float]) -> None:
        self.store = store
        self.table = table
        self.commit_id = commit_id
        self.clock = clock
        self.losses = 0
        self.tried = False  # a take was sent (it may have landed even when its answer was lost)
        self.waits = 0
        self.first_seen: tuple[tuple[str | None, int], float] | None = None
        self.waited_on: Floor | None = None  # the last floor this writer waited on

    def wait_or_take(self, snap: Snapshot, now_ms: int) -> float | None:
        """None when this attempt may commit; else how long to wait before
        the next one (another writer holds the floor, or this one just took it)."""
        seen = snap.floor
        if (
            seen is not None
            and seen.held_against(self.commit_id, now_ms, FLOOR_MS)
            and not self._lapsed(seen)
        ):
            self.waits += 1
            self.waited_on = seen
            step: float = min(FLOOR_POLL_S, 0.01 * 2.0 ** min(self.waits, 10))
            return min(step, max(0.0, (seen.until_ms - now_ms) / 1000))
        ours = seen is not None and seen.holder == self.commit_id and now_ms < seen.until_ms
        if self.losses < FLOOR_AFTER or ours:  # a floor of ours that lapsed is taken again
            return None
        self.losses = 0
        self.tried = True
        try:
            self.store.take_floor(self.table, seen, self.commit_id, now_ms + FLOOR_MS)
        except LineageError:
            return None  # refused (no right to create it) or no answer: go on without it
        return 0.0  # read again: under the floor if this writer holds it now

    def _lapsed(self, seen: Floor) -> bool:
        key = (seen.holder, seen.version)
        if self.first_seen is None or self.first_seen[0] != key:
            self.first_seen = (key, self.clock())
            return False
        return self.clock() - self.first_seen[1] > FLOOR_MS / 1000

    def lost(self) -> None:
        self.losses += 1

    def leave(self) -> None:
        if self.tried:
            with contextlib.suppress(LineageError):  # it lapses on its own
                self.store.leave_floor(self.table, self.commit_id)


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="seconds")


def commit_step(operation: Operation) -> str:
    """The failpoint prefix of a commit: ``END_REPLACE`` -> ``end``,
    ``RETENTION_MARK`` -> ``retention-mark`` (``end.before-commit``,
    ``rollback.after-commit``, ...)."""
    return operation.value.lower().removesuffix("_replace").replace("_", "-")


class LineageManager:
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

    def for_job(self, job_id: str | None) -> LineageManager:
        """This manager, recording ``job_id`` in the audit of every commit."""
        other = copy.copy(self)
        other.job_id = job_id
        return other

    def audit(self, reason: str | None = None) -> Audit:
        return Audit(actor=self.actor, job_id=self.job_id, reason=reason)

    # ---- the commit loop ----------------------------------------------------

    def commit(self, table: str, update: Update, reason: str | None = None) -> Committed:
        """Read, apply ``update`` (pure), compare-and-swap; bounded retries."""
        check_table_name(table)
        audit = self.audit(reason)
        commit_id = uuid.uuid4().hex
        floor = _FloorUse(self.store, table, commit_id, self.retry.clock)
        try:
            return self._commit(table, update, audit, commit_id, floor)
        finally:
            floor.leave()

    def _commit(
        self, table: str, update: Update, audit: Audit, commit_id: str, floor: _FloorUse
    ) -> Committed:
        attempts = Attempts(self.retry)
        unknown_since: int | None = None  # version read before an unknown outcome
        last_cause = ""
        retryable = False
        while attempts.next():
            try:
                snap = self.store.read(table)
                if unknown_since is not None:
                    landed = self.store.find_commit(table, commit_id, unknown_since)
                    if landed is not None:
                        return self._landed(self.store.read(table), landed, commit_id)
                now = self.store.now_ms()
                pause = floor.wait_or_take(snap, now)
                if pause is not None:
                    attempts.refund()  # waited for the floor, or took it: not a lost race
                    self.retry.sleep(pause)
                    continue
            except LineageError as exc:
                if unknown_since is not None and not isinstance(exc, NotFoundError):
                    # Our earlier write may have landed: never report "nothing written".
                    raise OutcomeUnknownError(table, commit_id, exc.message) from None
                raise
            change = update(snap.state, now)
            if not change.changed:
                return Committed(snap.state, change, commit_id, applied=False)
            retryable = False
            step = commit_step(change.operation)
            failpoint(f"{step}.before-commit")
            try:
                state = self.store.write(table, snap, change, audit, commit_id, now)
            except VersionConflict:
                floor.lost()
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
                    return self._landed(self.store.read(table), landed, commit_id)
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
            else "",
        )

    def _landed(self, snap: Snapshot, record: HistoryRecord, commit_id: str) -> Committed:
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

    # ---- tables -------------------------------------------------------------

    def create_table(self, config: TableConfig, reason: str | None = None) -> TableState:
        """Create a table. Its root is made canonical first (absolute, links
        resolved, never a protected place) and must not overlap another
        table's root: InvalidInputError, RefusedError."""
        config = dataclasses.replace(config, root=resolve_root(config.root))
        if self.claims is None:
            return self.store.create_table(config, self.audit(reason), uuid.uuid4().hex)
        # Claimed first, then created, then checked: of two stores creating
        # tables on one root at once, the second finds the first's marker.
        fresh = self._claim(config.name, config.root)
        try:
            state = self.store.create_table(config, self.audit(reason), uuid.uuid4().hex)
        except (InvalidInputError, RefusedError, TableExistsError, AuthError):
            # Not created by this call: the marker it made goes too, unless a
            # table of that name has this root by now (a twin job that trusted
            # this very marker). After any other failure the table may exist,
            # and keeps its claim.
            if fresh and not _same_root(self.store.roots().get(config.name), config.root):
                with contextlib.suppress(LineageError):
                    self.claims.remove_claim(config.root)
            raise
        self._check_claimed(config.name, config.root)
        return state

    def _claim(self, table: str, root: str) -> bool:
        """Check ``root`` and write its marker naming ``table``; True when no
        marker was there before (this call made it)."""
        assert self.claims is not None
        store_id = self.store.store_id()
        for _ in range(2):
            roots = self.store.roots()

            def holds(claim: Claim, where: str, roots: dict[str, str] = roots) -> bool:
                """Another store's claim always holds; one of this store's,
                while its table still has that root."""
                return claim.store != store_id or _same_root(roots.get(claim.table), where)

            check_no_claim_around(self.claims, table, root, holds)
            claim = read_claim(self.claims, root)
            live = claim is not None and claim.table != table and holds(claim, root)
            check_claim(claim, store_id, table, root, live=live)
            data = codec.encode_claim(store_id, table)
            try:
                if claim is not None:
                    self.claims.write_claim(root, data)
                    return False
                if self.claims.write_claim(root, data, exclusive=True):
                    return True
            except LineageError as exc:
                raise RefusedError(
                    f"could not claim the root {root!r} of table {table!r}: {exc.message}", table=table
                ) from None
        raise ConflictError(
            f"the claim marker under {root!r} kept changing; nothing was created", table=table
        )

    def _check_claimed(self, table: str, root: str) -> None:
        assert self.claims is not None
        claim = read_claim(self.claims, root)
        if claim != Claim(self.store.store_id(), table):
            raise RefusedError(
                f"table {table!r} was created, but the claim marker under {root!r} now names "
                f"{claim.table if claim else 'nobody'!r}: another store claimed the root at the same time",
                table=table,
                remedy="drop this table, or the other, and give each a root of its own",
            )

    def _unclaim(self, table: str, root: str) -> None:
        """After a drop, the root's marker goes if it still names this table
        of this store (best effort: a stale claim of this store never blocks)."""
        if self.claims is None:
            return
        with contextlib.suppress(LineageError):
            if read_claim(self.claims, root) == Claim(self.store.store_id(), table):
                self.claims.remove_claim(root)
                if _same_root(self.store.roots().get(table), root):  # created again meanwhile
                    self.claims.write_claim(root, codec.encode_claim(self.store.store_id(), table))

    def claim_root(self, table: str) -> str:
        """Write ``table``'s claim marker under its root (tables created before
        roots were claimed, or whose claim was lost). Refused when the root is
        claimed by another store or another live table. Returns the root."""
        if self.claims is None:
            raise RefusedError("this manager has no access to deep storage to claim a root")
        root = self.table(table).config.root
        resolve_root(root)  # a legacy root that create would refuse (relative, a home, ...) stays unclaimed
        self._claim(table, root)
        self._check_claimed(table, root)
        return root

    def list_tables(self) -> list[str]:
        """The tables whose metadata reads; an unreadable one is left out (see table_listing)."""
        return self.store.list_tables()

    def table_listing(self) -> TableListing:
        """Every table, with those whose metadata cannot be decoded named apart."""
        return self.store.table_listing()

    def table(self, table: str) -> TableState:
        check_table_name(table)
        return self.store.read(table).state

    def drop_table(self, table: str, *, force: bool = False, reason: str | None = None) -> None:
        """Remove a table's metadata. Refused while it has segments, unless forced.

        Files in deep storage are not touched: delete the segments and run
        retention first to reclaim them. The check and the drop are one
        compare-and-set, so a concurrent write makes the drop re-check. An
        interrupted drop is finished by running it again.
        """
        check_table_name(table)
        audit = self.audit(reason)
        attempts = Attempts(self.retry)
        while attempts.next():
            try:
                state = self.store.read(table).state
            except TableNotFoundError:
                self.store.drop_table(table, audit, None, resume_only=True)
                return
            except CorruptRecordError:
                if not force:
                    raise
                self.store.drop_table(table, audit, None)
                return
            if not force:
                live = [e.entry_id for e in state.entries.values() if e.state is EntryState.IN_PROGRESS]
                if state.segments or state.pending or live:
                    raise RefusedError(
                        f"table {table!r} still has {len(state.segments)} segment(s), "
                        f"{len(state.pending)} file(s) awaiting deletion and {len(live)} push(es) "
                        "in progress",
                        table=table,
                        remedy="delete its segments and run retention first, or pass --force "
                        "(files in deep storage are then left behind)",
                    )
            try:
                self.store.drop_table(table, audit, state.version)
                self._unclaim(table, state.config.root)
                return
            except VersionConflict:
                attempts.backoff()
        raise ContentionError(table, attempts.count, attempts.elapsed)

    # ---- segments and lineage -------------------------------------------------

    def register_segments(
        self,
        table: str,
        segments: Sequence[Segment],
        *,
        entry_id: str | None = None,
        reason: str | None = None,
    ) -> Committed:
        batch = list(segments)
        return self.commit(
            table, lambda s, now: transitions.register_segments(s, batch, now, entry_id), reason
        )

    def delete_segments(self, table: str, names: Sequence[str], reason: str | None = None) -> Committed:
        batch = list(names)
        return self.commit(table, lambda s, now: transitions.delete_segments(s, batch, now), reason)

    def start_replace(
        self,
        table: str,
        segments_from: Sequence[str],
        segments_to: Sequence[str],
        *,
        force_cleanup: bool = False,
        reason: str | None = None,
        entry_id: str | None = None,
        interval: tuple[int, int] | None = None,
        live_owners: frozenset[str] | None = None,
        hold: str | None = None,
    ) -> str:
        """Open a replacement by hand and return its entry id.

        No process holds an owner node for such an entry, so it is held for
        ``hold`` (a period; default the table's
        ``lineage_entry_cleanup_retention``; ``0s`` for none, Pinot's rule) on
        the store's clock: until then no other push's force cleanup and no
        retention pass takes it. See :func:`segment_lineage.lineage.core.transitions.start_replace`
        for ``interval`` and ``live_owners``.
        """
        eid = entry_id or str(uuid.uuid4())
        self.open_replace(
            table,
            segments_from,
            segments_to,
            force_cleanup=force_cleanup,
            reason=reason,
            entry_id=eid,
            interval=interval,
            live_owners=live_owners,
            hold=hold,
        )
        return eid

    def open_replace(
        self,
        table: str,
        segments_from: Sequence[str],
        segments_to: Sequence[str],
        *,
        force_cleanup: bool = False,
        reason: str | None = None,
        entry_id: str | None = None,
        interval: tuple[int, int] | None = None,
        live_owners: frozenset[str] | None = None,
        hold: str | None = None,
    ) -> Committed:
        """:meth:`start_replace`, returning the commit: its change names the
        entry and the stale entries force cleanup reverted (``cleaned``)."""
        eid = entry_id or str(uuid.uuid4())
        src, dst = list(segments_from), list(segments_to)
        audit = self.audit(reason)
        hold_ms = None if hold is None else parse_period(hold)

        def update(s: TableState, now: int) -> Change:
            span = s.config.lineage_entry_cleanup_retention_ms if hold_ms is None else hold_ms
            return transitions.start_replace(
                s,
                src,
                dst,
                entry_id=eid,
                audit=audit,
                now_ms=now,
                force_cleanup=force_cleanup,
                interval=interval,
                live_owners=live_owners,
                held_until_ms=now + span if span else None,
            )

        return self.commit(table, update, reason)

    def end_replace(
        self,
        table: str,
        entry_id: str,
        to_subset: Sequence[str] | None = None,
        reason: str | None = None,
    ) -> Committed:
        subset = None if to_subset is None else list(to_subset)
        return self.commit(table, lambda s, now: transitions.end_replace(s, entry_id, now, subset), reason)

    def revert_replace(
        self, table: str, entry_id: str, *, force: bool = False, reason: str | None = None
    ) -> Committed:
        return self.commit(table, lambda s, now: transitions.revert_replace(s, entry_id, now, force), reason)

    # ---- versions: time travel and rollback --------------------------------------

    def resolve_version(
        self,
        table: str,
        *,
        version: int | None = None,
        at_ms: int | None = None,
        entry_id: str | None = None,
    ) -> int:
        """A table version from one of: a version number; a moment (the newest
        version committed at or before it); an entry (the version just before
        that push completed). With none, the version before the newest
        completed push."""
        given = [x for x in (version, at_ms, entry_id) if x is not None]
        if len(given) > 1:
            raise InvalidInputError("give at most one of a version, a time and an entry")
        if version is not None:
            if isinstance(version, bool) or not isinstance(version, int) or version < 1:
                raise InvalidInputError(f"invalid version {version!r}: a whole number from 1")
            return version
        history = self.store.iter_history(table)  # newest first, read only as far as needed
        if at_ms is not None:
            for record in history:
                if record.at_ms <= at_ms:
                    return record.version
            raise InvalidInputError(f"table {table!r} did not exist at {at_ms} (epoch ms)")
        ends = (r for r in history if r.operation is Operation.END_REPLACE)
        if entry_id is not None:
            check_entry_id(entry_id)
            for record in ends:
                if record.entry_id == entry_id:
                    return record.version - 1
            raise NotFoundError(f"entry {entry_id} never completed on table {table!r}")
        live = self.table(table)
        landed: set[str] | None = None  # entries whose segments are visible now, computed once if needed
        for record in ends:
            entry = live.entries.get(record.entry_id or "")
            if entry is not None:
                if entry.state is EntryState.COMPLETED:
                    return record.version - 1
                continue
            # Gone from the record: retention removes a finished push's entry
            # once nothing is left to reclaim (every APPEND push). Its segments
            # still name it: if any is visible, the push is still in force.
            if landed is None:
                landed = {s.entry_id for s in visible_segments(live) if s.entry_id is not None}
            if record.entry_id in landed:
                return record.version - 1
        raise RefusedError(f"table {table!r} has no completed push to undo", table=table)

    def table_as_of(self, table: str, version: int) -> TableState:
        """Version ``version`` itself, or VersionGoneError: never another one,
        whatever commits meanwhile. Not pinned: its files may go at any time
        (use :meth:`pin_readable` to read them)."""
        check_table_name(table)
        state = self.store.read_version(table, version)
        if state.version != version:  # a store bug must not hand a reader another snapshot
            raise LineageError(
                f"asked for version {version} of table {table!r}, the store answered version {state.version}"
            )
        return state

    def resolve_as_of(self, table: str, as_of: int | str) -> int:
        """``as_of`` as users give it: a version number, or text (a version,
        an ISO-8601 time, or ``ms:EPOCH_MS``)."""
        if isinstance(as_of, str):
            version, at_ms = parse_version_or_time(as_of)
            return self.resolve_version(table, version=version, at_ms=at_ms)
        return self.resolve_version(table, version=as_of)

    def pin_readable(self, table: str, version: int | None = None) -> Lease:
        """Pin a version whose files stay until the lease is released: the
        current one (``version=None``) or a retained past one.

        Pin first, then choose and verify: the lease is created, then the head
        is read again, and every segment the pinned version shows must still
        be registered there at the same location (not condemned into
        ``pending``). Retention re-reads the leases after its mark commit and
        ZooKeeper applies writes in one order, so either this read sees the
        mark or the pass sees the lease. The current version, condemned under
        us, is pinned again at the newest version, at most ``PIN_ATTEMPTS``
        times.

        Raises VersionGoneError for a past version no longer readable (naming
        the oldest readable one): not retryable. ContentionError when every
        attempt lost its version: retry later. Any error releases the lease.
        """
        check_table_name(table)
        if version is not None:
            self.resolve_version(table, version=version)  # validates it
        started = time.monotonic()
        for _ in range(PIN_ATTEMPTS):
            lease = self.store.pin(table, version)
            try:
                then = lease.state
                if version is not None and then.version != version:
                    raise LineageError(
                        f"pinned version {then.version} of table {table!r} instead of version {version}"
                    )
                current = self.table(table)  # read after the lease exists: see the docstring
                if version is not None:
                    self.check_readable(then, current)
                    return lease
                if self._gone(then, current) is None:
                    return lease
            except BaseException:
                self.store.release(lease)
                raise
            self.store.release(lease)  # condemned between our read and our lease: take the newest
        raise ContentionError(
            table, PIN_ATTEMPTS, time.monotonic() - started, doing="pinning a version retention left alone"
        )

    def check_readable(self, then: TableState, current: TableState) -> None:
        """Refuse a past version whose files retention took or is taking:
        every segment it shows must still be registered in ``current`` (a
        head read after the reader's lease exists) at the same location; one
        queued in ``pending`` is condemned, so not readable. Names the oldest
        readable version after it."""
        gone = self._gone(then, current)
        if gone is None:
            return
        oldest = None
        for version in self.store.versions(then.config.name):
            if version > then.version and not self._gone(
                self.table_as_of(then.config.name, version), current
            ):
                oldest = version
                break
        raise VersionGoneError(
            then.config.name, then.version, oldest, why=f"can no longer be read: segment {gone} was reclaimed"
        )

    @staticmethod
    def _gone(then: TableState, current: TableState) -> str | None:
        """The first segment ``then`` shows that ``current`` does not hold
        registered at the same location, or whose location waits in pending."""
        if then.version == current.version:
            return None  # one version: what it shows is registered, and nothing registered is pending
        for seg in visible_segments(then):
            now = current.segments.get(seg.name)
            if now is None or seg.location in current.pending or not _same_file(now, seg):
                return seg.name
        return None

    def rollback(
        self, table: str, target_version: int, *, dry_run: bool = False, reason: str | None = None
    ) -> RollbackPlan:
        """One atomic commit that makes the visible set equal to
        ``target_version``'s (earlier or later: a rollback is undone by rolling
        forward). Costs one version read and one commit, whatever the size."""
        target = self.table_as_of(table, target_version)
        current = self.table(table)
        if dry_run:
            change = transitions.rollback(current, target, self.store.now_ms(), self.audit(reason))
            plan = _rollback_plan(current, change, target_version, None)
            rows_before = sum(s.rows for s in visible_segments(current))
            return dataclasses.replace(
                plan,
                rows_before=rows_before,
                rows_after=rows_before + plan.rows_appearing - plan.rows_disappearing,
            )

        def apply(state: TableState, now: int) -> Change:
            # A rollback is planned against what the operator saw: if another
            # change landed meanwhile (another rollback, say), this one gives way.
            if state.version != current.version:
                raise ConflictError(
                    f"table {table!r} changed while the rollback was planned "
                    f"(version {current.version} -> {state.version}); nothing was rolled back",
                    table=table,
                    remedy="look at 'lineage history' and run the rollback again if it still applies",
                )
            return transitions.rollback(state, target, now, audit)

        why = reason or f"rollback to version {target_version}"
        audit = self.audit(why)
        committed = self.commit(table, apply, why)
        before = current
        if committed.applied and committed.state.version - 1 != current.version:
            before = self.table_as_of(table, committed.state.version - 1)
        return _rollback_plan(
            before, committed.change, target_version, committed.state.version if committed.applied else None
        )

    # ---- reads ----------------------------------------------------------------

    def visible_segments(self, table: str) -> list[Segment]:
        return visible_segments(self.table(table))

    def entries(self, table: str) -> list[LineageEntry]:
        return list(self.table(table).entries.values())

    def history(self, table: str, limit: int | None = None) -> list[HistoryRecord]:
        check_table_name(table)
        if limit is not None and limit < 1:
            raise InvalidInputError(f"invalid limit {limit}: must be at least 1")
        return self.store.history(table, limit)


def _same_file(now: Segment, then: Segment) -> bool:
    """The same registration of a segment: a name and location deleted,
    reclaimed and registered again hold other data."""
    return (now.location, now.created_ms, now.checksum, now.size_bytes) == (
        then.location,
        then.created_ms,
        then.checksum,
        then.size_bytes,
    )


def _same_root(registered: str | None, root: str) -> bool:
    """Whether a table's registered root is ``root`` (a claim by a table
    that moved elsewhere, or was dropped, no longer holds)."""
    if registered is None:
        return False
    try:
        mine = canonical_root(registered)
    except InvalidInputError:
        return False
    if "://" not in mine:  # a local folder may have moved behind a link since it was registered
        mine, root = os.path.realpath(mine), os.path.realpath(root)
    return mine.casefold() == root.casefold()


def _rollback_plan(before: TableState, change: Change, target: int, committed: int | None) -> RollbackPlan:
    after = change.state
    appear, disappear = visibility_delta(before, after)

    def was(e: str) -> EntryState | None:
        entry = before.entries.get(e)  # None: removed by retention, brought back by the rollback
        return None if entry is None else entry.state

    restored = tuple(
        e
        for e, entry in after.entries.items()
        if entry.state is EntryState.COMPLETED and was(e) is EntryState.REVERTED
    )
    reverted = tuple(
        e
        for e, entry in after.entries.items()
        if entry.state is EntryState.REVERTED and was(e) in (EntryState.COMPLETED, None)
    )
    return RollbackPlan(
        table=before.config.name,
        target_version=target,
        from_version=before.version,
        restored=restored,
        reverted=reverted,
        appear=tuple(sorted(appear)),
        disappear=tuple(sorted(disappear)),
        rows_appearing=sum(after.segments[n].rows for n in appear),
        rows_disappearing=sum(before.segments[n].rows for n in disappear),
        committed_version=committed,
    )
