"""Reading a table: its head, then exactly the version that head references.

A read sends the floor's read with the head's (one round trip), then builds
the state from the head's bucket blobs and name chunks: the entries at once,
the segments and pending deletions as bucket maps that fetch and decode a
bucket when a key of it is first wanted (a rollback on a table of 100,000
segments looks at the few buckets that changed). Versions are immutable, so
what was built is kept: the last version read per table, each kind's bucket
map (shared by versions with the same blobs), and the last few states
rebuilt (small LRU caches from cachetools).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from cachetools import LRUCache
from kazoo.exceptions import NoNodeError

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import ENTRIES, KINDS, PENDING, SEGMENTS, Head, NameList, StoredEntry
from segment_lineage.lineage.core.bucket_maps import BucketMap, bucket_of, frozen, placed
from segment_lineage.lineage.core.errors import (
    CorruptRecordError,
    LineageError,
    StoreUnavailableError,
    TableNotFoundError,
)
from segment_lineage.lineage.core.model import LineageEntry, TableState
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.store.contract import Floor, ReadAgainError, Snapshot
from segment_lineage.lineage.zk.connection import ZkConnection
from segment_lineage.lineage.zk.store.blobs import BlobGone, BlobStore, Bucket, Decode
from segment_lineage.lineage.zk.store.loaded import (
    BucketKeys,
    Loaded,
    chunk_ids,
    chunks_of,
    decode_chunk,
    decoded_pairs,
    dispatch,
)
from segment_lineage.lineage.zk.store.locks import Floors, Queues
from segment_lineage.lineage.zk.store.paths import Paths

READ_ATTEMPTS = 5
STATES_CACHED = 8  # rebuilt versions kept in memory
MAPS_CACHED = 12  # per-kind bucket maps kept in memory, shared by versions with the same blobs
PRELOAD_BUCKETS = 32  # differing buckets of a kind fetched ahead (more: left to the comparison)


def _differing(heads: Sequence[Head], kind: str) -> list[int]:
    """The places where the versions ``heads`` hold different ``kind``
    buckets; none when they are laid out differently (compared as whole
    maps then) or differ in more than PRELOAD_BUCKETS places."""
    columns = [h.buckets[kind] for h in heads]
    if len({len(ids) for ids in columns}) != 1:
        return []
    places = [i for i, ids in enumerate(zip(*columns, strict=True)) if len(set(ids)) > 1]
    return places if len(places) <= PRELOAD_BUCKETS else []


# A table's answers to a commit read: its head (decoded, znode version, bytes), floor and queue.
_Answers = tuple[Head, int, bytes, Floor | None, tuple[str, ...]]


class Heads:
    def __init__(
        self, zk: ZkConnection, paths: Paths, blobs: BlobStore, floors: Floors, queues: Queues
    ) -> None:
        self.zk = zk
        self.paths = paths
        self.blobs = blobs
        self.floors = floors
        self.queues = queues
        self._lock = threading.Lock()
        self._last: dict[str, tuple[Loaded, Snapshot]] = {}  # per table: the last version read
        self._states: LRUCache[tuple[object, ...], TableState] = LRUCache(maxsize=STATES_CACHED)
        self._maps: LRUCache[tuple[str, str, tuple[str, ...]], BucketMap[Any]] = LRUCache(maxsize=MAPS_CACHED)

    def read_head(self, table: str) -> tuple[Head, int]:
        """The head and its znode version. TableNotFoundError, also while it is being dropped."""
        head, zversion, _ = self.read_head_raw(table)
        return head, zversion

    def read_head_raw(self, table: str, behind: Callable[[], None] | None = None) -> tuple[Head, int, bytes]:
        """``read_head``, and the head record's bytes as read (``behind``: as ZkConnection.get's)."""
        path = self.paths.head(table)
        try:
            raw, stat = self.zk.get(path, doing=f"reading table {table!r}", behind=behind)
        except NoNodeError:
            raise TableNotFoundError(table) from None
        head, zversion = self._head(table, raw, int(stat.version))
        return head, zversion, raw

    def _head(self, table: str, raw: bytes, zversion: int) -> tuple[Head, int]:
        path = self.paths.head(table)
        last = self._last.get(table)
        if last is not None and last[0].zversion == zversion and last[0].raw == raw:
            return last[0].head, zversion  # unchanged: decoded already
        head = codec.decode_head(raw, path)
        if head.dropping:
            raise TableNotFoundError(table, dropping=True)
        if head.config.name != table:
            raise CorruptRecordError(path, f"head names table {head.config.name!r}")
        return head, zversion

    def last(self, table: str, head: Head, zversion: int) -> Snapshot | None:
        """The last snapshot read of ``table``, if it is of this very head."""
        last = self._last.get(table)
        if last is not None and last[0].zversion == zversion and last[0].head == head:
            return last[1]
        return None

    def read(self, table: str, *, whole: bool = False) -> Snapshot:
        return self.read_at(table, commit=False, whole=whole)[0]

    def read_at(self, table: str, *, commit: bool, whole: bool = False) -> tuple[Snapshot, int | None]:
        """One version of ``table``; for a commit attempt also its queue and
        the store's clock, read right behind the head (the mtime of a ``set``
        on the clock node; None when the node is missing). Everything goes
        out together: one round trip. ``whole``: a version not built yet has
        all its buckets fetched together (``preload``), one more round trip
        in all, where loading kind by kind takes one each."""
        check_table_name(table)
        path = self.paths.head(table)
        last_gone = ""
        for _ in range(READ_ATTEMPTS):
            pending_floor = self.floors.send_read(table)  # with the head: one round trip
            sent: list[Any] = []

            def clock_behind(sent: list[Any] = sent) -> None:
                if commit:
                    sent[:] = [self.queues.send_read(table), self.zk.send_set(self.paths.clock, b"")]

            try:
                raw, stat = self.zk.get(path, doing=f"reading table {table!r}", behind=clock_behind)
            except NoNodeError:
                raise TableNotFoundError(table) from None
            head, zversion = self._head(table, raw, int(stat.version))
            try:
                floor = self.floors.answer(pending_floor, table)
            except StoreUnavailableError:
                # Sent before the head's read, on a connection that was lost and
                # made again (the head's read was retried on the new one): ask again.
                floor = self.floors.answer(self.floors.send_read(table), table)
            queue = self.queues.answer(sent[0], table) if sent else ()
            now = self._clock(sent[1]) if sent else None
            if whole and self.last(table, head, zversion) is None:
                self.preload({table: [head]}, whole=True)
            try:
                return replace(self._snapshot(table, head, zversion, raw, floor), queue=queue), now
            except BlobGone as gone:
                last_gone = str(gone)
        raise CorruptRecordError(
            self.paths.head(table), f"blob {last_gone} referenced by the head is missing"
        )

    def send_read(self, table: str) -> tuple[Any, Any]:
        """Send :meth:`read`'s requests (the floor's, then the head's) now,
        behind another request (one round trip for all); :meth:`answer_read`
        awaits them."""
        return self.floors.send_read(table), self.zk.send_get(self.paths.head(table))

    def answer_read(self, table: str, sent: tuple[Any, Any]) -> Snapshot:
        """The version :meth:`send_read`'s requests read; read again, with
        :meth:`read`'s retries, when their answers were lost (a connection
        made again) or the version's blobs went meanwhile."""
        pending_floor, pending_head = sent
        try:
            head, zversion, raw = self._answer_head(table, pending_head)
            return self._snapshot(table, head, zversion, raw, self.floors.answer(pending_floor, table))
        except (StoreUnavailableError, BlobGone):
            return self.read(table)

    def _answer_head(self, table: str, pending: Any) -> tuple[Head, int, bytes]:
        """The head a pipelined read of ``table`` got: decoded, its znode version, its bytes."""
        with self.zk.reading(f"reading table {table!r}"):
            try:
                raw, stat = self.zk.answer(pending)
            except NoNodeError:
                raise TableNotFoundError(table) from None
        head, zversion = self._head(table, raw, int(stat.version))
        return head, zversion, raw

    def send_commit_extras(self, table: str) -> list[Any]:
        """Send a commit attempt's reads beside the head's (floor, queue, clock): :meth:`commit_read`."""
        floors, queues = self.floors, self.queues
        return [floors.send_read(table), queues.send_read(table), self.zk.send_set(self.paths.clock, b"")]

    def commit_read(
        self, table: str, head: Head, zversion: int, raw: bytes, extras: list[Any]
    ) -> tuple[Snapshot, int | None]:
        """A commit attempt's read, of a head read otherwise with
        :meth:`send_commit_extras` behind it (as read_at(commit=True) gives)."""
        floor = self.floors.answer(extras[0], table)
        queue = self.queues.answer(extras[1], table)
        now = self._clock(extras[2])
        return replace(self._snapshot(table, head, zversion, raw, floor), queue=queue), now

    def _send_commit_read(self, table: str) -> tuple[str, Any, Any, Any]:
        """Send a commit attempt's reads of ``table``: its floor, head and queue (read_at's order)."""
        floor = self.floors.send_read(table)
        return table, floor, self.zk.send_get(self.paths.head(table)), self.queues.send_read(table)

    def _snapshot(self, table: str, head: Head, zversion: int, raw: bytes, floor: Floor | None) -> Snapshot:
        """The version ``head`` references, with ``floor``: the last one read
        when the head did not move, else built (BlobGone: read again)."""
        last = self.last(table, head, zversion)
        if last is not None:  # the head did not move: the same immutable version
            return replace(last, floor=floor)
        loaded = self.load(table, head, zversion, raw)
        state = loaded.state()
        snapshot = Snapshot(state, loaded, floor, recent=tuple(reversed(head.history_tail)))
        self._last[table] = (loaded, snapshot)
        self.remember_state(table, head.buckets, state)
        return snapshot

    def read_many(self, tables: Sequence[str]) -> list[tuple[Snapshot, int | None]]:
        """``read_at(table, commit=True)`` of each of ``tables``, their
        requests sent together: every head, floor and queue, then the clock
        once, in one round trip (a set commit's read). Versions not built
        yet are then loaded table by table. A table whose answers did not
        come (a connection lost meanwhile) or whose blobs went is read
        again alone, with read_at's retries."""
        for table in tables:
            check_table_name(table)
        self.zk.check_answering()
        sent = [self._send_commit_read(table) for table in tables]
        clock = self.zk.send_set(self.paths.clock, b"")
        answered = [(table, self._answer_commit_read(table, *pending)) for table, *pending in sent]
        # The versions not built yet, fetched whole and together: a set
        # commit checks each whole before its write.
        self.preload(
            {t: [a[0]] for t, a in answered if a is not None and self.last(t, a[0], a[1]) is None},
            whole=True,
        )
        out = [self._built_or_read(table, got) for table, got in answered]
        try:
            now = self._clock(clock)
        except StoreUnavailableError:
            now = None  # the caller asks the clock again
        return [(snap, now if n is None else n) for snap, n in out]

    def _answer_commit_read(
        self, table: str, pending_floor: Any, pending_head: Any, pending_queue: Any
    ) -> _Answers | None:
        """A table's answers to a commit read; None when they did not come
        (a connection lost meanwhile: read again alone)."""
        try:
            head, zversion, raw = self._answer_head(table, pending_head)
            floor = self.floors.answer(pending_floor, table)
            return head, zversion, raw, floor, self.queues.answer(pending_queue, table)
        except StoreUnavailableError:
            return None

    def _built_or_read(self, table: str, got: _Answers | None) -> tuple[Snapshot, int | None]:
        """The snapshot a commit read's answers give, or the table read again
        alone (no answers, or its blobs went: the table moved on)."""
        if got is not None:
            head, zversion, raw, floor, queue = got
            with contextlib.suppress(BlobGone):
                return replace(self._snapshot(table, head, zversion, raw, floor), queue=queue), None
        return self.read_at(table, commit=True)

    def _clock(self, pending: Any) -> int | None:
        with self.zk.reading("clock read"):
            try:
                stat = self.zk.answer(pending)
            except NoNodeError:
                return None
        return int(stat.mtime)

    def load(self, table: str, head: Head, zversion: int, raw: bytes = b"") -> Loaded:
        """The version ``head`` references. BlobGone when one of its blobs was
        collected. Entries are loaded at once (their name lists resolved);
        segments and pending deletions load bucket by bucket, when wanted."""
        maps: dict[str, Any] = {}
        bucket_keys: dict[str, Sequence[Sequence[str]]] = {}
        for kind in KINDS:
            ids = head.buckets[kind]
            if len(set(ids)) != len(ids):
                raise CorruptRecordError(self.paths.head(table), f"a {kind} bucket blob is listed twice")
            records = self._bucket_map(table, kind, ids)
            maps[kind] = records
            bucket_keys[kind] = BucketKeys(records)
        entries_map: BucketMap[StoredEntry] = maps[ENTRIES]
        try:
            stored: dict[str, StoredEntry] = dict(entries_map.items())
        except ReadAgainError as exc:
            raise BlobGone(str(exc.blob)) from None
        chunks = self.blobs.decoded(table, chunk_ids(stored.values()), decode_chunk)
        entries: dict[str, LineageEntry] = {}
        lists: dict[str, tuple[tuple[str, ...], NameList, tuple[str, ...], NameList]] = {}
        for entry in sorted(stored.values(), key=lambda e: (e.created_ms, e.entry_id)):
            src = self._names(entry.src, chunks, table, entry.entry_id)
            dst = self._names(entry.dst, chunks, table, entry.entry_id)
            entries[entry.entry_id] = entry.resolve(src, dst)
            lists[entry.entry_id] = (src, entry.src, dst, entry.dst)
        maps[ENTRIES] = frozen(entries)
        return Loaded(head, zversion, maps, bucket_keys, lists, raw)

    def _decoder(self, kind: str, ids: tuple[str, ...]) -> Decode:
        """How a bucket blob of the map ``ids`` is decoded. Placement and
        duplicates are checked once, when the blob is decoded; the cached
        result then serves every later read."""
        index_of = {blob: i for i, blob in enumerate(ids)}

        def decode(blob: str, raw: bytes, where: str) -> Bucket:
            index, count = index_of[blob], len(index_of)
            keys, pairs = decoded_pairs(kind, codec.decode_bucket(raw, kind, where), where)
            if len(set(keys)) != len(keys) or not placed(keys, index, count):
                seen: set[str] = set()
                for key in keys:  # which, for the error
                    if key in seen:
                        raise CorruptRecordError(where, f"duplicate {kind} key {key!r}")
                    if bucket_of(key, count) != index:
                        raise CorruptRecordError(where, f"{key!r} in the wrong bucket")
                    seen.add(key)
            return Bucket(index, count, pairs)

        return decode

    def preload(self, versions: Mapping[str, Sequence[Head]], *, whole: bool = False) -> None:
        """Fetch together what loading the versions ``versions[table]`` of
        each table and comparing them will fetch: every entries bucket, the
        segment and pending buckets where a table's versions differ (when
        few do; ``whole``: every one), then the entries' name chunks. Two
        round trips in all (a rollback wants its target's and the head's, a
        set commit every table's), where loading them one by one takes two
        each. Best effort: a blob gone is left to the load."""
        wanted = {table: self._wanted(heads, whole) for table, heads in versions.items()}
        with contextlib.suppress(StoreUnavailableError):  # what is missing, the loads fetch with retries
            asked = [(table, list(w), dispatch(w)) for table, w in wanted.items()]
            found = self.blobs.decoded_many(asked, partial=True)
            chunks = [sorted(chunks_of(blobs)) for blobs in found]
            self.blobs.decoded_many(
                [(t, c, decode_chunk) for t, c in zip(wanted, chunks, strict=True)], partial=True
            )

    def _wanted(self, heads: Sequence[Head], whole: bool) -> dict[str, Decode]:
        """The blobs ``preload`` fetches for versions ``heads`` of one table, each with its decoder."""
        wanted: dict[str, Decode] = {}
        for kind in KINDS:
            places = _differing(heads, kind)
            for head in heads:
                ids = head.buckets[kind]
                decode = self._decoder(kind, ids)
                for i in range(len(ids)) if whole or kind == ENTRIES else places:
                    wanted.setdefault(ids[i], decode)
        return wanted

    def keep(self, table: str, head: Head, zversion: int, raw: bytes) -> None:
        """Keep ``head`` as the table's last version read, as a read does (a
        commit's read right after finds it built). Best effort."""
        # A head moved on and collected, a connection lost, a blob missing:
        # the version asked was built already, and the next read reads anew.
        with contextlib.suppress(BlobGone, LineageError):
            self._snapshot(table, head, zversion, raw, None)

    def written(self, table: str, buckets: Mapping[str, tuple[str, ...]], state: TableState) -> None:
        """A commit this store made: its version's segment and pending maps
        hold what the change's own maps hold, so look-ups built for those
        serve them (``same_as``): a writer's next register on a big table
        costs what it touches, not a pass over the table. The copies are
        also their whole-map dicts (``BucketMap.known``)."""
        for kind, records in ((SEGMENTS, state.segments), (PENDING, state.pending)):
            found = self._bucket_map(table, kind, tuple(buckets[kind]))
            if found is not records and found.same_as is None and not found.indexes:
                found.same_as = records
                if isinstance(records, dict):
                    found.known(records)

    def _bucket_map(self, table: str, kind: str, ids: tuple[str, ...]) -> BucketMap[Any]:
        """A kind's records in the bucket blobs ``ids``, loaded when wanted.
        Versions that share the blobs (a rollback leaves the segments alone)
        share the map, which nobody mutates: comparing them costs nothing."""
        key = (table, kind, ids)
        with self._lock:
            found = self._maps.get(key)
        if found is not None:
            return found
        decode = self._decoder(kind, ids)

        def load(indexes: Sequence[int]) -> dict[int, Sequence[tuple[str, Any]]]:
            try:
                blobs: dict[str, Bucket] = self.blobs.decoded(table, [ids[i] for i in indexes], decode)
            except BlobGone as gone:
                if str(gone) in self.read_head(table)[0].buckets[kind]:
                    raise CorruptRecordError(
                        self.paths.head(table), f"blob {gone} referenced by the head is missing"
                    ) from None
                raise ReadAgainError(
                    f"table {table!r}: {kind} metadata blob {gone} of a version read earlier was "
                    "collected since (the table moved on); read the table again",
                    blob=str(gone),
                ) from gone
            out: dict[int, Sequence[tuple[str, Any]]] = {}
            for i in indexes:
                bucket = blobs[ids[i]]
                if (bucket.index, bucket.count) != (i, len(ids)):
                    raise CorruptRecordError(
                        self.paths.blob(table, ids[i]), "bucket blob listed at another place"
                    )
                out[i] = bucket.pairs
            return out

        records: BucketMap[Any] = BucketMap(ids, load)
        with self._lock:
            self._maps[key] = records
        return records

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
                self.paths.head(table),
                f"entry {entry}: expected {names.count} names, found {len(out)}",
            )
        return out

    # ---- rebuilt versions, kept by content ---------------------------------------

    def remember_state(self, table: str, buckets: Mapping[str, tuple[str, ...]], state: TableState) -> None:
        """Versions are immutable: keep the last few rebuilt, keyed by content."""
        key = (table, state.version, tuple(tuple(buckets[k]) for k in KINDS))
        with self._lock:
            self._states[key] = state

    def remembered_state(
        self, table: str, version: int, buckets: Mapping[str, tuple[str, ...]]
    ) -> TableState | None:
        key = (table, version, tuple(tuple(buckets[k]) for k in KINDS))
        with self._lock:
            return self._states.get(key)
