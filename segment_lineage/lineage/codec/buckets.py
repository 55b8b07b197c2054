"""Bucket blobs (segments, entries or pending deletions, one hash bucket
each) and ``names`` blobs (chunks of a long segment-name list).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from segment_lineage.lineage.codec.columnar import Columns
from segment_lineage.lineage.codec.columns import schema_from_json, type_to_json
from segment_lineage.lineage.codec.envelope import (
    NEWER,
    _Bad,
    _decoding,
    _enum,
    _envelope,
    _envelope_at,
    _get,
    _opt,
    _str_list,
    dumps,
    parse,
)
from segment_lineage.lineage.codec.pending import (
    PENDING_KIND,
    decode_pending,
    decode_pending_columns,
    encode_pending_columns,
)
from segment_lineage.lineage.codec.segments import (
    SEGMENTS_KIND,
    decode_columns,
    decode_segments,
    encode_columns,
    encode_segment_columns,
)
from segment_lineage.lineage.core.errors import CorruptRecordError
from segment_lineage.lineage.core.model import (
    Audit,
    EntryState,
    LineageEntry,
    PendingDeletion,
    Segment,
    TimeUnit,
)
from segment_lineage.lineage.core.names import check_entry_id, check_table_name
from segment_lineage.lineage.core.schema import SchemaPolicy
from segment_lineage.lineage.core.staged import Staged

BUCKET = "segment-lineage.bucket"
NAMES = "segment-lineage.names"

SEGMENTS = SEGMENTS_KIND
ENTRIES = "entries"
PENDING = PENDING_KIND
KINDS = (SEGMENTS, ENTRIES, PENDING)


# ---- records in buckets -----------------------------------------------------


@dataclass(frozen=True)
class NameList:
    """A segment-name list as stored: inline, or in ``names`` blobs."""

    names: tuple[str, ...] | None
    chunks: tuple[str, ...]
    count: int


def entry_to_dict(entry: LineageEntry, src: NameList, dst: NameList) -> dict[str, object]:
    d: dict[str, object] = {
        "id": entry.entry_id,
        "state": entry.state.value,
        "ts": entry.timestamp_ms,
        "created": entry.created_ms,
        "actor": entry.audit.actor,
        "job": entry.audit.job_id,
        "reason": entry.audit.reason,
    }
    if entry.interval is not None:
        d["interval"] = list(entry.interval)
    if entry.held_until_ms is not None:
        d["held"] = entry.held_until_ms
    if entry.whole:
        d["whole"] = True
    if entry.staged is not None:
        d["staged"] = staged_to_dict(entry.staged)
    for key, names in (("from", src), ("to", dst)):
        if names.names is not None:
            d[key] = list(names.names)
        else:
            d[key + "_chunks"] = list(names.chunks)
            d[key + "_count"] = names.count
    return d


def staged_to_dict(staged: Staged) -> dict[str, object]:
    d: dict[str, object] = {"policy": staged.policy}
    if staged.mode is not None:
        d["mode"] = staged.mode
    if staged.schema is not None:
        d["schema"] = [[f.name, type_to_json(f.type)] for f in staged.schema]
    if staged.time_unit is not None:
        d["time_unit"] = staged.time_unit
    if staged.audit is not None:
        d["audit"] = staged.audit
    if staged.set_id is not None:
        d["set"] = staged.set_id
        d["set_tables"] = list(staged.set_tables)
    return d


def staged_from_dict(d: Mapping[str, Any]) -> Staged:
    unit = _opt(d, "time_unit", str)
    return Staged(
        mode=_opt(d, "mode", str),
        policy=_enum(SchemaPolicy, d.get("policy"), "schema policy").value,
        schema=schema_from_json(d.get("schema")),
        time_unit=None if unit is None else _enum(TimeUnit, unit, "time unit").value,
        audit=_opt(d, "audit", str),
        set_id=_opt(d, "set", str),
        set_tables=tuple(check_table_name(t) for t in _str_list(d, "set_tables")) if "set" in d else (),
    )


@dataclass(frozen=True)
class StoredEntry:
    """An entry record as read from a bucket, before its name chunks are loaded."""

    entry_id: str
    state: EntryState
    timestamp_ms: int
    created_ms: int
    audit: Audit
    src: NameList
    dst: NameList
    interval: tuple[int, int] | None = None
    held_until_ms: int | None = None
    whole: bool = False
    staged: Staged | None = None

    def resolve(self, src: tuple[str, ...], dst: tuple[str, ...]) -> LineageEntry:
        return LineageEntry(
            self.entry_id,
            src,
            dst,
            self.state,
            self.timestamp_ms,
            self.created_ms,
            self.audit,
            self.interval,
            self.held_until_ms,
            self.whole,
            self.staged,
        )


def _names(d: Mapping[str, Any], key: str) -> NameList:
    if key in d:
        names = tuple(_str_list(d, key))
        return NameList(names=names, chunks=(), count=len(names))
    chunks = tuple(_str_list(d, key + "_chunks"))
    return NameList(names=None, chunks=chunks, count=_get(d, key + "_count", int))


def stored_entry_from_dict(d: Mapping[str, Any]) -> StoredEntry:
    return StoredEntry(
        entry_id=check_entry_id(_get(d, "id", str)),
        state=_enum(EntryState, d.get("state"), "entry state"),
        timestamp_ms=_get(d, "ts", int),
        created_ms=_get(d, "created", int),
        audit=Audit(_get(d, "actor", str), _opt(d, "job", str), _opt(d, "reason", str)),
        src=_names(d, "from"),
        dst=_names(d, "to"),
        interval=_interval(d),
        held_until_ms=_opt(d, "held", int),  # absent in records written before holds existed
        whole=_opt(d, "whole", bool) or False,  # absent: not a refresh (or written before the flag)
        staged=staged_from_dict(_get(d, "staged", dict)) if "staged" in d else None,
    )


def _interval(d: Mapping[str, Any]) -> tuple[int, int] | None:
    raw = d.get("interval")
    if raw is None:
        return None
    if (
        not isinstance(raw, list)
        or len(raw) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in raw)
        or raw[0] >= raw[1]
    ):
        raise _Bad(f"bad interval {raw!r}")
    return (raw[0], raw[1])


# Bucket formats: 1 holds ``records``, one JSON object each; 2 holds
# ``columns`` (segments and pending deletions: see
# :mod:`segment_lineage.lineage.codec.segments` and ``.pending``), what is
# written now for those kinds; entries are always format 1. Both are read.
ROWS_VERSION = 1
COLUMNS_VERSION = 2
Records = Sequence[Mapping[str, Any]] | Columns


def encode_bucket(kind: str, records: Sequence[Mapping[str, object]]) -> bytes:
    """A bucket of segments (records made by ``segment_to_dict``) or entries
    (``entry_to_dict``); pending deletions: :func:`encode_pending_bucket`."""
    if kind == ENTRIES:
        return dumps(_envelope(BUCKET, kind=kind, records=list(records)))
    if kind == PENDING:
        raise ValueError("pending deletions are encoded from their records: encode_pending_bucket")
    return dumps(_envelope_at(BUCKET, COLUMNS_VERSION, {"kind": kind, "columns": encode_columns(records)}))


def empty_bucket(kind: str) -> bytes:
    """A bucket of ``kind`` with no records, as a new table's first version holds."""
    return encode_pending_bucket(()) if kind == PENDING else encode_bucket(kind, ())


