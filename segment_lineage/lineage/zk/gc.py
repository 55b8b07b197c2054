"""Metadata garbage: a mark-and-sweep of the blobs nothing references."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
)
from kazoo.handlers.threading import KazooTimeoutError

from segment_lineage.lineage import codec
from segment_lineage.lineage.core.acl import (
    Place,
)
from segment_lineage.lineage.core.errors import (
    AuthError,
    LineageError,
    StoreUnavailableError,
)
from segment_lineage.lineage.zk.connection import _refused
from segment_lineage.lineage.zk.heads import _Loaded
from segment_lineage.lineage.zk.paths import VERSIONS

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


class _Gc:
    # ---- metadata garbage ------------------------------------------------------

    def referenced_blobs(self, table: str) -> set[str]:
        """Every blob the current head reaches: buckets, name chunks, history."""
        return self._referenced(table)[0]

    def _referenced(self, table: str) -> tuple[set[str], int]:
        """:meth:`referenced_blobs`, and the head's znode version they were read at."""
        snap = self.read(table)
        loaded = snap.token
        assert isinstance(loaded, _Loaded)
        keep = loaded.head.bucket_blobs() | loaded.chunk_blobs()
        keep.update(blob for blob, _ in self._history_chunks(table, loaded.head))
        for _, lease in self._records(table, "leases"):
            keep.update(lease.blobs)
        for _, record in self._records(table, VERSIONS):
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
            batch = list(blobs[start : start + DELETE_BATCH])
            while batch:
                txn = self.client.transaction()
                txn.check(self.head_path(table), head_zversion)
                for blob in batch:
                    txn.delete(self.blob_path(table, blob))
                results = self._commit(txn)
                if not any(_refused(r) for r in results):
                    deleted += len(batch)
                    break
                if _refused(results[0]):
                    return deleted  # the head moved (or went): stop here
                # Some were gone already: delete the rest.
                batch = [b for b, r in zip(batch, results[1:], strict=True) if not isinstance(r, NoNodeError)]
        return deleted

    def collect_garbage(self, table: str, grace_ms: int = METADATA_GRACE_MS) -> int:
        """One mark-and-sweep pass over a table's unreferenced blobs.

        A blob is deleted only when an earlier pass already saw it
        unreferenced at least ``grace_ms`` ago (ZooKeeper's clock), so a
        reader holding an older head, or a writer between writing its blobs
        and swapping the head, has that long; with more than
        GARBAGE_SOFT_BLOBS unreferenced, PRESSURE_GRACE_MS at most. The marks live in the table's
        ``gc`` node, updated by compare-and-set: of two concurrent passes, one
        gives way. Returns the number of blobs deleted.
        """
        gc_path = f"{self.head_path(table)}/gc"
        try:
            now = self.now_ms()
            self._prune_versions(table)
            keep, head_zversion = self._referenced(table)
            children = self._call("listing blobs", "get_children", f"{self.head_path(table)}/blobs")
            unreferenced = [b for b in children if b not in keep]
            try:
                raw, stat = self._call("reading gc marks", "get", gc_path)
                marks = codec.decode_gc(raw, gc_path)
                version: int | None = int(stat.version)
            except NoNodeError:
                marks, version = {}, None
            if len(unreferenced) > GARBAGE_SOFT_BLOBS:
                grace_ms = min(grace_ms, PRESSURE_GRACE_MS)
            due = [b for b in unreferenced if b in marks and now - marks[b] >= grace_ms]
            due_set = set(due)
            kept = {b: marks.get(b, now) for b in unreferenced if b not in due_set}
            kept = dict(sorted(kept.items(), key=lambda kv: kv[1])[:GC_MARKS_MAX])
            data = codec.encode_gc(kept)
            try:
                if version is None:
                    self._op("create", gc_path, data, acl=self.acl_at(Place.GC))
                else:
                    self._op("set", gc_path, data, version=version)
            except (BadVersionError, NodeExistsError):
                return 0  # another pass is running
            return self._delete_unless_moved(table, due, head_zversion)
        except NoAuthError:
            raise AuthError(f"ZooKeeper refused collecting garbage of {table!r}: not authorised") from None
        except (KazooException, KazooTimeoutError) as exc:
            raise StoreUnavailableError(f"metadata garbage pass on {table!r}: {type(exc).__name__}") from None

    def _collect_quietly(self, table: str) -> None:
        """A garbage pass after a commit: its failure must not fail the commit."""
        try:
            self.collect_garbage(table)
        except LineageError as exc:
            log.warning("metadata garbage pass on %s skipped: %s", table, exc.message)
