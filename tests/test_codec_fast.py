"""The codec's fast path for segment records decodes exactly what the checked path does."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import buckets, envelope
from segment_lineage.lineage.core.errors import LineageError
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


def outcome(decode: Any, record: dict[str, Any]) -> object:
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