def encode_segment_bucket(segments: Sequence[Segment]) -> bytes:
    """A bucket of segments, in columns, from the segments themselves: the
    bytes :func:`encode_bucket` makes of their ``segment_to_dict`` records."""
    columns = encode_segment_columns(segments)
    return dumps(_envelope_at(BUCKET, COLUMNS_VERSION, {"kind": SEGMENTS, "columns": columns}))


def encode_pending_bucket(items: Sequence[PendingDeletion]) -> bytes:
    """A bucket of pending deletions, in columns."""
    columns = encode_pending_columns(items)
    return dumps(_envelope_at(BUCKET, COLUMNS_VERSION, {"kind": PENDING, "columns": columns}))


_COLUMN_DECODERS: dict[str, Callable[[Mapping[str, Any]], Columns]] = {
    SEGMENTS: decode_columns,
    PENDING: decode_pending_columns,
}


def decode_bucket(raw: bytes, kind: str, where: str) -> Records:
    doc = parse(raw, BUCKET, where, (ROWS_VERSION, COLUMNS_VERSION))
    with _decoding(where):
        if doc.get("kind") != kind:
            raise _Bad(f"expected a {kind} bucket, found {doc.get('kind')!r}")
        if doc["v"] == COLUMNS_VERSION:
            if kind not in _COLUMN_DECODERS:
                raise CorruptRecordError(where, f"a {kind} bucket is never stored in columns", remedy=NEWER)
            return _COLUMN_DECODERS[kind](_get(doc, "columns", dict))
        records = _get(doc, "records", list)
        if not all(isinstance(r, dict) for r in records):
            raise _Bad("records must be objects")
        return records


def decode_records(kind: str, records: Records, where: str) -> list[Any]:
    """Decode bucket records into Segment, StoredEntry or PendingDeletion."""
    if isinstance(records, Columns) and records.kind != kind:
        raise CorruptRecordError(where, f"a {kind} bucket is never stored in columns")
    with _decoding(where):
        if kind == SEGMENTS:
            return decode_segments(records)
        if kind == PENDING:
            return decode_pending(records)
        return [stored_entry_from_dict(r) for r in cast(Sequence[Mapping[str, Any]], records)]


def encode_names(names: Sequence[str]) -> bytes:
    return dumps(_envelope(NAMES, names=list(names)))


def decode_names(raw: bytes, where: str) -> list[str]:
    doc = parse(raw, NAMES, where)
    with _decoding(where):
        return _str_list(doc, "names")


def bucket_ids(buckets: Mapping[str, Sequence[str]]) -> set[str]:
    """Every bucket blob id of a head or a version record."""
    return {blob for ids in buckets.values() for blob in ids}
