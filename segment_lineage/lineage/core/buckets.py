"""The bucket layout, pure: which bucket a key lives in, how large buckets
may grow, and which buckets a change rewrites (doubling their count when one
grows too large). The ZooKeeper store writes what this decides."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from segment_lineage.lineage.core.errors import TooLargeError

BLOB_LIMIT = 256 * 1024  # a bucket or name chunk, encoded

MAX_BUCKETS = 1 << 11  # three kinds of 2048 bucket ids still fit in the head
# A commit rewrites the buckets it touches, so buckets stay small while the
# head can list them cheaply: split at SPLIT_BYTES up to SOFT_BUCKETS
# buckets (about 4 MB of records per kind), then let them grow to BLOB_LIMIT.
SPLIT_BYTES = 16 * 1024
SOFT_BUCKETS = 1 << 8


def bucket_limit(count: int) -> int:
    """The largest encoded bucket allowed among ``count`` buckets."""
    return SPLIT_BYTES if count < SOFT_BUCKETS else BLOB_LIMIT


def bucket_of(key: str, buckets: int) -> int:
    return zlib.crc32(key.encode()) & (buckets - 1)


@dataclass(frozen=True)
class Layout:
    """The buckets a change rewrites: how many buckets there are now, and
    each rewritten bucket's keys and encoded bytes (in the order encoded)."""

    count: int
    rewritten: Mapping[int, tuple[tuple[str, ...], bytes]]


def relayout(
    what: str,
    old: Mapping[str, object],
    new: Mapping[str, object],
    old_keys: Sequence[Sequence[str]],
    encode: Callable[[Sequence[str]], bytes],
) -> Layout | None:
    """Which buckets to rewrite so that ``old`` (laid out as ``old_keys``,
    bucket by bucket) becomes ``new``; None when no bucket changes.

    A bucket is rewritten when one of its keys was added, removed or given
    another object (compared by identity: unchanged records are the same
    objects). When a rewritten bucket encodes (``encode(keys)``) over its
    limit, the bucket count doubles and every bucket is laid out again.
    TooLargeError (``what`` names the records) past MAX_BUCKETS buckets.
    """
    if new is old:  # untouched by the change (a rollback's segments, say)
        return None
    count = len(old_keys)
    dirty: set[int] = set()
    for key, obj in new.items():
        if old.get(key) is not obj:
            dirty.add(bucket_of(key, count))
    for key in old:
        if key not in new:
            dirty.add(bucket_of(key, count))
    if not dirty:
        return None
    keys_of = {i: [k for k in old_keys[i] if k in new] for i in dirty}
    for key in new:
        if key not in old:
            keys_of[bucket_of(key, count)].append(key)
    while True:
        encoded: dict[int, tuple[tuple[str, ...], bytes]] = {}
        too_big = False
        for i, keys in keys_of.items():
            raw = encode(keys)
            if len(raw) > BLOB_LIMIT or (len(raw) > bucket_limit(count) and len(keys) > 1):
                too_big = True
                break
            encoded[i] = (tuple(keys), raw)
        if not too_big:
            return Layout(count, encoded)
        count *= 2
        if count > MAX_BUCKETS:
            raise TooLargeError(f"{what} exceeds {MAX_BUCKETS} buckets of {BLOB_LIMIT} bytes")
        keys_of = {i: [] for i in range(count)}  # every bucket anew, at the doubled count
        for key in new:
            keys_of[bucket_of(key, count)].append(key)
