"""Turning an Arrow table into one segment file: shared by every writer."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ingest.storage import DeepStore


@dataclass(frozen=True)
class SegmentFile:
    location: str
    rows: int
    size_bytes: int
    checksum: str
    min_time: int | None
    max_time: int | None


def time_as_ms(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Timestamps, dates or integers (taken as ms) as epoch milliseconds."""
    kind = column.type
    if pa.types.is_timestamp(kind):
        # Integer division, so sub-millisecond precision (Spark writes ns) is
        # truncated instead of refused as a lossy cast.
        per_ms = {"s": None, "ms": 1, "us": 1_000, "ns": 1_000_000}[kind.unit]
        raw = pc.cast(column, pa.int64())
        if per_ms is None:
            return pc.multiply(raw, 1_000)
        return raw if per_ms == 1 else pc.divide(raw, per_ms)
    if pa.types.is_date(kind):
        return pc.multiply(pc.cast(pc.cast(column, pa.date32()), pa.int64()), 86_400_000)
    if pa.types.is_integer(kind):
        return pc.cast(column, pa.int64())
    raise ValueError(f"time column of type {kind} is not a timestamp, date or integer")


def write_segment(store: DeepStore, table: pa.Table, location: str, time_column: str | None) -> SegmentFile:
    """Write ``table`` as one Parquet file at ``location``; return its metadata."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    data = sink.getvalue().to_pybytes()
    store.write_bytes(location, data)
    tmin = tmax = None
    if time_column is not None:
        bounds = pc.min_max(time_as_ms(table.column(time_column)))
        tmin, tmax = bounds["min"].as_py(), bounds["max"].as_py()
    return SegmentFile(
        location=location,
        rows=table.num_rows,
        size_bytes=len(data),
        checksum="sha256:" + hashlib.sha256(data).hexdigest()[:32],
        min_time=tmin,
        max_time=tmax,
    )
