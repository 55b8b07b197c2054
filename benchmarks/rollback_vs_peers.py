"""Rollback latency on tables of N segments: ours beside deltalake's restore
and pyiceberg's rollback (SQL catalog on SQLite), in the same run.

For each N (default 1k, 10k, 100k), each system gets a table of N data files
(ours: N registered segments on a real ZooKeeper started here, on loopback;
deltalake and pyiceberg: one write of N partitions), then, per round, a push
of one more file and a timed rollback of that push:

* ours: ``LineageManager.rollback(table, resolve_version(table))``;
* deltalake: ``DeltaTable.restore(previous_version)``;
* pyiceberg: ``manage_snapshots().rollback_to_snapshot(previous).commit()``.

Reports the median and p90 seconds per system and the ratio ours / peer.

    .venv/bin/pip install -e ".[bench]"
    .venv/bin/python benchmarks/rollback_vs_peers.py [--sizes 1000,10000,100000] [--rounds 7] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from common import fresh_manager, percentile, register_many, scratch_zookeeper

from lineage.model import Segment, TableConfig


def ours(hosts: str, n: int, rounds: int) -> list[float]:
    m = fresh_manager(hosts)
    m.create_table(TableConfig.build("bench", "/bench", "APPEND"))
    register_many(m, "bench", [Segment(f"bench_{i:07d}", f"bench_{i:07d}.parquet", rows=1) for i in range(n)])
    times = []
    for r in range(rounds):
        extra = f"extra_{r:04d}"
        entry = m.start_replace("bench", [], [extra])
        m.register_segments("bench", [Segment(extra, f"{extra}.parquet", rows=1)], entry_id=entry)
        m.end_replace("bench", entry)
        began = time.perf_counter()
        m.rollback("bench", m.resolve_version("bench"))
        times.append(time.perf_counter() - began)
        assert extra not in {s.name for s in m.visible_segments("bench")}
    m.store.close()
    return times


def delta(work: Path, n: int, rounds: int) -> list[float]:
    from deltalake import DeltaTable, write_deltalake

    path = str(work / f"delta-{n}")
    write_deltalake(path, pa.table({"k": list(range(n)), "v": [1] * n}), partition_by=["k"])
    times = []
    for r in range(rounds):
        write_deltalake(path, pa.table({"k": [n + r], "v": [2]}), mode="append", partition_by=["k"])
        table = DeltaTable(path)
        previous = table.version() - 1
        began = time.perf_counter()
        table.restore(previous)
        times.append(time.perf_counter() - began)
    return times


def iceberg(work: Path, n: int, rounds: int) -> list[float]:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField

    catalog = SqlCatalog(
        "bench", uri=f"sqlite:///{work}/iceberg-{n}.db", warehouse=f"file://{work}/iceberg-{n}"
    )
    catalog.create_namespace("bench")
    schema = Schema(
        NestedField(1, "k", LongType(), required=False), NestedField(2, "v", LongType(), required=False)
    )
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="k"))
    table = catalog.create_table("bench.t", schema=schema, partition_spec=spec)
    table.append(pa.table({"k": pa.array(range(n), pa.int64()), "v": pa.array([1] * n, pa.int64())}))
    times = []
    for r in range(rounds):
        table.append(pa.table({"k": pa.array([n + r], pa.int64()), "v": pa.array([2], pa.int64())}))
        table = catalog.load_table("bench.t")
        current = table.current_snapshot()
        assert current is not None and current.parent_snapshot_id is not None
        began = time.perf_counter()
        table.manage_snapshots().rollback_to_snapshot(current.parent_snapshot_id).commit()
        times.append(time.perf_counter() - began)
        table = catalog.load_table("bench.t")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    with scratch_zookeeper("rollback-bench-") as (work, server):
        for n in (int(s) for s in args.sizes.split(",")):
            row: dict[str, Any] = {"segments": n}
            for name, run in (
                ("ours", lambda n=n: ours(server.hosts, n, args.rounds)),
                ("deltalake", lambda n=n: delta(work, n, args.rounds)),
                ("pyiceberg", lambda n=n: iceberg(work, n, args.rounds)),
            ):
                times = run()
                row[f"{name}_median_s"] = statistics.median(times)
                row[f"{name}_p90_s"] = percentile(times, 0.9)
            row["ratio_ours_over_deltalake"] = row["ours_median_s"] / row["deltalake_median_s"]
            row["ratio_ours_over_pyiceberg"] = row["ours_median_s"] / row["pyiceberg_median_s"]
            results.append(row)
            print(
                f"{n:>7} segments: ours {row['ours_median_s'] * 1000:.1f} ms "
                f"(p90 {row['ours_p90_s'] * 1000:.1f}), deltalake restore "
                f"{row['deltalake_median_s'] * 1000:.1f} ms, pyiceberg rollback "
                f"{row['pyiceberg_median_s'] * 1000:.1f} ms; ratios "
                f"{row['ratio_ours_over_deltalake']:.2f} / {row['ratio_ours_over_pyiceberg']:.2f}",
                flush=True,
            )
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
