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
    meta = pq.read_metadata(path, filesystem=fs)
    return file_stats(meta, columns, _nan_free(path, fs, meta, columns))


def _nan_free(path: str, fs: Any, meta: pq.FileMetaData, columns: Sequence[str]) -> list[str]:
    """The file's floating-point columns of ``columns`` read and found to
    hold no NaN; none when they hold more than :data:`NAN_LOOK_BYTES`."""
    import pyarrow.compute as pc

    floats = [
        f.name for f in meta.schema.to_arrow_schema() if pa.types.is_floating(f.type) and f.name in columns
    ]
    if not floats or _uncompressed_bytes(meta, floats) > NAN_LOOK_BYTES:
        return []
    data = pq.read_table(path, columns=floats, filesystem=fs)
    return [name for name in floats if not pc.any(pc.is_nan(data.column(name))).as_py()]


def _uncompressed_bytes(meta: pq.FileMetaData, names: Collection[str]) -> int:
    """The data of the columns ``names`` in every row group, uncompressed."""
    return sum(
        meta.row_group(g).column(c).total_uncompressed_size
        for g in range(meta.num_row_groups)
        for c in range(meta.num_columns)
        if meta.row_group(g).column(c).path_in_schema in names
    )


def file_stats(meta: pq.FileMetaData, columns: Sequence[str], nan_free: Collection[str] = ()) -> str:
    """The ``stats`` JSON of one file's add action for a table of ``columns``,
    from the file's footer; ``nan_free``: its floating-point columns known to
    hold no NaN."""
    rows = meta.num_rows
    fields = {field.name: field for field in meta.schema.to_arrow_schema()}
    chunks = _chunks(meta, fields)
    found: dict[str, tuple[int | None, tuple[Any, Any] | None]] = {}
    for name in columns:
        if name not in fields:  # the file lacks it: it reads as null in every row
            found[name] = rows, None
            continue
        whole = chunks[name] if len(chunks[name]) == meta.num_row_groups else []
        found[name] = _column(fields[name].type, whole, name in nan_free)
    return _stats_json(rows, found)


def _chunks(meta: pq.FileMetaData, names: Collection[str]) -> dict[str, list[Chunk]]:
    """Each of the flat columns ``names``' statistics, row group by row group
    (a nested column's path has a dot: it is not among them)."""
    chunks: dict[str, list[Chunk]] = {name: [] for name in names}
    for group in range(meta.num_row_groups):
        row_group = meta.row_group(group)
        for index in range(row_group.num_columns):
            column = row_group.column(index)
            if column.path_in_schema in chunks:
                chunks[column.path_in_schema].append(Chunk(row_group.num_rows, column.statistics))
    return chunks


def _stats_json(rows: int, found: dict[str, tuple[int | None, tuple[Any, Any] | None]]) -> str:
    """The ``stats`` JSON of a file of ``rows`` rows, from each column's null
    count and bounds: no bound at all when one column holds values no bound
    can be given for."""
    nulls = {name: count for name, (count, _) in found.items() if count is not None}
    bounds = {name: pair for name, (_, pair) in found.items() if pair is not None}
    bounded = all(pair is not None or count == rows for count, pair in found.values())
    parts = [f'"numRecords":{rows}']
    if bounded and bounds:
        lows = {name: low for name, (low, _) in bounds.items()}
        highs = {name: high for name, (_, high) in bounds.items()}
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
    return _null_count(found), _bounds(kind, found, nan_free)


def _null_count(found: Sequence[Chunk]) -> int | None:
    """The nulls over all the row groups; None when one does not say."""
    if not all(c.stats.has_null_count for c in found):
        return None
    return sum(int(c.stats.null_count) for c in found)


def _bounds(kind: pa.DataType, found: Sequence[Chunk], nan_free: bool) -> tuple[Any, Any] | None:
    """The least minimum and the greatest maximum of the row groups holding
    values; None when one of them cannot be bounded."""
    valued = [c for c in found if not (c.stats.has_null_count and c.stats.null_count >= c.rows)]
    bound = _bound_for(kind, nan_free)
    if bound is None or not valued or any(not c.stats.has_min_max for c in valued):
        return None
    low = _fold([bound(_value(c.stats, high=False), False) for c in valued], min)
    high = _fold([bound(_value(c.stats, high=True), True) for c in valued], max)
    return None if low is None or high is None else (low, high)


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
    """How a column of ``kind`` is bounded; None: it is not (binary, nested,
    time of day and the rest, and floating point that may hold a NaN)."""
    if pa.types.is_floating(kind):
        return _finite if nan_free else None
    if pa.types.is_timestamp(kind):
        return _timestamp(kind)
    return next((bound for is_kind, bound in _BOUNDS if is_kind(kind)), None)


def _boolean(value: Any, _high: bool) -> bool | None:
    return value if isinstance(value, bool) else None


def _whole(value: Any, _high: bool) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _decimal(value: Any, _high: bool) -> decimal.Decimal | None:
    return value if isinstance(value, decimal.Decimal) and value.is_finite() else None


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


# The kinds bounded as the footer states them (text cut, dates as ISO dates);
# floating point and timestamps depend on more than the kind (:func:`_bound_for`).
_BOUNDS: tuple[tuple[Callable[[pa.DataType], bool], Bound], ...] = (
    (pa.types.is_boolean, _boolean),
    (pa.types.is_integer, _whole),
    (pa.types.is_decimal, _decimal),
    (pa.types.is_string, _text),
    (pa.types.is_large_string, _text),
    (pa.types.is_date32, _date),
)


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
