"""History: the records of each commit, in a head's tail and in sealed,
immutable ``history`` chunks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from segment_lineage.lineage.codec.envelope import (
    _Bad,
    _decoding,
    _enum,
    _envelope,
    _get,
    _opt,
    _str_list,
    dumps,
    parse,
)
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Detail, Operation
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
        **({} if h.detail is None else {"detail": _detail_to_dict(h.detail)}),
        **({} if h.set_id is None else {"set": h.set_id}),
        **({"set_size": h.set_size} if h.set_size else {}),
    }


def _detail_to_dict(d: Detail) -> dict[str, object]:
    """The fields that say something (an interval as a list)."""
    return {
        f.name: list(value) if isinstance(value, tuple) else value
        for f in dataclasses.fields(d)
        if (value := getattr(d, f.name)) is not None
    }


def _detail_from_dict(d: Mapping[str, Any]) -> Detail:
    interval = d.get("interval")
    if interval is not None and (
        not isinstance(interval, list) or len(interval) != 2 or not all(type(x) is int for x in interval)
    ):
        raise _Bad("field 'interval' must be two whole numbers")
    return Detail(
        mode=_opt(d, "mode", str),
        interval=None if interval is None else (interval[0], interval[1]),
        target=_opt(d, "target", int),
        schema=_opt(d, "schema", str),
        settings=_opt(d, "settings", str),
        audit=_opt(d, "audit", str),
    )


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
        detail=_detail_from_dict(_get(d, "detail", dict)) if "detail" in d else None,
        set_id=_opt(d, "set", str),
        set_size=_opt(d, "set_size", int) or 0,
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
