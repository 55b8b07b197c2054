"""The ZooKeeper store: one small head per table, immutable blobs behind it.

Layout under the project root (``/segment-lineage`` below any chroot)::

    /tables/<table>               head: config, version, blob ids, history tail
    /tables/<table>/blobs/<id>    immutable: a hash bucket of segments,
                                  entries or pending deletions; a chunk of a
                                  long name list; sealed history records
    /tables/<table>/versions/v-N  a retained version: its blob ids
    /tables/<table>/gc            marks of the metadata sweep
    /tables/<table>/floor         which commit holds the commits a while (a big change)
    /tables/<table>/owners/<id>   ephemeral: a running push's claim
    /tables/<table>/leases/...    ephemeral: a reader's pinned version
    /tables/<table>/passes/lock   ephemeral: the retention pass running on the table
    /tables/<table>/mirror/lock   ephemeral: the publisher (or drop) at work on its mirror
    /names/<casefolded table>     create-if-absent guard against case twins
    /clock                        scratch node; its mtime is the single clock
    /leaders/<name>/...           leader elections (the retention daemon)
    /acl                          the ACL policy, when roles are in use

With an ACL policy (:mod:`segment_lineage.lineage.core.acl`) every node is created with the ACL
of its place; without one, with the single identity's ACL, or open.

Why: one znode per table caps Pinot near 9K-69K segments (1 MB
``jute.maxbuffer``). Here a commit first writes the new blobs it needs (each
well under 512 KB, uniquely named, invisible until referenced) and then
compare-and-sets the head: that single versioned ``set`` is the atomic
commit. A reader reads the head, then only blobs that head references, so it
always sees exactly one version. Blobs are immutable, so they are cached by id.

Unreferenced blobs (from failed commits, or replaced by later ones) are
removed by :meth:`ZkStore.collect_garbage` after a grace period measured on
ZooKeeper's clock.

:class:`ZkStore` implements the table log (the contract's methods) over
collaborators with one concern each, and hands out the coordination recipes
as they are, without forwarding: the connection (``zk``), paths (``paths``),
the ACL policy and shared nodes (``nodes``), blobs and their cache
(``blobs``), reading (``heads``), the commit (``commits``), tables
(``tables``), history (``history_``), retained versions (``versions_``),
metadata garbage (``gc``), ephemeral nodes (``ephemerals``); and the recipes:
holds (``holds(kind)``: owners in :mod:`.leases`, passes and mirrors in
:mod:`.locks`), the commit queues, floors and elections (:mod:`.locks`), pins
(:mod:`.leases`) and the session (:mod:`.session`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.security import ACL

from segment_lineage.lineage.core.env import SYSTEM, Env
from segment_lineage.lineage.core.errors import MirrorHeldError, PassRunningError, StoreUnavailableError
from segment_lineage.lineage.core.model import TableState
from segment_lineage.lineage.store.contract import HoldKind, Holds, Snapshot
from segment_lineage.lineage.zk.connection import ZkConnection
from segment_lineage.lineage.zk.store.blobs import BlobGone, BlobStore
from segment_lineage.lineage.zk.store.commit import Commits
from segment_lineage.lineage.zk.store.ephemerals import Ephemerals
from segment_lineage.lineage.zk.store.gc import MetadataGc, Sweeper
from segment_lineage.lineage.zk.store.heads import Heads
from segment_lineage.lineage.zk.store.history import History
from segment_lineage.lineage.zk.store.leases import Leases, Owners
from segment_lineage.lineage.zk.store.locks import Elections, Floors, Queues, TableHolds
from segment_lineage.lineage.zk.store.nodes import Nodes
from segment_lineage.lineage.zk.store.paths import ROOT as ROOT
from segment_lineage.lineage.zk.store.paths import Paths
from segment_lineage.lineage.zk.store.session import ZkSession
from segment_lineage.lineage.zk.store.tables import Tables
from segment_lineage.lineage.zk.store.versions import Versions


class ZkStore:
    """Thread-safe for reads and writes from several threads of one process."""

    def __init__(
        self,
        client: KazooClient,
        *,
        acl: Sequence[ACL] | None = None,
        identity: str | None = None,
        owns_client: bool = True,
        root: str = ROOT,
        op_timeout_s: float = 10.0,
        session_timeout_s: float = 10.0,
        env: Env = SYSTEM,
    ) -> None:
        self.client = client
        self.root = root
        self.op_timeout_s = op_timeout_s
        self._owns_client = owns_client
        self.zk = ZkConnection(client, op_timeout_s, env)
        self.session = ZkSession(self.zk, root, session_timeout_s)
        self.paths = Paths(root)
        self.nodes = Nodes(self.zk, self.paths, acl, identity)
        self.blobs = BlobStore(self.zk, self.paths, self.nodes)
        self.ephemerals = Ephemerals(self.zk, self.paths, self.nodes)
        self.floors = Floors(self.zk, self.paths, self.nodes)
        self.queues = Queues(self.zk, self.paths, self.nodes)
        self.heads = Heads(self.zk, self.paths, self.blobs, self.floors, self.queues)
        self.history_ = History(self.zk, self.paths, self.heads, self.blobs)
        self.versions_ = Versions(self.zk, self.paths, self.nodes, self.heads, self.ephemerals)
        self.gc = MetadataGc(self.zk, self.paths, self.nodes, self.heads, self.history_, self.versions_)
        self.owners = Owners(self.zk, self.ephemerals)
        self.sweeper = Sweeper(self.gc)
        self.commits = Commits(
            self.zk,
            self.paths,
            self.nodes,
            self.blobs,
            self.versions_,
            self.sweeper,
            self.owners.path,
            self.heads,  # a version written keeps the look-ups its change built
        )
        self.tables = Tables(self.zk, self.paths, self.nodes, self.heads)
        self.pins = Leases(self.paths, self.heads, self.versions_, self.ephemerals)
        self.elections = Elections(self.zk, self.paths, self.nodes, self.ephemerals)
        passes = TableHolds(self.zk, self.paths, self.ephemerals, "passes", lambda t, _: PassRunningError(t))
        mirrors = TableHolds(self.zk, self.paths, self.ephemerals, "mirror", MirrorHeldError)
        self._holds: dict[str, Holds] = {"owner": self.owners, "pass": passes, "mirror": mirrors}
        # The table log is the collaborators' own methods, handed out as they are.
        self.now_ms = self.nodes.now_ms
        self.store_id = self.nodes.store_id  # its ensemble and chroot, which root claims name
        self.require_role = self.nodes.require_role
        self.create_table = self.tables.create_table
        self.drop_table = self.tables.drop_table  # marks the head dropping, deletes the blobs, then the head
        self.roots = self.tables.roots
        self.list_tables = self.tables.list_tables
        self.table_listing = self.tables.table_listing
        self.write = self.commits.write
        self.write_together = self.commits.write_together  # several tables in one multi
        self.find_commit = self.history_.find_commit
        self.iter_history = self.history_.iter_history
        self.history = self.history_.history
        self.versions = self.versions_.versions
        self.collect_garbage = self.gc.collect  # one mark-and-sweep pass; how many blobs went

    def holds(self, kind: HoldKind) -> Holds:
        return self._holds[kind]

    def read(self, table: str, *, whole: bool = False) -> Snapshot:
        self.nodes.send_contact()  # a new client's first contact goes with its first read
        return self.heads.read(table, whole=whole)

    def read_version(self, table: str, version: int) -> TableState:
        self.nodes.send_contact()
        return self.versions_.read_version(table, version)

    def read_version_now(self, table: str, version: int) -> tuple[TableState, Snapshot, int]:
        self.nodes.send_contact()
        extras: list[Any] = []

        def behind() -> None:
            extras[:] = self.heads.send_commit_extras(table)

        target, (head, zversion, raw) = self.versions_.read_version_with_head(table, version, behind)
        self.nodes.ensure_root()
        try:
            snap, now = self.heads.commit_read(table, head, zversion, raw, extras)
        except (StoreUnavailableError, BlobGone):  # answers lost with a connection, or the head moved on
            snap, now = self.heads.read_at(table, commit=True)
        return target, snap, self.nodes.now_ms() if now is None else now

    def read_now(self, table: str) -> tuple[Snapshot, int]:
        self.nodes.send_contact()  # answered below: one round trip with the read
        snap, now = self.heads.read_at(table, commit=True)
        self.nodes.ensure_root()  # the shared nodes are there before the commit writes
        return snap, self.nodes.now_ms() if now is None else now  # the clock node was missing: made again

    def read_now_many(self, tables: Sequence[str]) -> list[tuple[Snapshot, int]]:
        self.nodes.ensure_root()
        read = self.heads.read_many(tables)
        # None: the clock node was missing (made again) or its answer lost.
        clock = self.nodes.now_ms() if any(now is None for _, now in read) else 0
        return [(snap, clock if now is None else now) for snap, now in read]

    def close(self) -> None:
        self.sweeper.drain(self.op_timeout_s)  # a garbage pass a commit handed off, if one runs
        self.zk.detach()
        if self._owns_client:
            self.client.stop()
            self.client.close()
