"""Immutable blobs: written before the head that references them, fetched in
pipelined batches, and decoded once: one bounded cache (an LRU, weighed by
records) keeps them by id, since a blob never changes."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache
from kazoo.exceptions import NodeExistsError, NoNodeError

from segment_lineage.lineage.core.acl import Place
from segment_lineage.lineage.core.errors import TableNotFoundError, TooLargeError
from segment_lineage.lineage.store.contract import RetryableStoreError
from segment_lineage.lineage.zk.connection import UNAVAILABLE, ZkConnection, translated
from segment_lineage.lineage.zk.store.nodes import Nodes
from segment_lineage.lineage.zk.store.paths import Paths

REQUEST_LIMIT = 512 * 1024  # every request we send stays under this
CACHE_BLOBS = 8192
# Decoded blobs are weighed by their records (a bucket's pairs, a chunk's
# names). A table that keeps changing leaves superseded buckets behind, so the
# cache holds at most this many records plus twice the largest table read.
CACHE_RECORDS = 50_000

BLOB_ID = re.compile(r"^[0-9a-f]{32}$")  # what new_blob_id makes


@dataclass
class NewBlobs:
    """The blobs one commit adds, each under a new id from ``new_id`` (the
    store's env: 32 hex digits, as :data:`BLOB_ID` says)."""

    new_id: Callable[[], str]
    raw: dict[str, bytes] = field(default_factory=dict)
    decoded: dict[str, Any] = field(default_factory=dict)  # what reading a blob would give, where known

    def add(self, data: bytes, decoded: Any = None) -> str:
        blob = self.new_id()
        self.raw[blob] = data
        if decoded is not None:
            self.decoded[blob] = decoded
        return blob


@dataclass(frozen=True)
class Bucket:
    """A decoded bucket blob, checked for the place it was decoded for."""

    index: int
    count: int
    pairs: Sequence[tuple[str, Any]]  # a tuple, or segments built when first wanted (LazyPairs)


def weight(value: Any) -> int:
    if isinstance(value, Bucket):
        return max(1, len(value.pairs))
    if isinstance(value, tuple):
        return max(1, len(value))
    return 1


class BlobGone(Exception):
    """A blob referenced by the head we read has been collected: re-read."""


Decode = Callable[[str, bytes, str], Any]  # (blob, raw, where) -> decoded


class BlobStore:
    """Thread-safe. ``cached_records`` tells how much the cache holds."""

    def __init__(self, zk: ZkConnection, paths: Paths, nodes: Nodes) -> None:
        self.zk = zk
        self.paths = paths
        self.nodes = nodes
        self._lock = threading.Lock()
        # Bounded below (remember): by count, and by records against a limit
        # that grows with the largest table read.
        self._cache: LRUCache[str, Any] = LRUCache(maxsize=float("inf"), getsizeof=weight)
        self._largest_table = 0  # records of the largest table state read

    # ---- the cache ---------------------------------------------------------------

    def cached(self, blob: str) -> Any | None:
        with self._lock:
            return self._cache.get(blob)

    def remember(self, blob: str, value: Any) -> None:
        with self._lock:
            if blob in self._cache:
                return
            self._cache[blob] = value
            limit = CACHE_RECORDS + 2 * self._largest_table
            while len(self._cache) > 1 and (len(self._cache) > CACHE_BLOBS or self._cache.currsize > limit):
                self._cache.popitem()

    def note_table(self, records: int) -> None:
        """A table of ``records`` was read: what one read needs stays cached together."""
        with self._lock:
            self._largest_table = max(self._largest_table, records)

    @property
    def cached_records(self) -> int:
        """Records held by the decoded-blob cache (bounded; see CACHE_RECORDS)."""
        with self._lock:
            return int(self._cache.currsize)

    # ---- reading -------------------------------------------------------------------

    def _send(self, table: str, blobs: Iterable[str]) -> dict[str, Any]:
        """Send the reads of blobs not in the cache (answered by :meth:`_answer`)."""
        wanted = list(blobs)
        if wanted:
            self.zk.check_answering()
        return {b: self.zk.send_get(self.paths.blob(table, b)) for b in wanted}

    def _answer(self, table: str, pending: Mapping[str, Any], partial: bool = False) -> dict[str, bytes]:
        """The bytes of each blob sent for; BlobGone for one gone (``partial``: left out)."""
        out: dict[str, bytes] = {}
        for blob, result in pending.items():
            with translated(
                "ZooKeeper read failed",
                refused=f"ZooKeeper refused reading table {table!r}: not authorised",
            ):
                try:
                    data, _ = self.zk.answer(result)
                except NoNodeError:
                    if partial:
                        continue
                    raise BlobGone(blob) from None
            out[blob] = data
        return out

    def decoded(self, table: str, blobs: Sequence[str], decode: Decode) -> dict[str, Any]:
        """Each of ``blobs`` decoded (``decode(blob, raw, where)``), from the
        cache or fetched. BlobGone when one is gone (the head moved on)."""
        return self.decoded_many([(table, blobs, decode)])[0]

    def decoded_many(
        self, asked: Sequence[tuple[str, Sequence[str], Decode]], *, partial: bool = False
    ) -> list[dict[str, Any]]:
        """``decoded`` for several tables' blobs, every fetch sent before the
        first answer is awaited: one round trip for all. BlobGone when one is
        gone; ``partial`` (a prefetch): gone blobs are left out, and the
        load that wants one finds out."""
        found: list[dict[str, Any]] = []
        sent: list[dict[str, Any]] = []
        for table, blobs, _ in asked:
            cached = {blob: value for blob in blobs if (value := self.cached(blob)) is not None}
            found.append(cached)
            sent.append(self._send(table, [blob for blob in blobs if blob not in cached]))
        for (table, _, decode), out, pending in zip(asked, found, sent, strict=True):
            self._take(table, decode, out, self._answer(table, pending, partial))
        return found

    def _take(self, table: str, decode: Decode, out: dict[str, Any], raws: Mapping[str, bytes]) -> None:
        """Decode the blobs fetched for one table into ``out``, and cache them."""
        fresh = {blob: decode(blob, raw, self.paths.blob(table, blob)) for blob, raw in raws.items()}
        out.update(fresh)
        if fresh:
            # What one read needs stays cached together, however large the table.
            self.note_table(sum(weight(value) for value in out.values()))
            for blob, value in fresh.items():
                self.remember(blob, value)

    # ---- writing -------------------------------------------------------------------

    def write(self, table: str, blobs: Mapping[str, bytes]) -> None:
        """Create new blobs (not yet referenced). RetryableStoreError: nothing committed."""
        for data in blobs.values():
            if len(data) > REQUEST_LIMIT:
                raise TooLargeError(
                    f"blob of {len(data)} bytes for table {table!r} exceeds the request limit"
                )
        if blobs:
            self.zk.check_answering()
        results = {
            b: self.zk.send_create(self.paths.blob(table, b), data, self.nodes.acl_at(Place.BLOB))
            for b, data in blobs.items()
        }
        for blob, result in results.items():
            with translated(
                f"writing blob {blob} failed",
                refused=f"ZooKeeper refused writing table {table!r}: not authorised",
                failure=RetryableStoreError,
            ):
                try:
                    self.zk.answer(result)
                except NodeExistsError:
                    # Ids are fresh per write and a create is never resent: the node is not ours.
                    raise RetryableStoreError(f"blob {blob} already exists") from None
                except NoNodeError:
                    raise TableNotFoundError(table) from None

    def discard(self, table: str, blobs: Iterable[str]) -> None:
        """Delete blobs nothing references (best effort: what is left, the
        sweep takes after its grace). Sent together, each answer awaited."""
        sent = [self.zk.send_delete(self.paths.blob(table, b)) for b in blobs]
        for result in sent:
            with contextlib.suppress(*UNAVAILABLE):
                self.zk.settle(result)
