"""Consistent push against a plain Spark Parquet overwrite of the same data, side by side.

Both read the same Parquet source (generated once) and write it with the same
partitioning; runs alternate, and the report gives medians and the ratio.
Starts its own ZooKeeper on loopback; Spark runs in local mode.

    .venv/bin/python benchmarks/push_vs_spark.py [--rows 10000000] [--partitions 8] [--runs 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from pyspark.sql import functions as F

from ingest.spark_job import push_dataframe, spark_session
from lineage.manager import LineageManager
from lineage.model import TableConfig
from lineage.zk_client import ZkSettings, connect
from lineage.zk_server import ZkServer, free_port
from lineage.zk_store import ZkStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        server = ZkServer(tmp / "zk", free_port())
        server.start()
        spark = spark_session(args.master)
        try:
            source = str(tmp / "source")
            (
                spark.range(args.rows, numPartitions=args.partitions)
                .select(
                    F.col("id"),
                    (F.lit(1_700_000_000_000) + F.col("id")).alias("ts"),
                    F.concat(F.lit("user-"), (F.col("id") % 1000).cast("string")).alias("user"),
                    (F.rand(7) * 100).alias("value"),
                )
                .write.parquet(source)
            )
            store = ZkStore(connect(ZkSettings(hosts=f"{server.hosts}/bench{uuid.uuid4().hex[:6]}")))
            m = LineageManager(store)
            m.create_table(TableConfig.build("bench", str(tmp / "table"), replaced_segments_retention="0s"))
            plain_times: list[float] = []
            push_times: list[float] = []
            for run in range(args.runs):
                df = spark.read.parquet(source)
                start = time.perf_counter()
                df.write.mode("overwrite").parquet(str(tmp / "plain"))
                plain_times.append(time.perf_counter() - start)

                df = spark.read.parquet(source)
                start = time.perf_counter()
                result = push_dataframe(m, "bench", df, reason=f"bench run {run}")
                push_times.append(time.perf_counter() - start)
                assert result.rows == args.rows
                # Keep the disk flat between runs: earlier snapshots are not needed here.
                for old in (tmp / "table").glob("push_*"):
                    if old.name not in {s.location.split("/")[0] for s in m.visible_segments("bench")}:
                        shutil.rmtree(old, ignore_errors=True)
            store.close()
        finally:
            spark.stop()
            server.stop()
    plain, push = statistics.median(plain_times), statistics.median(push_times)
    report = {
        "rows": args.rows,
        "partitions": args.partitions,
        "runs": args.runs,
        "plain_spark_overwrite_s": [round(t, 2) for t in plain_times],
        "consistent_push_s": [round(t, 2) for t in push_times],
        "plain_median_s": round(plain, 2),
        "push_median_s": round(push, 2),
        "ratio_push_over_plain": round(push / plain, 3),
    }
    print("| rows | partitions | plain Spark overwrite (median s) | consistent push (median s) | ratio |")
    print("|---|---|---|---|---|")
    print(f"| {args.rows:,} | {args.partitions} | {plain:.2f} | {push:.2f} | {push / plain:.3f} |")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
