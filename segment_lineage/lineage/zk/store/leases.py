"""Push owners and reader leases: ephemeral nodes that live as long as their
session. An owner marks a running push's entry; a lease pins one version for
a reader (retention keeps its blobs and files)."""

from __future__ import annotations

from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from segment_lineage.lineage import codec
from segment_lineage.lineage.core.errors import CorruptRecordError, RefusedError, StoreUnavailableError
from segment_lineage.lineage.core.model import TableState
from segment_lineage.lineage.core.names import check_entry_id
from segment_lineage.lineage.store.contract import LOCK, Lease, LeaseInfo, ReadAgainError, Snapshot
from segment_lineage.lineage.zk.connection import ZkConnection
from segment_lineage.lineage.zk.store.ephemerals import Ephemerals
from segment_lineage.lineage.zk.store.heads import Heads
from segment_lineage.lineage.zk.store.loaded import Loaded
from segment_lineage.lineage.zk.store.paths import Paths
from segment_lineage.lineage.zk.store.versions import Versions


class Owners:
    """A push's owner claim on its entry (the hold kind ``owner``, named by entry id)."""

    def __init__(self, zk: ZkConnection, ephemerals: Ephemerals) -> None:
        self.zk = zk
        self.ephemerals = ephemerals

    def hold(self, table: str, name: str = LOCK) -> None:
        entry_id = name
        try:
            self.ephemerals.create(table, "owners", check_entry_id(entry_id), b"", sequence=False)
        except NodeExistsError:
            path = self.ephemerals.own_path(table, "owners", entry_id)
            stat = self.zk.exists(path, doing="owner")
            if stat is None or stat.ephemeralOwner != self.zk.session_id():
                raise RefusedError(
                    f"entry {entry_id} is already owned by another push", table=table
                ) from None

    def path(self, table: str, entry_id: str) -> str:
        """The owner node a push of ``entry_id`` holds (its commits check it)."""
        return self.ephemerals.own_path(table, "owners", check_entry_id(entry_id))

    def holds(self, table: str, name: str = LOCK) -> bool:
        """Whether this session still holds the claim on entry ``name``."""
        try:
            stat = self.zk.exists(self.path(table, name), doing="owner")
        except (NoNodeError, StoreUnavailableError):
            return False
        return stat is not None and stat.ephemeralOwner == self.zk.session_id()

    def holds_now(self, table: str, name: str = LOCK) -> int | None:
        return self.ephemerals.owned_now(self.path(table, name), "owner")

    def release(self, table: str, name: str = LOCK) -> None:
        self.ephemerals.delete_quietly(self.path(table, name), "owner")

    def live(self, table: str) -> frozenset[str]:
        return frozenset(i.rsplit("/", 1)[-1] for i in self.ephemerals.listing(table, "owners"))


class Leases:
    def __init__(self, paths: Paths, heads: Heads, versions: Versions, ephemerals: Ephemerals) -> None:
        self.paths = paths
        self.heads = heads
        self.versions = versions
        self.ephemerals = ephemerals

    def pin(
        self, table: str, version: int | None = None, read: Snapshot | None = None, *, look: bool = False
    ) -> Lease:
        """Lease one version. The lease alone does not make it readable:
        retention may have condemned it before the lease existed, which only
        a head read after the lease can tell (``LineageManager.pin_readable``).
        ``read``: the head as the caller read it, at the version asked for
        (one round trip less). ``look``: that head read, sent right behind
        the lease's create (ZooKeeper answers a session's requests in order):
        one round trip for both."""
        snap = read if read is not None else self.heads.read(table)
        loaded = snap.token
        assert isinstance(loaded, Loaded)
        state = snap.state
        if version is not None and version != state.version:
            raw, past = self.versions.record(table, version, state.version)
            # The lease goes first: from then on retention keeps its blobs and files.
            lease_id, after = self._create(table, raw, look)
            return Lease(table, lease_id, self.versions.rebuild(table, loaded.head, past), after)
        record = codec.LeaseRecord(
            version=state.version,
            buckets=dict(loaded.head.buckets),
            chunks=tuple(sorted(loaded.chunk_blobs())),
        )
        lease_id, after = self._create(table, codec.encode_lease(record), look)
        return Lease(table, lease_id, state, after)

    def _create(self, table: str, raw: bytes, look: bool) -> tuple[str, TableState | None]:
        """A new lease node holding ``raw``: its id, and with ``look`` the
        table as read right behind it (the lease goes if that read fails)."""
        sent: list[tuple[Any, Any]] = []

        def behind() -> None:
            sent.append(self.heads.send_read(table))

        lease_id = self.ephemerals.create(
            table, "leases", "lease-", raw, sequence=True, behind=behind if look else None
        )
        if not look:
            return lease_id, None
        try:
            return lease_id, self.heads.answer_read(table, sent[-1]).state
        except BaseException:
            self._drop(table, lease_id)
            raise

    def pinned_states(self, table: str) -> list[TableState]:
        """The table versions live readers pinned, rebuilt from their blobs.
        A lease that does not decode, or whose blobs are gone (no reader
        could be reading through it), is skipped and reported
        (:meth:`Versions.ignored_leases`)."""
        head, _ = self.heads.read_head(table)
        base = self.paths.folder(table, "leases")
        states = []
        for name, record in self.versions.records(table, "leases"):
            try:
                # Loaded now: a lease's blobs stay while it does, and one that
                # names a blob that is not there is found here, not mid-pass.
                states.append(self.versions.rebuild(table, head, record, lease=True).loaded())
            except CorruptRecordError as exc:
                self.versions.ignore_lease(table, f"{base}/{name}", exc.message)
            except ReadAgainError as exc:
                self.versions.ignore_lease(
                    table, f"{base}/{name}", f"names blob {exc.blob}, which is missing"
                )
        return states

    def release(self, lease: Lease) -> None:
        self._drop(lease.table, lease.lease_id)

    def _drop(self, table: str, lease_id: str) -> None:
        self.ephemerals.delete_quietly(f"{self.paths.folder(table, 'leases')}/{lease_id}", "lease")

    def leases(self, table: str) -> list[LeaseInfo]:
        return [
            LeaseInfo(lease_id, record.version) for lease_id, record in self.versions.records(table, "leases")
        ]

    def ignored(self, table: str) -> list[str]:
        return self.versions.ignored_leases(table)
