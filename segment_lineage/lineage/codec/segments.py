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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from segment_lineage.lineage.codec import columnar
from segment_lineage.lineage.codec.columnar import INT, OPT_INT, OPT_STR, STR, Columns, typed
from segment_lineage.lineage.codec.envelope import _get, _opt
from segment_lineage.lineage.core.model import Segment
from segment_lineage.lineage.core.names import (
    check_location,
    check_segment_name,
    good_locations,
    good_segment_names,
)

SEGMENTS_KIND = "segments"  # the bucket kind (codec.buckets names it from here)
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


def _as_columns(records: Sequence[Mapping[str, Any]]) -> Columns:
    columns = {k: [d.get(k) for d in records] for k in SEGMENT_COLUMNS}
    return Columns(SEGMENTS_KIND, columns, len(records), OPTIONAL_COLUMNS)


def encode_columns(records: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """Format 2's ``columns`` of records made by :func:`segment_to_dict`."""
    return columnar.encode({k: [r.get(k) for r in records] for k in SEGMENT_COLUMNS}, OPTIONAL_COLUMNS)


def encode_segment_columns(segments: Sequence[Segment]) -> dict[str, object]:
    """Format 2's ``columns`` of ``segments``, straight from the objects (no
    record dict each): what :func:`encode_columns` makes of their
    :func:`segment_to_dict` records. Names and locations are checked a column
    at a time; a bad one is named as :func:`segment_to_dict` names it."""
    names = [s.name for s in segments]
    locations = [s.location for s in segments]
    if not (good_segment_names(names) and good_locations(locations)):
        for seg in segments:  # one by one: the error names the record
            segment_to_dict(seg)
    tmin = [s.min_time for s in segments]
    columns: dict[str, list[Any]] = {
        "name": names,
        "loc": locations,
        "rows": [s.rows for s in segments],
        "bytes": [s.size_bytes for s in segments],
        "sum": [s.checksum for s in segments],
        "created": [s.created_ms for s in segments],
        "tmin": tmin,
        # A record holds its end time only beside a start time (segment_to_dict).
        "tmax": [None if low is None else s.max_time for low, s in zip(tmin, segments, strict=True)],
        "entry": [s.entry_id for s in segments],
    }
    return columnar.encode(columns, OPTIONAL_COLUMNS)


def decode_columns(columns: Mapping[str, Any]) -> Columns:
    """Format 2's ``columns``, their shape checked (raises _Bad)."""
    return columnar.decode(SEGMENTS_KIND, columns, SEGMENT_COLUMNS, OPTIONAL_COLUMNS)


Records = Sequence[Mapping[str, Any]] | Columns


def decode_segments(records: Records) -> list[Segment]:
    """A bucket's segments, in either format (raises as the checked path does)."""
    columns = records if isinstance(records, Columns) else _as_columns(records)
    fast = _segments_from_columns(columns)
    if fast is not None:
        return fast
    rows = records.rows() if isinstance(records, Columns) else records
    return [_segment_checked(r) for r in rows]  # one by one: the error names the record


def lazy_segments(stored: Records) -> tuple[list[str], list[str], Callable[[], list[Segment]]] | None:
    """A bucket's names and locations, and how to build its segments when
    first wanted: a reader of names and locations builds no object per
    record. None when the bucket is in rows or anything is unusual (its
    segments are then decoded at once, by :func:`decode_segments`, which
    says what is wrong). Every column is checked here: building cannot fail."""
    if not isinstance(stored, Columns) or not _usual(stored):
        return None
    return stored.columns["name"], stored.columns["loc"], lambda: _built(stored)


def _segments_from_columns(stored: Columns) -> list[Segment] | None:
    """The segments of ``stored``, checked a column at a time; None when
    anything is unusual (the checked path then says what)."""
    return _built(stored) if _usual(stored) else None


def _usual(stored: Columns) -> bool:
    """Whether every column of ``stored`` holds what a segment's field does."""
    cols, count = stored.columns, stored.count
    nothing = [None] * count
    return (
        good_segment_names(cols["name"])
        and good_locations(cols["loc"])
        and typed(cols["rows"], INT)
        and typed(cols["bytes"], INT)
        and typed(cols["created"], INT)
        and typed(cols["sum"], STR)
        and typed(cols.get("tmin", nothing), OPT_INT)
        and typed(cols.get("tmax", nothing), OPT_INT)
        and typed(cols.get("entry", nothing), OPT_STR)
    )


def _built(stored: Columns) -> list[Segment]:
    """The segments of columns :func:`_usual` accepted."""
    cols = stored.columns
    nothing = [None] * stored.count
    tmin, tmax, entry = cols.get("tmin", nothing), cols.get("tmax", nothing), cols.get("entry", nothing)
    out: list[Segment] = []
    add = out.append
    columns = (cols["name"], cols["loc"], cols["rows"], cols["bytes"], cols["sum"], tmin, tmax, entry)
    for values in zip(*columns, cols["created"], strict=True):
        # Built without __init__: a frozen dataclass's __init__ sets each
        # field through object.__setattr__, which was most of a cold read.
        seg: Segment = _new(Segment)
        seg.__dict__.update(zip(_FIELDS, values, strict=True))
        add(seg)
    return out
