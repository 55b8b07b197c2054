"""The commit: one multi that compare-and-sets the head, creates the new
blobs the change needs (each uniquely named, invisible until referenced),
records the version and checks the floor. That single versioned ``set`` is
the atomic commit; its results are checked element by element. A change too
large for one request writes its blobs first, and the multi checks each is
still there instead."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kazoo.exceptions import BadVersionError, NoAuthError, NoNodeError, RolledBackError

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import ENTRIES, PENDING, SEGMENTS, Head, NameList
from segment_lineage.lineage.core import buckets as layout
from segment_lineage.lineage.core.acl import Place
from segment_lineage.lineage.core.errors import (
    AuthError,
    ClaimLostError,
    RefusedError,
    TableNotFoundError,
    TooLargeError,
)
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.model import Audit, Change, HistoryRecord, LineageEntry, TableState
from segment_lineage.lineage.store.contract import (
    RetryableStoreError,
    Snapshot,
    VersionConflict,
    WriteOutcomeUnknown,
)
from segment_lineage.lineage.zk.connection import ZkConnection, refused, translated
from segment_lineage.lineage.zk.store.blobs import BlobStore, Bucket, new_blob_id
from segment_lineage.lineage.zk.store.gc import MetadataGc
from segment_lineage.lineage.zk.store.heads import Loaded
from segment_lineage.lineage.zk.store.nodes import Nodes
from segment_lineage.lineage.zk.store.paths import Paths
from segment_lineage.lineage.zk.store.versions import Versions

HEAD_LIMIT = 448 * 1024  # leaves room for the blob checks in the commit multi
INLINE_MULTI_BYTES = 128 * 1024  # blobs, head and version record up to this go in the one multi
INLINE_NAMES_BYTES = 4 * 1024  # shorter name lists live inside the entry record
HISTORY_TAIL = 64  # history records kept in the head before sealing a blob
HISTORY_TAIL_BYTES = 64 * 1024  # ... or fewer, when their text makes them this large


def name_list(names: tuple[str, ...], blobs: dict[str, bytes]) -> NameList:
    """A list of segment names, inline when short, else in chunk blobs added to ``blobs``."""
    if len(codec.dumps(list(names))) <= INLINE_NAMES_BYTES:
        return NameList(names=names, chunks=(), count=len(names))
    chunk_ids: list[str] = []
    current: list[str] = []
    size = 0
    for name in names:
        if current and size + len(name) + 3 > layout.BLOB_LIMIT - 128:
            blob = new_blob_id()
            blobs[blob] = codec.encode_names(current)
            chunk_ids.append(blob)
            current, size = [], 0
        current.append(name)
        size += len(name) + 3
    if current:
        blob = new_blob_id()
        blobs[blob] = codec.encode_names(current)
        chunk_ids.append(blob)
    return NameList(names=None, chunks=tuple(chunk_ids), count=len(names))


def encode_record(kind: str, obj: Any, base: Loaded, blobs: dict[str, bytes]) -> dict[str, object]:
    """One record of a bucket; an entry reuses the name lists of ``base``
    that it still has, else writes new ones into ``blobs``."""
    if kind == SEGMENTS:
        return codec.segment_to_dict(obj)
    if kind == PENDING:
        return codec.pending_to_dict(obj)
    entry: LineageEntry = obj
    old = base.lists.get(entry.entry_id)
    src = (
        old[1] if old is not None and old[0] is entry.segments_from else name_list(entry.segments_from, blobs)
    )
    dst = old[3] if old is not None and old[2] is entry.segments_to else name_list(entry.segments_to, blobs)
    return codec.entry_to_dict(entry, src, dst)


class Commits:
    def __init__(
        self,
        zk: ZkConnection,
        paths: Paths,
        nodes: Nodes,
        blobs: BlobStore,
        versions: Versions,
        gc: MetadataGc,
        owner_path: Callable[[str, str], str],
    ) -> None:
        self.zk = zk
        self.paths = paths
        self.nodes = nodes
        self.blobs = blobs
        self.versions = versions
        self.gc = gc
        self.owner_path = owner_path  # (table, entry) -> the push's owner node

    def _buckets(
        self,
        kind: str,
        new: Mapping[str, Any],
        base: Loaded,
        blobs: dict[str, bytes],
        table: str,
        decoded: dict[str, Bucket],
    ) -> tuple[str, ...]:
        """The bucket ids of ``kind`` after the change; new buckets go into ``blobs``."""
        old_ids = base.head.buckets[kind]
        found = layout.relayout(
            f"table {table!r}: {kind} metadata",
            base.maps[kind],
            new,
            base.bucket_keys[kind],
            lambda keys: codec.encode_bucket(kind, [encode_record(kind, new[k], base, blobs) for k in keys]),
        )
        if found is None:
            return old_ids
        count = found.count
        ids = list(old_ids) if len(old_ids) == count else [""] * count
        for i, (keys, raw) in found.rewritten.items():
            blob = new_blob_id()
            blobs[blob] = raw
            ids[i] = blob
            if kind != ENTRIES:  # records stored as they are: what reading the blob would give
                decoded[blob] = Bucket(i, count, tuple((k, new[k]) for k in keys))
        return tuple(ids)

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
        loaded = base.token
        if not isinstance(loaded, Loaded):
            raise TypeError("snapshot was not read from this store")
        state = change.state
        blobs: dict[str, bytes] = {}
        decoded: dict[str, Bucket] = {}
        buckets = {
            SEGMENTS: self._buckets(SEGMENTS, state.segments, loaded, blobs, table, decoded),
            ENTRIES: self._buckets(ENTRIES, state.entries, loaded, blobs, table, decoded),
            PENDING: self._buckets(PENDING, state.pending, loaded, blobs, table, decoded),
        }
        version = loaded.head.version + 1
        record = HistoryRecord.of(version, commit_id, now_ms, change, audit)
        last, tail = loaded.head.history_last, loaded.head.history_tail
        # Sealed by count and by size: long reasons in any script never push
        # the head past its limit.
        sealed_now = bool(tail) and (
            len(tail) >= HISTORY_TAIL or codec.history_size((*tail, record)) > HISTORY_TAIL_BYTES
        )
        if sealed_now:
            blob = new_blob_id()
            blobs[blob] = codec.encode_history(tail, last)
            last, tail = blob, ()
        head = Head(
            config=state.config,
            version=version,
            commit_id=commit_id,
            buckets=buckets,
            history_last=last,
            history_tail=(*tail, record),
        )
        raw = codec.encode_head(head)
        if len(raw) > HEAD_LIMIT:
            raise TooLargeError(f"table {table!r}: head record of {len(raw)} bytes exceeds {HEAD_LIMIT}")
        # The version's own record, for time travel and rollback: its bucket
        # blobs and (a superset of) the name chunks its entries use.
        used = codec.bucket_ids(buckets) | ({last} if sealed_now else set())
        chunks = loaded.chunk_blobs() | (set(blobs) - used)
        version_record = codec.encode_lease(codec.LeaseRecord(version, buckets, tuple(sorted(chunks))))
        self.versions.ensure_folder(table)
        # A small change's blobs go in the multi itself (one round trip, and
        # a lost race leaves nothing behind); a large one's are written first.
        inline = sum(map(len, blobs.values())) + len(raw) + len(version_record) <= INLINE_MULTI_BYTES
        if not inline:
            self.blobs.write(table, blobs)
        # One multi: swap the head only if every new blob is there (written
        # first, a garbage pass may have taken those of a writer paused too long).
        txn = self.zk.transaction()
        txn.set_data(self.paths.head(table), raw, version=loaded.zversion)
        for blob, data in blobs.items():
            if inline:
                txn.create(self.paths.blob(table, blob), data, acl=self.nodes.acl_at(Place.BLOB))
            else:
                txn.check(self.paths.blob(table, blob), 0)
        txn.create(self.paths.version(table, version), version_record, acl=self.nodes.acl_at(Place.VERSION))
        if base.floor is not None:  # nobody took the floor since the read
            txn.check(self.paths.floor(table), base.floor.version)
        guard_path = self.paths.guard_node(role) if role is not None and self.nodes.policy() else None
        if guard_path is not None:  # only that role may write it: others are refused the multi
            txn.set_data(guard_path, b"", -1)
        if owner is not None:  # the push's claim stands: its session did not end since it took it
            txn.check(self.owner_path(table, owner), -1)
        failpoint("store.before-head-swap")
        with translated(
            "head swap",
            refused=f"ZooKeeper refused writing table {table!r}: not authorised",
            failure=WriteOutcomeUnknown,
        ):
            results = self.zk.commit(txn)
        head_result = results[0]
        claim: object = None
        if owner is not None:  # failed on its own (the ops after a failed one fail as "inconsistent")
            claim, results = results[-1], results[:-1]
        claim_lost = isinstance(claim, NoNodeError)
        guard: object = None
        if guard_path is not None:
            guard, results = results[-1], results[:-1]
        floor_taken = base.floor is not None and refused(results[-1])
        checks = results[1:-1] if base.floor is not None else results[1:]
        failed = [r for r in checks if refused(r)]
        if not inline and (
            isinstance(head_result, (BadVersionError, NoNodeError, NoAuthError))
            or failed
            or floor_taken
            or claim_lost
            or refused(guard)
        ):
            # The multi was refused as a whole: no head, version or lease
            # references this attempt's blobs. Take them away now rather than
            # leave them to the sweep: under contention a big commit's
            # attempts would otherwise fill the server's memory.
            self.blobs.discard(table, blobs)
        if isinstance(guard, NoAuthError):
            raise AuthError(
                f"ZooKeeper refused this change of table {table!r}: it needs the {role} role "
                f"(identity {(self.nodes.identity or 'anonymous').partition(':')[0]!r} is "
                f"{self.nodes.role() or 'unknown'}); nothing was changed"
            )
        if isinstance(guard, NoNodeError):
            raise RefusedError(
                f"the {role} role's node {guard_path} is missing; nothing was changed",
                table=table,
                remedy="run 'lineage acl apply' as an admin (once, for stores made before it)",
            )
        if claim_lost and owner is not None:
            raise ClaimLostError(table, owner)
        if isinstance(head_result, BadVersionError):
            raise VersionConflict(f"table {table} changed since version {loaded.head.version}")
        if floor_taken and not failed and isinstance(head_result, RolledBackError):
            raise VersionConflict(f"table {table}: a writer took the floor since v{loaded.head.version}")
        if isinstance(head_result, NoNodeError):
            raise TableNotFoundError(table)
        if isinstance(head_result, NoAuthError) or any(isinstance(r, NoAuthError) for r in (*failed, claim)):
            raise AuthError(f"ZooKeeper refused writing table {table!r}: not authorised")
        if failed and inline:  # a create of this multi failed: nothing was applied
            raise RetryableStoreError(f"creating a new blob failed ({type(failed[0]).__name__})")
        if failed:
            raise RetryableStoreError(f"a new blob vanished before the commit ({type(failed[0]).__name__})")
        if isinstance(head_result, Exception):
            raise WriteOutcomeUnknown(f"head swap: {type(head_result).__name__}")
        # The writer's next read needs no decoding of the buckets it wrote.
        for blob, bucket in decoded.items():
            self.blobs.remember(blob, bucket)
        if sealed_now and self.nodes.may_sweep():
            self.gc.collect_quietly(table)
        return TableState(state.config, version, state.segments, state.entries, state.pending)
