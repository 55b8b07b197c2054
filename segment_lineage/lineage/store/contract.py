"""The store interface: read one consistent version, compare-and-swap a new one.

Two implementations share it, and one contract test suite runs on both:
:class:`segment_lineage.lineage.store.memory.MemoryStore` and
:class:`segment_lineage.lineage.zk.store.ZkStore`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import DEFAULT_VERSIONS_KEPT, Audit, Change, TableConfig, TableState

MAX_VERSIONS = DEFAULT_VERSIONS_KEPT  # past versions each store keeps readable
MAX_HISTORY = 10_240  # history records each store keeps (older ones are compacted away)
MEMBER_PREFIX = "member-"  # an election member's name: this, then its join order
LOCK = "lock"  # the name of a table's single hold of a kind (a pass's, a mirror's)

HoldKind = Literal["owner", "pass", "mirror"]


# A drop's call back once the table is marked dropping: (its root, its config).
OnMarked = Callable[[str | None, TableConfig | None], None]


class VersionConflict(LineageError):
    """Internal: the table moved on since it was read. Re-read and recompute."""


class WriteOutcomeUnknown(LineageError):
    """Internal: the swap was sent but its result is unknown."""


class RetryableStoreError(LineageError):
    """Internal: nothing was committed (a blob write failed); safe to retry."""


class ReadAgainError(RetryableStoreError):
    """A part of a version read earlier, loaded only when first wanted, was
    collected since: the table moved on long ago. Read the table again (the
    commit loop does, as after a lost race). ``blob``: the part that went.
    A past version asked for by number is not read again: the manager tells
    it no longer kept (:class:`~segment_lineage.lineage.core.errors.VersionGoneError`)."""

    def __init__(self, message: str, *, blob: str | None = None) -> None:
        super().__init__(message)
        self.blob = blob


@dataclass(frozen=True)
class Lease:
    """A reader's pin on one table version. Released on close, or with the
    reader's session if the reader dies."""

    table: str
    lease_id: str
    state: TableState
    # The table as read right after the lease was made (``Pins.pin(look=True)``).
    after: TableState | None = None


@dataclass(frozen=True)
class LeaseInfo:
    lease_id: str
    version: int


@dataclass(frozen=True)
class Member:
    """One candidate of an election: its name (which sorts in join order),
    who it says it is, and the session that holds it (None: unknown)."""

    name: str
    identity: str
    session: int | None


@dataclass(frozen=True)
class Floor:
    """Who holds a table's commits: a writer that kept losing the race takes
    the floor, and other writers wait until it commits or ``until_ms``
    (ZooKeeper's clock) passes. Liveness only: every commit still
    compares-and-sets the head."""

    holder: str | None  # the holding commit's id; None: free
    until_ms: int
    version: int  # of the stored record, for compare-and-set

    def held_against(self, commit_id: str, now_ms: int, limit_ms: int) -> bool:
        """Held by another commit now. A floor stamped more than ``limit_ms``
        ahead (the longest a take asks for) was not made by a take: ignored."""
        return (
            self.holder is not None
            and self.holder != commit_id
            and now_ms < self.until_ms <= now_ms + limit_ms
        )


@dataclass(frozen=True)
class TableListing:
    """Every table of a store: those whose metadata reads, in name order, and
    those whose head cannot be decoded (table -> the error), which readers
    and retention fail closed on, one table at a time."""

    readable: tuple[str, ...]
    unreadable: Mapping[str, str]


@dataclass(frozen=True)
class Snapshot:
    """One consistent version of a table, and the store's token to swap it;
    with the table's floor as read in the same call (None: the table has no
    floor record yet)."""

    state: TableState
    token: object
    floor: Floor | None = None
    queue: tuple[str, ...] = ()  # the table's commit queue, oldest ticket first (read by read_now)
    # The version's newest history records, newest first, as far as the read
    # found them at hand (the head's own tail on ZooKeeper): the first is this
    # version's. Older ones are read with history(); it may hold none.
    recent: tuple[HistoryRecord, ...] = ()


@dataclass(frozen=True)
class Write:
    """One table's part of a write of several tables at once
    (:meth:`Store.write_together`): the arguments of :meth:`Store.write`."""

    table: str
    base: Snapshot
    change: Change
    audit: Audit
    commit_id: str
    now_ms: int
    owner: str | None = None
    role: str | None = None


