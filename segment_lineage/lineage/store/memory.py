"""An in-memory store for fast pure tests. Same contract as the ZooKeeper store.

Thread-safe. ``inject_unknown`` makes the next writes report an unknown
outcome (after applying them, or not) so the manager's recovery can be tested.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace

from segment_lineage.lineage.core.errors import (
    ClaimLostError,
    MirrorHeldError,
    PassRunningError,
    TableExistsError,
    TableNotFoundError,
    VersionGoneError,
)
from segment_lineage.lineage.core.model import (
    Audit,
    Change,
    HistoryRecord,
    Operation,
    TableConfig,
    TableState,
)
from segment_lineage.lineage.core.names import check_role, check_table_name
from segment_lineage.lineage.core.roots import check_no_overlap
from segment_lineage.lineage.core.schema_versions import config_at
from segment_lineage.lineage.store.contract import (
    MAX_HISTORY,
    MAX_VERSIONS,
    MEMBER_PREFIX,
    Floor,
    Lease,
    LeaseInfo,
    Member,
    OnMarked,
    Snapshot,
    TableListing,
    VersionConflict,
    WriteOutcomeUnknown,
)

SESSION = 1  # the one session of a memory store's client
FREE = Floor(None, 0, 0)


class MemoryStore:
    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._lock = threading.Lock()
        self._tables: dict[str, TableState] = {}
        self._history: dict[str, list[HistoryRecord]] = {}
        self._unknown: list[bool] = []
        self._owners: dict[str, set[str]] = {}
        self._leases: dict[str, dict[str, TableState]] = {}
        self._next_lease = 0
        self._versions: dict[str, dict[int, TableState]] = {}
        self._passes: dict[str, object] = {}  # table -> the session holding its retention pass
        self._mirror_holds: set[str] = set()  # tables whose mirror this store's client holds
        self._dropping: dict[str, TableState] = {}  # marked dropping, their metadata not yet gone
        self._floors: dict[str, Floor] = {}
        self._queues: dict[str, dict[str, str]] = {}  # table -> ticket -> commit id, oldest first
        self._tickets = 0
        self._session = object()
        self._id = uuid.uuid4().hex
        self._members: dict[str, dict[str, str]] = {}  # role -> member name -> identity
        self._next_member = 0
        self.session_timeout_s = 10.0

    def inject_unknown(self, *, landed: bool, times: int = 1) -> None:
        """The next ``times`` writes report an unknown outcome; ``landed`` says
        whether each was applied first."""
        self._unknown.extend([landed] * times)

    def now_ms(self) -> int:
        return self._clock()

    def create_table(self, config: TableConfig, audit: Audit, commit_id: str) -> TableState:
        check_table_name(config.name)
        with self._lock:
            for name in [*self._tables, *self._dropping]:  # a dropping table's name and root stay taken
                if name.casefold() == config.name.casefold():
                    raise TableExistsError(config.name, name)
            check_no_overlap(config.name, config.root, self._roots())
            state = TableState(config=config, version=1)
            self._tables[config.name] = state
            self._history[config.name] = [
                HistoryRecord(
                    1,
                    commit_id,
                    self.now_ms(),
                    Operation.CREATE_TABLE,
                    None,
                    audit.actor,
                    audit.job_id,
                    audit.reason,
                    0,
                    0,
                    0,
                )
            ]
            return state

    def store_id(self) -> str:
        return self._id

    def _roots(self) -> dict[str, str]:
        tables = {**self._dropping, **self._tables}  # as on ZooKeeper: registered until the drop ends
        return {name: state.config.root for name, state in tables.items()}

    def roots(self) -> dict[str, str]:
        with self._lock:
            return self._roots()

    def list_tables(self) -> list[str]:
        with self._lock:
            return sorted(self._tables)

    def table_listing(self) -> TableListing:
        return TableListing(tuple(self.list_tables()), {})  # records here are never decoded

    def read_now(self, table: str) -> tuple[Snapshot, int]:
        snap = self.read(table)
        with self._lock:
            queue = tuple(self._queues.get(table, {}))
        return replace(snap, queue=queue), self.now_ms()

    def join_queue(self, table: str, commit_id: str) -> str | None:
        with self._lock:
            if table not in self._tables:
                raise TableNotFoundError(table)
            self._tickets += 1
            ticket = f"t-{commit_id}-{self._tickets:010d}"
            self._queues.setdefault(table, {})[ticket] = commit_id
            return ticket

    def await_turn(self, table: str, ahead: str, timeout_s: float) -> bool:
        with self._lock:
            return ahead not in self._queues.get(table, {})  # never waits: the caller polls

    def leave_queue(self, table: str, ticket: str) -> None:
        with self._lock:
            self._queues.get(table, {}).pop(ticket, None)

    def read(self, table: str) -> Snapshot:
        with self._lock:
            state = self._tables.get(table)
            floor = self._floors.get(table, FREE)
            dropping = table in self._dropping
        if state is None:
            raise TableNotFoundError(table, dropping=dropping)
        return Snapshot(state, state.version, floor)

    def take_floor(self, table: str, seen: Floor | None, commit_id: str, until_ms: int) -> bool:
        with self._lock:
            if table not in self._tables:
                raise TableNotFoundError(table)
            current = self._floors.get(table, FREE)
            if seen is None or current.version != seen.version:
                return False
            self._floors[table] = Floor(commit_id, until_ms, current.version + 1)
            return True

    def leave_floor(self, table: str, commit_id: str) -> None:
        with self._lock:
            current = self._floors.get(table, FREE)
            if current.holder == commit_id:
                self._floors[table] = Floor(None, 0, current.version + 1)

    def write(
        self,
        table: str,
        base: Snapshot,
        change: Change,
        audit: Audit,
        commit_id: str,
        now_ms: int,
        owner: str | None = None,
        role: str | None = None,  # no ACL policy here: anyone may
    ) -> TableState:
        with self._lock:
            current = self._tables.get(table)
            if current is None:
                raise TableNotFoundError(table)
            if owner is not None and owner not in self._owners.get(table, set()):
                raise ClaimLostError(table, owner)
            if current.version != base.token:
                raise VersionConflict(f"table {table} is at version {current.version}")
            if base.floor is not None and self._floors.get(table, FREE).version != base.floor.version:
                raise VersionConflict(f"table {table}: a writer took the floor")
            outcome = self._unknown.pop(0) if self._unknown else None
            if outcome is False:
                raise WriteOutcomeUnknown("injected: lost before it was applied")
            state = change.state.replace(version=current.version + 1)
            self._tables[table] = state
            kept = self._versions.setdefault(table, {})
            kept[state.version] = state
            for old in sorted(kept)[: -(state.config.versions_kept or MAX_VERSIONS)]:
                del kept[old]
            records = self._history[table]
            records.append(HistoryRecord.of(state.version, commit_id, now_ms, change, audit))
            del records[: max(0, len(records) - MAX_HISTORY)]
            if outcome is True:
                raise WriteOutcomeUnknown("injected: applied, but the reply was lost")
            return state

    def find_commit(self, table: str, commit_id: str, after_version: int) -> HistoryRecord | None:
        with self._lock:
            for record in self._history.get(table, []):
                if record.version > after_version and record.commit_id == commit_id:
                    return record
        return None

    def history(self, table: str, limit: int | None = None) -> list[HistoryRecord]:
        with self._lock:
            if table not in self._tables:
                raise TableNotFoundError(table)
            records = list(reversed(self._history[table]))
        return records if limit is None else records[:limit]

    def iter_history(self, table: str) -> Iterator[HistoryRecord]:
        return iter(self.history(table))

    def drop_table(
        self,
        table: str,
        audit: Audit,
        expected_version: int | None,
        *,
        resume_only: bool = False,
        on_marked: OnMarked | None = None,
    ) -> None:
        with self._lock:
            current = self._tables.get(table)
            if current is None:
                current = self._dropping.get(table)
                if current is None:
                    raise TableNotFoundError(table)
            elif resume_only:
                raise TableNotFoundError(table)
            elif expected_version is not None and current.version != expected_version:
                raise VersionConflict(f"table {table} changed since version {expected_version}")
            else:  # marked: no one reads or writes it from here on
                del self._tables[table]
                self._dropping[table] = current
        if on_marked is not None:  # outside the lock: it works on deep storage
            on_marked(current.config.root, current.config)
        with self._lock:
            self._dropping.pop(table, None)
            self._history.pop(table, None)
            self._floors.pop(table, None)
            self._queues.pop(table, None)
            self._mirror_holds.discard(table)  # its node goes with the table's on ZooKeeper

    def require_role(self, *roles: str, doing: str) -> None:
        return None  # no ACL policy in memory

    def hold_owner(self, table: str, entry_id: str) -> None:
        self.read(table)
        with self._lock:
            self._owners.setdefault(table, set()).add(entry_id)

    def release_owner(self, table: str, entry_id: str) -> None:
        with self._lock:
            self._owners.get(table, set()).discard(entry_id)

    def live_owners(self, table: str) -> frozenset[str]:
        with self._lock:
            return frozenset(self._owners.get(table, set()))

    def hold_pass(self, table: str) -> None:
        self.read(table)
        with self._lock:
            if table in self._passes:  # held, by another client or by a pass of this one
                raise PassRunningError(table)
            self._passes[table] = self._session

    def holds_pass(self, table: str) -> bool:
        with self._lock:
            return self._passes.get(table) == self._session

    def release_pass(self, table: str) -> None:
        with self._lock:
            if self._passes.get(table) == self._session:
                del self._passes[table]

    def hold_mirror(self, table: str) -> None:
        self.read(table)
        with self._lock:
            if table in self._mirror_holds:
                raise MirrorHeldError(table)
            self._mirror_holds.add(table)

    def holds_mirror(self, table: str) -> bool:
        with self._lock:
            return table in self._mirror_holds

    def release_mirror(self, table: str) -> None:
        with self._lock:
            self._mirror_holds.discard(table)

    def versions(self, table: str) -> list[int]:
        self.read(table)
        with self._lock:
            return sorted(self._versions.get(table, {}))

    def read_version(self, table: str, version: int) -> TableState:
        with self._lock:  # one look at the table: the answer is ``version`` or an error
            current = self._tables.get(table)
            if current is None:
                raise TableNotFoundError(table)
            kept = self._versions.get(table, {})
            state = current if current.version == version else kept.get(version)
            oldest = min(kept) if kept else None
        if state is None:
            raise VersionGoneError(table, version, oldest, current.version)
        # As ZooKeeper rebuilds it: the current config, with the version's own schema.
        return state if state is current else state.replace(config=config_at(current.config, version))

    def pin(self, table: str, version: int | None = None) -> Lease:
        state = self.read(table).state if version is None else self.read_version(table, version)
        with self._lock:
            self._next_lease += 1
            lease_id = f"lease-{self._next_lease:010d}"
            self._leases.setdefault(table, {})[lease_id] = state
        return Lease(table, lease_id, state)

    def release(self, lease: Lease) -> None:
        with self._lock:
            self._leases.get(lease.table, {}).pop(lease.lease_id, None)

    def leases(self, table: str) -> list[LeaseInfo]:
        with self._lock:
            return [LeaseInfo(k, v.version) for k, v in sorted(self._leases.get(table, {}).items())]

    def pinned_states(self, table: str) -> list[TableState]:
        with self._lock:
            return list(self._leases.get(table, {}).values())

    def ignored_leases(self, table: str) -> list[str]:
        return []  # leases here are made by pin() alone: none is malformed

    def collect_garbage(self, table: str) -> int:
        return 0  # versions here are plain objects: the interpreter reclaims them

    # ---- one session that never ends, and its elections ------------------------

    def connected(self) -> bool:
        return True

    def session_id(self) -> int | None:
        return SESSION

    def session_alive(self, since: int) -> bool:
        return since == SESSION

    def confirm_session(self) -> None:
        return None

    def join_election(self, role: str, identity: str) -> str:
        check_role(role)
        with self._lock:
            name = f"{MEMBER_PREFIX}{self._next_member:010d}"
            self._next_member += 1
            self._members.setdefault(role, {})[name] = identity
            return name

    def election(self, role: str) -> list[str]:
        with self._lock:
            return sorted(self._members.get(role, {}))

    def election_member(self, role: str, name: str) -> Member | None:
        with self._lock:
            identity = self._members.get(role, {}).get(name)
        return None if identity is None else Member(name, identity, SESSION)

    def leave_election(self, role: str, name: str) -> None:
        with self._lock:
            self._members.get(role, {}).pop(name, None)

    def close(self) -> None:
        pass
