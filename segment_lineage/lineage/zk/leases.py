"""Push owners and reader leases: ephemeral nodes that live as long as their session."""

from __future__ import annotations

import logging

from kazoo.exceptions import (
    NodeExistsError,
)

from segment_lineage.lineage import codec
from segment_lineage.lineage.core.errors import (
    CorruptRecordError,
    RefusedError,
)
from segment_lineage.lineage.core.model import (
    TableState,
)
from segment_lineage.lineage.core.names import check_entry_id
from segment_lineage.lineage.store.contract import (
    Lease,
    LeaseInfo,
)
from segment_lineage.lineage.zk.heads import _Loaded

log = logging.getLogger(__name__)


class _Leases:
    def hold_owner(self, table: str, entry_id: str) -> None:
        try:
            self._ephemeral(table, "owners", check_entry_id(entry_id), b"", sequence=False)
        except NodeExistsError:
            path = self._own_path(table, "owners", entry_id)
            stat = self._call("owner", "exists", path)
            if stat is None or stat.ephemeralOwner != self.session_id():
                raise RefusedError(
                    f"entry {entry_id} is already owned by another push", table=table
                ) from None

    def release_owner(self, table: str, entry_id: str) -> None:
        self._delete_quietly(self._own_path(table, "owners", check_entry_id(entry_id)), "owner")

    def live_owners(self, table: str) -> frozenset[str]:
        return frozenset(i.rsplit("/", 1)[-1] for i in self._ephemerals(table, "owners"))

    def pin(self, table: str, version: int | None = None) -> Lease:
        """Lease one version. The lease alone does not make it readable:
        retention may have condemned it before the lease existed, which only
        a head read after the lease can tell (``LineageManager.pin_readable``)."""
        snap = self.read(table)
        loaded = snap.token
        assert isinstance(loaded, _Loaded)
        state = snap.state
        if version is not None and version != state.version:
            raw, past = self._version_record(table, version, state.version)
            # The lease goes first: from then on retention keeps its blobs and files.
            lease_id = self._ephemeral(table, "leases", "lease-", raw, sequence=True)
            return Lease(table, lease_id, self._rebuild(table, loaded.head, past))
        record = codec.LeaseRecord(
            version=state.version,
            buckets=dict(loaded.head.buckets),
            chunks=tuple(sorted(loaded.chunk_blobs())),
        )
        lease_id = self._ephemeral(table, "leases", "lease-", codec.encode_lease(record), sequence=True)
        return Lease(table, lease_id, state)

    def pinned_states(self, table: str) -> list[TableState]:
        """The table versions live readers pinned, rebuilt from their blobs.
        A lease that does not decode, or whose blobs are gone (no reader
        could be reading through it), is skipped and reported
        (:meth:`ignored_leases`)."""
        head, _ = self._read_head(table)
        base = f"{self.head_path(table)}/leases"
        states = []
        for name, record in self._records(table, "leases"):
            try:
                states.append(self._rebuild(table, head, record))
            except CorruptRecordError as exc:
                self._ignore_lease(table, f"{base}/{name}", exc.message)
        return states

    def release(self, lease: Lease) -> None:
        self._delete_quietly(f"{self.head_path(lease.table)}/leases/{lease.lease_id}", "lease")

    def leases(self, table: str) -> list[LeaseInfo]:
        return [LeaseInfo(lease_id, record.version) for lease_id, record in self._records(table, "leases")]