class Holds(Protocol):
    """Holds of one kind on tables, each an ephemeral claim that lives as long
    as this client's session: ``owner`` (a running push's entry, by entry
    id), ``pass`` (one retention pass at a time) and ``mirror`` (one publish,
    drop or disable of a table's mirror at a time), named :data:`LOCK`."""

    def hold(self, table: str, name: str = LOCK) -> None:
        """Take the hold. ``owner``: RefusedError when another session owns the
        entry; this session again is fine. ``pass``: PassRunningError when
        another client holds it; this session again is fine. ``mirror``:
        MirrorHeldError when another client holds it, or this one already
        does (two holders of one process never overlap)."""
        ...

    def holds(self, table: str, name: str = LOCK) -> bool:
        """Whether this client still holds it (asks the server)."""
        ...

    def holds_now(self, table: str, name: str = LOCK) -> int | None:
        """The store's clock when this client still holds it, else None, both
        asked together (one round trip on ZooKeeper): for a fenced write."""
        ...

    def release(self, table: str, name: str = LOCK) -> None:
        """Let it go, if it is still this session's (gone with the session anyway)."""
        ...

    def live(self, table: str) -> frozenset[str]:
        """The names held on ``table`` by live sessions (owners: running pushes' entries)."""
        ...


class Queues(Protocol):
    """The tables' commit queues: a writer that lost a race waits its turn."""

    def join(self, table: str, commit_id: str) -> str | None:
        """A ticket at the tail of the table's commit queue, gone with this
        client's session (or :meth:`leave`). None when the store keeps no
        queue for the table (a table made before queues, under an ACL policy,
        until ``lineage acl apply``): commit without one."""
        ...

    def await_turn(self, table: str, ahead: str, timeout_s: float) -> bool:
        """Wait until ticket ``ahead`` is gone: True when it is, False after
        ``timeout_s`` or at once where the store cannot wait (then poll)."""
        ...

    def leave(self, table: str, ticket: str) -> None:
        """Give up a ticket (best effort: it goes with the session anyway)."""
        ...


class Floors(Protocol):
    """Who holds a table's commits a while (see :class:`Floor`)."""

    def take(self, table: str, seen: Floor | None, commit_id: str, until_ms: int) -> bool:
        """Take the floor for ``commit_id`` if it is still as ``seen``
        (compare-and-set); False when someone else changed it first."""
        ...

    def leave(self, table: str, commit_id: str) -> None:
        """Free the floor if ``commit_id`` holds it."""
        ...


class Pins(Protocol):
    """Readers' pins on table versions; retention keeps a pinned version's files."""

    def pin(
        self, table: str, version: int | None = None, read: Snapshot | None = None, *, look: bool = False
    ) -> Lease:
        """Pin one consistent version for a reader: the current one, or a
        retained one. ``read``: the table as the caller read it, at the
        version pinned (the caller checks): the pin builds on it instead of
        reading the head again. ``look``: also read the table once the lease
        exists (``Lease.after``; on ZooKeeper, asked right behind the lease:
        one round trip for both)."""
        ...

    def release(self, lease: Lease) -> None: ...

    def leases(self, table: str) -> list[LeaseInfo]: ...

    def pinned_states(self, table: str) -> list[TableState]:
        """The versions live readers hold: retention keeps their files. A
        malformed lease is skipped, not fatal: see :meth:`ignored`."""
        ...

    def ignored(self, table: str) -> list[str]:
        """Why each malformed lease of ``table`` seen so far was skipped
        (leases are written by readers; retention reports these)."""
        ...


class Elections(Protocol):
    """Elections bound to this client's session; the first member leads."""

    def join(self, role: str, identity: str) -> str:
        """Join ``role``'s election for as long as this session lives; returns the member's name."""
        ...

    def members(self, role: str) -> list[str]:
        """The members of ``role``'s election, in join order."""
        ...

    def member(self, role: str, name: str) -> Member | None:
        """One member (None once it is gone)."""
        ...

    def leave(self, role: str, name: str) -> None:
        """Leave; a member already gone is fine."""
        ...


class Session(Protocol):
    """This client's session, which holds, tickets, pins and members live as long as."""

    @property
    def timeout_s(self) -> float: ...

    def connected(self) -> bool:
        """Whether the client is connected now (no request sent)."""
        ...

    def id(self) -> int | None:
        """This client's current session (None while there is none)."""
        ...

    def alive(self, since: int) -> bool:
        """False once the session ``since`` is suspended, lost or replaced."""
        ...

    def confirm(self) -> None:
        """One round trip to the server; StoreUnavailableError when it fails
        (a session that expired while the process was paused fails it)."""
        ...


