"""How a DataFrame is cut into a push's segments, and its time column read
before anything is written: partitions by count or by input size, one
segment per time chunk (``--time-granularity``), the integer time unit, and
the rows of a replaced range checked to lie inside it."""

from __future__ import annotations

import math
import os
from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DateType,
    IntegralType,
    MapType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from segment_lineage.ingest.errors import PushRefusedError
from segment_lineage.ingest.push import check_rows_within
from segment_lineage.ingest.segments import MAX_CHUNKED_SEGMENTS
from segment_lineage.ingest.time_units import resolve_time_unit, to_ms
from segment_lineage.lineage.core.model import TimeGranularity, TimeUnit


def quoted(name: str) -> str:
    """A column name for ``F.col``, taken literally (dots, spaces, backticks)."""
    return "`" + name.replace("`", "``") + "`"


def plan_partitions(df: DataFrame, segments: int | None, target_mb: float | None) -> DataFrame:
    """Shape the output: ``segments`` partitions, or about ``target_mb`` each
    (estimated from the input files), or the input's own partitioning."""
    if segments is not None:
        if segments < 1:
            raise PushRefusedError(f"--segments must be at least 1, got {segments}")
        return df.repartition(segments)
    if target_mb is not None:
        if target_mb <= 0:
            raise PushRefusedError(f"--target-mb must be positive, got {target_mb}")
        total = sum(_input_size(path) for path in df.inputFiles())
        wanted = max(1, math.ceil(total / (target_mb * 1024 * 1024)))
        return df.repartition(wanted)
    return df


_KEY, _PID = "__lineage_chunk", "__lineage_partition"


def millis(df: DataFrame, time_column: str, unit: TimeUnit | None) -> Column:
    """The time column as epoch milliseconds, as the writers compute a segment's times."""
    kind = df.schema[time_column].dataType
    column = F.col(quoted(time_column))
    if isinstance(kind, TimestampType | TimestampNTZType):
        return F.unix_millis(column.cast("timestamp"))
    if isinstance(kind, DateType):
        return F.unix_date(column).cast("long") * 86_400_000
    if isinstance(kind, IntegralType) and unit is not None:
        raw = column.cast("long")
        if unit is TimeUnit.S:
            return raw * 1_000
        if unit is TimeUnit.MS:
            return raw
        per_ms = 1_000 if unit is TimeUnit.US else 1_000_000
        # Rounding down, in decimals: a double would round nanoseconds since 1970.
        floored = (raw - F.pmod(raw, F.lit(per_ms))).cast("decimal(38,0)") / F.lit(per_ms)
        return floored.cast("long")
    raise PushRefusedError(f"time column {time_column!r} of type {kind.simpleString()} is not a time")


def plan_chunked(
    df: DataFrame,
    time_column: str,
    unit: TimeUnit | None,
    granularity: TimeGranularity,
    segments: int | None,
    target_mb: float | None,
) -> DataFrame:
    """Shape the output so that no partition holds rows of two time chunks
    (UTC hours, days or months; rows without a time apart): each chunk gets
    a share of the partitions that ``segments``, ``target_mb`` or the
    input's partitioning asks for (one at least), by its rows.

    One job counts the rows per chunk. Spark places a row by the hash of
    its partition key, so each partition is given a key value known (by a
    second, tiny job) to hash to it: a chunk's rows go to its own partitions only."""
    keyed = df.withColumn(_KEY, _chunk_key(df, time_column, unit, granularity))
    counts = {row[_KEY]: row["count"] for row in keyed.groupBy(_KEY).count().collect()}
    if not counts:
        return df
    wanted = plan_partitions(df, segments, target_mb).rdd.getNumPartitions()
    shares = chunk_shares(counts, wanted)
    slots = sum(shares.values())
    if slots > MAX_CHUNKED_SEGMENTS:
        raise PushRefusedError(
            f"the input spans {len(counts)} time chunks, {slots} segments in all (at most "
            f"{MAX_CHUNKED_SEGMENTS}): use a coarser --time-granularity, or fewer --segments"
        )
    landing = _landing_keys(df, slots)
    placed = keyed.withColumn(_PID, _partition_key(df, shares, landing))
    return placed.repartition(slots, F.col(_PID)).drop(_KEY, _PID)


def _chunk_key(
    df: DataFrame, time_column: str, unit: TimeUnit | None, granularity: TimeGranularity
) -> Column:
    """A row's time chunk: the epoch milliseconds its chunk starts at."""
    return F.coalesce(
        F.unix_millis(F.date_trunc(granularity.value, F.timestamp_millis(millis(df, time_column, unit)))),
        F.lit(-(2**63)),  # rows without a time: a chunk of their own
    )


