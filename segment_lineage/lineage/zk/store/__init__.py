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

:class:`ZkStore` is a thin facade over collaborators with one concern each:
the connection (:mod:`.connection`), paths (:mod:`.paths`), the ACL policy and
shared nodes (:mod:`.nodes`), blobs and their cache (:mod:`.blobs`), reading
(:mod:`.heads`), the commit (:mod:`.commit`), tables (:mod:`.tables`), history
(:mod:`.history`), retained versions (:mod:`.versions`), metadata garbage
(:mod:`.gc`), ephemeral nodes (:mod:`.ephemerals`), owners and leases
(:mod:`.leases`), and the floor, table holds and elections (:mod:`.locks`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from kazoo.client import KazooClient
from kazoo.security import ACL

from segment_lineage.lineage.core.acl import AclPolicy, Place
from segment_lineage.lineage.core.errors import MirrorHeldError, PassRunningError
from segment_lineage.lineage.core.model import Audit, Change, HistoryRecord, TableConfig, TableState
from segment_lineage.lineage.store.contract import (
    Floor,
    Lease,
    LeaseInfo,
    Member,
    OnMarked,
    Snapshot,
    TableListing,
)
from segment_lineage.lineage.zk.connection import ZkConnection
from segment_lineage.lineage.zk.store.blobs import BlobStore
from segment_lineage.lineage.zk.store.commit import Commits
from segment_lineage.lineage.zk.store.ephemerals import Ephemerals
from segment_lineage.lineage.zk.store.gc import METADATA_GRACE_MS, MetadataGc
from segment_lineage.lineage.zk.store.heads import Heads
from segment_lineage.lineage.zk.store.history import History
from segment_lineage.lineage.zk.store.leases import Leases, Owners
from segment_lineage.lineage.zk.store.locks import Elections, Floors, Queues, TableHolds
from segment_lineage.lineage.zk.store.nodes import Nodes
from segment_lineage.lineage.zk.store.paths import ROOT, Paths
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
    ) -> None:
        self.client = client
        self.session_timeout_s = session_timeout_s
        self.root = root
        self.op_timeout_s = op_timeout_s
        self._owns_client = owns_client
        self.zk = ZkConnection(client, op_timeout_s)
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
        self.commits = Commits(
            self.zk, self.paths, self.nodes, self.blobs, self.versions_, self.gc, self.owners.path
        )
        self.tables = Tables(self.zk, self.paths, self.nodes, self.heads)
        self.leases_ = Leases(self.paths, self.heads, self.versions_, self.ephemerals)
        self.passes = TableHolds(
            self.zk, self.paths, self.ephemerals, "passes", lambda t, _: PassRunningError(t)
        )
        self.mirror_holds = TableHolds(self.zk, self.paths, self.ephemerals, "mirror", MirrorHeldError)
        self.elections = Elections(self.zk, self.paths, self.nodes, self.ephemerals)

    # ---- paths -------------------------------------------------------------------

    def head_path(self, table: str) -> str:
        return self.paths.head(table)

    def blob_path(self, table: str, blob: str) -> str:
        return self.paths.blob(table, blob)

    # ---- access control ------------------------------------------------------------

    @property
    def acl(self) -> list[ACL] | None:
        """The single identity's ACL, when no policy is in force (None: open)."""
        return self.nodes.acl

    @property
    def identity(self) -> str | None:
        """This client's digest id, when it authenticates."""
        return self.nodes.identity

    def policy(self) -> AclPolicy | None:
        """The ACL policy in force, read once per store; None when there is none."""
        return self.nodes.policy()

    def forget_policy(self) -> None:
        self.nodes.forget_policy()

    def role(self) -> str | None:
        return self.nodes.role()

    def acl_at(self, place: Place, owner: str | None = None) -> list[ACL] | None:
        """The ACL a node created at ``place`` gets."""
        return self.nodes.acl_at(place, owner)

    def require_role(self, *roles: str, doing: str) -> None:
        """AuthError when a policy is in force and this identity has none of ``roles`` (nor admin)."""
        self.nodes.require_role(*roles, doing=doing)

    def may_sweep(self) -> bool:
        """Whether this identity may delete metadata blobs and version records."""
        return self.nodes.may_sweep()

    def ensure_node(self, path: str, place: Place, data: bytes = b"", owner: str | None = None) -> bool:
        """Create ``path`` unless it exists; True when this call created it."""
        return self.nodes.ensure_node(path, place, data, owner)

    # ---- the clock, the store's id ---------------------------------------------------

    def now_ms(self) -> int:
        return self.nodes.now_ms()

    def store_id(self) -> str:
        """This store's id (its ensemble and chroot), which root claims name."""
        return self.nodes.store_id()

    @property
    def commits_sent(self) -> int:
        """How many multis this store has sent, landed or not: a watched view
        re-reads after its own process wrote, before the watch event arrives."""
        return self.zk.commits_sent

    @property
    def cached_records(self) -> int:
        """Records held by the decoded-blob cache (bounded; see blobs.CACHE_RECORDS)."""
        return self.blobs.cached_records

    # ---- tables ------------------------------------------------------------------------

    def create_table(self, config: TableConfig, audit: Audit, commit_id: str) -> TableState:
        return self.tables.create_table(config, audit, commit_id)

    def drop_table(
        self,
        table: str,
        audit: Audit,
        expected_version: int | None,
        *,
        resume_only: bool = False,
        on_marked: OnMarked | None = None,
    ) -> None:
        """Mark the head dropping (compare-and-set), delete the blobs, then the head."""
        self.tables.drop_table(table, audit, expected_version, resume_only=resume_only, on_marked=on_marked)

    def roots(self) -> dict[str, str]:
        return self.tables.roots()

    def list_tables(self) -> list[str]:
        return self.tables.list_tables()

    def table_listing(self) -> TableListing:
        return self.tables.table_listing()

    # ---- reading and committing ----------------------------------------------------------

    def read(self, table: str) -> Snapshot:
        return self.heads.read(table)

    def read_now(self, table: str) -> tuple[Snapshot, int]:
        self.nodes.ensure_root()
        snap, now = self.heads.read_at(table, commit=True)
        return snap, self.nodes.now_ms() if now is None else now  # the clock node was missing: made again

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
        return self.commits.write(table, base, change, audit, commit_id, now_ms, owner, role)

    def take_floor(self, table: str, seen: Floor | None, commit_id: str, until_ms: int) -> bool:
        return self.floors.take(table, seen, commit_id, until_ms)

    def leave_floor(self, table: str, commit_id: str) -> None:
        self.floors.leave(table, commit_id)

    def join_queue(self, table: str, commit_id: str) -> str | None:
        return self.queues.join(table, commit_id)

    def await_turn(self, table: str, ahead: str, timeout_s: float) -> bool:
        return self.queues.await_turn(table, ahead, timeout_s)

    def leave_queue(self, table: str, ticket: str) -> None:
        self.queues.leave(table, ticket)

    # ---- history and retained versions -----------------------------------------------------

    def find_commit(self, table: str, commit_id: str, after_version: int) -> HistoryRecord | None:
        return self.history_.find_commit(table, commit_id, after_version)

    def iter_history(self, table: str) -> Iterator[HistoryRecord]:
        return self.history_.iter_history(table)

    def history(self, table: str, limit: int | None = None) -> list[HistoryRecord]:
        return self.history_.history(table, limit)

    def versions(self, table: str) -> list[int]:
        """The retained versions of a table, oldest first."""
        return self.versions_.versions(table)

    def read_version(self, table: str, version: int) -> TableState:
        return self.versions_.read_version(table, version)

    # ---- metadata garbage ---------------------------------------------------------------------

    def referenced_blobs(self, table: str) -> set[str]:
        """Every blob the current head reaches (buckets, name chunks, history),
        or a retained version or a lease keeps."""
        return self.gc.referenced(table)[0]

    def collect_garbage(self, table: str, grace_ms: int = METADATA_GRACE_MS) -> int:
        """One mark-and-sweep pass over a table's unreferenced blobs; how many were deleted."""
        return self.gc.collect(table, grace_ms)

    # ---- push owners, reader leases, retention pass holds -------------------------------------

    def hold_owner(self, table: str, entry_id: str) -> None:
        self.owners.hold(table, entry_id)

    def release_owner(self, table: str, entry_id: str) -> None:
        self.owners.release(table, entry_id)

    def live_owners(self, table: str) -> frozenset[str]:
        return self.owners.live(table)

    def pin(self, table: str, version: int | None = None) -> Lease:
        return self.leases_.pin(table, version)

    def pinned_states(self, table: str) -> list[TableState]:
        return self.leases_.pinned_states(table)

    def release(self, lease: Lease) -> None:
        self.leases_.release(lease)

    def leases(self, table: str) -> list[LeaseInfo]:
        return self.leases_.leases(table)

    def ignored_leases(self, table: str) -> list[str]:
        return self.versions_.ignored_leases(table)

    def hold_pass(self, table: str) -> None:
        self.passes.hold(table)

    def holds_pass(self, table: str) -> bool:
        return self.passes.holds(table)

    def release_pass(self, table: str) -> None:
        self.passes.release(table)

    def hold_mirror(self, table: str) -> None:
        self.mirror_holds.hold(table)

    def holds_mirror(self, table: str) -> bool:
        return self.mirror_holds.holds(table)

    def release_mirror(self, table: str) -> None:
        self.mirror_holds.release(table)

    # ---- the session, and elections bound to it ----------------------------------------------

    def session_alive(self, since: int) -> bool:
        return self.zk.session_alive(since)

    def session_id(self) -> int | None:
        return self.zk.session_id()

    def connected(self) -> bool:
        return self.zk.connected()

    def confirm_session(self) -> None:
        self.zk.confirm_session(self.root)

    def join_election(self, role: str, identity: str) -> str:
        return self.elections.join(role, identity)

    def election(self, role: str) -> list[str]:
        return self.elections.members(role)

    def election_member(self, role: str, name: str) -> Member | None:
        return self.elections.member(role, name)

    def leave_election(self, role: str, name: str) -> None:
        self.elections.leave(role, name)

    def close(self) -> None:
        self.zk.detach()
        if self._owns_client:
            self.client.stop()
            self.client.close()
