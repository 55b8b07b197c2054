"""A table's history, newest first: the records in the head's tail, then
sealed chunks (immutable blobs, each naming the one before), for at most
MAX_HISTORY records; older chunks are unreachable and collected."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import Head
from segment_lineage.lineage.core.errors import CorruptRecordError
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.store.contract import MAX_HISTORY
from segment_lineage.lineage.zk.connection import ZkConnection
from segment_lineage.lineage.zk.store.blobs import BlobGone, BlobStore
from segment_lineage.lineage.zk.store.heads import Heads
from segment_lineage.lineage.zk.store.paths import Paths


class History:
    def __init__(self, zk: ZkConnection, paths: Paths, heads: Heads, blobs: BlobStore) -> None:
        self.zk = zk
        self.paths = paths
        self.heads = heads
        self.blobs = blobs

    def find_commit(self, table: str, commit_id: str, after_version: int) -> HistoryRecord | None:
        self.zk.sync(self.paths.head(table), doing="sync")
        head, _ = self.heads.read_head(table)
        for record in self.records(table, head, until_version=after_version):
            if record.commit_id == commit_id and record.version > after_version:
                return record
        return None

    def chunks(self, table: str, head: Head) -> Iterable[tuple[str, codec.HistoryChunk]]:
        """Sealed history chunks, newest first, following each chunk's ``prev``
        for at most MAX_HISTORY records: older chunks are no longer reachable,
        so the metadata garbage pass removes them (history stays bounded)."""
        blob = head.history_last
        seen = len(head.history_tail)
        for _ in range(MAX_HISTORY):  # a chunk holds at least one record
            if blob is None or seen >= MAX_HISTORY:
                return
            try:
                chunk: codec.HistoryChunk = self.blobs.decoded(
                    table, [blob], lambda _blob, raw, where: codec.decode_history(raw, where)
                )[blob]
            except BlobGone:
                raise CorruptRecordError(self.paths.blob(table, blob), "history blob missing") from None
            yield blob, chunk
            seen += len(chunk.records)
            blob = chunk.prev

    def records(self, table: str, head: Head, until_version: int = 0) -> Iterable[HistoryRecord]:
        yield from reversed(head.history_tail)
        for _, chunk in self.chunks(table, head):
            yield from reversed(chunk.records)
            if chunk.records and chunk.records[0].version <= until_version:
                return

    def iter_history(self, table: str) -> Iterator[HistoryRecord]:
        head, _ = self.heads.read_head(table)  # now: a missing table is refused at the call
        return iter(self.records(table, head))

    def history(self, table: str, limit: int | None = None) -> list[HistoryRecord]:
        return list(itertools.islice(self.iter_history(table), limit))
