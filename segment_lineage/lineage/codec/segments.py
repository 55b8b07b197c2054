"""Segment records in bucket blobs: one JSON object each (bucket format 1),
or a bucket's records in columns (format 2, what is written now).

Format 2 holds one list per field of :func:`segment_to_dict`. An optional
field (times, entry) is left out when no record has it, and stored sparse,
as {"<index>": value}, when fewer than half have it: a bucket grows by what
one record adds, as in format 1 (a bucket passing its limit doubles the
bucket count, which rewrites every bucket). Columns parse about three times
faster and take a quarter less space; both formats are read.

Decoding checks a bucket a column at a time (names and locations by one
regular expression each) and builds the segments without the frozen
dataclass's ``__init__``; anything unusual is decoded record by record by
the checked path, which names what is wrong. A test holds the two equal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from segment_lineage.lineage.codec.envelope import _Bad, _get, _opt
from segment_lineage.lineage.core.model import Segment
from segment_lineage.lineage.core.names import (
    check_location,
    check_segment_name,
    good_locations,
    good_segment_names,
)

SEGMENT_COLUMNS = ("name", "loc", "rows", "bytes", "sum", "created", "tmin", "tmax", "entry")
OPTIONAL_COLUMNS = frozenset({"tmin", "tmax", "entry"})
_FIELDS = (  # Segment's, in the order _segments_from_columns zips the columns
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
_new = object.__new__


def segment_to_dict(seg: Segment) -> dict[str, object]:
    d: dict[str, object] = {  # checked as decoding checks them: never an undecodable record
        "name": check_segment_name(seg.name),
        "loc": check_location(seg.location),
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
    """One record: the fast path of a bucket, else the checked path."""
    fast = _segments_from_columns(_as_columns([d]))
    return fast[0] if fast else _segment_checked(d)


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


@dataclass(frozen=True)
class SegmentColumns:
    """A segment bucket's records as stored in format 2: equal-length lists."""

    columns: Mapping[str, list[Any]]
    count: int

    def rows(self) -> list[dict[str, Any]]:
        """The records one by one, as format 1 holds them (absent: None)."""
        present = [k for k in SEGMENT_COLUMNS if k in self.columns]
        return [
            {
                k: self.columns[k][i]
                for k in present
                if not (k in OPTIONAL_COLUMNS and self.columns[k][i] is None)
            }
            for i in range(self.count)
        ]


def _as_columns(records: Sequence[Mapping[str, Any]]) -> SegmentColumns:
    return SegmentColumns({k: [d.get(k) for d in records] for k in SEGMENT_COLUMNS}, len(records))


def encode_columns(records: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """Format 2's ``columns`` of records made by :func:`segment_to_dict`."""
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
    return columns


def decode_columns(columns: Mapping[str, Any]) -> SegmentColumns:
    """Format 2's ``columns``, their shape checked (raises _Bad)."""
    _check_named(columns)
    count = len(columns["name"])
    dense = {k: _dense(k, v, count) if isinstance(v, dict) else v for k, v in columns.items()}
    if any(not isinstance(v, list) or len(v) != count for v in dense.values()):
        raise _Bad("columns must be lists of one length, or objects by index for optional fields")
    return SegmentColumns(dense, count)


def _check_named(columns: Mapping[str, Any]) -> None:
    """Refuse a column format 2 has not, and a required one missing or not a list (raises _Bad)."""
    unknown = sorted(set(columns) - set(SEGMENT_COLUMNS))
    if unknown:
        raise _Bad(f"unknown column(s) {', '.join(map(repr, unknown))}")
    missing = [k for k in SEGMENT_COLUMNS if k not in OPTIONAL_COLUMNS and k not in columns]
    if missing:
        raise _Bad(f"missing column(s) {', '.join(map(repr, missing))}")
    if not all(isinstance(columns[k], list) for k in SEGMENT_COLUMNS if k not in OPTIONAL_COLUMNS):
        raise _Bad("columns must be lists")


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


def decode_segments(records: Sequence[Mapping[str, Any]] | SegmentColumns) -> list[Segment]:
    """A bucket's segments, in either format (raises as the checked path does)."""
    columns = records if isinstance(records, SegmentColumns) else _as_columns(records)
    fast = _segments_from_columns(columns)
    if fast is not None:
        return fast
    rows = records.rows() if isinstance(records, SegmentColumns) else records
    return [_segment_checked(r) for r in rows]  # one by one: the error names the record


_INT: frozenset[type] = frozenset({int})
_OPT_INT: frozenset[type] = frozenset({int, type(None)})
_STR: frozenset[type] = frozenset({str})
_OPT_STR: frozenset[type] = frozenset({str, type(None)})


def _typed(values: Sequence[object], types: frozenset[type]) -> bool:
    """Whether every value is of exactly one of ``types`` (bool is no int), at C speed."""
    return set(map(type, values)) <= types


def _segments_from_columns(stored: SegmentColumns) -> list[Segment] | None:
    """The segments of ``stored``, checked a column at a time; None when
    anything is unusual (the checked path then says what)."""
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
        # Built without __init__: a frozen dataclass's __init__ sets each
        # field through object.__setattr__, which was most of a cold read.
        seg: Segment = _new(Segment)
        seg.__dict__.update(zip(_FIELDS, values, strict=True))
        add(seg)
    return out
