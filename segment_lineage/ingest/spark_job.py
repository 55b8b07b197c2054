"""The Spark side: consistent push of a DataFrame, and Spark readers.

Executors write the segments: one Parquet file per output partition, written
with pyarrow into the table's deep-store root (so S3, GCS and HDFS work the
same way as a local directory). Each task attempt writes its own file
(``<name>.a<attempt>.parquet``); Spark hands the driver the result of exactly
one successful attempt per partition, so only those become segments, and
every other file under the push's directory (failed or speculative attempts)
is queued for retention.

The same code runs in local mode and on a cluster: pass a master URL.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type, to_arrow_type
from pyspark.sql.types import (
    DateType,
    IntegerType,
    IntegralType,
    MapType,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from segment_lineage.ingest.errors import PushRefusedError
from segment_lineage.ingest.push import (
    PushMode,
    PushResult,
    PushTarget,
    Written,
    check_rows_within,
    consistent_push,
    plan_push,
)
from segment_lineage.ingest.push_plan import INPUT_FORMATS, WRITERS
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.ingest.schemas import plan_schema, schema_of, to_arrow
from segment_lineage.ingest.segments import MAX_CHUNKED_SEGMENTS, check_one_chunk, check_times_present
from segment_lineage.ingest.spark_jvm import start_quiet_jvm
from segment_lineage.ingest.spark_writers import arrow_write, native_write, task_progress
from segment_lineage.ingest.time_units import resolve_time_unit, to_ms
from segment_lineage.lineage.config import Settings
from segment_lineage.lineage.core.failpoints import ENV as FAILPOINT_ENV
from segment_lineage.lineage.core.model import TimeGranularity, TimeUnit
from segment_lineage.lineage.core.schema import Schema, SchemaPolicy
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.deep import DeepStore

NATIVE_SCHEMES = ("file", "hdfs")


def spark_session(
    master: str | None = None,
    app_name: str = "segment-lineage",
    conf: dict[str, str] | None = None,
    *,
    settings: Settings | None = None,
    quiet_logs: bool = True,
) -> SparkSession:
    """A Spark session on ``master``, else the settings' (by default, the
    environment's: ``SPARK_MASTER``, else local mode, bound to loopback).
    ``conf`` adds Spark settings (``spark.speculation=true`` and the like).
    ``quiet_logs``: the driver logs warnings and errors only, without Spark's
    start-up notices (``log4j2.properties`` here); False: Spark's default
    profile. Either is fixed when the first session of the process starts its JVM."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    chosen = master or (Settings.from_env() if settings is None else settings).spark_master
    if chosen.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # keep local mode on loopback
    options = {
        "spark.app.name": app_name,
        "spark.master": chosen,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # Standard Parquet timestamps, adjusted to UTC, not the legacy INT96
        # (which other readers take as naive times); the session's zone UTC.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.session.timeZone": "UTC",
        # A push directory holds segments only: no _SUCCESS marker, no .crc side files.
        "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    }
    if chosen.startswith("local"):
        options.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    given = conf or {}
    if quiet_logs and "spark.driver.extraJavaOptions" not in given:
        # The driver's log4j: fatal errors only (local mode runs the executors in it too).
        options["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={LOG4J2.as_uri()}"
    options.update(given)
    if quiet_logs:
        start_quiet_jvm(options)  # the JVM's own start-up warning dropped too
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    # Quiet: the JVM's fatal errors only (log4j2.properties says why).
    spark.sparkContext.setLogLevel("FATAL" if quiet_logs else "ERROR")
    return spark


LOG4J2 = Path(__file__).with_name("log4j2.properties")


def sample_frame(spark: SparkSession, label: str, count: int) -> DataFrame:
    """Generated sample data: ``count`` rows of (label, i)."""
    return spark.range(count).select(F.lit(label).alias("label"), F.col("id").alias("i"))


def read_input(spark: SparkSession, path: str, fmt: str = "parquet") -> DataFrame:
    if fmt not in INPUT_FORMATS:
        raise PushRefusedError(f"unknown input format {fmt!r}: use {', '.join(INPUT_FORMATS)}")
    reader = spark.read
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    try:
        df = reader.format(fmt).load(path)
    except AnalysisException as exc:  # a missing path, an unreadable file
        first = str(exc).splitlines()[0]
        raise PushRefusedError(f"cannot read input {path!r} as {fmt}: {first}") from None
    if fmt == "csv":  # whole numbers as Arrow's CSV reader infers them: 64 bits, whatever their size
        for field in df.schema:
            if isinstance(field.dataType, IntegerType):
                df = df.withColumn(field.name, F.col(_quoted(field.name)).cast("long"))
    return df


def _quoted(name: str) -> str:
    """A column name for ``F.col``, taken literally (dots, spaces, backticks)."""
    return "`" + name.replace("`", "``") + "`"


def frame_schema(df: DataFrame) -> Schema:
    """A DataFrame's columns as a table schema (PushRefusedError for a
    column type a table cannot hold)."""
    fields = []
    for field in df.schema:
        try:
            kind = to_arrow_type(field.dataType, timezone="UTC")
        except Exception as exc:  # pyspark raises its own error classes for unsupported types
            raise PushRefusedError(
                f"column {field.name!r} has type {field.dataType.simpleString()}, which a table cannot hold"
            ) from exc
        fields.append(pa.field(field.name, kind))
    return schema_of(pa.schema(fields))


def conform_frame(df: DataFrame, schema: Schema) -> DataFrame:
    """``df`` with each column whose type differs from ``schema``'s (a
    narrower integer or float) cast to it."""
    wanted = {f.name: f.type for f in schema}
    have = {f.name: f.type for f in frame_schema(df)}
    for name, kind in wanted.items():
        if name in have and have[name] != kind:
            df = df.withColumn(name, F.col(_quoted(name)).cast(from_arrow_type(to_arrow(kind))))
    return df


# ---- the driver side --------------------------------------------------------------


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
    column = F.col(_quoted(time_column))
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
    spark = df.sparkSession
    key = F.coalesce(
        F.unix_millis(F.date_trunc(granularity.value, F.timestamp_millis(millis(df, time_column, unit)))),
        F.lit(-(2**63)),  # rows without a time: a chunk of their own
    )
    keyed = df.withColumn(_KEY, key)
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
    probe = spark.range(slots * 64).select(F.col("id"), F.pmod(F.hash("id"), F.lit(slots)).alias("p"))
    landing = {row["p"]: row["id"] for row in probe.groupBy("p").agg(F.min("id").alias("id")).collect()}
    if len(landing) < slots:  # 64 tries per partition leave one unreached with odds below 2**-90
        raise PushRefusedError(f"no partition key found for {slots - len(landing)} of {slots} partitions")
    first: dict[int, int] = {}
    at = 0
    for k, share in shares.items():
        first[k] = at
        at += share
    offsets = F.create_map(*[F.lit(x).cast("long") for k in shares for x in (k, first[k])])
    sizes = F.create_map(*[F.lit(x).cast("long") for k, share in shares.items() for x in (k, share)])
    values = F.array(*[F.lit(landing[p]).cast("long") for p in range(slots)])
    hashable = [
        F.col(_quoted(f.name)) for f in df.schema if not isinstance(f.dataType, MapType | VariantType)
    ]
    row_hash = F.xxhash64(*hashable) if hashable else F.lit(0)  # Spark hashes no map
    spread = F.pmod(row_hash, F.element_at(sizes, F.col(_KEY)))
    slot = F.element_at(offsets, F.col(_KEY)) + spread
    placed = keyed.withColumn(_PID, F.element_at(values, (slot + 1).cast("int")))
    return placed.repartition(slots, F.col(_PID)).drop(_KEY, _PID)


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
        time_column, *_bounds(df, F.col(_quoted(time_column)).cast("long")), declared, say
    )


def check_interval_rows(
    df: DataFrame, time_column: str, interval: tuple[int, int], time_unit: TimeUnit | None = None
) -> None:
    """Refuse, before anything is written, rows outside the interval.
    ``time_unit`` is an integer column's unit (as for the segments' times)."""
    if time_column not in df.columns:
        raise PushRefusedError(f"the input has no time column {time_column!r}")
    kind = df.schema[time_column].dataType
    column = F.col(time_column)
    if isinstance(kind, TimestampType | TimestampNTZType):
        millis = F.unix_millis(column.cast("timestamp"))  # epoch ms in Spark: no local-time detour
    elif isinstance(kind, DateType):
        millis = F.unix_date(column).cast("long") * 86_400_000
    elif isinstance(kind, IntegralType):
        if time_unit is None:
            raise PushRefusedError(f"the integer time column {time_column!r} needs its unit (s, ms, us, ns)")
        # The conversion is monotonic: convert the raw bounds, exactly as the writers convert values.
        lo, hi = _bounds(df, column.cast("long"))
        check_rows_within(
            time_column,
            None if lo is None else to_ms(lo, time_unit),
            None if hi is None else to_ms(hi, time_unit),
            interval,
        )
        return
    else:
        raise PushRefusedError(f"time column {time_column!r} of type {kind.simpleString()} is not a time")
    check_rows_within(time_column, *_bounds(df, millis), interval)


def push_dataframe(
    manager: LineageManager,
    table: str,
    df: DataFrame,
    *,
    mode: PushMode | str | None = None,
    interval: tuple[int, int] | None = None,
    segments: int | None = None,
    target_mb: float | None = None,
    reason: str | None = None,
    progress: Callable[[str], None] | None = None,
    owner_wait_s: float = 15.0,
    writer: str = "auto",
    progress_every_s: float = 5.0,
    job_id: str | None = None,
    schema_policy: SchemaPolicy | str = SchemaPolicy.ENFORCE,
    dry_run: bool = False,
) -> PushResult:
    """Consistent push of ``df`` into ``table``: all of it appears at once, or none.

    ``job_id`` makes a retried job return its completed push's result instead
    of pushing again (see :func:`segment_lineage.ingest.push.consistent_push`).

    ``writer``: "native" (Spark's Parquet writer and commit protocol; local
    and HDFS roots), "arrow" (executors write through pyarrow; any root), or
    "auto" (native where it can, else arrow).

    The columns must fit the table's recorded schema under ``schema_policy``
    (``evolve`` adds new columns, ``replace`` with a refresh replaces it);
    narrower integers and floats are widened to the recorded types.
    ``dry_run``: every check, then what the push would do (one job counts
    the rows); nothing written.
    """
    state = manager.table(table)
    mode = PushMode.of(mode, state.config)
    policy = SchemaPolicy.parse(schema_policy)
    columns = plan_schema(state.config, frame_schema(df), policy, full_refresh=mode is PushMode.REFRESH)
    df = conform_frame(df, columns)
    time_column = state.config.time_column
    time_unit: TimeUnit | None = None
    if time_column is not None:
        if time_column not in df.columns:
            raise PushRefusedError(f"the input has no time column {time_column!r}")
        check_times_present(time_column, df.filter(F.col(_quoted(time_column)).isNull()).limit(1000).count())
        time_unit = resolve_integer_unit(df, time_column, state.config.time_unit, progress)
        if mode is PushMode.REPLACE_RANGE and interval is not None:
            check_interval_rows(df, time_column, interval, time_unit)
    granularity = state.config.time_granularity
    if granularity is not None and time_column is not None:
        shaped = plan_chunked(df, time_column, time_unit, granularity, segments, target_mb)
    else:
        shaped = plan_partitions(df, segments, target_mb)
    partitions = shaped.rdd.getNumPartitions()
    if dry_run:
        return plan_push(
            manager,
            table,
            partitions=partitions,
            rows=df.count(),
            mode=mode,
            interval=interval,
            schema=columns,
            schema_policy=policy,
        )
    failpoint = os.environ.get(FAILPOINT_ENV)
    if writer not in WRITERS:
        raise PushRefusedError(f"unknown writer {writer!r}: use {', '.join(WRITERS)}")
    native = writer == "native" or (
        writer == "auto" and DeepStore.for_root(state.config.root).scheme in NATIVE_SCHEMES
    )

    def write(target: PushTarget) -> Written:
        store = DeepStore.for_root(target.root)
        if native and store.scheme not in NATIVE_SCHEMES:
            raise PushRefusedError(f"the native writer cannot write to {store.scheme}://; use --writer arrow")
        with task_progress(shaped.sparkSession, progress, progress_every_s):
            if native:
                written = native_write(shaped, store, target, time_unit)
            else:
                written = arrow_write(shaped, store, target, time_unit, failpoint)
        if granularity is not None and time_column is not None:
            check_one_chunk(written.segments, granularity)
        return written

    return consistent_push(
        manager,
        table,
        write,
        partitions=partitions,
        mode=mode,
        interval=interval,
        reason=reason,
        progress=progress,
        owner_wait_s=owner_wait_s,
        job_id=job_id,
        schema=columns,
        schema_policy=policy,
        time_unit=time_unit,
    )


# ---- readers -----------------------------------------------------------------------


def snapshot_dataframe(spark: SparkSession, reader: SnapshotReader) -> DataFrame:
    """A DataFrame over exactly the segments of a pinned snapshot."""
    store = reader.store
    if not reader.segments:
        return spark.createDataFrame([], StructType([]))
    if store.scheme in ("file", "hdfs"):
        recorded = reader.arrow_schema()
        source = spark.read if recorded is None else spark.read.schema(from_arrow_schema(recorded))
        try:
            return source.parquet(*(store.uri(s.location) for s in reader.segments))
        except AnalysisException as exc:
            if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
                raise reader.too_old(str(exc).splitlines()[0]) from None
            raise
    # Spark has no S3/GCS connector here; the pinned files come through Arrow.
    return spark.createDataFrame(reader.to_arrow())


@contextmanager
def pinned_table(
    spark: SparkSession, manager: LineageManager, table: str, as_of: int | str | None = None
) -> Iterator[DataFrame]:
    """``with pinned_table(spark, m, "events") as df:`` reads one snapshot
    (the current one, or ``as_of`` a retained version or time); its files stay
    (the lease) until the block ends."""
    with SnapshotReader(manager, table, as_of) as reader:
        yield snapshot_dataframe(spark, reader)


_HELD: list[SnapshotReader] = []


def read_table(
    spark: SparkSession, table: str, manager: LineageManager, as_of: int | str | None = None
) -> DataFrame:
    """A DataFrame over the table's current snapshot (or ``as_of`` a retained
    version or time). Its lease is held until :func:`release_reads` or the end
    of the process (use :func:`pinned_table` to scope it)."""
    reader = SnapshotReader(manager, table, as_of)
    _HELD.append(reader)
    return snapshot_dataframe(spark, reader)


def release_reads() -> None:
    while _HELD:
        _HELD.pop().close()
