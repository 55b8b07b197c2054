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
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.security import ACL

from segment_lineage.lineage.core.acl import (
    AclPolicy,
)
from segment_lineage.lineage.core.model import (
    TableState,
)
from segment_lineage.lineage.store.contract import (
    Snapshot,
)
from segment_lineage.lineage.zk.blobs import _Blobs
from segment_lineage.lineage.zk.commit import _Commit
from segment_lineage.lineage.zk.connection import _Connection
from segment_lineage.lineage.zk.ephemerals import _Ephemerals
from segment_lineage.lineage.zk.gc import _Gc
from segment_lineage.lineage.zk.heads import _Heads, _Loaded
from segment_lineage.lineage.zk.history import _History
from segment_lineage.lineage.zk.leases import _Leases
from segment_lineage.lineage.zk.locks import _Locks
from segment_lineage.lineage.zk.nodes import _Nodes
from segment_lineage.lineage.zk.paths import ROOT, _Paths
from segment_lineage.lineage.zk.tables import _Tables
from segment_lineage.lineage.zk.versions import _Versions

log = logging.getLogger(__name__)


class ZkStore(
    _Paths,
    _Connection,
    _Nodes,
    _Blobs,
    _Heads,
    _Commit,
    _Tables,
    _History,
    _Gc,
    _Versions,
    _Ephemerals,
    _Leases,
    _Locks,
):
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
        self._store_id: str | None = None
        self._passes_held: set[str] = set()  # tables whose retention pass this store holds
        self._ignored: dict[str, dict[str, str]] = {}  # per table: malformed lease path -> why
        self.op_timeout_s = op_timeout_s
        self.acl = list(acl) if acl else None
        self.identity = identity  # this client's digest id, when it authenticates
        self._policy: tuple[AclPolicy | None] | None = None  # loaded once
        self._owns_client = owns_client
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._cache_records = 0
        self._largest_table = 0  # records of the largest table state read
        self._ready = False
        self._versions_ready: set[str] = set()
        self._last: dict[str, tuple[_Loaded, Snapshot]] = {}  # per table: the last version read
        self._states: OrderedDict[tuple[object, ...], TableState] = OrderedDict()
        self._merged: OrderedDict[tuple[str, str, tuple[str, ...]], tuple[dict[str, Any], list[list[str]]]]
        self._merged = OrderedDict()
        self._commits_sent = 0  # multis sent by this store, whatever their outcome
        self._commits_lock = threading.Lock()
        # When a wait for ZooKeeper last ran out, until it answers again: while
        # the client stays disconnected, later calls fail at once instead of
        # each waiting op_timeout_s in turn (a failed push's cleanup, its owner
        # release), so a command fails within one bounded wait.
        self._unanswered_since: float | None = None
        client.add_listener(self._on_state)

    def close(self) -> None:
        self.client.remove_listener(self._on_state)
        if self._owns_client:
            self.client.stop()
            self.client.close()