def _landing_keys(df: DataFrame, slots: int) -> dict[int, int]:
    """Partition -> a key value Spark's hash places in it (the second, tiny job)."""
    probe = df.sparkSession.range(slots * 64).select(
        F.col("id"), F.pmod(F.hash("id"), F.lit(slots)).alias("p")
    )
    landing = {row["p"]: row["id"] for row in probe.groupBy("p").agg(F.min("id").alias("id")).collect()}
    if len(landing) < slots:  # 64 tries per partition leave one unreached with odds below 2**-90
        raise PushRefusedError(f"no partition key found for {slots - len(landing)} of {slots} partitions")
    return landing


def _partition_key(df: DataFrame, shares: dict[int, int], landing: dict[int, int]) -> Column:
    """A keyed row's partition key: its chunk's partitions are a run of
    ``shares[chunk]`` from the chunk's first, and the row's hash picks one."""
    first: dict[int, int] = {}
    at = 0
    for k, share in shares.items():
        first[k] = at
        at += share
    offsets = F.create_map(*[F.lit(x).cast("long") for k in shares for x in (k, first[k])])
    sizes = F.create_map(*[F.lit(x).cast("long") for k, share in shares.items() for x in (k, share)])
    values = F.array(*[F.lit(landing[p]).cast("long") for p in range(at)])  # at: every share, the slots
    spread = F.pmod(_row_hash(df), F.element_at(sizes, F.col(_KEY)))
    slot = F.element_at(offsets, F.col(_KEY)) + spread
    return F.element_at(values, (slot + 1).cast("int"))


def _row_hash(df: DataFrame) -> Column:
    """A hash of a row's columns, those Spark can hash (no map, no variant)."""
    hashable = [F.col(quoted(f.name)) for f in df.schema if not isinstance(f.dataType, MapType | VariantType)]
    return F.xxhash64(*hashable) if hashable else F.lit(0)


def chunk_shares(counts: dict[int, int], wanted: int) -> dict[int, int]:
    """Partitions per chunk: ``wanted`` in all (one per chunk at least, none
    beyond a chunk's rows), shared by rows, the remainders to the largest."""
    total = sum(counts.values())
    budget = max(wanted, len(counts))
    exact = {k: budget * n / total for k, n in counts.items()}
    shares = {k: max(1, min(counts[k], int(share))) for k, share in exact.items()}
    for k in sorted(exact, key=lambda k: exact[k] - int(exact[k]), reverse=True):
        if sum(shares.values()) >= budget:
            break
        if shares[k] < counts[k]:
            shares[k] += 1
    return dict(sorted(shares.items()))


def _input_size(uri: str) -> int:
    path = uri.removeprefix("file:")
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _bounds(df: DataFrame, values: Column) -> tuple[int | None, int | None]:
    row = df.agg(F.min(values).alias("lo"), F.max(values).alias("hi")).first()
    lo = None if row is None or row["lo"] is None else int(row["lo"])
    hi = None if row is None or row["hi"] is None else int(row["hi"])
    return lo, hi


def resolve_integer_unit(
    df: DataFrame, time_column: str, declared: TimeUnit | None, say: Callable[[str], None] | None
) -> TimeUnit | None:
    """The unit of an integer time column: the table's, or inferred from the
    whole input (one Spark job) before anything is written. None for
    timestamps and dates, which carry their own."""
    if time_column not in df.columns or not isinstance(df.schema[time_column].dataType, IntegralType):
        return None
    return resolve_time_unit(
        time_column, *_bounds(df, F.col(quoted(time_column)).cast("long")), declared, say
    )


def check_interval_rows(
    df: DataFrame, time_column: str, interval: tuple[int, int], time_unit: TimeUnit | None = None
) -> None:
    """Refuse, before anything is written, rows outside the interval.
    ``time_unit`` is an integer column's unit (as for the segments' times)."""
    if time_column not in df.columns:
        raise PushRefusedError(f"the input has no time column {time_column!r}")
    if not isinstance(df.schema[time_column].dataType, IntegralType):
        # Timestamps and dates as the writers read them (epoch ms in Spark: no local-time detour).
        check_rows_within(time_column, *_bounds(df, millis(df, time_column, None)), interval)
        return
    if time_unit is None:
        raise PushRefusedError(f"the integer time column {time_column!r} needs its unit (s, ms, us, ns)")
    # The conversion is monotonic: convert the raw bounds, exactly as the writers convert values.
    lo, hi = _bounds(df, F.col(time_column).cast("long"))
    check_rows_within(
        time_column,
        None if lo is None else to_ms(lo, time_unit),
        None if hi is None else to_ms(hi, time_unit),
        interval,
    )
