"""The in-memory store's coordination recipes: holds, commit queues, floors,
pins, elections and the one session, each a small class as on ZooKeeper.

They share the store's lock and its live tables (a ``dict`` the store
mutates in place), so every call is as atomic as it was on the store itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from segment_lineage.lineage.core.errors import (
    LineageError,
    MirrorHeldError,
    PassRunningError,
    TableNotFoundError,
)
from segment_lineage.lineage.core.model import TableState
from segment_lineage.lineage.core.names import check_role
from segment_lineage.lineage.store.contract import (
    LOCK,
    MEMBER_PREFIX,
    Floor,
    Lease,
    LeaseInfo,
    Member,
    Snapshot,
)

SESSION = 1  # the one session of a memory store's client
FREE = Floor(None, 0, 0)

Tables = dict[str, TableState]


def _require(tables: Tables, table: str) -> None:
    if table not in tables:
        raise TableNotFoundError(table)


class MemoryOwners:
    """Push owner claims, by entry id. The one session holds them all."""

    def __init__(self, lock: threading.RLock, tables: Tables, clock: Callable[[], int]) -> None:
        self._lock, self._tables, self._clock = lock, tables, clock
        self._owners: dict[str, set[str]] = {}

    def hold(self, table: str, name: str = LOCK) -> None:
        with self._lock:
            _require(self._tables, table)
            self._owners.setdefault(table, set()).add(name)

    def holds(self, table: str, name: str = LOCK) -> bool:
        with self._lock:
            return name in self._owners.get(table, set())

    def holds_now(self, table: str, name: str = LOCK) -> int | None:
        return self._clock() if self.holds(table, name) else None

    def release(self, table: str, name: str = LOCK) -> None:
        with self._lock:
            self._owners.get(table, set()).discard(name)

    def live(self, table: str) -> frozenset[str]:
        with self._lock:
            return frozenset(self._owners.get(table, set()))


class MemoryLocks:
    """One kind of exclusive table hold (``pass``, ``mirror``): held by this
    store's client, or not; taking it twice is refused (``busy``)."""

    def __init__(
        self,
        lock: threading.RLock,
        tables: Tables,
        busy: Callable[[str], LineageError],
        clock: Callable[[], int],
    ) -> None:
        self._lock, self._tables, self._busy, self._clock = lock, tables, busy, clock
        self._held: set[tuple[str, str]] = set()

    def hold(self, table: str, name: str = LOCK) -> None:
        with self._lock:
            _require(self._tables, table)
            if (table, name) in self._held:  # by another client, or by a holder in this one
                raise self._busy(table)
            self._held.add((table, name))

    def holds(self, table: str, name: str = LOCK) -> bool:
        with self._lock:
            return (table, name) in self._held

    def holds_now(self, table: str, name: str = LOCK) -> int | None:
        return self._clock() if self.holds(table, name) else None

    def release(self, table: str, name: str = LOCK) -> None:
        with self._lock:
            self._held.discard((table, name))

    def live(self, table: str) -> frozenset[str]:
        with self._lock:
            return frozenset(name for held, name in self._held if held == table)

    def forget(self, table: str) -> None:
        """The table is gone: its holds go with it (its nodes do on ZooKeeper)."""
        with self._lock:
            self._held = {(t, n) for t, n in self._held if t != table}


def memory_holds(
    lock: threading.RLock, tables: Tables, clock: Callable[[], int]
) -> tuple[MemoryOwners, MemoryLocks, MemoryLocks]:
    """The owner, pass and mirror holds of one memory store (on its ``clock``)."""
    return (
        MemoryOwners(lock, tables, clock),
        MemoryLocks(lock, tables, PassRunningError, clock),
        MemoryLocks(lock, tables, MirrorHeldError, clock),
    )


