"""What keeps metadata blobs alive or condemns them: a lease (a pinned or
retained version: its buckets and name chunks) and a table's metadata-sweep
marks (``gc``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from segment_lineage.lineage.codec.buckets import KINDS, bucket_ids
from segment_lineage.lineage.codec.envelope import (
    _Bad,
    _decoding,
    _envelope,
    _get,
    _str_list,
    dumps,
    parse,
)

GC = "segment-lineage.gc"


def encode_gc(candidates: Mapping[str, int]) -> bytes:
    """Metadata blobs seen unreferenced, with when they were first seen so."""
    return dumps(_envelope(GC, candidates=dict(candidates)))


def decode_gc(raw: bytes, where: str) -> dict[str, int]:
    doc = parse(raw, GC, where)
    with _decoding(where):
        candidates = _get(doc, "candidates", dict)
        if not all(isinstance(k, str) and isinstance(v, int) for k, v in candidates.items()):
            raise _Bad("candidates must map blob ids to times")
        return dict(candidates)


LEASE = "segment-lineage.lease"


@dataclass(frozen=True)
class LeaseRecord:
    """What a reader pinned: a table version, its bucket blobs by kind, and
    the name chunks its entries use. Enough to rebuild that version."""

    version: int
    buckets: Mapping[str, tuple[str, ...]]
    chunks: tuple[str, ...]

    @property
    def blobs(self) -> set[str]:
        return bucket_ids(self.buckets) | set(self.chunks)


def encode_lease(lease: LeaseRecord) -> bytes:
    return dumps(
        _envelope(
            LEASE,
            version=lease.version,
            buckets={k: list(v) for k, v in lease.buckets.items()},
            chunks=list(lease.chunks),
        )
    )


def decode_lease(raw: bytes, where: str) -> LeaseRecord:
    doc = parse(raw, LEASE, where)
    with _decoding(where):
        buckets_doc = _get(doc, "buckets", dict)
        return LeaseRecord(
            version=_get(doc, "version", int),
            buckets={kind: tuple(_str_list(buckets_doc, kind)) for kind in KINDS},
            chunks=tuple(_str_list(doc, "chunks")),
        )
