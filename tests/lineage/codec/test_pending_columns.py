"""Pending deletions are written in columns (bucket format 2); buckets
written before, one object per record (format 1), are still read; the
column-at-a-time path decodes exactly what the checked path does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import envelope
from segment_lineage.lineage.codec import pending as pending_codec
from segment_lineage.lineage.core.errors import CorruptRecordError, InvalidInputError, LineageError
from segment_lineage.lineage.core.model import DeletionReason, PendingDeletion

ENTRY = "5f0c4a4e-3c8b-4f55-9a57-63f1a1b0b3c1"
PENDING_ = st.builds(
    PendingDeletion,
    location=st.from_regex(r"\A[a-z]{1,3}(/[a-z0-9_]{1,4}){0,2}\.parquet\Z"),
    segment=st.from_regex(r"\A[a-z][a-z0-9_]{0,6}\Z"),
    reason=st.sampled_from(list(DeletionReason)),
    marked_ms=st.integers(0, 2**53),
    entry_id=st.none() | st.just(ENTRY),
    size_bytes=st.integers(0, 10**12),
)


def decoded(raw: bytes) -> list[PendingDeletion]:
    return codec.decode_records(codec.PENDING, codec.decode_bucket(raw, codec.PENDING, "t"), "t")


@settings(max_examples=300, deadline=None)
@given(st.lists(PENDING_, max_size=12, unique_by=lambda p: p.location))
def test_pending_deletions_written_in_columns_read_back_the_same(items: list[PendingDeletion]) -> None:
    raw = codec.encode_pending_bucket(items)
    stored = codec.decode_bucket(raw, codec.PENDING, "t")
    assert isinstance(stored, codec.Columns) and json.loads(raw)["v"] == 2
    assert codec.decode_records(codec.PENDING, stored, "t") == items


@settings(max_examples=200, deadline=None)
@given(st.lists(PENDING_, max_size=6, unique_by=lambda p: p.location))
def test_a_bucket_written_one_object_per_record_is_still_read(items: list[PendingDeletion]) -> None:
    doc = {
        "format": codec.BUCKET,
        "v": 1,
        "kind": "pending",
        "records": [codec.pending_to_dict(p) for p in items],
    }
    assert decoded(json.dumps(doc).encode()) == items


def test_an_entry_id_few_records_have_is_stored_by_index() -> None:
    items = [PendingDeletion(f"p/s{i}.parquet", f"s{i}", DeletionReason.REPLACED, i) for i in range(10)]
    items[9] = PendingDeletion("p/s9.parquet", "s9", DeletionReason.REPLACED, 9, ENTRY, 5)
    columns = json.loads(codec.encode_pending_bucket(items))["columns"]
    assert columns["entry"] == {"9": ENTRY} and columns["bytes"] == [0] * 9 + [5]
    none = json.loads(codec.encode_pending_bucket(items[:9]))["columns"]
    assert "entry" not in none
    assert decoded(codec.encode_pending_bucket(items)) == items


def test_a_record_no_reader_would_accept_is_never_written() -> None:
    good = PendingDeletion("p/a.parquet", "a", DeletionReason.REPLACED, 1)
    for bad in (
        PendingDeletion("../a.parquet", "a", DeletionReason.REPLACED, 1),
        PendingDeletion("p/b.parquet", "a/b", DeletionReason.REPLACED, 1),
    ):
        with pytest.raises(InvalidInputError):
            codec.encode_pending_bucket([good, bad])


def columns_doc(**change: object) -> bytes:
    columns: dict[str, object] = {
        "loc": ["a.parquet", "b.parquet"],
        "segment": ["a", "b"],
        "reason": ["REPLACED", "ORPHAN"],
        "marked": [1, 2],
        "bytes": [0, 7],
    }
    columns.update(change)
    columns = {k: v for k, v in columns.items() if v is not None}
    return json.dumps({"format": codec.BUCKET, "v": 2, "kind": "pending", "columns": columns}).encode()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (columns_doc(color=["r", "g"]), "unknown column.s. 'color'"),
        (columns_doc(marked=None), "missing column.s. 'marked'"),
        (columns_doc(marked=[1]), "lists of one length"),
        (columns_doc(bytes={"0": 1}), "columns must be lists"),
        (columns_doc(entry={"2": ENTRY}), "index '2' is not one of the bucket's 2 records"),
        (columns_doc(reason=["REPLACED", "GONE"]), "deletion reason"),
        (columns_doc(marked=[1, True]), "field 'marked' must be int"),
        (columns_doc(loc=["a.parquet", "/abs.parquet"]), "location"),
        (columns_doc(segment=["a", ""]), "segment name"),
    ],
)
def test_a_bad_bucket_in_columns_fails_closed_naming_the_problem(raw: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decoded(raw)


def test_a_bucket_of_one_kind_is_not_read_as_another() -> None:
    raw = codec.encode_pending_bucket([PendingDeletion("p/a.parquet", "a", DeletionReason.REPLACED, 1)])
    with pytest.raises(CorruptRecordError, match="expected a segments bucket"):
        codec.decode_bucket(raw, codec.SEGMENTS, "t")
    stored = codec.decode_bucket(raw, codec.PENDING, "t")
    with pytest.raises(CorruptRecordError, match="never stored in columns"):
        codec.decode_records(codec.SEGMENTS, stored, "t")


ODD = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.text(max_size=3), st.integers())
FIELDS = {
    "loc": st.sampled_from(["p/a.parquet", "../x", "/abs", "a//b", "k=1/f.parquet"]) | ODD,
    "segment": st.sampled_from(["a", "a..b", "", "x/y", "ok-2.v"]) | ODD,
    "reason": st.sampled_from(["REPLACED", "ORPHAN_SEEN", "replaced", ""]) | ODD,
    "marked": st.integers(-1, 2**60) | ODD,
    "entry": st.none() | st.just(ENTRY) | ODD,
    "bytes": st.integers(-1, 10**12) | ODD,
}


def outcome(decode: Any, arg: Any) -> Any:
    try:
        return decode(arg)
    except (LineageError, envelope._Bad, KeyError, TypeError, ValueError, AttributeError) as exc:
        return type(exc)


VALID = {"loc": "p/a.parquet", "segment": "a", "reason": "REPLACED", "marked": 1, "entry": ENTRY, "bytes": 3}


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    """A valid record with up to two fields replaced by odd values."""
    record = dict(VALID)
    for key in draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=2, unique=True)):
        record[key] = draw(FIELDS[key])
    return record


@settings(max_examples=400, deadline=None)
@given(records())
def test_the_column_path_decodes_what_the_checked_path_does(record: dict[str, Any]) -> None:
    """One record's fields in columns: the column-at-a-time path gives what
    the record-by-record path gives (a record, or an error)."""
    columns = pending_codec.decode_pending_columns({k: [v] for k, v in record.items()})
    fast = pending_codec._from_columns(columns)
    checked = outcome(lambda rows: [codec.pending_from_dict(r) for r in rows], columns.rows())
    if fast is not None:
        assert fast == checked
    assert outcome(pending_codec.decode_pending, columns) == checked


def test_a_bucket_a_newer_build_might_write_says_to_upgrade() -> None:
    raw = json.dumps({"format": codec.BUCKET, "v": 2, "kind": "entries", "columns": {}}).encode()
    with pytest.raises(CorruptRecordError, match="never stored in columns") as refused:
        codec.decode_bucket(raw, codec.ENTRIES, "t")
    assert refused.value.remedy is not None and "upgrade this client" in refused.value.remedy
    assert refused.value.message.count("corrupt lineage record") == 1
    raw = json.dumps({"format": codec.BUCKET, "v": 3, "kind": "segments", "columns": {}}).encode()
    with pytest.raises(CorruptRecordError, match="unknown format version 3") as newer:
        codec.decode_bucket(raw, codec.SEGMENTS, "t")
    assert newer.value.remedy is not None and "newer segment-lineage" in newer.value.remedy
    raw = json.dumps({"format": codec.BUCKET, "v": 0, "kind": "segments", "records": []}).encode()
    with pytest.raises(CorruptRecordError, match="unknown format version 0") as odd:
        codec.decode_bucket(raw, codec.SEGMENTS, "t")
    assert odd.value.remedy is None
