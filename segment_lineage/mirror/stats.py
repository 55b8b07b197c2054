"""Statistics of a segment file for its add action in the Delta log
(``numRecords``, ``minValues``, ``maxValues``, ``nullCount``), read from the
file's own Parquet footer, never from what a caller registered: engines
(DuckDB, delta-rs, Polars, Spark) skip the files a filter rules out.

A bound is given only where it is safe to prune on: the footer states it
for every row group, and it is written so that it still holds after the
format's rounding. Timestamps are kept to the millisecond, as Delta keeps
them: a minimum is rounded down, a maximum up. Text longer than
:data:`MAX_TEXT` characters, decimals, booleans, binary and nested columns
get no bounds (their null counts are still given). A column a file lacks
gets nothing: it reads as null there, which no bound says.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

MAX_TEXT = 32  # characters: Delta's own writers cut longer text, which is not a bound on it
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

Bound = Callable[[Any, bool], Any]  # (raw or converted value, is the maximum) -> JSON value, or None


def file_stats(meta: pq.FileMetaData) -> str:
    """The ``stats`` JSON of one file's add action, from its footer."""
    fields = {field.name: field for field in meta.schema.to_arrow_schema()}
    chunks: dict[str, list[Any]] = {name: [] for name in fields}
    for group in range(meta.num_row_groups):
        row_group = meta.row_group(group)
        for index in range(row_group.num_columns):
            column = row_group.column(index)
            if column.path_in_schema in chunks:  # a flat column (a nested one's path has a dot)
                chunks[column.path_in_schema].append(column.statistics)
    stats: dict[str, Any] = {"numRecords": meta.num_rows}
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name, found in chunks.items():
        if meta.num_row_groups and len(found) == meta.num_row_groups:
            _column(fields[name].type, found, name, lows, highs, nulls)
    for key, values in (("minValues", lows), ("maxValues", highs), ("nullCount", nulls)):
        if values:
            stats[key] = values
    return json.dumps(stats, separators=(",", ":"))


def _column(
    kind: pa.DataType,
    found: Sequence[Any],
    name: str,
    lows: dict[str, Any],
    highs: dict[str, Any],
    nulls: dict[str, int],
) -> None:
    """One column's null count and bounds, over all its row groups."""
    if all(s is not None and s.has_null_count for s in found):
        nulls[name] = sum(int(s.null_count) for s in found)
    bound = _bound_for(kind)
    counted = [s for s in found if s is not None and s.has_min_max]
    if bound is None or len(counted) != len(found):
        return  # a row group without bounds (all null, say): none for the file
    low = _fold([bound(_value(kind, s, high=False), False) for s in counted], min)
    high = _fold([bound(_value(kind, s, high=True), True) for s in counted], max)
    if low is not None and high is not None:
        lows[name], highs[name] = low, high


def _fold(values: list[Any], pick: Callable[[list[Any]], Any]) -> Any:
    """The least (or greatest) of the row groups' bounds; None when any is missing."""
    return None if not values or any(v is None for v in values) else pick(values)


def _value(kind: pa.DataType, stats: Any, *, high: bool) -> Any:
    """A row group's bound: raw for timestamps (their unit is the file's), else converted."""
    if pa.types.is_timestamp(kind):
        return stats.max_raw if high else stats.min_raw
    return stats.max if high else stats.min


def _bound_for(kind: pa.DataType) -> Bound | None:
    if pa.types.is_integer(kind):
        return lambda v, _high: v if isinstance(v, int) and not isinstance(v, bool) else None
    if pa.types.is_floating(kind):
        return lambda v, _high: v if isinstance(v, float) and math.isfinite(v) else None  # NaN: no bound
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return lambda v, _high: v if isinstance(v, str) and len(v) <= MAX_TEXT else None
    if pa.types.is_date32(kind) or pa.types.is_date64(kind):
        return lambda v, _high: v.isoformat() if isinstance(v, dt.date) else None
    if pa.types.is_timestamp(kind):
        return _timestamp(kind)
    return None


def _timestamp(kind: pa.TimestampType) -> Bound:
    """Milliseconds, a minimum rounded down and a maximum up; ``Z`` for an
    instant (a column with a zone), none for a local date-time."""
    per_second = _PER_SECOND[kind.unit]
    zone = "Z" if kind.tz is not None else ""

    def bound(raw: Any, high: bool) -> str | None:
        if not isinstance(raw, int):
            return None  # INT96 and the like: no bound
        ms = -((-raw * 1_000) // per_second) if high else (raw * 1_000) // per_second
        try:
            moment = _EPOCH + dt.timedelta(milliseconds=ms)
        except OverflowError:
            return None
        if not 1 <= moment.year <= 9999:
            return None
        return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}.{ms % 1000:03d}{zone}"

    return bound
