"""Immutable blobs: fetched, decoded and cached by id, written before the head that references them."""

from __future__ import annotations

import contextlib
import logging
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import (
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
)
from kazoo.handlers.threading import KazooTimeoutError

from segment_lineage.lineage.core.acl import (
    Place,
)
from segment_lineage.lineage.core.errors import (
    AuthError,
    StoreUnavailableError,
    TableNotFoundError,
    TooLargeError,
)
from segment_lineage.lineage.store.contract import (
    RetryableStoreError,
)

log = logging.getLogger(__name__)

REQUEST_LIMIT = 512 * 1024  # every request we send stays under this

CACHE_BLOBS = 8192
# Decoded blobs are weighed by their records (a bucket's pairs, a chunk's
# names). A table that keeps changing leaves superseded buckets behind, so the
# cache holds at most this many records plus twice the largest table read.
CACHE_RECORDS = 50_000


def _blob_id() -> str:
    return uuid.uuid4().hex


_BLOB_ID = re.compile(r"^[0-9a-f]{32}$")  # what _blob_id makes


@dataclass(frozen=True)
class _Bucket:
    """A decoded bucket blob, checked for the place it was decoded for."""

    index: int
    count: int
    pairs: tuple[tuple[str, Any], ...]


def _weight(value: Any) -> int:
    if isinstance(value, _Bucket):
        return max(1, len(value.pairs))
    if isinstance(value, tuple):
        return max(1, len(value))
    return 1


class _BlobGone(Exception):
    """A blob referenced by the head we read has been collected: re-read."""


class _Blobs:
    # ---- blobs ---------------------------------------------------------------

    def _cached(self, blob: str) -> Any | None:
        with self._cache_lock:
            value = self._cache.get(blob)
            if value is not None:
                self._cache.move_to_end(blob)
            return value

    def _remember(self, blob: str, value: Any) -> None:
        with self._cache_lock:
            if blob in self._cache:
                return
            self._cache[blob] = value
            self._cache_records += _weight(value)
            limit = CACHE_RECORDS + 2 * self._largest_table
            while len(self._cache) > 1 and (len(self._cache) > CACHE_BLOBS or self._cache_records > limit):
                _, gone = self._cache.popitem(last=False)
                self._cache_records -= _weight(gone)

    @property
    def cached_records(self) -> int:
        """Records held by the decoded-blob cache (bounded; see CACHE_RECORDS)."""
        with self._cache_lock:
            return self._cache_records

    def _fetch(self, table: str, blobs: Iterable[str]) -> dict[str, bytes]:
        """Raw bytes of blobs not in the cache, fetched in one pipelined batch."""
        wanted = list(blobs)
        if wanted:
            self._check_answering()
        pending = {b: self.client.get_async(self.blob_path(table, b)) for b in wanted}
        out: dict[str, bytes] = {}
        for blob, result in pending.items():
            try:
                data, _ = self._wait(result)
            except NoNodeError:
                raise _BlobGone(blob) from None
            except NoAuthError:
                raise AuthError(f"ZooKeeper refused reading table {table!r}: not authorised") from None
            except (KazooException, KazooTimeoutError, ConnectionError, TimeoutError) as exc:
                raise StoreUnavailableError(f"ZooKeeper read failed: {type(exc).__name__}") from None
            out[blob] = data
        return out

    def _decoded(self, table: str, blobs: Sequence[str], decode: Any) -> dict[str, Any]:
        found: dict[str, Any] = {}
        missing: list[str] = []
        for blob in blobs:
            value = self._cached(blob)
            if value is None:
                missing.append(blob)
            else:
                found[blob] = value
        fresh = {
            blob: decode(blob, raw, self.blob_path(table, blob))
            for blob, raw in self._fetch(table, missing).items()
        }
        found.update(fresh)
        if fresh:
            # What one read needs stays cached together, however large the table.
            needed = sum(_weight(value) for value in found.values())
            with self._cache_lock:
                self._largest_table = max(self._largest_table, needed)
            for blob, value in fresh.items():
                self._remember(blob, value)
        return found

    def _write_blobs(self, table: str, blobs: Mapping[str, bytes]) -> None:
        for data in blobs.values():
            if len(data) > REQUEST_LIMIT:
                raise TooLargeError(
                    f"blob of {len(data)} bytes for table {table!r} exceeds the request limit"
                )
        if blobs:
            self._check_answering()
        results = {
            b: self.client.create_async(self.blob_path(table, b), data, acl=self.acl_at(Place.BLOB))
            for b, data in blobs.items()
        }
        for blob, result in results.items():
            try:
                self._wait(result)
            except NodeExistsError:
                # Ids are fresh per write and a create is never resent: the node is not ours.
                raise RetryableStoreError(f"blob {blob} already exists") from None
            except NoNodeError:
                raise TableNotFoundError(table) from None
            except NoAuthError:
                raise AuthError(f"ZooKeeper refused writing table {table!r}: not authorised") from None
            except (KazooException, KazooTimeoutError, ConnectionError, TimeoutError) as exc:
                raise RetryableStoreError(f"writing blob {blob} failed: {type(exc).__name__}") from None

    def _discard_blobs(self, table: str, blobs: Iterable[str]) -> None:
        """Delete blobs nothing references (best effort: what is left, the
        sweep takes after its grace). Sent together, each answer awaited."""
        sent = [self.client.delete_async(self.blob_path(table, b)) for b in blobs]
        for result in sent:
            with contextlib.suppress(KazooException, KazooTimeoutError, ConnectionError, TimeoutError):
                result.get(timeout=self.op_timeout_s)
