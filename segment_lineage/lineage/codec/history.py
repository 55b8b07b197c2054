"""History: the records of each commit, in a head's tail and in sealed,
immutable ``history`` chunks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from segment_lineage.lineage.codec.envelope import (
    _decoding,
    _enum,
    _envelope,
    _get,
    _opt,
    _str_list,
    dumps,
    parse,
)
from segment_lineage.lineage.core.model import (
    HistoryRecord,
    Operation,
)
from segment_lineage.lineage.core.names import (
    check_entry_id,
)

HISTORY = "segment-lineage.history"


# ---- history ----------------------------------------------------------------


def history_to_dict(h: HistoryRecord) -> dict[str, object]:
    return {
        "version": h.version,
        "commit": h.commit_id,
        "at": h.at_ms,
        "op": h.operation.value,
        "entry": h.entry_id,
        "actor": h.actor,
        "job": h.job_id,
        "reason": h.reason,
        "segments": h.segments,
        "rows": h.rows,
        "bytes": h.size_bytes,
        **({"cleaned": list(h.cleaned)} if h.cleaned else {}),
    }


def history_from_dict(d: Mapping[str, Any]) -> HistoryRecord:
    return HistoryRecord(
        version=_get(d, "version", int),
        commit_id=_get(d, "commit", str),
        at_ms=_get(d, "at", int),
        operation=_enum(Operation, d.get("op"), "operation"),
        entry_id=_opt(d, "entry", str),
        actor=_get(d, "actor", str),
        job_id=_opt(d, "job", str),
        reason=_opt(d, "reason", str),
        segments=_get(d, "segments", int),
        rows=_get(d, "rows", int),
        size_bytes=_get(d, "bytes", int),
        cleaned=tuple(check_entry_id(e) for e in _str_list(d, "cleaned")) if "cleaned" in d else (),
    )


@dataclass(frozen=True)
class HistoryChunk:
    """Sealed history records, oldest first, and the id of the chunk before."""

    records: tuple[HistoryRecord, ...]
    prev: str | None


def history_size(records: Sequence[HistoryRecord]) -> int:
    """Encoded bytes of ``records`` in a head's tail or a history chunk."""
    return sum(len(dumps(history_to_dict(r))) + 1 for r in records)


def encode_history(records: Sequence[HistoryRecord], prev: str | None) -> bytes:
    return dumps(_envelope(HISTORY, prev=prev, records=[history_to_dict(r) for r in records]))


def decode_history(raw: bytes, where: str) -> HistoryChunk:
    doc = parse(raw, HISTORY, where)
    with _decoding(where):
        return HistoryChunk(
            records=tuple(history_from_dict(r) for r in _get(doc, "records", list)),
            prev=_opt(doc, "prev", str),
        )
