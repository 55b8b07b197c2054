"""Tables: creating one (its head, folders, first version and empty
buckets in one multi, with its name guard and the root registry), dropping
one (marked, emptied, then removed; a drop cut short is finished by running
it again), listing them, and the registry of their deep-storage roots."""

from __future__ import annotations

import contextlib
from typing import Any

from kazoo.exceptions import BadVersionError, NoAuthError, NodeExistsError, NoNodeError, NotEmptyError

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import KINDS, Head
from segment_lineage.lineage.core.acl import OWN_PREFIX, TABLE_FOLDERS, Place, own_folder
from segment_lineage.lineage.core.errors import (
    AuthError,
    CorruptRecordError,
    InvalidNameError,
    StoreUnavailableError,
    TableExistsError,
    TableNotFoundError,
)
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Audit, Operation, TableConfig, TableState
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.core.retry import Attempts, RetryPolicy
from segment_lineage.lineage.core.roots import check_no_overlap, overlaps
from segment_lineage.lineage.store.contract import OnMarked, TableListing, VersionConflict
from segment_lineage.lineage.zk.connection import UNKNOWN, ZkConnection, translated
from segment_lineage.lineage.zk.store.heads import READ_ATTEMPTS, Heads
from segment_lineage.lineage.zk.store.nodes import Nodes, folder_data
from segment_lineage.lineage.zk.store.paths import Paths

# A create swaps the one root registry, so creates made at once race on it:
# each loser backs off (full jitter, doubling from 5 ms up to 200 ms) and
# tries again, at most 16 times. Its waits are real time, as the store's are.
CREATE_RETRY = RetryPolicy(max_attempts=16, deadline_s=30.0, base_delay_s=0.005, max_delay_s=0.2)


