"""Consistent push against a plain Spark Parquet overwrite of the same data.

Both read the same Parquet source (generated once per size: id, ts, user,
value) and write it with the same partitioning in the same Spark session;
runs alternate. Ours: ``push_dataframe`` (start, Spark's writer into a fresh
push directory, one footer read per segment, then register and end in one commit).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

from benchmarks.common import OURS, Context, Suite, close_and_drop, fresh_manager
from benchmarks.measure import case, measure

PEER = "Spark overwrite"
PARTITIONS = 8


def run(ctx: Context) -> list[Suite]:
    from segment_lineage.ingest.spark_job import spark_session

    suite = Suite("push", "Push: consistent push against a plain Spark overwrite", "rows", __doc__ or "")
    spark = spark_session(ctx.master)
    try:
        for rows in [20_000, 100_000] if ctx.quick else [1_000_000, 10_000_000]:
            one_size(ctx, spark, suite, rows, 1 if ctx.quick else 3)
    finally:
        spark.stop()
    suite.notes.append(
        "Memory includes Spark's JVM (a child process in local mode); both jobs run in the same JVM."
    )
    return [suite]


def one_size(ctx: Context, spark: Any, suite: Suite, rows: int, runs: int) -> None:
    from pyspark.sql import functions as F

    from segment_lineage.ingest.spark_job import push_dataframe
    from segment_lineage.lineage.core.model import TableConfig
    from segment_lineage.lineage.core.visibility import visible_segments

    source = str(ctx.work / f"source-{rows}")
    (
        spark.range(rows, numPartitions=PARTITIONS)
        .select(
            F.col("id"),
            (F.lit(1_700_000_000_000) + F.col("id")).alias("ts"),
            F.concat(F.lit("user-"), (F.col("id") % 1000).cast("string")).alias("user"),
            (F.rand(7) * 100).alias("value"),
        )
        .write.parquet(source)
    )
    m = fresh_manager(ctx.hosts)
    root = ctx.work / f"table-{rows}"
    m.create_table(TableConfig.build("bench", str(root), replaced_segments_retention="0s"))
    plain_dir = str(ctx.work / f"plain-{rows}")

    def plain() -> Callable[[], Any]:
        df = spark.read.parquet(source)
        return lambda: df.write.mode("overwrite").parquet(plain_dir)

    def ours() -> Callable[[], Any]:
        # Keep the disk flat between runs: earlier snapshots are not needed here.
        live = {s.location.split("/")[0] for s in visible_segments(m.table("bench"))}
        for old in root.glob("push_*"):
            if old.name not in live:
                shutil.rmtree(old, ignore_errors=True)
        df = spark.read.parquet(source)
        return lambda: push_dataframe(m, "bench", df, reason="benchmark")

    def pushed_all(result: Any) -> None:
        assert result.rows == rows, result

    timings: dict[str, tuple[list[float], list[int]]] = {PEER: ([], []), OURS: ([], [])}
    for _ in range(runs):
        for system, prepare, check in ((PEER, plain, None), (OURS, ours, pushed_all)):
            times, peaks = measure(prepare, 1, check)
            timings[system][0].extend(times)
            timings[system][1].extend(peaks)
    for system, measured in timings.items():
        suite.add(case("push", rows, system, measured, partitions=PARTITIONS))
    suite.profile_if_slower("push", rows, ours)
    close_and_drop(m)
    for path in (source, plain_dir, root):
        shutil.rmtree(path, ignore_errors=True)
