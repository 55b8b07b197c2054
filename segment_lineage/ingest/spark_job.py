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

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.dataset as ds
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type
from pyspark.sql.types import (
    IntegerType,
)

from segment_lineage.ingest.arrow_push import check_same_header
from segment_lineage.ingest.audit import Audit
from segment_lineage.ingest.errors import PushInputError, PushRefusedError, check_csv_header, unreadable_input
from segment_lineage.ingest.push import (
    PushMode,
    PushResult,
    PushTarget,
    Written,
    consistent_push,
    plan_push,
)
from segment_lineage.ingest.push_plan import INPUT_FORMATS, WRITERS, Prepared
from segment_lineage.ingest.schemas import plan_schema, schema_of
from segment_lineage.ingest.segments import check_one_chunk, check_times_present
from segment_lineage.ingest.spark_jvm import start_quiet_jvm
from segment_lineage.ingest.spark_plan import (
    check_interval_rows,
    plan_chunked,
    plan_partitions,
    quoted,
    resolve_integer_unit,
)
from segment_lineage.ingest.spark_writers import arrow_write, native_write, task_progress
from segment_lineage.lineage.config import Settings
from segment_lineage.lineage.core.failpoints import ENV as FAILPOINT_ENV
from segment_lineage.lineage.core.model import TableConfig, TimeUnit
from segment_lineage.lineage.core.schema import Schema, SchemaPolicy
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.arrow_types import to_arrow
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
    options = _session_options(app_name, chosen, conf or {}, quiet_logs)
    if quiet_logs:
        start_quiet_jvm(options)  # the JVM's own start-up warning dropped too
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    # Quiet: the JVM's fatal errors only (log4j2.properties says why).
    spark.sparkContext.setLogLevel("FATAL" if quiet_logs else "ERROR")
    return spark


