"""The bucket layout: which bucket a key lives in, and how large buckets may grow."""

from __future__ import annotations

import zlib

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
