"""Pending deletions in bucket blobs: one JSON object each (bucket format 1,
read, no longer written), or a bucket's records in columns (format 2).

Format 2 holds one list per field of :func:`pending_to_dict`, the entry id
optional (:mod:`segment_lineage.lineage.codec.columnar`). A retention pass
queues and clears a whole table's replaced files at once (100,000 records in
one commit), so both ways are a column at a time: writing checks every
location and segment name by one regular expression, reading checks each
column and builds the records without the frozen dataclass's ``__init__``.
Anything unusual is written or read record by record, which names the
record at fault. A test holds the two paths equal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from segment_lineage.lineage.codec import columnar
from segment_lineage.lineage.codec.columnar import INT, OPT_STR, STR, Columns, typed
from segment_lineage.lineage.codec.envelope import _enum, _get, _opt
from segment_lineage.lineage.core.model import DeletionReason, PendingDeletion
from segment_lineage.lineage.core.names import (
    check_location,
    check_segment_name,
    good_locations,
    good_segment_names,
)

PENDING_KIND = "pending"  # the bucket kind (codec.buckets names it from here)
PENDING_COLUMNS = ("loc", "segment", "reason", "marked", "entry", "bytes")
OPTIONAL = frozenset({"entry"})
_FIELDS = ("location", "segment", "reason", "marked_ms", "entry_id", "size_bytes")  # zipped in column order
_REASONS = {r.value: r for r in DeletionReason}
_new = object.__new__


def pending_to_dict(p: PendingDeletion) -> dict[str, object]:
    """One record as format 1 holds it (and as format 2's rows give it)."""
    # Checked as decoding checks them: a record no reader could decode is
    # never written (a hand-made change would leave the table unreadable).
    d: dict[str, object] = {
        "loc": check_location(p.location),
        "segment": check_segment_name(p.segment),
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


def encode_pending_columns(items: Sequence[PendingDeletion]) -> dict[str, object]:
    """Format 2's ``columns`` of ``items`` (raises InvalidInputError, naming
    it, for a location or segment name no reader would accept)."""
    locations = [p.location for p in items]
    segments = [p.segment for p in items]
    if not (good_locations(locations) and good_segment_names(segments)):
        for p in items:  # one by one: the error names the record
            check_location(p.location)
            check_segment_name(p.segment)
    return columnar.encode(
        {
            "loc": locations,
            "segment": segments,
            "reason": [p.reason.value for p in items],
            "marked": [p.marked_ms for p in items],
            "entry": [p.entry_id for p in items],
            "bytes": [p.size_bytes for p in items],
        },
        OPTIONAL,
    )


def decode_pending_columns(columns: Mapping[str, Any]) -> Columns:
    """Format 2's ``columns``, their shape checked (raises _Bad)."""
    return columnar.decode(PENDING_KIND, columns, PENDING_COLUMNS, OPTIONAL)


def decode_pending(records: Sequence[Mapping[str, Any]] | Columns) -> list[PendingDeletion]:
    """A bucket's pending deletions, in either format (raises as the checked path does)."""
    if isinstance(records, Columns):
        fast = _from_columns(records)
        if fast is not None:
            return fast
        records = records.rows()
    return [pending_from_dict(r) for r in records]  # one by one: the error names the record


def _from_columns(stored: Columns) -> list[PendingDeletion] | None:
    """The records of ``stored``, checked a column at a time; None when
    anything is unusual (the checked path then says what)."""
    cols = stored.columns
    entry = cols.get("entry", [None] * stored.count)
    if not (
        good_locations(cols["loc"])
        and good_segment_names(cols["segment"])
        and typed(cols["reason"], STR)
        and set(cols["reason"]) <= _REASONS.keys()
        and typed(cols["marked"], INT)
        and typed(entry, OPT_STR)
        and typed(cols["bytes"], INT)
    ):
        return None
    out: list[PendingDeletion] = []
    add = out.append
    reasons = [_REASONS[r] for r in cols["reason"]]
    rows = zip(cols["loc"], cols["segment"], reasons, cols["marked"], entry, cols["bytes"], strict=True)
    for values in rows:
        p: PendingDeletion = _new(PendingDeletion)  # as segments are built (codec.segments)
        p.__dict__.update(zip(_FIELDS, values, strict=True))
        add(p)
    return out