class MemoryQueues:
    def __init__(self, lock: threading.RLock, tables: Tables) -> None:
        self._lock, self._tables = lock, tables
        self._queues: dict[str, dict[str, str]] = {}  # table -> ticket -> commit id, oldest first
        self._tickets = 0

    def join(self, table: str, commit_id: str) -> str | None:
        with self._lock:
            _require(self._tables, table)
            self._tickets += 1
            ticket = f"t-{commit_id}-{self._tickets:010d}"
            self._queues.setdefault(table, {})[ticket] = commit_id
            return ticket

    def await_turn(self, table: str, ahead: str, timeout_s: float) -> bool:
        with self._lock:
            return ahead not in self._queues.get(table, {})  # never waits: the caller polls

    def leave(self, table: str, ticket: str) -> None:
        with self._lock:
            self._queues.get(table, {}).pop(ticket, None)

    def tickets(self, table: str) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._queues.get(table, {}))

    def forget(self, table: str) -> None:
        with self._lock:
            self._queues.pop(table, None)


class MemoryFloors:
    def __init__(self, lock: threading.RLock, tables: Tables) -> None:
        self._lock, self._tables = lock, tables
        self._floors: dict[str, Floor] = {}

    def take(self, table: str, seen: Floor | None, commit_id: str, until_ms: int) -> bool:
        with self._lock:
            _require(self._tables, table)
            current = self._floors.get(table, FREE)
            if seen is None or current.version != seen.version:
                return False
            self._floors[table] = Floor(commit_id, until_ms, current.version + 1)
            return True

    def leave(self, table: str, commit_id: str) -> None:
        with self._lock:
            current = self._floors.get(table, FREE)
            if current.holder == commit_id:
                self._floors[table] = Floor(None, 0, current.version + 1)

    def current(self, table: str) -> Floor:
        with self._lock:
            return self._floors.get(table, FREE)

    def forget(self, table: str) -> None:
        with self._lock:
            self._floors.pop(table, None)


class MemoryPins:
    """Readers' leases; ``state_of`` reads the pinned version (the current
    one for None), raising as the store's reads do."""

    def __init__(self, lock: threading.RLock, state_of: Callable[[str, int | None], TableState]) -> None:
        self._lock, self._state_of = lock, state_of
        self._leases: dict[str, dict[str, TableState]] = {}
        self._next = 0

    def pin(
        self, table: str, version: int | None = None, read: Snapshot | None = None, *, look: bool = False
    ) -> Lease:
        state = read.state if read is not None else self._state_of(table, version)
        with self._lock:
            self._next += 1
            lease_id = f"lease-{self._next:010d}"
            self._leases.setdefault(table, {})[lease_id] = state
        try:
            after = self._state_of(table, None) if look else None  # read once the lease exists
        except BaseException:
            self.release(Lease(table, lease_id, state))
            raise
        return Lease(table, lease_id, state, after)

    def release(self, lease: Lease) -> None:
        with self._lock:
            self._leases.get(lease.table, {}).pop(lease.lease_id, None)

    def leases(self, table: str) -> list[LeaseInfo]:
        with self._lock:
            return [LeaseInfo(k, v.version) for k, v in sorted(self._leases.get(table, {}).items())]

    def pinned_states(self, table: str) -> list[TableState]:
        with self._lock:
            return list(self._leases.get(table, {}).values())

    def ignored(self, table: str) -> list[str]:
        return []  # leases here are made by pin() alone: none is malformed


class MemoryElections:
    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._members: dict[str, dict[str, str]] = {}  # role -> member name -> identity
        self._next = 0

    def join(self, role: str, identity: str) -> str:
        check_role(role)
        with self._lock:
            name = f"{MEMBER_PREFIX}{self._next:010d}"
            self._next += 1
            self._members.setdefault(role, {})[name] = identity
            return name

    def members(self, role: str) -> list[str]:
        with self._lock:
            return sorted(self._members.get(role, {}))

    def member(self, role: str, name: str) -> Member | None:
        with self._lock:
            identity = self._members.get(role, {}).get(name)
        return None if identity is None else Member(name, identity, SESSION)

    def leave(self, role: str, name: str) -> None:
        with self._lock:
            self._members.get(role, {}).pop(name, None)


class MemorySession:
    """One session that never ends."""

    timeout_s = 10.0

    def connected(self) -> bool:
        return True

    def id(self) -> int | None:
        return SESSION

    def alive(self, since: int) -> bool:
        return since == SESSION

    def confirm(self) -> None:
        return None
