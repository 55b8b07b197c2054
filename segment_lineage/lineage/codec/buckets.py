"""Bucket blobs (segments, entries or pending deletions, one hash bucket
each) and ``names`` blobs (chunks of a long segment-name list).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from segment_lineage.lineage.codec.envelope import (
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
from segment_lineage.lineage.core.errors import CorruptRecordError
from segment_lineage.lineage.core.model import (
    Audit,
    DeletionReason,
    EntryState,
    LineageEntry,
    PendingDeletion,
    Segment,
)
from segment_lineage.lineage.core.names import (
    check_entry_id,
    check_location,
    check_segment_name,
    good_locations,
    good_segment_names,
)

BUCKET = "segment-lineage.bucket"
NAMES = "segment-lineage.names"

SEGMENTS = "segments"

_new = object.__new__
ENTRIES = "entries"
PENDING = "pending"
KINDS = (SEGMENTS, ENTRIES, PENDING)


# ---- records in buckets -----------------------------------------------------


def segment_to_dict(seg: Segment) -> dict[str, object]:
    d: dict[str, object] = {
        "name": seg.name,
        "loc": seg.location,
        "rows": seg.rows,
        "bytes": seg.size_bytes,
        "sum": seg.checksum,
        "created": seg.created_ms,
    }
    if seg.min_time is not None:
        d["tmin"] = seg.min_time
        d["tmax"] = seg.max_time
    if seg.entry_id is not None:
        d["entry"] = seg.entry_id
    return d


def segment_from_dict(d: Mapping[str, Any]) -> Segment:
    # Fast path for the common record (a cold read of a large table decodes
    # every segment): the same checks as below, inline; anything unusual
    # takes the field-by-field path, which names what is wrong.
    name, loc, rows, size, checksum, created = (
        d.get("name"),
        d.get("loc"),
        d.get("rows"),
        d.get("bytes"),
        d.get("sum"),
        d.get("created"),
    )
    tmin, tmax, entry = d.get("tmin"), d.get("tmax"), d.get("entry")
    if (
        type(name) is str
        and type(loc) is str
        and type(rows) is int
        and type(size) is int
        and type(checksum) is str
        and type(created) is int
        and (tmin is None or type(tmin) is int)
        and (tmax is None or type(tmax) is int)
        and (entry is None or type(entry) is str)
    ):
        # Built without __init__: a frozen dataclass's __init__ sets each
        # field through object.__setattr__, which was most of a cold read's
        # decode. Every field is set, from the values checked above; a test
        # holds this to what Segment(...) makes.
        seg: Segment = _new(Segment)
        values = (
            check_segment_name(name),
            check_location(loc),
            rows,
            size,
            checksum,
            tmin,
            tmax,
            entry,
            created,
        )
        seg.__dict__.update(zip(_FIELDS, values, strict=True))
        return seg
    return _segment_checked(d)


def _segments_at_once(records: Sequence[Mapping[str, Any]]) -> list[Segment] | None:
    """A version 1 bucket's records decoded together, as version 2's columns
    are (the common case of a cold read of a large table). None when any
    record is unusual: the caller then decodes them one by one, which names
    what is wrong (a test holds the two paths equal)."""
    columns = {k: [d.get(k) for d in records] for k in SEGMENT_COLUMNS}
    return _segments_from_columns(SegmentColumns(columns, len(records)))


_INT: frozenset[type] = frozenset({int})
_OPT_INT: frozenset[type] = frozenset({int, type(None)})
_STR: frozenset[type] = frozenset({str})
_OPT_STR: frozenset[type] = frozenset({str, type(None)})


def _typed(values: Sequence[object], types: frozenset[type]) -> bool:
    """Whether every value is of exactly one of ``types`` (bool is no int), at C speed."""
    return set(map(type, values)) <= types


def _segments_from_columns(stored: SegmentColumns) -> list[Segment] | None:
    """A version 2 bucket's segments, checked column by column as
    :func:`_segments_at_once` checks records. None when anything is unusual."""
    cols, count = stored.columns, stored.count
    names, locations, rows, size, checksum, created = (
        cols["name"],
        cols["loc"],
        cols["rows"],
        cols["bytes"],
        cols["sum"],
        cols["created"],
    )
    nothing = [None] * count
    tmin, tmax, entry = cols.get("tmin", nothing), cols.get("tmax", nothing), cols.get("entry", nothing)
    if not (
        good_segment_names(names)
        and good_locations(locations)
        and _typed(rows, _INT)
        and _typed(size, _INT)
        and _typed(created, _INT)
        and _typed(checksum, _STR)
        and _typed(tmin, _OPT_INT)
        and _typed(tmax, _OPT_INT)
        and _typed(entry, _OPT_STR)
    ):
        return None
    out: list[Segment] = []
    add = out.append
    for values in zip(names, locations, rows, size, checksum, tmin, tmax, entry, created, strict=True):
        seg: Segment = _new(Segment)  # as in segment_from_dict
        seg.__dict__.update(zip(_FIELDS, values, strict=True))
        add(seg)
    return out


_FIELDS = (
    "name",
    "location",
    "rows",
    "size_bytes",
    "checksum",
    "min_time",
    "max_time",
    "entry_id",
    "created_ms",
)


def _segment_checked(d: Mapping[str, Any]) -> Segment:
    return Segment(
        name=check_segment_name(_get(d, "name", str)),
        location=check_location(_get(d, "loc", str)),
        rows=_get(d, "rows", int),
        size_bytes=_get(d, "bytes", int),
        checksum=_get(d, "sum", str),
        min_time=_opt(d, "tmin", int),
        max_time=_opt(d, "tmax", int),
        entry_id=_opt(d, "entry", str),
        created_ms=_get(d, "created", int),
    )


def pending_to_dict(p: PendingDeletion) -> dict[str, object]:
    d: dict[str, object] = {
        "loc": p.location,
        "segment": p.segment,
        "reason": p.reason.value,
        "marked": p.marked_ms,
    }
    if p.entry_id is not None:
        d["entry"] = p.entry_id
    if p.size_bytes:
        d["bytes"] = p.size_bytes
    return d


def pending_from_dict(d: Mapping[str, Any]) -> PendingDeletion:
    return PendingDeletion(
        location=check_location(_get(d, "loc", str)),
        segment=check_segment_name(_get(d, "segment", str)),
        reason=_enum(DeletionReason, d.get("reason"), "deletion reason"),
        marked_ms=_get(d, "marked", int),
        entry_id=_opt(d, "entry", str),
        size_bytes=_opt(d, "bytes", int) or 0,
    )


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
    for key, names in (("from", src), ("to", dst)):
        if names.names is not None:
            d[key] = list(names.names)
        else:
            d[key + "_chunks"] = list(names.chunks)
            d[key + "_count"] = names.count
    return d


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


# Bucket format versions: 1 holds ``records``, one JSON object each; 2, for
# segments, holds ``columns``: one list per field of segment_to_dict. An
# optional field (times, entry) is left out when no record has it, and
# stored sparse, as {"<index>": value}, when fewer than half have it: a
# bucket grows by what one record adds, as in version 1 (a bucket passing its
# limit doubles the bucket count, which rewrites every bucket). Columns parse
# about three times faster and take a quarter less space; both are read.
ROWS_VERSION = 1
COLUMNS_VERSION = 2
SEGMENT_COLUMNS = ("name", "loc", "rows", "bytes", "sum", "created", "tmin", "tmax", "entry")
OPTIONAL_COLUMNS = frozenset({"tmin", "tmax", "entry"})


@dataclass(frozen=True)
class SegmentColumns:
    """A segment bucket's records as stored in version 2: equal-length lists."""

    columns: Mapping[str, list[Any]]
    count: int

    def rows(self) -> list[dict[str, Any]]:
        """The records one by one, as version 1 holds them (absent: None)."""
        present = [k for k in SEGMENT_COLUMNS if k in self.columns]
        return [
            {
                k: self.columns[k][i]
                for k in present
                if not (k in OPTIONAL_COLUMNS and self.columns[k][i] is None)
            }
            for i in range(self.count)
        ]


