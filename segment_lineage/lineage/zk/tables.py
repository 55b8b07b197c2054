"""Creating and dropping tables, and the registry of their roots."""

from __future__ import annotations

import contextlib
import logging
import uuid

from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.handlers.threading import KazooTimeoutError

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import KINDS, Head
from segment_lineage.lineage.core.acl import (
    OWN_PREFIX,
    Place,
    own_folder,
)
from segment_lineage.lineage.core.errors import (
    AuthError,
    CorruptRecordError,
    InvalidNameError,
    StoreUnavailableError,
    TableExistsError,
    TableNotFoundError,
)
from segment_lineage.lineage.core.model import (
    Audit,
    HistoryRecord,
    Operation,
    TableConfig,
    TableState,
)
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.core.roots import check_no_overlap, overlaps
from segment_lineage.lineage.store.contract import (
    TableListing,
    VersionConflict,
)
from segment_lineage.lineage.zk.blobs import _blob_id
from segment_lineage.lineage.zk.connection import _UNKNOWN
from segment_lineage.lineage.zk.heads import READ_ATTEMPTS
from segment_lineage.lineage.zk.paths import VERSIONS

log = logging.getLogger(__name__)


class _Tables:
    # ---- tables ----------------------------------------------------------------

    def create_table(self, config: TableConfig, audit: Audit, commit_id: str) -> TableState:
        table = check_table_name(config.name)
        self._ensure_root()
        now = self.now_ms()
        empty = {kind: _blob_id() for kind in KINDS}
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
        head = Head(config, 1, commit_id, {k: (b,) for k, b in empty.items()}, None, (record,))
        guard = f"{self.root}/names/{table.casefold()}"
        path = self.head_path(table)
        for _ in range(READ_ATTEMPTS):
            # The root registry is read, checked and swapped in the same multi
            # that creates the name guard: two creates of overlapping roots
            # cannot both land.
            roots, roots_version = self._roots_for_create(table, config.root)
            txn = self.client.transaction()
            txn.create(guard, codec.encode_guard(table), acl=self.acl_at(Place.GUARD))
            txn.create(path, codec.encode_head(head), acl=self.acl_at(Place.HEAD))
            txn.create(f"{path}/blobs", b"", acl=self.acl_at(Place.BLOBS))
            txn.create(f"{path}/{VERSIONS}", b"", acl=self.acl_at(Place.VERSIONS))
            txn.create(f"{path}/gc", codec.encode_gc({}), acl=self.acl_at(Place.GC))
            txn.create(f"{path}/owners", b"", acl=self.acl_at(Place.OWNERS))
            txn.create(f"{path}/leases", b"", acl=self.acl_at(Place.LEASES))
            for folder, own, ident in self._own_folders():
                txn.create(f"{path}/{folder}/{own_folder(ident)}", b"", acl=self.acl_at(own, ident))
            txn.create(f"{path}/passes", b"", acl=self.acl_at(Place.RETENTION_HOLDS))
            txn.create(f"{path}/floor", codec.encode_floor(None, 0), acl=self.acl_at(Place.FLOOR))
            initial = codec.LeaseRecord(1, {k: (b,) for k, b in empty.items()}, ())
            txn.create(
                self.version_path(table, 1), codec.encode_lease(initial), acl=self.acl_at(Place.VERSION)
            )
            for kind, blob in empty.items():
                txn.create(
                    self.blob_path(table, blob), codec.encode_bucket(kind, []), acl=self.acl_at(Place.BLOB)
                )
            registry = codec.encode_roots({**roots, table: config.root})
            if roots_version is None:
                txn.create(self._roots_path, registry, acl=self.acl_at(Place.GUARD))
            else:
                txn.set_data(self._roots_path, registry, version=roots_version)
            try:
                results = self._commit(txn)
            except _UNKNOWN:
                try:
                    self._call("sync", "sync", f"{self.root}/tables")
                    current, _ = self._read_head(table)
                except TableNotFoundError:
                    continue
                if current.commit_id == commit_id or any(
                    r.commit_id == commit_id for r in current.history_tail
                ):
                    return TableState(config=config, version=1)
                raise TableExistsError(table) from None
            except NoAuthError:
                raise AuthError(f"ZooKeeper refused creating table {table!r}: not authorised") from None
            failures = [r for r in results if isinstance(r, Exception)]
            if not failures:
                return TableState(config=config, version=1)
            if isinstance(results[0], NodeExistsError):
                try:
                    raw_guard, guard_stat = self._call("table lookup", "get", guard)
                except NoNodeError:
                    continue
                existing = codec.decode_guard(raw_guard, guard, table.casefold())
                if not self._call("table lookup", "exists", self.head_path(existing)):
                    # Left by a drop cut short after the head went: creates are
                    # atomic, so a guard without a head is never a live table.
                    with contextlib.suppress(NoNodeError, BadVersionError):
                        self._op("delete", guard, version=guard_stat.version)
                    continue
                raise TableExistsError(table, existing)
            if isinstance(results[-1], (BadVersionError, NodeExistsError)):
                continue  # another create or drop changed the root registry: check again
            if isinstance(results[0], NoAuthError) or any(isinstance(r, NoAuthError) for r in failures):
                raise AuthError(f"ZooKeeper refused creating table {table!r}: not authorised")
            first = next(r for r in failures if type(r).__name__ != "RolledBackError")
            raise StoreUnavailableError(f"creating table {table!r} failed: {type(first).__name__}")
        raise StoreUnavailableError(f"creating table {table!r} did not settle after {READ_ATTEMPTS} attempts")

    @property
    def _roots_path(self) -> str:
        return f"{self.root}/roots"

    def roots(self) -> dict[str, str]:
        """Every table's root (table -> root), from the root registry; built
        from the tables' heads while no registry exists yet."""
        self._ensure_root()
        try:
            raw, _ = self._call("reading the root registry", "get", self._roots_path)
        except NoNodeError:
            return self._roots_from_heads()
        return codec.decode_roots(raw, self._roots_path)

    def _roots_from_heads(self) -> dict[str, str]:
        """Tables created before the registry existed: their roots as recorded."""
        out = {}
        for name in self._call("listing tables", "get_children", f"{self.root}/tables"):
            try:
                head, _ = self._read_head(name)
            except (TableNotFoundError, CorruptRecordError, InvalidNameError):
                continue
            out[name] = head.config.root
        return out

    def _roots_for_create(self, table: str, root: str) -> tuple[dict[str, str], int | None]:
        """The registry to extend with ``root`` and its znode version (None:
        no registry yet), after refusing an overlap with a live table's root.
        An entry whose table is gone (a drop cut short) is dropped."""
        self._ensure_root()
        try:
            raw, stat = self._call("reading the root registry", "get", self._roots_path)
            roots, version = codec.decode_roots(raw, self._roots_path), stat.version
        except NoNodeError:
            roots, version = self._roots_from_heads(), None
        for other, theirs in list(roots.items()):
            if (
                other != table
                and overlaps(root, theirs)
                and not self._call("table lookup", "exists", self.head_path(other))
            ):
                del roots[other]
        roots.pop(table, None)
        check_no_overlap(table, root, roots)
        return roots, version

    def _forget_root(self, table: str) -> None:
        """Remove a dropped table from the root registry (compare-and-set; a
        create also drops entries whose table is gone, so this is best effort)."""
        for _ in range(READ_ATTEMPTS):
            try:
                raw, stat = self._call("reading the root registry", "get", self._roots_path)
            except NoNodeError:
                return
            roots = codec.decode_roots(raw, self._roots_path)
            if roots.pop(table, None) is None:
                return
            try:
                self._op("set", self._roots_path, codec.encode_roots(roots), version=stat.version)
                return
            except BadVersionError:
                continue

    def list_tables(self) -> list[str]:
        return list(self.table_listing().readable)

    def table_listing(self) -> TableListing:
        self._ensure_root()
        children = self._call("listing tables", "get_children", f"{self.root}/tables")
        readable, unreadable = [], {}
        for name in sorted(children):
            try:
                self._read_head(name)
            except (TableNotFoundError, InvalidNameError):
                continue  # being dropped, or not a table of ours
            except CorruptRecordError as exc:
                unreadable[name] = exc.message
                continue
            readable.append(name)
        return TableListing(tuple(readable), unreadable)

    def drop_table(
        self, table: str, audit: Audit, expected_version: int | None, *, resume_only: bool = False
    ) -> None:
        """Mark the head dropping (compare-and-set), delete the blobs, then the head.

        ``expected_version``: the version the caller checked; VersionConflict
        when the table moved on. None skips the check (a forced drop of an
        unreadable table). ``resume_only`` finishes an interrupted drop and
        nothing else. A drop cut short is finished by running it again.
        """
        path = self.head_path(table)
        guard = f"{self.root}/names/{table.casefold()}"
        try:
            for _ in range(READ_ATTEMPTS):
                try:
                    raw, stat = self._call(f"reading table {table!r}", "get", path)
                except NoNodeError:
                    raise TableNotFoundError(table) from None
                try:
                    head: Head | None = codec.decode_head(raw, path)
                except CorruptRecordError:
                    if expected_version is not None or resume_only:
                        raise
                    head = None
                if head is not None and not head.dropping:
                    if resume_only:
                        raise TableNotFoundError(table)
                    if expected_version is not None and head.version != expected_version:
                        raise VersionConflict(f"table {table} changed since version {expected_version}")
                    marked = Head(
                        head.config,
                        head.version + 1,
                        uuid.uuid4().hex,
                        head.buckets,
                        head.history_last,
                        head.history_tail,
                        dropping=True,
                    )
                    # The name guard is rewritten (same bytes) in the same multi:
                    # only an identity allowed to drop tables may write it, so
                    # one that may only commit cannot leave the table half dropped.
                    txn = self.client.transaction()
                    txn.set_data(path, codec.encode_head(marked), version=stat.version)
                    txn.set_data(guard, codec.encode_guard(table))
                    head_result, guard_result = self._commit(txn)
                    if isinstance(head_result, NoAuthError) or isinstance(guard_result, NoAuthError):
                        raise NoAuthError()
                    if isinstance(guard_result, NoNodeError):  # left by an old crash: restore it, retry
                        with contextlib.suppress(NodeExistsError):
                            self._op("create", guard, codec.encode_guard(table), acl=self.acl_at(Place.GUARD))
                        continue
                    if isinstance(head_result, BadVersionError):
                        if expected_version is not None:
                            raise VersionConflict(f"table {table} changed while dropping") from None
                        continue
                    if isinstance(head_result, Exception):
                        raise head_result
                    stat = head_result
                for child in self._call("listing", "get_children", path):
                    for grandchild in self._call("listing", "get_children", f"{path}/{child}"):
                        node = f"{path}/{child}/{grandchild}"
                        if grandchild.startswith(OWN_PREFIX):  # one identity's owners or leases
                            with contextlib.suppress(NoNodeError):
                                for leaf in self._call("listing", "get_children", node):
                                    with contextlib.suppress(NoNodeError):
                                        self._retried("delete", f"{node}/{leaf}")
                        with contextlib.suppress(NoNodeError, NotEmptyError):
                            self._retried("delete", node)
                    with contextlib.suppress(NoNodeError, NotEmptyError):
                        self._retried("delete", f"{path}/{child}")
                try:
                    self._op("delete", path, version=stat.version)
                except NotEmptyError:
                    continue  # a late writer added a blob: sweep again
                except BadVersionError:
                    continue
                with contextlib.suppress(NoNodeError):
                    self._op("delete", guard)
                self._forget_root(table)
                return
        except NoAuthError:
            raise AuthError(f"ZooKeeper refused dropping table {table!r}: not authorised") from None
        except (KazooException, KazooTimeoutError) as exc:
            raise StoreUnavailableError(
                f"dropping table {table!r} was interrupted ({type(exc).__name__})",
                remedy="run the drop again; it continues where it stopped",
            ) from None
        raise StoreUnavailableError(f"dropping table {table!r} did not settle; run the drop again")
