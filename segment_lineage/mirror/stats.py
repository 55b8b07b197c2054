"""Statistics of a segment file for its add action in the Delta log
(``numRecords``, ``minValues``, ``maxValues``, ``nullCount``), read from the
file's own Parquet footer, never from what a caller registered: engines
(DuckDB, delta-rs, Polars, Spark) skip the files a filter rules out.

Every bound is one pruning on it is safe with, in every engine:

- whole numbers, booleans, dates and decimals (written as exact JSON
  numbers) as the footer states them;
- text cut to :data:`MAX_TEXT` characters, a minimum as its prefix and a
  maximum as its prefix with the last character raised (still above the
  value, in code point order, which is UTF-8's byte order);
- timestamps kept to the millisecond, as Delta keeps them: a minimum
  rounded down, a maximum up;
- floating point only where the file holds no NaN (Parquet's bounds leave
  NaN out, while DuckDB and DataFusion order it above every number) and no
  infinity (JSON has none): the caller reads the column to know.

A column the file lacks, or holds only nulls in, gets a null count of every
row and no bounds. A column that holds values but cannot be bounded (a row
group without statistics, a NaN, a nested column) takes every bound from
the file: delta-rs reads a bound missing beside others as null and would
skip the file for any filter on that column. The file then carries its row
and null counts only, and engines read it for every filter.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import logging
import math
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from segment_lineage.lineage.storage.deep import DeepStore

log = logging.getLogger("segment_lineage.mirror")

MAX_TEXT = 32  # characters kept of a text bound, as Delta's own writers keep
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DAY = dt.date(1970, 1, 1)

# (a row group's raw or converted bound, whether it is the maximum) -> a JSON value, or None
Bound = Callable[[Any, bool], Any]


@dataclass(frozen=True)
class Chunk:
    """One row group's statistics of one column."""

    rows: int
    stats: Any  # pyarrow's Statistics, or None when the writer wrote none


STATS_READERS = 8  # footers read at once for one commit's added files
NAN_LOOK_BYTES = 64 << 20  # floating-point data read at most, per file, to know it holds no NaN


def files_stats(store: DeepStore, locations: Sequence[str], columns: Sequence[str]) -> dict[str, str]:
    """Each file's statistics (:func:`footer_stats`), a few files at once;
    a file that cannot be read so gets none (engines then read it whole,
    which is always safe), and the publish goes on."""
    fs = store.filesystem()

    def one(location: str) -> tuple[str, str | None]:
        try:
            return location, footer_stats(store.path(location), fs, columns)
        except Exception as exc:  # noqa: BLE001  no statistics is always safe
            said = str(exc).partition("\n")[0] or type(exc).__name__
            log.warning("no statistics for %s in the Delta log: %s", location, said)
            return location, None

    if len(locations) <= 1:
        found = [one(location) for location in locations]
    else:
        with ThreadPoolExecutor(
            min(len(locations), STATS_READERS), thread_name_prefix="mirror-stats"
        ) as pool:
            found = list(pool.map(one, locations))
    return {location: stats for location, stats in found if stats is not None}


def footer_stats(path: str, fs: Any, columns: Sequence[str]) -> str:
    """:func:`file_stats` of the file at ``path`` on ``fs``: its footer, and
    its floating-point columns when they hold at most :data:`NAN_LOOK_BYTES`."""
    import pyarrow.compute as pc

    meta = pq.read_metadata(path, filesystem=fs)
    floats = [
        f.name for f in meta.schema.to_arrow_schema() if pa.types.is_floating(f.type) and f.name in columns
    ]
    size = sum(
        meta.row_group(g).column(c).total_uncompressed_size
        for g in range(meta.num_row_groups)
        for c in range(meta.num_columns)
        if meta.row_group(g).column(c).path_in_schema in floats
    )
    nan_free: list[str] = []
    if floats and size <= NAN_LOOK_BYTES:
        data = pq.read_table(path, columns=floats, filesystem=fs)
        nan_free = [name for name in floats if not pc.any(pc.is_nan(data.column(name))).as_py()]
    return file_stats(meta, columns, nan_free)