Records = Sequence[Mapping[str, Any]] | SegmentColumns


def encode_bucket(kind: str, records: Sequence[Mapping[str, object]]) -> bytes:
    if kind != SEGMENTS:
        return dumps(_envelope(BUCKET, kind=kind, records=list(records)))
    columns: dict[str, object] = {}
    for k in SEGMENT_COLUMNS:
        values = [r.get(k) for r in records]
        if k in OPTIONAL_COLUMNS:
            given = {str(i): v for i, v in enumerate(values) if v is not None}
            if not given:
                continue
            if 2 * len(given) < len(values):
                columns[k] = given
                continue
        columns[k] = values
    return dumps(_envelope_at(BUCKET, COLUMNS_VERSION, {"kind": kind, "columns": columns}))


def decode_bucket(raw: bytes, kind: str, where: str) -> Records:
    doc = parse(raw, BUCKET, where, (ROWS_VERSION, COLUMNS_VERSION))
    with _decoding(where):
        if doc.get("kind") != kind:
            raise _Bad(f"expected a {kind} bucket, found {doc.get('kind')!r}")
        if doc["v"] == COLUMNS_VERSION:
            if kind != SEGMENTS:
                raise _Bad(f"a {kind} bucket is never stored in columns")
            return _columns(_get(doc, "columns", dict))
        records = _get(doc, "records", list)
        if not all(isinstance(r, dict) for r in records):
            raise _Bad("records must be objects")
        return records


