"""The codec's fast path for segment records decodes exactly what the checked path does."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import buckets, envelope
from segment_lineage.lineage.core.errors import LineageError

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
