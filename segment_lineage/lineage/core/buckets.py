"""The bucket layout, pure: how large buckets may grow, and which buckets a
change rewrites (doubling their count when one grows too large). Which
bucket a key lives in, and the maps themselves, are
:mod:`segment_lineage.lineage.core.bucket_maps`. The ZooKeeper store writes
what this decides."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from segment_lineage.lineage.core.bucket_maps import BucketMap, bucket_of, copy_of
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
    dirty = _dirty(old, new, count)
    if not dirty:
        return None
    keys_of = _dirty_keys(old, new, old_keys, dirty)
    hashes: list[tuple[str, int]] | None = None  # each key's hash, once however often the count grows
    while True:
        encoded = _encoded(keys_of, count, encode)
        if not isinstance(encoded, int):
            return Layout(count, encoded)
        count = grown(count, encoded)
        if count > MAX_BUCKETS:
            raise TooLargeError(f"{what} exceeds {MAX_BUCKETS} buckets of {BLOB_LIMIT} bytes")
        if hashes is None:
            crc32 = zlib.crc32
            hashes = [(key, crc32(key.encode())) for key in new]
        mask = count - 1
        keys_of = {i: [] for i in range(count)}  # every bucket anew, at the grown count
        for key, hashed in hashes:
            keys_of[hashed & mask].append(key)


def _dirty_keys(
    old: Mapping[str, object], new: Mapping[str, object], old_keys: Sequence[Sequence[str]], dirty: set[int]
) -> dict[int, list[str]]:
    """``new``'s keys in each ``dirty`` bucket at the old count: the old in their order, then the added."""
    count = len(old_keys)
    if isinstance(old, BucketMap):
        old.load_buckets(dirty)  # together, not a round trip per bucket
    keys_of = {i: [k for k in old_keys[i] if k in new] for i in dirty}
    # Keys added: among those a change touched when it says which, in the order touched.
    for key in edited.touched if (edited := copy_of(new, old)) is not None else new:
        if key not in old and key in new:
            keys_of[bucket_of(key, count)].append(key)
    return keys_of


SKIP_MARGIN = 1024  # a share at least this far over the limit before a count is skipped
SAMPLE_KEYS = 64  # the records encoded to guess a large bucket's size


def grown(count: int, over: int) -> int:
    """The bucket count to try after a bucket of ``over`` encoded bytes did
    not fit among ``count``: doubled, and doubled again while that bucket's
    share alone would still be over the limit. Its records spread over the
    buckets it splits into, so one of them gets at least its share (a
    bucket's size is about its records' sizes): a count skipped is one that
    would have failed, and the count found is the doubling's, without
    encoding every record at each count on the way."""
    count_next = count * 2
    while count_next < MAX_BUCKETS and over * count // count_next > bucket_limit(count_next) + SKIP_MARGIN:
        count_next *= 2
    return count_next


def _dirty(old: Mapping[str, object], new: Mapping[str, object], count: int) -> set[int]:
    """The buckets holding a key added, removed or given another object.
    A change's copy of ``old`` (:class:`Edited`) names the keys it touched:
    only those are compared, so the cost follows the change."""
    edited = copy_of(new, old)
    if edited is not None:
        return {bucket_of(key, count) for key in edited.differing(old)}
    dirty: set[int] = set()
    # Compared as dicts: a bucket map's look-ups would call back into Python once per key.
    old_get = (old.flat() if isinstance(old, BucketMap) else old).get
    new_dict = new.flat() if isinstance(new, BucketMap) else new
    for key, obj in new_dict.items():
        if old_get(key) is not obj:
            dirty.add(bucket_of(key, count))
    for key in old:
        if key not in new_dict:
            dirty.add(bucket_of(key, count))
    return dirty


def _encoded(
    keys_of: Mapping[int, list[str]], count: int, encode: Callable[[Sequence[str]], bytes]
) -> dict[int, tuple[tuple[str, ...], bytes]] | int:
    """Each bucket's keys and bytes; as soon as one is over its limit, its
    size (of a bucket of many keys whose first few alone say it is far over,
    half the size they suggest: no record is encoded only to be thrown away)."""
    encoded: dict[int, tuple[tuple[str, ...], bytes]] = {}
    for i, keys in keys_of.items():
        if len(keys) > 4 * SAMPLE_KEYS:
            guess = len(encode(keys[:SAMPLE_KEYS])) * len(keys) // SAMPLE_KEYS
            if guess > 4 * bucket_limit(count):
                return guess // 2
        raw = encode(keys)
        if len(raw) > BLOB_LIMIT or (len(raw) > bucket_limit(count) and len(keys) > 1):
            return len(raw)
        encoded[i] = (tuple(keys), raw)
    return encoded