def _columns(columns: Mapping[str, Any]) -> SegmentColumns:
    unknown = sorted(set(columns) - set(SEGMENT_COLUMNS))
    if unknown:
        raise _Bad(f"unknown column(s) {', '.join(map(repr, unknown))}")
    missing = [k for k in SEGMENT_COLUMNS if k not in OPTIONAL_COLUMNS and k not in columns]
    if missing:
        raise _Bad(f"missing column(s) {', '.join(map(repr, missing))}")
    if not all(isinstance(columns[k], list) for k in SEGMENT_COLUMNS if k not in OPTIONAL_COLUMNS):
        raise _Bad("columns must be lists")
    count = len(columns["name"])
    dense = {k: _dense(k, v, count) if isinstance(v, dict) else v for k, v in columns.items()}
    if any(not isinstance(v, list) or len(v) != count for v in dense.values()):
        raise _Bad("columns must be lists of one length, or objects by index for optional fields")
    return SegmentColumns(dense, count)


def _dense(column: str, sparse: Mapping[str, Any], count: int) -> list[Any]:
    """An optional column stored as {"<index>": value}, as a list."""
    if column not in OPTIONAL_COLUMNS:
        raise _Bad(f"column {column!r} must be a list")
    out: list[Any] = [None] * count
    for key, value in sparse.items():
        if not (key.isascii() and key.isdigit() and str(int(key)) == key and int(key) < count):
            raise _Bad(f"column {column!r}: index {key!r} is not one of the bucket's {count} records")
        if value is None:
            raise _Bad(f"column {column!r}: index {key!r} holds null")
        out[int(key)] = value
    return out


def decode_records(kind: str, records: Records, where: str) -> list[Any]:
    """Decode bucket records into Segment, StoredEntry or PendingDeletion."""
    if kind == SEGMENTS:
        if isinstance(records, SegmentColumns):
            fast = _segments_from_columns(records)
            if fast is not None:
                return fast
            records = records.rows()  # one by one: the error names the record
        else:
            fast = _segments_at_once(records)
            if fast is not None:
                return fast
    elif isinstance(records, SegmentColumns):
        raise CorruptRecordError(where, f"a {kind} bucket is never stored in columns")
    decoder: Callable[[Mapping[str, Any]], Any] = {
        SEGMENTS: segment_from_dict,
        ENTRIES: stored_entry_from_dict,
        PENDING: pending_from_dict,
    }[kind]
    with _decoding(where):
        return [decoder(r) for r in records]


def encode_names(names: Sequence[str]) -> bytes:
    return dumps(_envelope(NAMES, names=list(names)))


def decode_names(raw: bytes, where: str) -> list[str]:
    doc = parse(raw, NAMES, where)
    with _decoding(where):
        return _str_list(doc, "names")


def bucket_ids(buckets: Mapping[str, Sequence[str]]) -> set[str]:
    """Every bucket blob id of a head or a version record."""
    return {blob for ids in buckets.values() for blob in ids}
