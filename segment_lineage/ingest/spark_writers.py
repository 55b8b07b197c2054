"""Spark's two writers of a push: each task writing its partition through
pyarrow (retried and speculative attempts sorted out by the driver), or
Spark's own Parquet writer whose commit protocol keeps only committed
attempts; and the progress a long write reports."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession

from segment_lineage.ingest.errors import StorageError
from segment_lineage.ingest.push import PushTarget, Written
from segment_lineage.ingest.segments import time_as_ms, write_segment
from segment_lineage.lineage.core.model import Segment, TimeUnit
from segment_lineage.lineage.storage.deep import DeepStore

RESULT_SCHEMA = (
    "name string, location string, rows long, bytes long, checksum string, "
    "min_time long, max_time long, part int, attempt int"
)
ARROW_RESULT_SCHEMA = pa.schema(
    [
        ("name", pa.string()),
        ("location", pa.string()),
        ("rows", pa.int64()),
        ("bytes", pa.int64()),
        ("checksum", pa.string()),
        ("min_time", pa.int64()),
        ("max_time", pa.int64()),
        ("part", pa.int32()),
        ("attempt", pa.int32()),
    ]
)


# ---- the executor side -------------------------------------------------------------


def partition_writer(
    store: DeepStore,
    push_dir: str,
    names: tuple[str, ...],
    time_column: str | None,
    time_unit: TimeUnit | None,
    failpoint: str | None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each task runs: write its partition as one Parquet file."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = TaskContext.get()
        assert ctx is not None
        part, attempt = ctx.partitionId(), ctx.attemptNumber()
        if failpoint == "task.slow-first-attempt" and attempt == 0 and part == 0:
            time.sleep(90)  # long enough that only a speculative copy can finish first
        table = pa.Table.from_batches(list(batches))
        if table.num_rows == 0:
            return
        name = names[part]
        location = f"{push_dir}/{name}.a{attempt}.parquet"
        written = write_segment(store, table, location, time_column, time_unit)
        if failpoint == "task.after-write" and attempt == 0:
            raise RuntimeError(f"failpoint task.after-write (partition {part}, attempt {attempt})")
        yield pa.RecordBatch.from_pylist(
            [
                {
                    "name": name,
                    "location": written.location,
                    "rows": written.rows,
                    "bytes": written.size_bytes,
                    "checksum": written.checksum,
                    "min_time": written.min_time,
                    "max_time": written.max_time,
                    "part": part,
                    "attempt": attempt,
                }
            ],
            schema=ARROW_RESULT_SCHEMA,
        )

    return run


@contextmanager
def task_progress(spark: SparkSession, say: Callable[[str], None] | None, every_s: float) -> Iterator[None]:
    """Report Spark's completed/total tasks every ``every_s`` seconds while writing."""
    if say is None:
        yield
        return
    stop = threading.Event()
    tracker = spark.sparkContext.statusTracker()

    def loop() -> None:
        while not stop.wait(every_s):
            stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            done = sum(st.numCompletedTasks for st in stages if st is not None)
            total = sum(st.numTasks for st in stages if st is not None)
            if total:
                say(f"writing: {done}/{total} tasks done")

    thread = threading.Thread(target=loop, name="push-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def arrow_write(
    shaped: DataFrame, store: DeepStore, target: PushTarget, time_unit: TimeUnit | None, failpoint: str | None
) -> Written:
    """Executors write through pyarrow, one file per task attempt; the driver
    keeps the winning attempt of each partition and queues the rest."""
    fn = partition_writer(store, target.push_dir, target.names, target.time_column, time_unit, failpoint)
    rows = shaped.mapInArrow(fn, RESULT_SCHEMA).collect()
    winners = sorted(rows, key=lambda r: r["part"])
    segments_out = tuple(
        Segment(
            name=r["name"],
            location=r["location"],
            rows=r["rows"],
            size_bytes=r["bytes"],
            checksum=r["checksum"],
            min_time=r["min_time"],
            max_time=r["max_time"],
        )
        for r in winners
    )
    keep = {s.location for s in segments_out}
    try:
        strays = tuple(f.location for f in store.list(target.push_dir) if f.location not in keep)
    except StorageError:
        strays = ()
    return Written(segments_out, strays)


def native_write(
    shaped: DataFrame, store: DeepStore, target: PushTarget, time_unit: TimeUnit | None
) -> Written:
    """Spark's own Parquet writer into the push's directory.

    Spark's commit protocol moves only committed task attempts into the
    directory, so retried and speculative attempts leave nothing there.
    Metadata comes from each file's Parquet footer (and the time column,
    when the table has one), never from re-reading the data.
    """
    shaped.write.mode("errorifexists").option("compression", "snappy").parquet(store.uri(target.push_dir))
    files = [f for f in store.list(target.push_dir) if f.location.endswith(".parquet")]
    with ThreadPoolExecutor(max_workers=16) as pool:
        described = list(pool.map(lambda f: _described(store, target, time_unit, f.location, f.size), files))
    names = [s.name for s in described]
    if len(set(names)) != len(names):
        raise StorageError(
            "Spark wrote several files for one partition; unset spark.sql.files.maxRecordsPerFile for pushes"
        )
    # Spark writes an empty file for partition 0 of an empty result: not a segment.
    segments = tuple(sorted((s for s in described if s.rows > 0), key=lambda s: s.name))
    empties = tuple(s.location for s in described if s.rows == 0)
    return Written(segments, empties)


def _described(
    store: DeepStore, target: PushTarget, time_unit: TimeUnit | None, path: str, size: int
) -> Segment:
    """The segment a file Spark wrote is: the partition its name says, its
    footer's fingerprint and rows, and its time column's bounds."""
    base = path.rsplit("/", 1)[-1]
    if not base.startswith("part-") or not base[5:10].isdigit():
        raise StorageError(f"unexpected file {path!r} in push directory {target.push_dir!r}")
    part = int(base[5:10])
    if part >= len(target.names):
        raise StorageError(
            f"Spark wrote partition {part} but the push planned {len(target.names)}; "
            "turn off adaptive skew splitting for pushes (spark.sql.adaptive.skewJoin.enabled=false)"
        )
    fs = store.filesystem()
    with fs.open_input_file(store.path(path)) as handle:
        handle.seek(size - 8)
        footer_len = int.from_bytes(handle.read(4), "little")
        handle.seek(size - 8 - footer_len)
        fingerprint = hashlib.sha256(handle.read(footer_len)).hexdigest()[:32]
        rows = pq.ParquetFile(handle).metadata.num_rows
    tmin, tmax = _time_bounds(fs, store.path(path), target.time_column, time_unit)
    return Segment(
        name=target.names[part],
        location=path,
        rows=rows,
        size_bytes=size,
        checksum="parquet-footer-sha256:" + fingerprint,
        min_time=tmin,
        max_time=tmax,
    )


def _time_bounds(
    fs: Any, path: str, time_column: str | None, time_unit: TimeUnit | None
) -> tuple[int | None, int | None]:
    """A file's earliest and latest time, in epoch ms, read from its time
    column (None, None: the table has none, or the file no times)."""
    if time_column is None:
        return None, None
    column = pq.read_table(path, columns=[time_column], filesystem=fs)
    bounds = pc.min_max(time_as_ms(column.column(0), time_unit))
    return bounds["min"].as_py(), bounds["max"].as_py()
