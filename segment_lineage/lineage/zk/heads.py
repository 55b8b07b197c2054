"""Reading a table's head and the one version it references."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kazoo.exceptions import (
    NoNodeError,
)

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import ENTRIES, KINDS, PENDING, SEGMENTS, Head, NameList, StoredEntry
from segment_lineage.lineage.core.buckets import bucket_of
from segment_lineage.lineage.core.errors import (
    CorruptRecordError,
    TableNotFoundError,
)
from segment_lineage.lineage.core.model import (
    LineageEntry,
    TableState,
)
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.store.contract import (
    Snapshot,
)
from segment_lineage.lineage.zk.blobs import _BlobGone, _Bucket

log = logging.getLogger(__name__)

READ_ATTEMPTS = 5


STATES_CACHED = 8  # rebuilt versions kept in memory
MERGED_CACHED = 12  # merged per-kind maps kept in memory, shared by versions with the same blobs


@dataclass
class _Loaded:
    """The store's token for one read: what the state was built from."""

    head: Head
    zversion: int
    maps: dict[str, dict[str, Any]]  # kind -> key -> object (shared with the state)
    bucket_keys: dict[str, list[list[str]]]  # kind -> bucket -> keys
    lists: dict[str, tuple[tuple[str, ...], NameList, tuple[str, ...], NameList]]

    def chunk_blobs(self) -> set[str]:
        """The name-list chunks the entries of this version use."""
        out: set[str] = set()
        for _, src_list, _, dst_list in self.lists.values():
            out.update(src_list.chunks)
            out.update(dst_list.chunks)
        return out


def _key(kind: str, obj: Any) -> str:
    if kind == SEGMENTS:
        return str(obj.name)
    if kind == ENTRIES:
        return str(obj.entry_id)
    return str(obj.location)


