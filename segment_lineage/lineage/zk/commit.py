"""The commit: new blobs first, then one multi that compare-and-sets the head."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NoAuthError,
    NoNodeError,
    RolledBackError,
)
from kazoo.handlers.threading import KazooTimeoutError

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import ENTRIES, PENDING, SEGMENTS, Head, NameList
from segment_lineage.lineage.core.acl import (
    Place,
)
from segment_lineage.lineage.core.buckets import BLOB_LIMIT, MAX_BUCKETS, bucket_limit, bucket_of
from segment_lineage.lineage.core.errors import (
    AuthError,
    TableNotFoundError,
    TooLargeError,
)
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.model import (
    Audit,
    Change,
    HistoryRecord,
    LineageEntry,
    TableState,
)
from segment_lineage.lineage.store.contract import (
    RetryableStoreError,
    Snapshot,
    VersionConflict,
    WriteOutcomeUnknown,
)
from segment_lineage.lineage.zk.blobs import _blob_id, _Bucket
from segment_lineage.lineage.zk.connection import _refused
from segment_lineage.lineage.zk.heads import _Loaded

log = logging.getLogger(__name__)

HEAD_LIMIT = 448 * 1024  # leaves room for the blob checks in the commit multi

INLINE_NAMES_BYTES = 4 * 1024  # shorter name lists live inside the entry record
HISTORY_TAIL = 64  # history records kept in the head before sealing a blob
HISTORY_TAIL_BYTES = 64 * 1024  # ... or fewer, when their text makes them this large


class _Commit:
    # ---- writing ---------------------------------------------------------------

    def _name_list(self, names: tuple[str, ...], blobs: dict[str, bytes]) -> NameList:
        if len(codec.dumps(list(names))) <= INLINE_NAMES_BYTES:
            return NameList(names=names, chunks=(), count=len(names))
        chunk_ids: list[str] = []
        current: list[str] = []
        size = 0
        for name in names:
            if current and size + len(name) + 3 > BLOB_LIMIT - 128:
                blob = _blob_id()
                blobs[blob] = codec.encode_names(current)
                chunk_ids.append(blob)
                current, size = [], 0
            current.append(name)
            size += len(name) + 3
        if current:
            blob = _blob_id()
            blobs[blob] = codec.encode_names(current)
            chunk_ids.append(blob)
        return NameList(names=None, chunks=tuple(chunk_ids), count=len(names))

    def _encode(self, kind: str, obj: Any, base: _Loaded, blobs: dict[str, bytes]) -> dict[str, object]:
        if kind == SEGMENTS:
            return codec.segment_to_dict(obj)
        if kind == PENDING:
            return codec.pending_to_dict(obj)
        entry: LineageEntry = obj
        old = base.lists.get(entry.entry_id)
        if old is not None and old[0] is entry.segments_from:
            src = old[1]
        else:
            src = self._name_list(entry.segments_from, blobs)
        if old is not None and old[2] is entry.segments_to:
            dst = old[3]
        else:
            dst = self._name_list(entry.segments_to, blobs)
        return codec.entry_to_dict(entry, src, dst)

    def _buckets(
        self,
        kind: str,
        new: Mapping[str, Any],
        base: _Loaded,
        blobs: dict[str, bytes],
        table: str,
        decoded: dict[str, _Bucket],
    ) -> tuple[str, ...]:
        old = base.maps[kind]
        old_ids = base.head.buckets[kind]
        if new is old:  # untouched by the change (a rollback's segments, say)
            return old_ids
        count = len(old_ids)
        dirty: set[int] = set()
        for key, obj in new.items():
            if old.get(key) is not obj:
                dirty.add(bucket_of(key, count))
        for key in old:
            if key not in new:
                dirty.add(bucket_of(key, count))
        if not dirty:
            return old_ids
        layout: list[list[str]] | None = None
        while True:
            if layout is None:
                keys_of = {i: [k for k in base.bucket_keys[kind][i] if k in new] for i in dirty}
                for key in new:
                    if key not in old:
                        i = bucket_of(key, count)
                        keys_of[i].append(key)
            else:
                keys_of = dict(enumerate(layout))
            encoded: dict[int, bytes] = {}
            too_big = False
            for i, keys in keys_of.items():
                raw = codec.encode_bucket(kind, [self._encode(kind, new[k], base, blobs) for k in keys])
                if len(raw) > BLOB_LIMIT or (len(raw) > bucket_limit(count) and len(keys) > 1):
                    too_big = True
                    break
                encoded[i] = raw
            if not too_big:
                break
            count *= 2
            if count > MAX_BUCKETS:
                raise TooLargeError(
                    f"table {table!r}: {kind} metadata exceeds {MAX_BUCKETS} buckets of {BLOB_LIMIT} bytes"
                )
            layout = [[] for _ in range(count)]
            for key in new:
                layout[bucket_of(key, count)].append(key)
            dirty = set(range(count))
        ids = list(old_ids) if len(old_ids) == count else [""] * count
        for i, raw in encoded.items():
            blob = _blob_id()
            blobs[blob] = raw
            ids[i] = blob
            if kind != ENTRIES:  # records stored as they are: what reading the blob would give
                decoded[blob] = _Bucket(i, count, tuple((k, new[k]) for k in keys_of[i]))
        return tuple(ids)

    def write(
        self, table: str, base: Snapshot, change: Change, audit: Audit, commit_id: str, now_ms: int
    ) -> TableState:
        loaded = base.token
        if not isinstance(loaded, _Loaded):
            raise TypeError("snapshot was not read from this store")
        state = change.state
        blobs: dict[str, bytes] = {}
        decoded: dict[str, _Bucket] = {}
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
            blob = _blob_id()
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
        self._ensure_versions(table)
        self._write_blobs(table, blobs)
        # One multi: swap the head only if every new blob is still there (a
        # garbage pass may have taken the blobs of a writer paused too long).
        txn = self.client.transaction()
        txn.set_data(self.head_path(table), raw, version=loaded.zversion)
        for blob in blobs:
            txn.check(self.blob_path(table, blob), 0)
        txn.create(self.version_path(table, version), version_record, acl=self.acl_at(Place.VERSION))
        if base.floor is not None:  # nobody took the floor since the read
            txn.check(self._floor_path(table), base.floor.version)
        failpoint("store.before-head-swap")
        try:
            results = self._commit(txn)
        except NoAuthError:
            raise AuthError(f"ZooKeeper refused writing table {table!r}: not authorised") from None
        except (KazooException, KazooTimeoutError) as exc:
            raise WriteOutcomeUnknown(f"head swap: {type(exc).__name__}") from None
        head_result = results[0]
        floor_taken = base.floor is not None and _refused(results[-1])
        checks = results[1:-1] if base.floor is not None else results[1:]
        failed = [r for r in checks if _refused(r)]
        if isinstance(head_result, (BadVersionError, NoNodeError, NoAuthError)) or failed or floor_taken:
            # The multi was refused as a whole: no head, version or lease
            # references this attempt's blobs. Take them away now rather than
            # leave them to the sweep: under contention a big commit's
            # attempts would otherwise fill the server's memory.
            self._discard_blobs(table, blobs)
        if isinstance(head_result, BadVersionError):
            raise VersionConflict(f"table {table} changed since version {loaded.head.version}")
        if floor_taken and not failed and isinstance(head_result, RolledBackError):
            raise VersionConflict(f"table {table}: a writer took the floor since v{loaded.head.version}")
        if isinstance(head_result, NoNodeError):
            raise TableNotFoundError(table)
        if isinstance(head_result, NoAuthError):
            raise AuthError(f"ZooKeeper refused writing table {table!r}: not authorised")
        if failed:
            raise RetryableStoreError(f"a new blob vanished before the commit ({type(failed[0]).__name__})")
        if isinstance(head_result, Exception):
            raise WriteOutcomeUnknown(f"head swap: {type(head_result).__name__}")
        # The writer's next read needs no decoding of the buckets it wrote.
        for blob, bucket in decoded.items():
            self._remember(blob, bucket)
        if sealed_now and self.may_sweep():
            self._collect_quietly(table)
        return TableState(state.config, version, state.segments, state.entries, state.pending)
