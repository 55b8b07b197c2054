"""The codec's fast path for segment records decodes exactly what the checked path does."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import envelope
from segment_lineage.lineage.codec import segments as buckets
from segment_lineage.lineage.core.errors import CorruptRecordError, InvalidInputError, LineageError
from segment_lineage.lineage.core.model import Segment

ODD = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.text(max_size=3), st.integers())
FIELDS = {
    "name": st.sampled_from(["seg_1", "a..b", "", "x/y", "ok-2.v"]) | ODD,
    "loc": st.sampled_from(["p/seg_1.parquet", "../x", "/abs", "a//b", "k=1/f.parquet"]) | ODD,
    "rows": st.integers(-1, 10**12) | ODD,
    "bytes": st.integers(-1, 10**12) | ODD,
    "sum": st.sampled_from(["", "c" * 16]) | ODD,
    "created": st.integers(0, 2**41) | ODD,
    "tmin": st.none() | st.integers(-(2**40), 2**41) | ODD,
    "tmax": st.none() | st.integers(-(2**40), 2**41) | ODD,
    "entry": st.none() | st.sampled_from(["5f0c4a4e-3c8b-4f55-9a57-63f1a1b0b3c1"]) | ODD,
}


def outcome(decode: Any, record: Any) -> Any:
    try:
        return decode(record)
    except (LineageError, envelope._Bad, KeyError, TypeError, ValueError, AttributeError) as exc:
        return type(exc)


VALID = {
    "name": "seg_1",
    "loc": "p/seg_1.parquet",
    "rows": 10,
    "bytes": 2048,
    "sum": "c" * 16,
    "created": 1_700_000_000_000,
    "tmin": 1,
    "tmax": 2,
    "entry": "5f0c4a4e-3c8b-4f55-9a57-63f1a1b0b3c1",
}
MISSING = object()
ENTRY = "5f0c4a4e-3c8b-4f55-9a57-63f1a1b0b3c1"


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    """A valid record with up to two fields replaced by odd values or left out."""
    record = dict(VALID)
    for key in draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=2, unique=True)):
        value = draw(FIELDS[key] | st.just(MISSING))
        if value is MISSING:
            del record[key]
        else:
            record[key] = value
    return record


@settings(max_examples=800, deadline=None)
@given(records())
def test_the_fast_path_agrees_with_the_checked_path(record: dict[str, Any]) -> None:
    assert outcome(codec.segment_from_dict, record) == outcome(buckets._segment_checked, record)


def test_a_segment_built_by_the_fast_path_is_a_whole_frozen_segment() -> None:
    fast = codec.segment_from_dict(VALID)
    assert fast == buckets._segment_checked(VALID) and hash(fast) == hash(buckets._segment_checked(VALID))
    assert set(vars(fast)) == {f.name for f in dataclasses.fields(Segment)}  # a field added is a field set
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.rows = 1  # type: ignore[misc]


def one_by_one(records: list[dict[str, Any]]) -> object:
    try:
        return [buckets._segment_checked(r) for r in records]
    except (LineageError, envelope._Bad, KeyError, TypeError, ValueError, AttributeError) as exc:
        return type(exc)


def named(i: int, record: dict[str, Any]) -> dict[str, Any]:
    """``record`` under a name (and location) of its own, when it has the usual ones."""
    out = dict(record)
    if out.get("name") == VALID["name"]:
        out["name"] = f"seg_{i}"
    if out.get("loc") == VALID["loc"]:
        out["loc"] = f"p/seg_{i}.parquet"
    return out


@settings(max_examples=400, deadline=None)
@given(st.lists(records(), max_size=4))
def test_a_bucket_decoded_at_once_is_what_its_records_decode_to_one_by_one(
    batch: list[dict[str, Any]],
) -> None:
    records_ = [named(i, r) for i, r in enumerate(batch)]
    at_once = outcome(lambda rs: codec.decode_records(codec.SEGMENTS, rs, "test"), records_)
    if isinstance(at_once, type):  # an error: the records' decode names it, whichever path
        assert isinstance(one_by_one(records_), type)
    else:
        assert at_once == one_by_one(records_)
        assert all(set(vars(s)) == {f.name for f in dataclasses.fields(Segment)} for s in at_once)


def through_columns(records: list[dict[str, Any]]) -> object:
    """``records`` written as a version 2 bucket and read back."""
    raw = codec.encode_bucket(codec.SEGMENTS, records)
    return outcome(
        lambda _: codec.decode_records(codec.SEGMENTS, codec.decode_bucket(raw, "segments", "t"), "t"), {}
    )


@settings(max_examples=400, deadline=None)
@given(st.lists(records(), max_size=5))
def test_a_bucket_in_columns_reads_as_its_records_one_by_one(batch: list[dict[str, Any]]) -> None:
    records_ = [named(i, r) for i, r in enumerate(batch)]
    stored = through_columns(records_)
    if isinstance(stored, type):
        assert isinstance(one_by_one(records_), type)
    else:
        assert stored == one_by_one(records_)


TIMES = st.none() | st.tuples(st.integers(-(2**40), 2**41), st.integers(-(2**40), 2**41))
SEGMENTS_ = st.builds(
    lambda times, **fields: Segment(
        **fields, min_time=None if times is None else times[0], max_time=None if times is None else times[1]
    ),
    times=TIMES,
    name=st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True),
    location=st.from_regex(r"[a-z]{1,5}/[a-z0-9]{1,8}\.parquet", fullmatch=True),
    rows=st.integers(0, 10**9),
    size_bytes=st.integers(0, 10**12),
    checksum=st.sampled_from(["", "c" * 16]),
    entry_id=st.none() | st.just("5f0c4a4e-3c8b-4f55-9a57-63f1a1b0b3c1"),
    created_ms=st.integers(0, 2**41),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(SEGMENTS_, max_size=12, unique_by=lambda s: s.name))
def test_segments_written_in_columns_read_back_the_same(segments: list[Segment]) -> None:
    raw = codec.encode_bucket(codec.SEGMENTS, [codec.segment_to_dict(s) for s in segments])
    stored = codec.decode_bucket(raw, codec.SEGMENTS, "t")
    assert isinstance(stored, codec.Columns)
    assert codec.decode_records(codec.SEGMENTS, stored, "t") == segments


def test_a_field_few_segments_have_is_stored_by_index() -> None:
    plain = [Segment(f"s{i}", f"p/s{i}.parquet", rows=1) for i in range(10)]
    one_pushed = [*plain[:9], dataclasses.replace(plain[9], entry_id=ENTRY)]
    doc = json.loads(codec.encode_bucket(codec.SEGMENTS, [codec.segment_to_dict(s) for s in one_pushed]))
    assert doc["v"] == 2 and doc["columns"]["entry"] == {"9": VALID["entry"]}
    assert "tmin" not in doc["columns"]
    all_pushed = [dataclasses.replace(s, entry_id=ENTRY) for s in plain]
    doc = json.loads(codec.encode_bucket(codec.SEGMENTS, [codec.segment_to_dict(s) for s in all_pushed]))
    assert doc["columns"]["entry"] == [VALID["entry"]] * 10


def columns_doc(**change: object) -> bytes:
    columns: dict[str, object] = {
        "name": ["a", "b"],
        "loc": ["a.parquet", "b.parquet"],
        "rows": [1, 2],
        "bytes": [0, 0],
        "sum": ["", ""],
        "created": [0, 0],
    }
    columns.update(change)
    columns = {k: v for k, v in columns.items() if v is not None}
    return json.dumps({"format": codec.BUCKET, "v": 2, "kind": "segments", "columns": columns}).encode()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (columns_doc(color=["r", "g"]), "unknown column.s. 'color'"),
        (columns_doc(rows=None), "missing column.s. 'rows'"),
        (columns_doc(rows=[1]), "lists of one length"),
        (columns_doc(rows={"0": 1}), "columns must be lists"),
        (columns_doc(entry={"2": VALID["entry"]}), "index '2' is not one of the bucket's 2 records"),
        (columns_doc(entry={"01": VALID["entry"]}), "index '01' is not one"),
        (columns_doc(entry={"0": None}), "index '0' holds null"),
        (columns_doc(tmin="soon"), "lists of one length, or objects"),
        (columns_doc(rows=[1, "2"]), "field 'rows' must be int"),
        (columns_doc(name=["a", "a/b"]), "segment name"),
    ],
)
def test_a_bad_bucket_in_columns_fails_closed_naming_the_problem(raw: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        codec.decode_records(codec.SEGMENTS, codec.decode_bucket(raw, codec.SEGMENTS, "t"), "t")


def test_only_segment_buckets_come_in_columns_and_unknown_versions_are_refused() -> None:
    raw = json.dumps({"format": codec.BUCKET, "v": 2, "kind": "entries", "columns": {}}).encode()
    with pytest.raises(CorruptRecordError, match="never stored in columns"):
        codec.decode_bucket(raw, codec.ENTRIES, "t")
    raw = json.dumps({"format": codec.BUCKET, "v": 3, "kind": "segments", "columns": {}}).encode()
    with pytest.raises(CorruptRecordError, match="reads versions 1 and 2"):
        codec.decode_bucket(raw, codec.SEGMENTS, "t")


def test_a_number_past_the_digit_limit_fails_closed() -> None:
    raw = columns_doc().replace(b'"rows": [1, 2]', b'"rows": [1, ' + b"1" * 5000 + b"]")
    with pytest.raises(CorruptRecordError, match="not valid JSON"):
        codec.decode_bucket(raw, codec.SEGMENTS, "t")


NAMES_ANY = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(SEGMENTS_, max_size=12, unique_by=lambda s: s.name),
    st.lists(st.tuples(NAMES_ANY, NAMES_ANY), max_size=3),
)
def test_segments_encoded_straight_into_columns_are_the_bytes_their_records_make(
    segments: list[Segment], odd: list[tuple[str, str]]
) -> None:
    """A commit's segment buckets are encoded from the segments themselves;
    the bytes are those of their records, and a name or location no reader
    would accept is refused with the same error (nothing else accepted)."""
    renamed = (dataclasses.replace(segments[0], name=n, location=loc) for n, loc in odd if segments)
    made = [*segments, *renamed]
    try:
        expected: bytes | str = codec.encode_bucket(codec.SEGMENTS, [codec.segment_to_dict(s) for s in made])
    except InvalidInputError as exc:
        expected = str(exc)
    try:
        got: bytes | str = codec.encode_segment_bucket(made)
    except InvalidInputError as exc:
        got = str(exc)
    assert got == expected


def test_a_segment_with_an_end_time_and_no_start_is_encoded_as_its_record_is() -> None:
    seg = Segment("s", "p/s.parquet", rows=1, max_time=5)
    as_record = codec.encode_bucket(codec.SEGMENTS, [codec.segment_to_dict(seg)])
    assert codec.encode_segment_bucket([seg]) == as_record