def file_stats(meta: pq.FileMetaData, columns: Sequence[str], nan_free: Collection[str] = ()) -> str:
    """The ``stats`` JSON of one file's add action for a table of ``columns``,
    from the file's footer; ``nan_free``: its floating-point columns known to
    hold no NaN."""
    rows = meta.num_rows
    fields = {field.name: field for field in meta.schema.to_arrow_schema()}
    chunks: dict[str, list[Chunk]] = {name: [] for name in fields}
    for group in range(meta.num_row_groups):
        row_group = meta.row_group(group)
        for index in range(row_group.num_columns):
            column = row_group.column(index)
            if column.path_in_schema in chunks:  # a flat column (a nested one's path has a dot)
                chunks[column.path_in_schema].append(Chunk(row_group.num_rows, column.statistics))
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    bounded = True
    for name in columns:
        if name not in fields:  # the file lacks it: it reads as null in every row
            nulls[name] = rows
            continue
        found = chunks[name] if len(chunks[name]) == meta.num_row_groups else []
        nulls_in, bounds = _column(fields[name].type, found, name in nan_free)
        if nulls_in is not None:
            nulls[name] = nulls_in
        if bounds is not None:
            lows[name], highs[name] = bounds
        elif nulls_in != rows:  # values no bound can be given for
            bounded = False
    parts = [f'"numRecords":{rows}']
    if bounded and lows:
        parts += [f'"minValues":{_object(lows)}', f'"maxValues":{_object(highs)}']
    if nulls:
        parts.append(f'"nullCount":{_object(nulls)}')
    return "{" + ",".join(parts) + "}"


def _object(values: dict[str, Any]) -> str:
    """A JSON object; decimals as exact numbers (JSON's numbers are text),
    text as its characters, not escapes: delta-rs 1.6 decodes the escape of
    a character past U+FFFFF (a surrogate pair) to a lower one, and skipped
    files holding the text."""
    shown = (
        f"{_text_json(k)}:{format(v, 'f') if isinstance(v, decimal.Decimal) else _text_json(v)}"
        for k, v in values.items()
    )
    return "{" + ",".join(shown) + "}"


def _text_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _column(
    kind: pa.DataType, found: Sequence[Chunk], nan_free: bool
) -> tuple[int | None, tuple[Any, Any] | None]:
    """One column's null count (None: unknown) and bounds (None: none) over
    all its row groups; a row group of nulls alone bounds nothing."""
    if not found or any(c.stats is None for c in found):
        return None, None
    nulls = (
        sum(int(c.stats.null_count) for c in found) if all(c.stats.has_null_count for c in found) else None
    )
    valued = [c for c in found if not (c.stats.has_null_count and c.stats.null_count >= c.rows)]
    bound = _bound_for(kind, nan_free)
    if bound is None or not valued or any(not c.stats.has_min_max for c in valued):
        return nulls, None
    low = _fold([bound(_value(c.stats, high=False), False) for c in valued], min)
    high = _fold([bound(_value(c.stats, high=True), True) for c in valued], max)
    return nulls, None if low is None or high is None else (low, high)


def _fold(values: list[Any], pick: Callable[[list[Any]], Any]) -> Any:
    """The least (or greatest) of the row groups' bounds; None when any is missing."""
    return None if any(v is None for v in values) else pick(values)


def _value(stats: Any, *, high: bool) -> Any:
    """A row group's bound as the footer has it: raw (a timestamp's or a
    date's number, before any conversion could overflow), else converted;
    None where converting fails."""
    raw = stats.max_raw if high else stats.min_raw
    if isinstance(raw, int) and not isinstance(raw, bool):
        logical = str(stats.logical_type)
        if logical.startswith(("Timestamp", "Date")):
            return raw
    try:
        return stats.max if high else stats.min
    except (OverflowError, ValueError, pa.ArrowException):
        return None


def _bound_for(kind: pa.DataType, nan_free: bool) -> Bound | None:
    if pa.types.is_boolean(kind):
        return lambda v, _high: v if isinstance(v, bool) else None
    if pa.types.is_integer(kind):
        return lambda v, _high: v if isinstance(v, int) and not isinstance(v, bool) else None
    if pa.types.is_floating(kind):
        return _finite if nan_free else None
    if pa.types.is_decimal(kind):
        return lambda v, _high: v if isinstance(v, decimal.Decimal) and v.is_finite() else None
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _text
    if pa.types.is_date32(kind):
        return _date
    if pa.types.is_timestamp(kind):
        return _timestamp(kind)
    return None  # binary, nested, time of day and the rest: no bound


def _finite(value: Any, _high: bool) -> float | None:
    return float(value) if isinstance(value, float) and math.isfinite(value) else None


def _text(value: Any, high: bool) -> str | None:
    if not isinstance(value, str):
        return None
    if len(value) <= MAX_TEXT:
        return value
    cut = value[:MAX_TEXT]
    if not high:
        return cut  # a prefix sorts before the text it begins
    for at in range(len(cut) - 1, -1, -1):  # raise the last character that can be raised
        code = ord(cut[at]) + 1
        if code == 0xD800:  # past the surrogates, which no text holds
            code = 0xE000
        if code <= 0x10FFFF:
            return cut[:at] + chr(code)
    return None


def _date(days: Any, _high: bool) -> str | None:
    if not isinstance(days, int):
        return None
    try:
        return (_EPOCH_DAY + dt.timedelta(days=days)).isoformat()
    except OverflowError:  # past the years 1 to 9999 that ISO dates here can say
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
        return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}.{ms % 1000:03d}{zone}"

    return bound