def _session_options(app_name: str, master: str, given: dict[str, str], quiet_logs: bool) -> dict[str, str]:
    """The session's Spark settings: ours, then the caller's ``given`` over them."""
    options = {
        "spark.app.name": app_name,
        "spark.master": master,
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
    if master.startswith("local"):
        options.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    if quiet_logs and "spark.driver.extraJavaOptions" not in given:
        # The driver's log4j: fatal errors only (local mode runs the executors in it too).
        options["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={LOG4J2.as_uri()}"
    options.update(given)
    return options


LOG4J2 = Path(__file__).with_name("log4j2.properties")


def sample_frame(spark: SparkSession, label: str, count: int) -> DataFrame:
    """Generated sample data: ``count`` rows of (label, i)."""
    return spark.range(count).select(F.lit(label).alias("label"), F.col("id").alias("i"))


def read_input(spark: SparkSession, path: str, fmt: str = "parquet") -> DataFrame:
    if fmt not in INPUT_FORMATS:
        raise PushInputError(f"unknown input format {fmt!r}: use {', '.join(INPUT_FORMATS)}")
    reader = spark.read
    if fmt == "csv":
        # enforceSchema off: every file's header is checked against the
        # columns (by default a differing header is ignored and its values
        # taken by position, under the first file's names).
        reader = reader.options(header="true", inferSchema="true", enforceSchema="false")
    try:
        df = reader.format(fmt).load(path)
    except AnalysisException as exc:  # a missing path, an unreadable file: the input is at fault
        raise unreadable_input(path, fmt, ValueError(str(exc))) from None
    except Py4JJavaError as exc:  # a file not in the format (its footer), or reading it failed
        text = str(exc.java_exception)
        at_fault = "CANNOT_READ_FILE_FOOTER" in text or "is not a Parquet file" in text
        raise unreadable_input(path, fmt, (ValueError if at_fault else OSError)(text)) from None
    if fmt == "csv":
        check_csv_header(path, df.columns)
        _check_local_headers(path, df.inputFiles())
        df = _integers_as_long(df)
    return df


def _check_local_headers(path: str, files: Sequence[str]) -> None:
    """PushRefusedError when a CSV input's files on local disk name different
    columns: Spark refuses such a file only once it reads it, in the middle
    of the push; this says so before anything is written."""
    parsed = [urlparse(f) for f in files]
    local = [unquote(p.path) for p in parsed if p.scheme == "file"]
    try:
        local = [f for f in local if os.path.getsize(f) > 0]  # an empty file Spark skips: no header
        if len(local) > 1:
            check_same_header(ds.dataset(local, format="csv"), path)
    except (OSError, pa.ArrowException):
        pass  # what pyarrow cannot read, Spark may: its own check of each header still stands


def _integers_as_long(df: DataFrame) -> DataFrame:
    """A CSV input's whole numbers as Arrow's CSV reader infers them: 64 bits, whatever their size."""
    for field in df.schema:
        if isinstance(field.dataType, IntegerType):
            df = df.withColumn(field.name, F.col(quoted(field.name)).cast("long"))
    return df


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
            df = df.withColumn(name, F.col(quoted(name)).cast(from_arrow_type(to_arrow(kind))))
    return df


# ---- the driver side --------------------------------------------------------------


def _checked_times(
    df: DataFrame,
    config: TableConfig,
    mode: PushMode,
    interval: tuple[int, int] | None,
    progress: Callable[[str], None] | None,
) -> TimeUnit | None:
    """The time column's checks before anything is written (there, no null,
    within a replaced range); the unit its integers are read in."""
    time_column = config.time_column
    if time_column is None:
        return None
    if time_column not in df.columns:
        raise PushRefusedError(f"the input has no time column {time_column!r}")
    check_times_present(time_column, df.filter(F.col(quoted(time_column)).isNull()).limit(1000).count())
    time_unit = resolve_integer_unit(df, time_column, config.time_unit, progress)
    if mode is PushMode.REPLACE_RANGE and interval is not None:
        check_interval_rows(df, time_column, interval, time_unit)
    return time_unit


def _writer(
    shaped: DataFrame,
    config: TableConfig,
    writer: str,
    time_unit: TimeUnit | None,
    progress: Callable[[str], None] | None,
    progress_every_s: float,
) -> Callable[[PushTarget], Written]:
    """The push's write: Spark's native Parquet writer where the root allows
    it (and ``writer`` asks or leaves it to us), else executors through pyarrow."""
    failpoint = os.environ.get(FAILPOINT_ENV)
    if writer not in WRITERS:
        raise PushRefusedError(f"unknown writer {writer!r}: use {', '.join(WRITERS)}")
    native = writer == "native" or (
        writer == "auto" and DeepStore.for_root(config.root).scheme in NATIVE_SCHEMES
    )
    granularity, time_column = config.time_granularity, config.time_column

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

    return write


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
    audit: Audit | None = None,
    stage: bool = False,
    hold: str | None = None,
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
    the rows); nothing written. ``audit``: checks the written rows must pass
    before they show (:mod:`segment_lineage.ingest.audit`); ``stage`` (held for
    ``hold``) leaves them staged for a publish (:mod:`segment_lineage.ingest.stage`).
    """
    prepared = prepare_dataframe(
        manager, table, df, mode=mode, interval=interval, segments=segments, target_mb=target_mb,
        progress=progress, writer=writer, progress_every_s=progress_every_s, job_id=job_id,
        schema_policy=schema_policy, audit=audit,
    )  # fmt: skip
    if dry_run:
        return plan_push(
            manager,
            table,
            partitions=prepared.partitions,
            rows=df.count(),
            mode=prepared.mode,
            interval=interval,
            schema=prepared.schema,
            schema_policy=prepared.schema_policy,
            audit=audit,
            reason=reason,
        )
    return consistent_push(
        manager,
        table,
        prepared.write,
        partitions=prepared.partitions,
        mode=prepared.mode,
        interval=interval,
        reason=reason,
        progress=progress,
        owner_wait_s=owner_wait_s,
        job_id=job_id,
        schema=prepared.schema,
        schema_policy=prepared.schema_policy,
        time_unit=prepared.time_unit,
        audit=audit,
        stage=stage,
        hold=hold,
    )


def prepare_dataframe(
    manager: LineageManager,
    table: str,
    df: DataFrame,
    *,
    mode: PushMode | str | None = None,
    interval: tuple[int, int] | None = None,
    segments: int | None = None,
    target_mb: float | None = None,
    progress: Callable[[str], None] | None = None,
    writer: str = "auto",
    progress_every_s: float = 5.0,
    job_id: str | None = None,
    schema_policy: SchemaPolicy | str = SchemaPolicy.ENFORCE,
    audit: Audit | None = None,
) -> Prepared:
    """:func:`push_dataframe`'s checks and shaping (its columns against the
    table's, its times, its partitions), without pushing: a push set's table."""
    state = manager.table(table)
    mode = PushMode.of(mode, state.config)
    policy = SchemaPolicy.parse(schema_policy)
    columns = plan_schema(state.config, frame_schema(df), policy, full_refresh=mode is PushMode.REFRESH)
    df = conform_frame(df, columns)
    time_unit = _checked_times(df, state.config, mode, interval, progress)
    time_column, granularity = state.config.time_column, state.config.time_granularity
    if granularity is not None and time_column is not None:
        shaped = plan_chunked(df, time_column, time_unit, granularity, segments, target_mb)
    else:
        shaped = plan_partitions(df, segments, target_mb)
    return Prepared(
        table=table, write=_writer(shaped, state.config, writer, time_unit, progress, progress_every_s),
        partitions=shaped.rdd.getNumPartitions(), rows=None, mode=mode, interval=interval, schema=columns,
        schema_policy=policy, time_unit=time_unit, audit=audit, job_id=job_id,
    )  # fmt: skip
