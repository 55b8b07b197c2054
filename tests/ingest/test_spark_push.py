"""Consistent push with real Spark (local mode and a standalone cluster), real
ZooKeeper, real files, and an S3 endpoint (moto) on loopback."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from segment_lineage.ingest.errors import PushInputError
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.ingest.spark_job import push_dataframe, read_input, spark_session
from segment_lineage.ingest.spark_readers import pinned_table, read_table, release_reads
from segment_lineage.lineage.core.model import DeletionReason, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claims import CLAIM_FILE
from tests.helpers.paths import REPO
from tests.helpers.run import lineage_process
from tests.helpers.spark_cluster import SparkCluster

ROOT = REPO
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = spark_session("local[2,4]")  # up to 4 attempts per task
    yield session
    session.stop()


def labelled(spark: SparkSession, label: str, n: int, day: int = 0) -> object:
    start = dt.datetime(2026, 11, 1 + day, tzinfo=dt.UTC)
    return spark.range(n).select(
        F.lit(label).alias("label"),
        F.col("id").alias("i"),
        (F.lit(start).cast("timestamp") + F.make_interval(secs=F.col("id"))).alias("ts"),
    )


def snapshot(m: LineageManager, table: str) -> list[tuple[str, int]]:
    with SnapshotReader(m, table) as reader:
        data = reader.to_arrow()
    return sorted(zip(data.column("label").to_pylist(), data.column("i").to_pylist(), strict=True))


def test_a_push_set_of_spark_frames_lands_in_one_commit(
    spark: SparkSession, zk_manager: LineageManager, tmp_path: Path
) -> None:
    """A push set whose tables Spark writes (prepare_dataframe): every table
    shows its rows in one commit; a table whose rows fail its audit fails
    the set, and neither table changes."""
    from segment_lineage.ingest.push_set import push_set
    from segment_lineage.ingest.spark_job import prepare_dataframe

    m = zk_manager
    m.create_table(TableConfig.build("facts", str(tmp_path / "facts"), "APPEND", time_column="ts"))
    m.create_table(TableConfig.build("dims", str(tmp_path / "dims")))
    sets = [prepare_dataframe(m, "facts", labelled(spark, "f1", 30), segments=2),
            prepare_dataframe(m, "dims", labelled(spark, "d1", 5), segments=1)]  # fmt: skip
    done = push_set(m, sets, job_id="nightly-1")
    assert [p.rows for p in done.pushes] == [30, 5]
    assert {m.history(t, 1)[0].set_id for t in ("facts", "dims")} == {done.set_id}
    assert len(snapshot(m, "facts")) == 30 and len(snapshot(m, "dims")) == 5
    from segment_lineage.ingest.audit import Audit, AuditFailedError

    small = prepare_dataframe(m, "dims", labelled(spark, "d2", 3), audit=Audit(min_rows=10))
    with pytest.raises(AuditFailedError, match="'dims' failed its audit"):  # written by Spark, then refused
        push_set(m, [prepare_dataframe(m, "facts", labelled(spark, "f2", 3)), small])
    assert len(snapshot(m, "facts")) == 30 and snapshot(m, "dims")[0][0] == "d1"


def test_refresh_append_and_replace_range(
    spark: SparkSession, zk_manager: LineageManager, tmp_path: Path
) -> None:
    m = zk_manager
    m.create_table(TableConfig.build("events", str(tmp_path / "events"), "APPEND", time_column="ts"))
    for day in range(3):
        push_dataframe(m, "events", labelled(spark, f"day{day}", 50, day), mode="append", segments=2)
    assert len(snapshot(m, "events")) == 150
    day1 = (
        int(dt.datetime(2026, 11, 2, tzinfo=dt.UTC).timestamp() * 1000),
        int(dt.datetime(2026, 11, 3, tzinfo=dt.UTC).timestamp() * 1000),
    )
    result = push_dataframe(
        m, "events", labelled(spark, "day1-fixed", 20, 1), mode="replace-range", interval=day1, segments=3
    )
    assert result.replaced == 2 and result.rows == 20
    counts: dict[str, int] = {}
    for label, _ in snapshot(m, "events"):
        counts[label] = counts.get(label, 0) + 1
    assert counts == {"day0": 50, "day1-fixed": 20, "day2": 50}
    refresh = push_dataframe(m, "events", labelled(spark, "all", 10), mode="refresh", segments=1)
    assert refresh.replaced == 7 and snapshot(m, "events") == [("all", i) for i in range(10)]
    segs = m.visible_segments("events")
    assert segs[0].min_time == int(dt.datetime(2026, 11, 1, tzinfo=dt.UTC).timestamp() * 1000)
    assert segs[0].checksum.startswith("parquet-footer-sha256:")  # the native writer's fingerprint


def test_a_task_failing_once_leaves_no_duplicates(
    spark: SparkSession, zk_manager: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = zk_manager
    m.create_table(TableConfig.build("retried", str(tmp_path / "retried")))
    monkeypatch.setenv("LINEAGE_FAILPOINT", "task.after-write")  # attempt 0 writes, then fails
    result = push_dataframe(
        m,
        "retried",
        spark.range(100).withColumn("label", F.lit("x")).withColumnRenamed("id", "i"),
        segments=2,
        writer="arrow",
    )
    assert result.rows == 100
    rows = snapshot(m, "retried")
    assert len(rows) == 100 and len(set(rows)) == 100
    assert all(s.location.endswith(".a1.parquet") for s in m.visible_segments("retried"))
    strays = [p for p in m.table("retried").pending.values() if p.reason is DeletionReason.STRAY]
    assert sorted(p.location.rsplit(".", 2)[-2] for p in strays) == ["a0", "a0"]


def test_native_writer_task_retried_once_leaves_no_duplicates(
    spark: SparkSession, zk_manager: LineageManager, tmp_path: Path
) -> None:
    from pyspark import TaskContext
    from pyspark.sql.types import LongType

    def fail_first_attempt(value: int) -> int:
        ctx = TaskContext.get()
        if ctx is not None and ctx.attemptNumber() == 0 and ctx.partitionId() == 0:
            raise RuntimeError("first attempt fails")
        return value

    m = zk_manager
    m.create_table(TableConfig.build("nativeretry", str(tmp_path / "nativeretry")))
    flaky = F.udf(fail_first_attempt, LongType())
    df = spark.range(60, numPartitions=3).select(F.lit("n").alias("label"), flaky(F.col("id")).alias("i"))
    result = push_dataframe(m, "nativeretry", df, writer="native")
    assert result.rows == 60 and result.segments == 3
    rows = snapshot(m, "nativeretry")
    assert len(set(rows)) == 60
    files = sorted(
        p.name for p in (tmp_path / "nativeretry").rglob("*") if p.is_file() and p.name != CLAIM_FILE
    )
    assert len(files) == 3 and all(f.startswith("part-") for f in files)  # no attempt leftovers


def test_readers_see_whole_snapshots_while_pushes_run(
    spark: SparkSession, zk_manager: LineageManager, zk_hosts: str, tmp_path: Path
) -> None:
    m = zk_manager
    m.create_table(TableConfig.build("polled", str(tmp_path / "polled")))
    push_dataframe(m, "polled", labelled(spark, "p0", 40), segments=4)
    pushed = {"p0": 40}
    seen: list[tuple[frozenset[str], int]] = []
    stop = threading.Event()

    def poll() -> None:
        from segment_lineage.lineage.zk.client import ZkSettings, connect
        from segment_lineage.lineage.zk.store import ZkStore

        reader_manager = LineageManager(ZkStore(connect(ZkSettings(hosts=zk_hosts))))
        while not stop.is_set():
            with SnapshotReader(reader_manager, "polled") as reader:
                data = reader.to_arrow()
            seen.append((frozenset(data.column("label").to_pylist()), data.num_rows))
        reader_manager.store.close()

    thread = threading.Thread(target=poll)
    thread.start()
    try:
        for k, n in ((1, 30), (2, 60), (3, 10)):
            push_dataframe(m, "polled", labelled(spark, f"p{k}", n), segments=3)
            pushed[f"p{k}"] = n
    finally:
        stop.set()
        thread.join()
    assert len(seen) > 3
    for labels, count in seen:
        assert len(labels) == 1, labels  # never a mix of two pushes
        (label,) = labels
        assert count == pushed[label]  # never a partial push


def test_spark_readers(spark: SparkSession, zk_manager: LineageManager, tmp_path: Path) -> None:
    m = zk_manager
    m.create_table(TableConfig.build("sparkread", str(tmp_path / "sparkread")))
    push_dataframe(m, "sparkread", labelled(spark, "r", 25), segments=2)
    with pinned_table(spark, m, "sparkread") as df:
        assert df.count() == 25 and m.store.pins.leases("sparkread")
    assert m.store.pins.leases("sparkread") == []
    assert read_table(spark, "sparkread", m).count() == 25
    release_reads()
    assert m.store.pins.leases("sparkread") == []


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return lineage_process(*args, env=dict(os.environ, **(env or {})))


@pytest.mark.e2e
def test_cli_push_and_read(zk_hosts: str, tmp_path: Path) -> None:
    data = tmp_path / "input.csv"
    data.write_text("label,i\n" + "".join(f"csv,{i}\n" for i in range(12)))
    assert (
        cli("--zk", zk_hosts, "table", "create", "clitab", "--root", str(tmp_path / "clitab")).returncode == 0
    )
    pushed = cli(
        "--zk",
        zk_hosts,
        "--json",
        "push",
        "clitab",
        "--input",
        str(data),
        "--format",
        "csv",
        "--segments",
        "2",
        "--reason",
        "from csv",
        "--engine",
        "spark",
    )
    assert pushed.returncode == 0, pushed.stderr
    summary = json.loads(pushed.stdout)
    assert summary["rows"] == 12 and summary["segments"] == 2 and summary["engine"] == "spark"
    chatter = ("log4j", "setLogLevel", "NativeCodeLoader", "Setting default log level")  # Spark starting
    assert not [line for line in chatter if line in pushed.stderr], pushed.stderr
    assert "wrote 2 segment(s)" not in pushed.stderr  # with --json, progress lines only with --verbose
    read = cli("--zk", zk_hosts, "--json", "read", "clitab", "--limit", "5")
    assert read.returncode == 0 and len(json.loads(read.stdout)["rows"]) == 5
    bad = cli("--zk", zk_hosts, "push", "clitab", "--input", str(tmp_path / "missing"), "--format", "csv")
    assert bad.returncode == 2 and "does not exist" in bad.stderr
    bad = cli("--zk", zk_hosts, "push", "clitab", "--input", str(data), "--mode", "upsert")
    assert bad.returncode == 2 and "unknown push mode" in bad.stderr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    group = SparkCluster(tmp_path_factory.mktemp("spark"))
    group.start()
    yield group
    group.stop()


@pytest.mark.e2e
def test_push_on_a_standalone_cluster_with_speculation(
    cluster: SparkCluster, zk_hosts: str, tmp_path: Path
) -> None:
    source = tmp_path / "src"
    source.mkdir()
    pq.write_table(pa.table({"label": ["c"] * 400, "i": list(range(400))}), source / "part.parquet")
    assert (
        cli(
            "--zk", zk_hosts, "table", "create", "clustered", "--root", str(tmp_path / "clustered")
        ).returncode
        == 0
    )
    pushed = cli(
        "--zk",
        zk_hosts,
        "--json",
        "push",
        "clustered",
        "--input",
        str(source),
        "--segments",
        "4",
        "--writer",
        "arrow",
        "--master",
        cluster.master_url,
        "--conf",
        "spark.speculation=true",
        "--conf",
        "spark.speculation.interval=100ms",
        "--conf",
        "spark.speculation.multiplier=1.5",
        "--conf",
        "spark.speculation.quantile=0.5",
        "--conf",
        "spark.speculation.minTaskRuntime=500ms",
        "--conf",
        "spark.speculation.efficiency.enabled=false",
        env={"LINEAGE_FAILPOINT": "task.slow-first-attempt"},
    )
    assert pushed.returncode == 0, pushed.stderr
    assert json.loads(pushed.stdout)["rows"] == 400
    read = cli("--zk", zk_hosts, "--json", "read", "clustered", "--limit", "1000")
    rows = json.loads(read.stdout)["rows"]
    assert sorted(r["i"] for r in rows) == list(range(400))  # no duplicates from the speculative copy
    listed = cli("--zk", zk_hosts, "--json", "segments", "clustered")
    locations = [s["location"] for s in json.loads(listed.stdout)]
    assert any(
        loc.endswith(".a1.parquet") for loc in locations
    )  # partition 0 came from the speculative attempt


@pytest.mark.e2e
def test_push_to_s3(zk_manager: LineageManager, zk_hosts: str, s3: str, tmp_path: Path) -> None:
    # A fresh process, as in production, where executors carry their own credentials.
    m = zk_manager
    m.create_table(TableConfig.build("s3tab", "s3://lake/warehouse/s3tab"))
    env = {
        k: os.environ[k]
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "LINEAGE_S3_ENDPOINT")
    }
    for label, n in (("s3-a", 30), ("s3-b", 20)):
        source = tmp_path / label
        source.mkdir()
        pq.write_table(pa.table({"label": [label] * n, "i": list(range(n))}), source / "part.parquet")
        args = ["push", "s3tab", "--input", str(source), "--segments", "2", "--engine", "spark"]
        pushed = cli("--zk", zk_hosts, *args, env=env)
        assert pushed.returncode == 0, pushed.stderr
    assert snapshot(m, "s3tab") == [("s3-b", i) for i in range(20)]
    import boto3

    listed = boto3.client("s3", endpoint_url=s3).list_objects_v2(Bucket="lake")["Contents"]
    keys = [o["Key"] for o in listed if not o["Key"].endswith(CLAIM_FILE)]
    assert len(keys) == 4 and all(k.startswith("warehouse/s3tab/push_") for k in keys)
    read = cli("--zk", zk_hosts, "--json", "read", "s3tab", "--limit", "100", env=env)
    assert read.returncode == 0 and len(json.loads(read.stdout)["rows"]) == 20


def test_long_pushes_report_progress(spark: SparkSession, zk_manager: LineageManager, tmp_path: Path) -> None:
    import time

    from pyspark.sql.types import LongType

    def slow(value: int) -> int:
        time.sleep(0.05)
        return value

    m = zk_manager
    m.create_table(TableConfig.build("slow", str(tmp_path / "slow")))
    df = spark.range(30, numPartitions=3).select(
        F.lit("s").alias("label"), F.udf(slow, LongType())("id").alias("i")
    )
    messages: list[str] = []
    result = push_dataframe(m, "slow", df, progress=messages.append, progress_every_s=0.1)
    assert any(msg.startswith("writing: ") and "tasks done" in msg for msg in messages), messages
    assert messages[-1].startswith("wrote 3 segment(s), 30 rows")
    assert result.summary().startswith(
        f"pushed slow (refresh): entry {result.entry_id}, 3 segment(s), 30 rows"
    )


def test_spark_reader_says_snapshot_too_old(
    spark: SparkSession, zk_manager: LineageManager, tmp_path: Path
) -> None:
    from segment_lineage.ingest.errors import SnapshotTooOldError
    from segment_lineage.ingest.spark_readers import snapshot_dataframe
    from segment_lineage.lineage.storage.deep import DeepStore

    m = zk_manager
    m.create_table(TableConfig.build("old", str(tmp_path / "old")))
    push_dataframe(m, "old", labelled(spark, "a", 10), segments=1)
    with SnapshotReader(m, "old") as reader:
        store = DeepStore.for_root(str(tmp_path / "old"))
        push_dataframe(m, "old", labelled(spark, "b", 10), segments=1)
        push_dataframe(m, "old", labelled(spark, "c", 10), segments=1)  # "a" reclaimed proactively
        for seg in reader.segments:
            store.delete(seg.location)  # as retention would, had the lease been lost
        with pytest.raises(SnapshotTooOldError, match="snapshot too old"):
            snapshot_dataframe(spark, reader)


def test_cli_refuses_an_unknown_writer(zk_hosts: str, tmp_path: Path) -> None:
    data = tmp_path / "in.csv"
    data.write_text("label,i\nx,1\n")
    cli("--zk", zk_hosts, "table", "create", "wt", "--root", str(tmp_path / "wt"))
    bad = cli("--zk", zk_hosts, "push", "wt", "--input", str(data), "--format", "csv", "--writer", "magic")
    assert bad.returncode == 2 and "unknown writer 'magic'" in bad.stderr  # before Spark starts


def test_epoch_seconds_in_an_integer_column_are_inferred_by_both_writers(
    spark: SparkSession, zk_manager: LineageManager, tmp_path: Path
) -> None:
    from segment_lineage.retention.planner import Policy, plan

    m = zk_manager
    m.create_table(
        TableConfig.build("secs", str(tmp_path / "secs"), "APPEND", time_column="ts", time_retention="30d")
    )
    now_s = m.store.now_ms() // 1000
    df = spark.range(10).select(
        F.lit("s").alias("label"), F.col("id").alias("i"), (F.lit(now_s) - F.col("id")).alias("ts")
    )
    said: list[str] = []
    push_dataframe(m, "secs", df, mode="append", segments=1, writer="native", progress=said.append)
    push_dataframe(m, "secs", df, mode="append", segments=1, writer="arrow")
    assert [s for s in said if "epoch seconds" in s and "inferred" in s]
    segs = m.visible_segments("secs")
    assert [(s.min_time, s.max_time) for s in segs] == [((now_s - 9) * 1000, now_s * 1000)] * 2
    assert plan(m.table("secs"), Policy(m.store.now_ms())).condemn == {}
    # The interval (ms) is checked against the rows in the same unit as the segments' times.
    window = ((now_s - 9) * 1000, now_s * 1000 + 1)
    assert push_dataframe(m, "secs", df, mode="replace-range", interval=window, segments=1).replaced == 2


def test_both_writers_write_standard_utc_timestamps(
    spark: SparkSession, zk_manager: LineageManager, tmp_path: Path
) -> None:
    """Not INT96: DuckDB, pyarrow and Polars see instants in UTC."""
    m = zk_manager
    m.create_table(TableConfig.build("zoned", str(tmp_path / "zoned"), "APPEND", time_column="ts"))
    for writer in ("native", "arrow"):
        push_dataframe(m, "zoned", labelled(spark, writer, 3), mode="append", segments=1, writer=writer)
    for seg in m.visible_segments("zoned"):
        footer = pq.ParquetFile(tmp_path / "zoned" / seg.location)
        column = footer.schema.column(footer.schema_arrow.get_field_index("ts"))
        assert column.physical_type == "INT64", (seg.name, column)
        assert footer.schema_arrow.field("ts").type == pa.timestamp("us", tz="UTC"), seg.name
        first = pq.read_table(tmp_path / "zoned" / seg.location).column("ts")[0].as_py()
        assert first == dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def test_spark_and_arrow_pushes_share_one_schema(
    spark: SparkSession, zk_manager: LineageManager, tmp_path: Path
) -> None:
    """Spark's and Arrow's pushes are held to the same recorded schema: a CSV
    whose small integers Spark infers as int sits beside Arrow's int64; a
    renamed column is refused before anything is written; a column added
    with evolve reads as null in older files through the Spark reader too."""
    from segment_lineage.ingest.arrow_push import push_arrow
    from segment_lineage.ingest.spark_job import read_input
    from segment_lineage.lineage.core.schema import SchemaMismatchError

    m = zk_manager
    m.create_table(TableConfig.build("shared", str(tmp_path / "shared"), "APPEND"))
    push_arrow(m, "shared", [pa.table({"n": [1, 2], "s": ["a", "b"]})], mode="append")
    (tmp_path / "in.csv").write_text("n,s\n3,c\n")
    push_dataframe(m, "shared", read_input(spark, str(tmp_path / "in.csv"), "csv"), mode="append")
    version = m.table("shared").version
    with pytest.raises(SchemaMismatchError, match="column 's' \\(string\\) is missing"):
        push_dataframe(m, "shared", spark.createDataFrame([(4, "d")], "n long, t string"), mode="append")
    assert m.table("shared").version == version
    wider = spark.createDataFrame([(5, "e", 1.5)], "n int, s string, x double")
    push_dataframe(m, "shared", wider, mode="append", schema_policy="evolve")
    with pinned_table(spark, m, "shared") as df:
        rows = sorted((r["n"], r["s"], r["x"]) for r in df.collect())
    assert rows == [(1, "a", None), (2, "b", None), (3, "c", None), (5, "e", 1.5)]
    for seg in m.visible_segments("shared"):
        assert pq.read_schema(tmp_path / "shared" / seg.location).field("n").type == pa.int64(), seg.name


def test_an_empty_csv_field_is_null_whichever_engine_reads_it(spark: SparkSession, tmp_path: Path) -> None:
    """An empty CSV field, quoted or not, in a text column as in a number
    column: null through Spark's reader and through Arrow's alike (so an
    audit's not-null check judges them the same)."""
    from segment_lineage.ingest.arrow_push import read_input_arrow
    from segment_lineage.ingest.spark_job import read_input

    (tmp_path / "in.csv").write_text('a,b,c\n1,,x\n,2,\n3,4,""\n')
    by_spark = [r.asDict() for r in read_input(spark, str(tmp_path / "in.csv"), "csv").collect()]
    by_arrow = read_input_arrow(str(tmp_path / "in.csv"), "csv").to_pylist()
    expected = [{"a": 1, "b": None, "c": "x"}, {"a": None, "b": 2, "c": None}, {"a": 3, "b": 4, "c": None}]
    assert by_spark == by_arrow == expected
    # Text that only looks like a null marker stays text (Namibia's code among them), with either engine.
    (tmp_path / "markers.csv").write_text(
        'id,country,name,code\n1,NA,Null,nan\n2,US,None,N/A\n3,"NA","null",#N/A\n'
    )
    by_spark = [r.asDict() for r in read_input(spark, str(tmp_path / "markers.csv"), "csv").collect()]
    by_arrow = read_input_arrow(str(tmp_path / "markers.csv"), "csv").to_pylist()
    assert by_spark == by_arrow, (by_spark, by_arrow)
    assert [r["country"] for r in by_arrow] == ["NA", "US", "NA"]
    assert [r["code"] for r in by_arrow] == ["nan", "N/A", "#N/A"]


def test_time_chunks_keep_every_segment_inside_one_month(
    spark: SparkSession, zk_manager: LineageManager, tmp_path: Path
) -> None:
    """A push of three months (into one segment, if it could) writes a
    segment per month, so replacing one month afterwards works."""
    m = zk_manager
    config = TableConfig.build(
        "monthly", str(tmp_path / "monthly"), "APPEND", time_column="ts", time_granularity="month"
    )
    m.create_table(config)
    days = [dt.datetime(2013, month, day, 12, tzinfo=dt.UTC) for month in (1, 2, 3) for day in (1, 15, 28)]
    rows = [(n, t, {"k": n}) for n, t in enumerate(days)]  # a map column: Spark hashes none
    df = spark.createDataFrame(rows, "n long, ts timestamp, tags map<string, long>")
    plan = push_dataframe(m, "monthly", df, mode="append", segments=1, dry_run=True)
    assert plan.dry_run and (plan.segments, plan.rows) == (3, 9) and m.visible_segments("monthly") == []
    push_dataframe(m, "monthly", df, mode="append", segments=1)
    spans = sorted((s.min_time, s.max_time, s.rows) for s in m.visible_segments("monthly"))
    month_ms = [int(dt.datetime(2013, mo, 1, tzinfo=dt.UTC).timestamp() * 1000) for mo in (1, 2, 3, 4)]
    assert [(lo >= month_ms[i] and hi < month_ms[i + 1], n) for i, (lo, hi, n) in enumerate(spans)] == [
        (True, 3),
        (True, 3),
        (True, 3),
    ]
    feb = spark.createDataFrame(
        [(100, dt.datetime(2013, 2, 2, tzinfo=dt.UTC), {"k": 100})],
        "n long, ts timestamp, tags map<string, long>",
    )
    push_dataframe(m, "monthly", feb, mode="replace-range", interval=(month_ms[1], month_ms[2]))
    with SnapshotReader(m, "monthly") as reader:
        numbers = sorted(reader.to_arrow().column("n").to_pylist())
    assert numbers == [0, 1, 2, 6, 7, 8, 100]


@pytest.mark.e2e
def test_the_demo_prints_no_jvm_or_spark_chatter(zk_hosts: str, tmp_path: Path) -> None:
    """``make demo`` as a user sees it: the story, without the JVM's
    incubator warning or Spark's start-up lines."""
    env = dict(os.environ, LINEAGE_ZK=zk_hosts, LINEAGE_HOME=str(tmp_path / "home"))
    done = subprocess.run(
        [str(Path(sys.executable).parent / "lineage"), "demo"],
        capture_output=True, text=True, timeout=600, env=env, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "demo finished" in done.stdout
    noise = ("WARNING", "log4j", "incubator modules", "NativeCodeLoader", "setLogLevel", "SparkContext")
    assert not [line for line in output.splitlines() if any(word in line for word in noise)], output


@pytest.mark.e2e
def test_ctrl_c_during_a_spark_push_says_one_line_and_no_traceback(zk_hosts: str, tmp_path: Path) -> None:
    """`lineage push --engine spark`, interrupted (SIGINT) while Spark writes:
    the last line says the entry was reverted; no py4j or JVM traceback."""
    import signal

    from tests.helpers.run import wait_for

    env = dict(os.environ, LINEAGE_ZK=zk_hosts, LINEAGE_HOME=str(tmp_path / "home"))
    env.pop("LINEAGE_FAILPOINT", None)
    source = tmp_path / "in"
    made = subprocess.run(
        [sys.executable, "-m", "segment_lineage.sample", str(source), "--rows", "1000000"],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    lineage = str(Path(sys.executable).parent / "lineage")
    created = subprocess.run(
        [lineage, "table", "create", "big", "--root", str(tmp_path / "big")],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    err = tmp_path / "push.err"
    with err.open("w") as sink:
        push = subprocess.Popen(
            [lineage, "push", "big", "--input", str(source), "--engine", "spark"],
            stdout=subprocess.DEVNULL, stderr=sink, env=env, text=True,
        )  # fmt: skip
    try:
        # Signalled once Spark's tasks have opened their files (about 1.7 s
        # before they commit here), not after a fixed pause: 1.5 s after the
        # entry started, a busy machine's push had already ended, and the
        # signal came while the process was exiting.
        writing = "push_*/_temporary/0/_temporary/*/part-*"  # a task's open file
        wait_for("Spark to write", lambda: any((tmp_path / "big").glob(writing)), 120)
        push.send_signal(signal.SIGINT)
        assert push.wait(timeout=120) == 128 + signal.SIGINT
    finally:
        if push.poll() is None:
            push.kill()
    text = err.read_text()
    assert "Traceback" not in text and "\tat org.apache" not in text and "py4j" not in text, text
    last = text.strip().splitlines()[-1]
    assert last.startswith("error: push to 'big' interrupted by SIGINT: entry ") and last.endswith(
        "reverted, its files queued for retention"
    ), text


def test_a_spark_push_is_audited_before_its_rows_show(
    spark: SparkSession, zk_manager: LineageManager, tmp_path: Path
) -> None:
    """The audit reads what Spark wrote (several segments): a failing check
    reverts the push, a passing one is recorded."""
    from segment_lineage.ingest.audit import Audit, AuditFailedError

    m = zk_manager
    m.create_table(TableConfig.build("audited", str(tmp_path / "audited")))
    push_dataframe(m, "audited", labelled(spark, "old", 40), segments=2)
    every_tenth_null = F.when(F.col("i") % 10 == 0, None).otherwise(F.col("i"))
    holey = labelled(spark, "new", 30).withColumn("i", every_tenth_null)
    with pytest.raises(AuditFailedError, match=r"not-null i \(3 null\(s\)\)"):
        push_dataframe(m, "audited", holey, segments=3, audit=Audit(not_null=("i",)))
    assert [label for label, _ in snapshot(m, "audited")] == ["old"] * 40
    audit = Audit(
        min_rows=30, max_change_pct=50, not_null=("label",),
        sql="SELECT count(DISTINCT label) = 1 AND min(ts) IS NOT NULL FROM staged",
    )  # fmt: skip
    done = push_dataframe(m, "audited", labelled(spark, "new", 30), segments=3, audit=audit)
    assert done.audited is not None and "max-change 50% (-25.0%: 40 -> 30 rows)" in done.audited
    assert [label for label, _ in snapshot(m, "audited")] == ["new"] * 30


def test_an_input_spark_cannot_read_as_parquet_is_bad_input_with_the_format_hint(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "day.csv").write_text("id,label\n1,a\n")
    with pytest.raises(PushInputError, match="as parquet") as refused:
        read_input(spark, str(tmp_path / "day.csv"), "parquet")
    assert refused.value.remedy is not None and "--format csv" in refused.value.remedy
