"""An in-memory store for fast pure tests. Same contract as the ZooKeeper store.

Thread-safe. ``inject_unknown`` makes the next writes report an unknown
outcome (after applying them, or not) so the manager's recovery can be tested.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from segment_lineage.lineage.core.env import SYSTEM, Env
from segment_lineage.lineage.core.errors import (
    ClaimLostError,
    TableExistsError,
    TableNotFoundError,
    VersionGoneError,
)
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Audit, Change, Operation, TableConfig, TableState
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.core.roots import check_no_overlap
from segment_lineage.lineage.core.schema_versions import config_at
from segment_lineage.lineage.store.contract import (
    MAX_HISTORY,
    MAX_VERSIONS,
    HoldKind,
    Holds,
    OnMarked,
    Snapshot,
    TableListing,
    VersionConflict,
    Write,
    WriteOutcomeUnknown,
)
from segment_lineage.lineage.store.memory_recipes import (
    MemoryElections,
    MemoryFloors,
    MemoryPins,
    MemoryQueues,
    MemorySession,
    memory_holds,
)


class MemoryStore:
    def __init__(self, clock: Callable[[], int] | None = None, env: Env = SYSTEM) -> None:
        """``clock``: the store's milliseconds (ZooKeeper's clock; default the env's wall clock)."""
        self._clock = clock or env.wall_ms
        self._lock = threading.RLock()  # shared with the recipes
        self._tables: dict[str, TableState] = {}
        self._history: dict[str, list[HistoryRecord]] = {}
        self._unknown: list[bool] = []
        self._versions: dict[str, dict[int, TableState]] = {}
        self._dropping: dict[str, TableState] = {}  # marked dropping, their metadata not yet gone
        self._id = env.hex_id()
        owners, passes, mirrors = memory_holds(self._lock, self._tables, self.now_ms)
        self._holds: dict[str, Holds] = {"owner": owners, "pass": passes, "mirror": mirrors}
        self._owners, self._passes, self._mirrors = owners, passes, mirrors
        self.queues = MemoryQueues(self._lock, self._tables)
        self.floors = MemoryFloors(self._lock, self._tables)
        self.pins = MemoryPins(self._lock, self._state_of)
        self.elections = MemoryElections(self._lock)
        self.session = MemorySession()

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
            state = TableState(config=config, version=1).frozen()
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
        return replace(snap, queue=self.queues.tickets(table)), self.now_ms()

    def read_now_many(self, tables: Sequence[str]) -> list[tuple[Snapshot, int]]:
        return [self.read_now(table) for table in tables]

    def read_version_now(self, table: str, version: int) -> tuple[TableState, Snapshot, int]:
        return (self.read_version(table, version), *self.read_now(table))

    def read(self, table: str, *, whole: bool = False) -> Snapshot:  # (every record is at hand)
        with self._lock:
            state = self._tables.get(table)
            floor = self.floors.current(table)
            dropping = table in self._dropping
            records = self._history.get(table, [])
            recent = tuple(reversed(records[len(records) - _at_hand(len(records)) :]))
        if state is None:
            raise TableNotFoundError(table, dropping=dropping)
        return Snapshot(state, state.version, floor, recent=recent)

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
        return self.write_together([Write(table, base, change, audit, commit_id, now_ms, owner, role)])[0]

    def write_together(self, writes: Sequence[Write], checks: Sequence[Snapshot] = ()) -> list[TableState]:
        with self._lock:
            for w in writes:  # every check before any change: all land, or none
                self._check_write(w)
            for snap in checks:
                current = self._tables.get(snap.state.config.name)
                if current is None or current.version != snap.token:
                    raise VersionConflict(f"table {snap.state.config.name} moved since version {snap.token}")
            outcome = self._unknown.pop(0) if self._unknown else None
            if outcome is False:
                raise WriteOutcomeUnknown("injected: lost before it was applied")
            states = [self._apply_write(w) for w in writes]
            if outcome is True:
                raise WriteOutcomeUnknown("injected: applied, but the reply was lost")
            return states

    def _check_write(self, w: Write) -> None:
        current = self._tables.get(w.table)
        if current is None:
            raise TableNotFoundError(w.table)
        if w.owner is not None and not self._owners.holds(w.table, w.owner):
            raise ClaimLostError(w.table, w.owner)
        if current.version != w.base.token:
            raise VersionConflict(f"table {w.table} is at version {current.version}")
        if w.base.floor is not None and self.floors.current(w.table).version != w.base.floor.version:
            raise VersionConflict(f"table {w.table}: a writer took the floor")

    def _apply_write(self, w: Write) -> TableState:
        # Frozen as stored: what a read or a commit hands out edits nothing here.
        state = w.change.state.replace(version=self._tables[w.table].version + 1).frozen()
        self._tables[w.table] = state
        kept = self._versions.setdefault(w.table, {})
        kept[state.version] = state
        for old in sorted(kept)[: -(state.config.versions_kept or MAX_VERSIONS)]:
            del kept[old]
        records = self._history[w.table]
        records.append(HistoryRecord.of(state.version, w.commit_id, w.now_ms, w.change, w.audit))
        del records[: max(0, len(records) - MAX_HISTORY)]
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
            self.floors.forget(table)
            self.queues.forget(table)
            self._mirrors.forget(table)  # its node goes with the table's on ZooKeeper

    def require_role(self, *roles: str, doing: str) -> None:
        return None  # no ACL policy in memory

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

    def collect_garbage(self, table: str) -> int:
        return 0  # versions here are plain objects: the interpreter reclaims them

    def holds(self, kind: HoldKind) -> Holds:
        return self._holds[kind]

    def _state_of(self, table: str, version: int | None) -> TableState:
        return self.read(table).state if version is None else self.read_version(table, version)

    def close(self) -> None:
        pass


RECENT = 16  # history records a read hands back at most, as a head's tail sealed every RECENT records


def _at_hand(count: int) -> int:
    """How many of ``count`` records a read hands back with the version: a
    tail that restarts every RECENT records, as ZooKeeper's head seals its
    own (so callers meet both a long tail and a short one)."""
    return 0 if count == 0 else (count - 1) % RECENT + 1
