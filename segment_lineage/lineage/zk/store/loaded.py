"""What one read of a table's head was built from (:class:`Loaded`, the
store's token in a snapshot), a bucket map's keys bucket by bucket, the
key each kind of record is stored under, and the name chunks a version's
entries use."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import ENTRIES, PENDING, SEGMENTS, Head, NameList, StoredEntry
from segment_lineage.lineage.core.bucket_maps import BucketMap, LazyPairs
from segment_lineage.lineage.core.model import TableState
from segment_lineage.lineage.zk.store.blobs import Decode


@dataclass
class Loaded:
    """The store's token for one read: what the state was built from."""

    head: Head
    zversion: int
    maps: dict[str, Mapping[str, Any]]  # kind -> key -> object (shared with the state)
    bucket_keys: dict[str, Sequence[Sequence[str]]]  # kind -> bucket -> keys
    lists: dict[str, tuple[tuple[str, ...], NameList, tuple[str, ...], NameList]]
    raw: bytes = b""  # the head record as read (b"": not kept)

    def chunk_blobs(self) -> set[str]:
        """The name-list chunks the entries of this version use."""
        out: set[str] = set()
        for _, src_list, _, dst_list in self.lists.values():
            out.update(src_list.chunks)
            out.update(dst_list.chunks)
        return out

    def state(self) -> TableState:
        maps = self.maps
        return TableState(self.head.config, self.head.version, maps[SEGMENTS], maps[ENTRIES], maps[PENDING])


class BucketKeys(Sequence[list[str]]):
    """The keys of each bucket of a bucket map, bucket by bucket, loaded when wanted."""

    def __init__(self, records: BucketMap[Any]) -> None:
        self.records = records

    def __len__(self) -> int:
        return self.records.count

    def __getitem__(self, index: int) -> list[str]:  # type: ignore[override]
        return self.records.keys_in(index)


def key_of(kind: str, obj: Any) -> str:
    if kind == SEGMENTS:
        return str(obj.name)
    if kind == ENTRIES:
        return str(obj.entry_id)
    return str(obj.location)


def decoded_pairs(kind: str, stored: Any, where: str) -> tuple[Sequence[str], Sequence[tuple[str, Any]]]:
    """A decoded bucket's keys, and its (key, record) pairs: a segment
    bucket in columns builds its segments when first wanted (names and
    locations are at hand without them)."""
    lazy = codec.lazy_segments(stored) if kind == SEGMENTS else None
    if lazy is not None:
        keys, locations, build = lazy
        return keys, LazyPairs(keys, {"location": locations}, build)
    objs = codec.decode_records(kind, stored, where)
    keys = [o.name for o in objs] if kind == SEGMENTS else [key_of(kind, o) for o in objs]
    return keys, tuple(zip(keys, objs, strict=True))


def chunk_ids(entries: Iterable[StoredEntry]) -> list[str]:
    """The name chunks ``entries`` use, in their order."""
    return [c for e in entries for c in (*e.src.chunks, *e.dst.chunks)]


def chunks_of(blobs: Mapping[str, Any]) -> set[str]:
    """The name chunks the entries among decoded ``blobs`` use."""
    stored = (
        e
        for value in blobs.values()
        if not isinstance(value.pairs, LazyPairs)  # segments, not built for this
        for _, e in value.pairs
        if isinstance(e, StoredEntry)
    )
    return set(chunk_ids(stored))


def dispatch(decoders: Mapping[str, Decode]) -> Decode:
    """One decoder that decodes each blob with its own."""
    return lambda blob, raw, where: decoders[blob](blob, raw, where)


def decode_chunk(_blob: str, raw: bytes, where: str) -> tuple[str, ...]:
    return tuple(codec.decode_names(raw, where))