class _Heads:
    # ---- reading -------------------------------------------------------------

    def _read_head(self, table: str) -> tuple[Head, int]:
        path = self.head_path(table)
        try:
            raw, stat = self._call(f"reading table {table!r}", "get", path)
        except NoNodeError:
            raise TableNotFoundError(table) from None
        head = codec.decode_head(raw, path)
        if head.dropping:
            raise TableNotFoundError(table)
        if head.config.name != table:
            raise CorruptRecordError(path, f"head names table {head.config.name!r}")
        return head, int(stat.version)

    def read(self, table: str) -> Snapshot:
        check_table_name(table)
        last_gone = ""
        for _ in range(READ_ATTEMPTS):
            pending_floor = self.client.get_async(self._floor_path(table))  # with the head: one round trip
            head, zversion = self._read_head(table)
            floor = self._floor(pending_floor, table)
            last = self._last.get(table)
            if last is not None and last[0].zversion == zversion and last[0].head == head:
                return replace(last[1], floor=floor)  # the head did not move: the same immutable version
            try:
                loaded = self._load(table, head, zversion)
            except _BlobGone as gone:
                last_gone = str(gone)
                continue
            state = TableState(
                config=head.config,
                version=head.version,
                segments=loaded.maps[SEGMENTS],
                entries=loaded.maps[ENTRIES],
                pending=loaded.maps[PENDING],
            )
            snapshot = Snapshot(state, loaded, floor)
            with self._cache_lock:
                size = len(state.segments) + len(state.entries) + len(state.pending)
                self._largest_table = max(self._largest_table, size)
            self._last[table] = (loaded, snapshot)
            self._remember_state(table, head.buckets, state)
            return snapshot
        raise CorruptRecordError(self.head_path(table), f"blob {last_gone} referenced by the head is missing")

    def _load(self, table: str, head: Head, zversion: int) -> _Loaded:
        maps: dict[str, dict[str, Any]] = {}
        bucket_keys: dict[str, list[list[str]]] = {}
        for kind in KINDS:
            ids = head.buckets[kind]
            if len(set(ids)) != len(ids):
                raise CorruptRecordError(self.head_path(table), f"a {kind} bucket blob is listed twice")
            index_of = {blob: i for i, blob in enumerate(ids)}

            def decode(
                blob: str,
                raw: bytes,
                where: str,
                kind: str = kind,
                index_of: dict[str, int] = index_of,
            ) -> _Bucket:
                # Placement and duplicates are checked once, when the blob is
                # decoded; the cached result then serves every later read.
                index, count = index_of[blob], len(index_of)
                pairs = []
                seen: set[str] = set()
                for obj in codec.decode_records(kind, codec.decode_bucket(raw, kind, where), where):
                    key = _key(kind, obj)
                    if key in seen:
                        raise CorruptRecordError(where, f"duplicate {kind} key {key!r}")
                    if bucket_of(key, count) != index:
                        raise CorruptRecordError(where, f"{key!r} in the wrong bucket")
                    seen.add(key)
                    pairs.append((key, obj))
                return _Bucket(index, count, tuple(pairs))

            reused = self._merged_cached(table, kind, ids)
            if reused is not None:
                maps[kind], bucket_keys[kind] = reused
                continue
            blobs: dict[str, _Bucket] = self._decoded(table, ids, decode)
            merged: dict[str, Any] = {}
            keys: list[list[str]] = []
            for index, blob in enumerate(ids):
                bucket = blobs[blob]
                if (bucket.index, bucket.count) != (index, len(ids)):
                    raise CorruptRecordError(
                        self.blob_path(table, blob), "bucket blob listed at another place"
                    )
                merged.update(bucket.pairs)
                keys.append([key for key, _ in bucket.pairs])
            maps[kind] = merged
            bucket_keys[kind] = keys
            self._remember_merged(table, kind, ids, merged, keys)

        stored: dict[str, StoredEntry] = maps[ENTRIES]
        chunk_ids = [c for e in stored.values() for c in (*e.src.chunks, *e.dst.chunks)]
        chunks = self._decoded(
            table, chunk_ids, lambda _blob, raw, where: tuple(codec.decode_names(raw, where))
        )
        entries: dict[str, LineageEntry] = {}
        lists: dict[str, tuple[tuple[str, ...], NameList, tuple[str, ...], NameList]] = {}
        for entry in sorted(stored.values(), key=lambda e: (e.created_ms, e.entry_id)):
            src = self._names(entry.src, chunks, table, entry.entry_id)
            dst = self._names(entry.dst, chunks, table, entry.entry_id)
            entries[entry.entry_id] = entry.resolve(src, dst)
            lists[entry.entry_id] = (src, entry.src, dst, entry.dst)
        maps[ENTRIES] = entries
        return _Loaded(head, zversion, maps, bucket_keys, lists)

    def _merged_cached(
        self, table: str, kind: str, ids: tuple[str, ...]
    ) -> tuple[dict[str, Any], list[list[str]]] | None:
        """A kind's merged map built before from the same bucket blobs: versions
        that share them (a rollback leaves the segments alone) share the map,
        which nobody mutates, so neither reading nor diffing them is linear."""
        with self._cache_lock:
            found = self._merged.get((table, kind, ids))
            if found is not None:
                self._merged.move_to_end((table, kind, ids))
            return found

    def _remember_merged(
        self, table: str, kind: str, ids: tuple[str, ...], merged: dict[str, Any], keys: list[list[str]]
    ) -> None:
        with self._cache_lock:
            self._merged[(table, kind, ids)] = (merged, keys)
            while len(self._merged) > MERGED_CACHED:
                self._merged.popitem(last=False)

    def _names(
        self, names: NameList, chunks: Mapping[str, tuple[str, ...]], table: str, entry: str
    ) -> tuple[str, ...]:
        if names.names is not None:
            return names.names
        out: tuple[str, ...] = ()
        for chunk in names.chunks:
            out += chunks[chunk]
        if len(out) != names.count:
            raise CorruptRecordError(
                self.head_path(table),
                f"entry {entry}: expected {names.count} names, found {len(out)}",
            )
        return out
