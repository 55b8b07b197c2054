"""A table's history: the head's tail, then sealed chunks, newest first."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import Head
from segment_lineage.lineage.core.errors import (
    CorruptRecordError,
)
from segment_lineage.lineage.core.model import (
    HistoryRecord,
)
from segment_lineage.lineage.store.contract import (
    MAX_HISTORY,
)
from segment_lineage.lineage.zk.blobs import _BlobGone

log = logging.getLogger(__name__)


class _History:
    def find_commit(self, table: str, commit_id: str, after_version: int) -> HistoryRecord | None:
        self._call("sync", "sync", self.head_path(table))
        head, _ = self._read_head(table)
        for record in self._history(table, head, until_version=after_version):
            if record.commit_id == commit_id and record.version > after_version:
                return record
        return None

    def _history_chunks(self, table: str, head: Head) -> Iterable[tuple[str, codec.HistoryChunk]]:
        """Sealed history chunks, newest first, following each chunk's ``prev``
        for at most MAX_HISTORY records: older chunks are no longer reachable,
        so the metadata garbage pass removes them (history stays bounded)."""
        blob = head.history_last
        seen = len(head.history_tail)
        for _ in range(MAX_HISTORY):  # a chunk holds at least one record
            if blob is None or seen >= MAX_HISTORY:
                return
            try:
                chunk: codec.HistoryChunk = self._decoded(
                    table, [blob], lambda _blob, raw, where: codec.decode_history(raw, where)
                )[blob]
            except _BlobGone:
                raise CorruptRecordError(self.blob_path(table, blob), "history blob missing") from None
            yield blob, chunk
            seen += len(chunk.records)
            blob = chunk.prev

    def _history(self, table: str, head: Head, until_version: int = 0) -> Iterable[HistoryRecord]:
        yield from reversed(head.history_tail)
        for _, chunk in self._history_chunks(table, head):
            yield from reversed(chunk.records)
            if chunk.records and chunk.records[0].version <= until_version:
                return

    def iter_history(self, table: str) -> Iterator[HistoryRecord]:
        head, _ = self._read_head(table)  # now: a missing table is refused at the call
        return iter(self._history(table, head))

    def history(self, table: str, limit: int | None = None) -> list[HistoryRecord]:
        return list(itertools.islice(self.iter_history(table), limit))
