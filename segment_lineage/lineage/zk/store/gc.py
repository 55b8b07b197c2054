"""Metadata garbage: a mark-and-sweep of a table's blobs that nothing
references (no head, retained version or reader's lease), after a grace
measured on ZooKeeper's clock. Blobs left by failed commits, or replaced by
later ones, go this way."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RuntimeInconsistency

from segment_lineage.lineage import codec
from segment_lineage.lineage.core.acl import Place
from segment_lineage.lineage.core.errors import LineageError, StoreUnavailableError
from segment_lineage.lineage.zk.connection import ZkConnection, refused, translated
from segment_lineage.lineage.zk.store.heads import Heads
from segment_lineage.lineage.zk.store.history import History
from segment_lineage.lineage.zk.store.loaded import Loaded
from segment_lineage.lineage.zk.store.nodes import Nodes
from segment_lineage.lineage.zk.store.paths import VERSIONS, Paths
from segment_lineage.lineage.zk.store.versions import Versions

log = logging.getLogger(__name__)

METADATA_GRACE_MS = 10 * 60_000
# Garbage is bounded by size too: past this many unreferenced blobs (each at
# most SPLIT_BYTES, mostly), the grace shrinks to PRESSURE_GRACE_MS. Safe:
# an unreferenced blob belongs to no head, retained version or lease; a
# reader or writer that still wanted one finds it gone and reads again.
GARBAGE_SOFT_BLOBS = 1024
PRESSURE_GRACE_MS = 5_000
DELETE_BATCH = 500  # blob deletes per multi (with the head check), well under the request limit
GC_MARKS_MAX = 8_000


class MetadataGc:
    def __init__(
        self, zk: ZkConnection, paths: Paths, nodes: Nodes, heads: Heads, history: History, versions: Versions
    ) -> None:
        self.zk = zk
        self.paths = paths
        self.nodes = nodes
        self.heads = heads
        self.history = history
        self.versions = versions

    def referenced(self, table: str) -> tuple[set[str], int]:
        """Every blob the current head reaches (buckets, name chunks, history),
        or a retained version or lease does; and the head's znode version they
        were read at."""
        snap = self.heads.read(table)
        loaded = snap.token
        assert isinstance(loaded, Loaded)
        keep = loaded.head.bucket_blobs() | loaded.chunk_blobs()
        keep.update(blob for blob, _ in self.history.chunks(table, loaded.head))
        for _, lease in self.versions.records(table, "leases"):
            keep.update(lease.blobs)
        for _, record in self.versions.records(table, VERSIONS):
            keep.update(record.blobs)
        return keep, loaded.zversion

    def _delete_unless_moved(self, table: str, blobs: Sequence[str], head_zversion: int) -> int:
        """Delete ``blobs`` in multis that also check the head is still at
        ``head_zversion``: a commit that landed since the keep set was read may
        reference one of them (its blob check passed before this delete), so
        once the head moved nothing more is deleted (the next pass looks
        again). Returns how many were deleted."""
        deleted = 0
        for start in range(0, len(blobs), DELETE_BATCH):
            done = self._delete_batch(table, list(blobs[start : start + DELETE_BATCH]), head_zversion)
            if done is None:
                return deleted  # the head moved (or went): stop here
            deleted += done
        return deleted

    def _delete_batch(self, table: str, batch: list[str], head_zversion: int) -> int | None:
        """One batch's multi, again without those found gone: how many it
        deleted, None when the head moved (or went)."""
        while batch:
            txn = self.zk.transaction()
            txn.check(self.paths.head(table), head_zversion)
            for blob in batch:
                txn.delete(self.paths.blob(table, blob))
            results = self.zk.commit(txn)
            if not any(refused(r) for r in results):
                return len(batch)
            if refused(results[0]):
                return None
            # Some were gone already: delete the rest.
            rest = [b for b, r in zip(batch, results[1:], strict=True) if not isinstance(r, NoNodeError)]
            if len(rest) == len(batch):  # refused for another cause (an ACL): trying again cannot help
                raise _cause(results[1:])
            batch = rest
        return 0

    def _prune(self, table: str) -> None:
        """Prune the table's version records to its versions kept; nothing
        when its head cannot be read (being dropped, or undecodable: the
        setting is unknown, and the rest of the pass says what is wrong)."""
        try:
            head, _ = self.heads.read_head(table)
        except LineageError:
            return
        self.versions.prune(table, head.config.versions_kept)

    def _marks(self, table: str) -> tuple[dict[str, int], int | None]:
        """The table's marks (blob -> when first seen unreferenced) and their
        node's version (None: no node yet)."""
        gc_path = self.paths.gc(table)
        try:
            raw, stat = self.zk.get(gc_path, doing="reading gc marks")
        except NoNodeError:
            return {}, None
        return codec.decode_gc(raw, gc_path), int(stat.version)

    def _mark(self, table: str, kept: dict[str, int], version: int | None) -> bool:
        """Swap in the marks kept (compare-and-set); False when another pass did first."""
        gc_path = self.paths.gc(table)
        data = codec.encode_gc(kept)
        try:
            if version is None:
                self.zk.create(gc_path, data, acl=self.nodes.acl_at(Place.GC))
            else:
                self.zk.set(gc_path, data, version=version)
        except (BadVersionError, NodeExistsError):
            return False
        return True

    def collect(self, table: str, grace_ms: int = METADATA_GRACE_MS) -> int:
        """One mark-and-sweep pass over a table's unreferenced blobs.

        A blob is deleted only when an earlier pass already saw it
        unreferenced at least ``grace_ms`` ago (ZooKeeper's clock), so a
        reader holding an older head, or a writer between writing its blobs
        and swapping the head, has that long; with more than
        GARBAGE_SOFT_BLOBS unreferenced, PRESSURE_GRACE_MS at most. The marks live in the table's
        ``gc`` node, updated by compare-and-set: of two concurrent passes, one
        gives way. Returns the number of blobs deleted.
        """
        with translated(
            f"metadata garbage pass on {table!r}",
            refused=f"ZooKeeper refused collecting garbage of {table!r}: not authorised",
        ):
            now = self.nodes.now_ms()
            self._prune(table)
            keep, head_zversion = self.referenced(table)
            children = self.zk.get_children(self.paths.blobs(table), doing="listing blobs")
            unreferenced = [b for b in children if b not in keep]
            marks, version = self._marks(table)
            due, kept = _due(unreferenced, marks, now, grace_ms)
            if not self._mark(table, kept, version):
                return 0  # another pass is running
            return self._delete_unless_moved(table, due, head_zversion)

    def collect_quietly(self, table: str) -> None:
        """A garbage pass after a commit: its failure must not fail the commit."""
        try:
            self.collect(table)
        except LineageError as exc:
            log.warning("metadata garbage pass on %s skipped: %s", table, exc.message)


