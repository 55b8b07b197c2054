"""Turning an Arrow table into one segment file: shared by every writer."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from segment_lineage.ingest.errors import PushError, PushRefusedError
from segment_lineage.ingest.time_units import PER_SECOND
from segment_lineage.lineage.core.model import Segment, TimeGranularity, TimeUnit
from segment_lineage.lineage.core.periods import chunk_start, format_time
from segment_lineage.lineage.storage.deep import DeepStore


@dataclass(frozen=True)
class SegmentFile:
    location: str
    rows: int
    size_bytes: int
    checksum: str
    min_time: int | None
    max_time: int | None


def check_time_type(kind: pa.DataType) -> None:
    """Refuse a time column that is not a timestamp, a date or an integer."""
    if not (pa.types.is_timestamp(kind) or pa.types.is_date(kind) or pa.types.is_integer(kind)):
        raise PushRefusedError(f"the time column is of type {kind}: use a timestamp, a date or an integer")


def check_times_present(time_column: str, missing: int) -> None:
    """Refuse rows without a time: a table with a time column judges every
    row by it (replace-range, time chunks, time retention)."""
    if missing:
        raise PushRefusedError(
            f"{missing} row(s) of the input have no {time_column!r}: a table with a time column needs "
            "one on every row (replace-range, time chunks and time retention judge rows by it); "
            "nothing was written"
        )


def time_as_ms(column: pa.ChunkedArray, unit: TimeUnit | None = None) -> pa.ChunkedArray:
    """Timestamps, dates or integers in ``unit`` as epoch milliseconds.

    Timestamps carry their own unit and ignore ``unit``; integers need it
    (see :func:`segment_lineage.ingest.time_units.resolve_time_unit`).
    """
    kind = column.type
    if pa.types.is_timestamp(kind):
        # Floor division, so sub-millisecond precision (Spark writes ns) is
        # dropped instead of refused as a lossy cast, before 1970 as after.
        per_ms = {"s": None, "ms": 1, "us": 1_000, "ns": 1_000_000}[kind.unit]
        raw = pc.cast(column, pa.int64())
        if per_ms is None:
            return pc.multiply(raw, 1_000)
        return raw if per_ms == 1 else _floor_div(raw, per_ms)
    if pa.types.is_date(kind):
        days = pc.cast(pc.cast(column, pa.date32()), pa.int32())  # date32 -> int64 is no direct cast
        return pc.multiply(pc.cast(days, pa.int64()), 86_400_000)
    if pa.types.is_integer(kind):
        if unit is None:
            raise ValueError("an integer time column needs its unit (s, ms, us or ns)")
        raw = pc.cast(column, pa.int64())
        if unit is TimeUnit.S:
            return pc.multiply_checked(raw, 1_000)
        return raw if unit is TimeUnit.MS else _floor_div(raw, PER_SECOND[unit] // 1_000)
    check_time_type(kind)
    raise AssertionError(kind)  # check_time_type refused it


def _floor_div(values: pa.ChunkedArray, divisor: int) -> pa.ChunkedArray:
    """Integer division rounding down (Arrow's rounds toward zero), as Spark's
    ``unix_millis`` and :func:`segment_lineage.ingest.time_units.to_ms` do."""
    quotient = pc.divide(values, divisor)
    inexact = pc.and_(pc.less(values, 0), pc.not_equal(pc.multiply(quotient, divisor), values))
    return pc.if_else(inexact, pc.subtract(quotient, 1), quotient)


def integer_bounds(columns: Sequence[pa.ChunkedArray]) -> tuple[int | None, int | None] | None:
    """The raw min and max over the integer-typed ones of ``columns`` (None:
    none is an integer column, so none needs a unit); (None, None) when they
    hold no values."""
    integers = [c for c in columns if pa.types.is_integer(c.type)]
    if not integers:
        return None
    lows, highs = [], []
    for column in integers:
        bounds = pc.min_max(column)
        if bounds["min"].is_valid:
            lows.append(bounds["min"].as_py())
            highs.append(bounds["max"].as_py())
    return (min(lows), max(highs)) if lows else (None, None)


def write_segment(
    store: DeepStore,
    table: pa.Table,
    location: str,
    time_column: str | None,
    time_unit: TimeUnit | None = None,
) -> SegmentFile:
    """Write ``table`` as one Parquet file at ``location``; return its metadata.
    ``time_unit`` is the unit of an integer time column."""
    tmin = tmax = None
    if time_column is not None:  # before writing: a column that cannot convert leaves no file
        bounds = pc.min_max(time_as_ms(table.column(time_column), time_unit))
        tmin, tmax = bounds["min"].as_py(), bounds["max"].as_py()
    sink = pa.BufferOutputStream()
    # Timestamps in microseconds, as Spark writes and reads them (it refuses nanoseconds).
    pq.write_table(table, sink, compression="snappy", coerce_timestamps="us", allow_truncated_timestamps=True)
    data = sink.getvalue().to_pybytes()
    store.write_bytes(location, data)
    return SegmentFile(
        location=location,
        rows=table.num_rows,
        size_bytes=len(data),
        checksum="sha256:" + hashlib.sha256(data).hexdigest()[:32],
        min_time=tmin,
        max_time=tmax,
    )


def chunk_keys(
    column: pa.ChunkedArray, unit: TimeUnit | None, granularity: TimeGranularity
) -> pa.ChunkedArray:
    """The start (epoch ms, UTC) of the time chunk each value lies in; null for a null time."""
    moments = time_as_ms(column, unit).cast(pa.timestamp("ms", tz="UTC"))
    return pc.floor_temporal(moments, unit=granularity.value).cast(pa.int64())


MAX_CHUNKED_SEGMENTS = 10_000  # segments one push may split into by time chunk


def check_one_chunk(segments: Sequence[Segment], granularity: TimeGranularity) -> None:
    """PushError when a written segment holds rows of two time chunks (the
    split is checked, not trusted): the push is reverted, nothing lands."""
    for seg in segments:
        if seg.min_time is None or seg.max_time is None:
            continue
        if chunk_start(seg.min_time, granularity.value) != chunk_start(seg.max_time, granularity.value):
            raise PushError(
                f"segment {seg.name} holds rows from {format_time(seg.min_time)} to "
                f"{format_time(seg.max_time)}, more than one {granularity.value}"
            )


def split_by_chunk(
    parts: Sequence[pa.Table], time_column: str, unit: TimeUnit | None, granularity: TimeGranularity
) -> list[pa.Table]:
    """``parts`` cut so that no part holds rows of two time chunks (rows
    without a time go in a part of their own): a later replace-range on
    chunk bounds then finds segments that lie inside it."""
    out: list[pa.Table] = []
    for part in parts:
        if len(out) > MAX_CHUNKED_SEGMENTS:
            break
        if part.num_rows == 0:
            continue
        out += _by_chunk(part, chunk_keys(part.column(time_column), unit, granularity))
    if len(out) > MAX_CHUNKED_SEGMENTS:
        raise PushRefusedError(
            f"the input spans more than {MAX_CHUNKED_SEGMENTS} time chunks of a {granularity.value} "
            "(a segment each): use a coarser --time-granularity, or push it in parts"
        )
    return out or list(parts[:1])


def _by_chunk(part: pa.Table, keys: pa.ChunkedArray) -> list[pa.Table]:
    """One part cut by its rows' chunk ``keys``, in chunk order (rows without
    a time last); the part itself when it lies in one chunk."""
    distinct = pc.unique(keys)
    if len(distinct) <= 1:
        return [part]
    out: list[pa.Table] = []
    for key in sorted(distinct.to_pylist(), key=lambda k: (k is None, k or 0)):
        mask = pc.is_null(keys) if key is None else pc.fill_null(pc.equal(keys, key), False)
        out.append(part.filter(mask))
    return out