class Store(Protocol):
    def now_ms(self) -> int:
        """The single clock every timestamp comes from (ZooKeeper's, for ZkStore)."""
        ...

    def create_table(self, config: TableConfig, audit: Audit, commit_id: str) -> TableState:
        """Create-if-absent. TableExistsError when a table (or a case twin) exists."""
        ...

    def list_tables(self) -> list[str]:
        """The tables whose metadata reads (see table_listing for the others)."""
        ...

    def table_listing(self) -> TableListing:
        """Every table, readable or not: a corrupt head names its table here
        instead of hiding it or failing the whole listing."""
        ...

    def store_id(self) -> str:
        """This store's id, which root claims name (for ZooKeeper: the ensemble and chroot)."""
        ...

    def roots(self) -> dict[str, str]:
        """Every table's deep-store root, table -> root. create_table refuses a
        root that overlaps another table's (RefusedError)."""
        ...

    def read(self, table: str, *, whole: bool = False) -> Snapshot:
        """One consistent version. TableNotFoundError, CorruptRecordError.
        ``whole``: every record will be wanted; fetched together where the
        store can (one round trip, not one per kind as each is wanted)."""
        ...

    def read_now(self, table: str) -> tuple[Snapshot, int]:
        """``read`` with the table's commit queue, and then ``now_ms``, in one
        round trip where the store can (what every commit attempt starts with)."""
        ...

    def read_now_many(self, tables: Sequence[str]) -> list[tuple[Snapshot, int]]:
        """``read_now`` of each of ``tables``, their requests sent together
        where the store can (what a set commit's attempt starts with). Each
        table's version is one it had; they need not have been current together."""
        ...

    def write(
        self,
        table: str,
        base: Snapshot,
        change: Change,
        audit: Audit,
        commit_id: str,
        now_ms: int,
        owner: str | None = None,
        role: str | None = None,
    ) -> TableState:
        """Swap ``base`` for ``change.state`` at version ``base.version + 1``.

        ``owner``: the entry this commit is made for by the push that holds
        it (``holds("owner")``): the swap lands only while that claim stands,
        checked in the same request (ZooKeeper: a ``check`` of the owner node
        in the multi), so a push paused past its session never lands late.
        ``role``: a change only that role and the admins may make
        (:func:`segment_lineage.lineage.core.roles.guard_role`): under an ACL
        policy the same request writes that role's guard node, so ZooKeeper
        refuses it to every other role (AuthError).

        Raises VersionConflict (nothing written), WriteOutcomeUnknown (maybe
        written), RetryableStoreError (nothing written), TooLargeError (never
        retry), ClaimLostError (``owner``'s claim is gone: nothing written).
        """
        ...

    def write_together(self, writes: Sequence[Write], checks: Sequence[Snapshot] = ()) -> list[TableState]:
        """:meth:`write` of every table of ``writes`` in one request (ZooKeeper:
        one multi): all of them land, or none. Each of ``checks`` (a table the
        commit was decided on and leaves as it is) must still be at the version
        read, compared in the same request (VersionConflict otherwise). The errors are :meth:`write`'s,
        raised for the first table whose part was refused (its ``table``
        attribute, where the error has one, names it); TooLargeError when the
        request would exceed the store's limit (nothing sent)."""
        ...

    def find_commit(self, table: str, commit_id: str, after_version: int) -> HistoryRecord | None:
        """The history record of ``commit_id`` if it landed after ``after_version``."""
        ...

    def history(self, table: str, limit: int | None = None) -> list[HistoryRecord]:
        """History records, newest first."""
        ...

    def iter_history(self, table: str) -> Iterator[HistoryRecord]:
        """History records, newest first, fetched only as far as they are read."""
        ...

    def drop_table(
        self,
        table: str,
        audit: Audit,
        expected_version: int | None,
        *,
        resume_only: bool = False,
        on_marked: OnMarked | None = None,
    ) -> None:
        """Remove a table's metadata, if it is still at ``expected_version``.

        VersionConflict when it moved on (re-check and retry); None skips the
        check. ``resume_only`` finishes an interrupted drop and nothing else.
        ``on_marked`` is called with the table's root (None: not known) and
        config (None: unreadable) once the drop can no longer be refused and
        no one reads or writes the table any more (it is marked dropping),
        before its metadata (and its root's registration) goes; an error it
        raises leaves the drop to be run again (which calls it again).
        """
        ...

    def require_role(self, *roles: str, doing: str) -> None:
        """AuthError unless this client's identity is an admin or of one of
        ``roles``, when an ACL policy is in force (no roles: admins only)."""
        ...

    def versions(self, table: str) -> list[int]:
        """The versions still readable (time travel, rollback targets), oldest first."""
        ...

    def read_version(self, table: str, version: int) -> TableState:
        """One retained version. VersionGoneError when it is not retained."""
        ...

    def read_version_now(self, table: str, version: int) -> tuple[TableState, Snapshot, int]:
        """``read_version`` and ``read_now`` together where the store can (on
        ZooKeeper one round trip): a rollback's reads, its commit's first."""
        ...

    def collect_garbage(self, table: str) -> int:
        """Reclaim the store's own unreferenced metadata; returns how much."""
        ...

    # ---- the coordination recipes, after kazoo's ``client.Lock(path)`` -----------

    def holds(self, kind: HoldKind) -> Holds:
        """The holds of one kind: a push's owner claims, retention passes, mirror publishes."""
        ...

    @property
    def queues(self) -> Queues:
        """The tables' commit queues."""
        ...

    @property
    def floors(self) -> Floors:
        """The tables' floors."""
        ...

    @property
    def pins(self) -> Pins:
        """Readers' pins (leases) on table versions."""
        ...

    @property
    def elections(self) -> Elections:
        """Elections bound to this client's session."""
        ...

    @property
    def session(self) -> Session:
        """This client's session."""
        ...

    def close(self) -> None: ...