class Sweeper:
    """Metadata collection off the writer's path. A commit that sealed a
    history blob (one in HISTORY_TAIL) hands its table here and returns; one
    background thread collects the tables handed in, each once however often
    it was (a table handed in again while it is collected is collected once
    more). The thread ends when there is nothing left, and the store's close
    waits for it a bounded time (:meth:`drain`).

    Safe to cut short: a pass is a mark-and-sweep whose marks are
    compare-and-set (a process killed mid-pass is a crash like any other),
    and retention collects every table it cleans at the end of each pass."""

    def __init__(self, gc: MetadataGc) -> None:
        self.gc = gc
        self._lock = threading.Condition()
        self._tables: dict[str, None] = {}  # handed in, not yet collected, in order
        self._thread: threading.Thread | None = None
        self.passes = 0  # passes run (tests wait on them)

    def request(self, table: str) -> None:
        with self._lock:
            self._tables[table] = None
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lineage-metadata-gc", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._tables:
                    self._thread = None
                    self._lock.notify_all()
                    return
                table = next(iter(self._tables))
                del self._tables[table]
            try:
                self.gc.collect_quietly(table)
            except Exception:  # a closed client, say: the next pass (or retention's) collects it
                log.warning("metadata garbage pass on %s stopped", table, exc_info=True)
            with self._lock:
                self.passes += 1

    def drain(self, timeout_s: float) -> bool:
        """Wait until every table handed in was collected (True), or ``timeout_s`` passed."""
        with self._lock:
            return self._lock.wait_for(lambda: self._thread is None, timeout=max(0.0, timeout_s))


def _due(
    unreferenced: list[str], marks: dict[str, int], now: int, grace_ms: int
) -> tuple[list[str], dict[str, int]]:
    """The blobs seen unreferenced at least ``grace_ms`` ago (less under
    pressure), and the marks of the others to keep (the oldest first, at
    most GC_MARKS_MAX)."""
    if len(unreferenced) > GARBAGE_SOFT_BLOBS:
        grace_ms = min(grace_ms, PRESSURE_GRACE_MS)
    due = [b for b in unreferenced if b in marks and now - marks[b] >= grace_ms]
    due_set = set(due)
    kept = {b: marks.get(b, now) for b in unreferenced if b not in due_set}
    return due, dict(sorted(kept.items(), key=lambda kv: kv[1])[:GC_MARKS_MAX])


def _cause(results: Sequence[object]) -> Exception:
    """The delete that failed a blob multi on its own (those after it fail as inconsistent)."""
    for result in results:
        if isinstance(result, Exception) and refused(result) and not isinstance(result, RuntimeInconsistency):
            return result
    return StoreUnavailableError("deleting unreferenced blobs failed")