class Tables:
    def __init__(self, zk: ZkConnection, paths: Paths, nodes: Nodes, heads: Heads) -> None:
        self.zk = zk
        self.paths = paths
        self.nodes = nodes
        self.heads = heads

    def create_table(self, config: TableConfig, audit: Audit, commit_id: str) -> TableState:
        table = check_table_name(config.name)
        self.nodes.ensure_root()
        empty = {kind: self.zk.env.hex_id() for kind in KINDS}
        head = _first_head(config, audit, commit_id, self.nodes.now_ms(), empty)
        attempts = Attempts(CREATE_RETRY)
        while attempts.next():
            if attempts.count > 1:
                attempts.backoff()
            if self._try_create(table, head, empty):
                return TableState(config=config, version=1)
        tried = attempts.count
        raise StoreUnavailableError(f"creating table {table!r} did not settle after {tried} attempts")

    def _try_create(self, table: str, head: Head, empty: dict[str, str]) -> bool:
        """One attempt at the create's multi: whether the table is ours now
        (False: worth trying again; raises when it is not)."""
        # The root registry is read, checked and swapped in the same multi
        # that creates the name guard: two creates of overlapping roots
        # cannot both land.
        root = head.config.root
        roots, roots_version = self._roots_for_create(table, root)
        txn = self._create_txn(table, head, empty, {**roots, table: root}, roots_version)
        try:
            with translated(None, refused=f"ZooKeeper refused creating table {table!r}: not authorised"):
                results = self.zk.commit(txn)
        except UNKNOWN:
            return self._landed(table, head.commit_id)
        failures = [r for r in results if isinstance(r, Exception)]
        if failures:
            self._create_refused(table, results, failures)
        return not failures

    def _create_txn(
        self,
        table: str,
        head: Head,
        empty: dict[str, str],
        registry: dict[str, str],
        roots_version: int | None,
    ) -> Any:
        """One multi: the name guard, the head and its folders, the first
        version's record and empty buckets, and the root registry swapped."""
        path = self.paths.head(table)
        txn = self.zk.transaction()
        txn.create(self.paths.guard(table), codec.encode_guard(table), acl=self.nodes.acl_at(Place.GUARD))
        txn.create(path, codec.encode_head(head), acl=self.nodes.acl_at(Place.HEAD))
        for folder, place in TABLE_FOLDERS.items():
            txn.create(f"{path}/{folder}", folder_data(place), acl=self.nodes.acl_at(place))
        for folder, own, ident in self.nodes.own_folders():
            txn.create(f"{path}/{folder}/{own_folder(ident)}", b"", acl=self.nodes.acl_at(own, ident))
        initial = codec.LeaseRecord(1, {k: (b,) for k, b in empty.items()}, ())
        txn.create(
            self.paths.version(table, 1), codec.encode_lease(initial), acl=self.nodes.acl_at(Place.VERSION)
        )
        for kind, blob in empty.items():
            txn.create(
                self.paths.blob(table, blob), codec.empty_bucket(kind), acl=self.nodes.acl_at(Place.BLOB)
            )
        raw = codec.encode_roots(registry)
        if roots_version is None:
            txn.create(self.paths.roots, raw, acl=self.nodes.acl_at(Place.GUARD))
        else:
            txn.set_data(self.paths.roots, raw, version=roots_version)
        return txn

    def _landed(self, table: str, commit_id: str) -> bool:
        """After an unknown outcome: whether our create landed (False: the
        table is not there, try again; TableExistsError: another's is)."""
        try:
            self.zk.sync(self.paths.tables, doing="sync")
            current, _ = self.heads.read_head(table)
        except TableNotFoundError:
            return False
        if current.commit_id == commit_id or any(r.commit_id == commit_id for r in current.history_tail):
            return True
        raise TableExistsError(table) from None

    def _create_refused(self, table: str, results: list[Any], failures: list[Exception]) -> None:
        """Why a create's multi failed: returns when it is worth trying again
        (a guard a cut-short drop left, the root registry changed meanwhile),
        else raises."""
        if isinstance(results[0], NodeExistsError):
            self._guard_taken(table)
            return
        if isinstance(results[-1], (BadVersionError, NodeExistsError)):
            return  # another create or drop changed the root registry: check again
        if isinstance(results[0], NoAuthError) or any(isinstance(r, NoAuthError) for r in failures):
            raise AuthError(f"ZooKeeper refused creating table {table!r}: not authorised")
        first = next(r for r in failures if type(r).__name__ != "RolledBackError")
        raise StoreUnavailableError(f"creating table {table!r} failed: {type(first).__name__}")

    def _guard_taken(self, table: str) -> None:
        """The name guard exists: removes one a drop cut short left (returns,
        to try again), else raises TableExistsError naming the live table."""
        guard = self.paths.guard(table)
        try:
            raw_guard, guard_stat = self.zk.get(guard, doing="table lookup")
        except NoNodeError:
            return
        existing = codec.decode_guard(raw_guard, guard, table.casefold())
        if self.zk.exists(self.paths.head(existing), doing="table lookup"):
            raise TableExistsError(table, existing)
        # Left by a drop cut short after the head went: creates are
        # atomic, so a guard without a head is never a live table.
        with contextlib.suppress(NoNodeError, BadVersionError):
            self.zk.delete(guard, version=guard_stat.version)

    def roots(self) -> dict[str, str]:
        """Every table's root (table -> root), from the root registry; built
        from the tables' heads while no registry exists yet."""
        self.nodes.ensure_root()
        try:
            raw, _ = self.zk.get(self.paths.roots, doing="reading the root registry")
        except NoNodeError:
            return self._roots_from_heads()
        return codec.decode_roots(raw, self.paths.roots)

    def _roots_from_heads(self) -> dict[str, str]:
        """Tables created before the registry existed: their roots as recorded."""
        out = {}
        for name in self.zk.get_children(self.paths.tables, doing="listing tables"):
            try:
                head, _ = self.heads.read_head(name)
            except (TableNotFoundError, CorruptRecordError, InvalidNameError):
                continue
            out[name] = head.config.root
        return out

    def _roots_for_create(self, table: str, root: str) -> tuple[dict[str, str], int | None]:
        """The registry to extend with ``root`` and its znode version (None:
        no registry yet), after refusing an overlap with a live table's root.
        An entry whose table is gone (a drop cut short) is dropped."""
        self.nodes.ensure_root()
        try:
            raw, stat = self.zk.get(self.paths.roots, doing="reading the root registry")
            roots, version = codec.decode_roots(raw, self.paths.roots), stat.version
        except NoNodeError:
            roots, version = self._roots_from_heads(), None
        for other, theirs in list(roots.items()):
            if (
                other != table
                and overlaps(root, theirs)
                and not self.zk.exists(self.paths.head(other), doing="table lookup")
            ):
                del roots[other]
        roots.pop(table, None)
        check_no_overlap(table, root, roots)
        return roots, version

    def forget_root(self, table: str) -> None:
        """Remove a dropped table from the root registry (compare-and-set; a
        create also drops entries whose table is gone, so this is best effort)."""
        for _ in range(READ_ATTEMPTS):
            try:
                raw, stat = self.zk.get(self.paths.roots, doing="reading the root registry")
            except NoNodeError:
                return
            roots = codec.decode_roots(raw, self.paths.roots)
            if roots.pop(table, None) is None:
                return
            try:
                self.zk.set(self.paths.roots, codec.encode_roots(roots), version=stat.version)
                return
            except BadVersionError:
                continue

    def list_tables(self) -> list[str]:
        return list(self.table_listing().readable)

    def table_listing(self) -> TableListing:
        self.nodes.ensure_root()
        children = self.zk.get_children(self.paths.tables, doing="listing tables")
        readable, unreadable = [], {}
        for name in sorted(children):
            try:
                self.heads.read_head(name)
            except (TableNotFoundError, InvalidNameError):
                continue  # being dropped, or not a table of ours
            except CorruptRecordError as exc:
                unreadable[name] = exc.message
                continue
            readable.append(name)
        return TableListing(tuple(readable), unreadable)

    def _mark_dropping(
        self, table: str, head: Head, zversion: int, expected_version: int | None
    ) -> Any | None:
        """Compare-and-set the head as dropping; the head's new stat, or None
        to read it again (the guard restored, or the head moved on)."""
        path, guard = self.paths.head(table), self.paths.guard(table)
        marked = Head(
            head.config,
            head.version + 1,
            self.zk.env.hex_id(),
            head.buckets,
            head.history_last,
            head.history_tail,
            dropping=True,
        )
        # The name guard is rewritten (same bytes) in the same multi:
        # only an identity allowed to drop tables may write it, so
        # one that may only commit cannot leave the table half dropped.
        txn = self.zk.transaction()
        txn.set_data(path, codec.encode_head(marked), version=zversion)
        txn.set_data(guard, codec.encode_guard(table))
        head_result, guard_result = self.zk.commit(txn)
        if isinstance(head_result, NoAuthError) or isinstance(guard_result, NoAuthError):
            raise NoAuthError()
        if isinstance(guard_result, NoNodeError):  # left by an old crash: restore it, retry
            with contextlib.suppress(NodeExistsError):
                self.zk.create(guard, codec.encode_guard(table), acl=self.nodes.acl_at(Place.GUARD))
            return None
        if isinstance(head_result, BadVersionError):
            if expected_version is not None:
                raise VersionConflict(f"table {table} changed while dropping") from None
            return None
        if isinstance(head_result, Exception):
            raise head_result
        return head_result

    def _sweep(self, path: str) -> None:
        """Delete every node under a dropping table's head (blobs, versions,
        owners and leases, one identity's folder at a time)."""
        for child in self.zk.get_children(path, doing="listing"):
            for grandchild in self.zk.get_children(f"{path}/{child}", doing="listing"):
                node = f"{path}/{child}/{grandchild}"
                if grandchild.startswith(OWN_PREFIX):  # one identity's owners or leases
                    with contextlib.suppress(NoNodeError):
                        for leaf in self.zk.get_children(node, doing="listing"):
                            with contextlib.suppress(NoNodeError):
                                self.zk.delete(f"{node}/{leaf}", retry=True)
                with contextlib.suppress(NoNodeError, NotEmptyError):
                    self.zk.delete(node, retry=True)
            with contextlib.suppress(NoNodeError, NotEmptyError):
                self.zk.delete(f"{path}/{child}", retry=True)

    def drop_table(
        self,
        table: str,
        audit: Audit,
        expected_version: int | None,
        *,
        resume_only: bool = False,
        on_marked: OnMarked | None = None,
    ) -> None:
        """Mark the head dropping (compare-and-set), delete the blobs, then the head.

        ``expected_version``: the version the caller checked; VersionConflict
        when the table moved on. None skips the check (a forced drop of an
        unreadable table). ``resume_only`` finishes an interrupted drop and
        nothing else. A drop cut short is finished by running it again.
        ``on_marked`` runs once the head is marked (or found marked), with the
        table's root (from the head, else the root registry) and config.
        """
        with translated(
            lambda error: f"dropping table {table!r} was interrupted ({error})",
            refused=f"ZooKeeper refused dropping table {table!r}: not authorised",
            failure_remedy="run the drop again; it continues where it stopped",
        ):
            forced = expected_version is None and not resume_only
            for _ in range(READ_ATTEMPTS):
                head, stat = self._read_for_drop(table, forced=forced)
                if head is not None and not head.dropping:
                    stat = self._mark(table, head, stat, expected_version, resume_only)
                    if stat is None:
                        continue
                if on_marked is not None:
                    self._tell_marked(table, head, on_marked)
                    on_marked = None  # once: a sweep again after a late writer does not call it
                if self._remove(table, stat):
                    return
        raise StoreUnavailableError(f"dropping table {table!r} did not settle; run the drop again")

    def _read_for_drop(self, table: str, *, forced: bool) -> tuple[Head | None, Any]:
        """The head and its stat; None for the head of a forced drop that cannot be decoded."""
        path = self.paths.head(table)
        try:
            raw, stat = self.zk.get(path, doing=f"reading table {table!r}")
        except NoNodeError:
            raise TableNotFoundError(table) from None
        try:
            return codec.decode_head(raw, path), stat
        except CorruptRecordError:
            if not forced:
                raise
            return None, stat

    def _mark(
        self, table: str, head: Head, stat: Any, expected_version: int | None, resume_only: bool
    ) -> Any | None:
        """Mark a live head dropping, if the drop may: its new stat, or None to read it again."""
        if resume_only:
            raise TableNotFoundError(table)
        if expected_version is not None and head.version != expected_version:
            raise VersionConflict(f"table {table} changed since version {expected_version}")
        return self._mark_dropping(table, head, stat.version, expected_version)

    def _tell_marked(self, table: str, head: Head | None, on_marked: OnMarked) -> None:
        """Hand the marked table's root and config on (an unreadable head's root from the registry)."""
        if head is not None:
            on_marked(head.config.root, head.config)
        else:
            on_marked(self.roots().get(table), None)

    def _remove(self, table: str, stat: Any) -> bool:
        """Empty the marked head and delete it, then its name guard; False to
        sweep again (a late writer added a node, or the head moved)."""
        path = self.paths.head(table)
        self._sweep(path)
        try:
            self.zk.delete(path, version=stat.version)
        except (NotEmptyError, BadVersionError):
            return False  # a late writer added a blob: sweep again
        with contextlib.suppress(NoNodeError):
            self.zk.delete(self.paths.guard(table))
        self.forget_root(table)
        return True


def _first_head(config: TableConfig, audit: Audit, commit_id: str, now: int, empty: dict[str, str]) -> Head:
    """A new table's head: version 1, empty buckets, the create in its history."""
    record = HistoryRecord(
        1,
        commit_id,
        now,
        Operation.CREATE_TABLE,
        None,
        audit.actor,
        audit.job_id,
        audit.reason,
        0,
        0,
        0,
    )
    return Head(config, 1, commit_id, {k: (b,) for k, b in empty.items()}, None, (record,))
