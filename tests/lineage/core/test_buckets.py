"""The bucket layout: a map that outgrows its buckets is laid out at the
count plain doubling would find, without encoding every record at each
count on the way."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence

import pytest

from segment_lineage.lineage.core import buckets
from segment_lineage.lineage.core.bucket_maps import bucket_of
from segment_lineage.lineage.core.buckets import BLOB_LIMIT, MAX_BUCKETS, bucket_limit, relayout


def encoder(records: Mapping[str, str], calls: list[int]) -> Callable[[Sequence[str]], bytes]:
    def encode(keys: Sequence[str]) -> bytes:
        calls.append(len(keys))
        return json.dumps([[k, records[k]] for k in keys]).encode()

    return encode


def doubled(new: Mapping[str, str], count: int, encode: Callable[[Sequence[str]], bytes]) -> int:
    """The count plain doubling finds, every bucket encoded at each count."""
    while True:
        keys_of: dict[int, list[str]] = {i: [] for i in range(count)}
        for key in new:
            keys_of[bucket_of(key, count)].append(key)
        sizes = [(len(encode(keys)), len(keys)) for keys in keys_of.values()]
        if all(n <= BLOB_LIMIT and (n <= bucket_limit(count) or k <= 1) for n, k in sizes):
            return count
        count *= 2


@pytest.mark.parametrize("seed", range(12))
def test_a_growing_map_gets_the_count_doubling_finds(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([0, 1, 50, 400, 3_000, 20_000, 60_000])
    width = rng.choice([10, 80, 300])
    new = {f"k{i:06d}-{rng.random()}": "x" * rng.randint(1, width) for i in range(n)}
    old_count = rng.choice([1, 2, 8])
    old: dict[str, str] = {}
    calls: list[int] = []
    found = relayout("records", old, new, [[] for _ in range(old_count)], encoder(new, calls))
    expected = doubled(new, old_count, encoder(new, []))
    if not new:
        assert found is None
        return
    assert found is not None
    assert found.count == expected
    laid = {key for keys, _ in found.rewritten.values() for key in keys}
    assert laid == set(new)
    for i, (keys, raw) in found.rewritten.items():
        assert all(bucket_of(key, found.count) == i for key in keys)
        assert json.loads(raw) == [[k, new[k]] for k in keys]
    # Each record is encoded once where it lands, a few dozen to guess a
    # bucket's size, and (at most) once more in a count that did not fit:
    # not once at every count on the way.
    assert sum(calls) <= 2 * n + 64 * 12 + found.count
    if n >= 20_000:
        assert sum(calls) <= 1.25 * n


def test_counts_are_skipped_only_when_the_share_alone_is_over() -> None:
    assert buckets.grown(1, bucket_limit(2)) == 2  # a bucket just over: the next count
    over = 40 * bucket_limit(2)
    count = buckets.grown(1, over)
    assert over // count <= bucket_limit(count) + buckets.SKIP_MARGIN
    assert over * 2 // count > bucket_limit(count // 2) + buckets.SKIP_MARGIN
    assert buckets.grown(MAX_BUCKETS // 2, 10**12) == MAX_BUCKETS  # no further than the most there may be
