"""Reclaiming N replaced segments: our retention pass beside ``deltalake``'s vacuum.

For each N (default 10k and 100k), in the same run and on the same disk:

* ours: a table of N one-kilobyte segment files on a real ZooKeeper (started
  here, on loopback), all replaced by one new segment; timed: one retention
  pass with zero retention (plan, intent recorded in ZooKeeper, N fenced file
  deletes, intent cleared, metadata garbage pass), with and without the
  orphan scan of the root;
* deltalake: a Delta table of N files (one per partition), overwritten;
  timed: ``vacuum(retention_hours=0)``.

Reports seconds, files per second and the ratio ours / deltalake.

    .venv/bin/pip install deltalake
    .venv/bin/python benchmarks/retention_vs_vacuum.py [--sizes 10000,100000] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from common import fresh_manager, register_many, scratch_zookeeper

from lineage.model import Segment, TableConfig
from retention.executor import PassOptions, run_table

PAYLOAD = b"x" * 1024


def settle() -> None:
    """Both peers start from the same quiet disk: set-up writes flushed."""
    os.sync()
    time.sleep(2)


def ours(hosts: str, work: Path, n: int, orphans: bool) -> float:
    m = fresh_manager(hosts)
    root = work / f"ours-{n}-{orphans}"
    m.create_table(
        TableConfig.build(
            "bench",
            str(root),
            "APPEND",
            replaced_segments_retention="0s",
            lineage_entry_cleanup_retention="0s",
        )
    )
    names = [f"bench_{i:07d}" for i in range(n)]
    segments = []
    for name in names:
        location = f"push_old/{name[-3:]}/{name}.parquet"
        path = root / location
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(PAYLOAD)
        segments.append(Segment(name, location, rows=1, size_bytes=len(PAYLOAD)))
    register_many(m, "bench", segments)
    entry = m.start_replace("bench", names, ["bench_new"])
    (root / "new.parquet").write_bytes(PAYLOAD)
    m.register_segments("bench", [Segment("bench_new", "new.parquet", rows=1, size_bytes=len(PAYLOAD))])
    m.end_replace("bench", entry)
    settle()
    began = time.perf_counter()
    report = run_table(m, "bench", PassOptions(min_grace_ms=0, orphans=orphans))
    seconds = time.perf_counter() - began
    assert report.files_deleted == n and not report.errors, report.line()
    assert sum(1 for p in root.rglob("*.parquet")) == 1
    m.store.close()
    shutil.rmtree(root)
    return seconds


def delta(work: Path, n: int) -> float:
    from deltalake import DeltaTable, write_deltalake

    path = work / f"delta-{n}"
    write_deltalake(str(path), pa.table({"k": list(range(n)), "v": [1] * n}), partition_by=["k"])
    write_deltalake(str(path), pa.table({"k": [0], "v": [2]}), mode="overwrite", partition_by=["k"])
    table = DeltaTable(str(path))
    settle()
    began = time.perf_counter()
    gone = table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    seconds = time.perf_counter() - began
    assert len(gone) == n, len(gone)
    shutil.rmtree(path)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results: list[dict[str, Any]] = []
    with scratch_zookeeper("retention-bench-") as (work, server):
        for n in sizes:
            row: dict[str, Any] = {"files": n}
            row["ours_s"] = ours(server.hosts, work, n, orphans=False)
            row["ours_with_orphan_scan_s"] = ours(server.hosts, work, n, orphans=True)
            row["deltalake_vacuum_s"] = delta(work, n)
            row["ours_files_per_s"] = n / row["ours_s"]
            row["deltalake_files_per_s"] = n / row["deltalake_vacuum_s"]
            row["ratio_ours_over_deltalake"] = row["ours_s"] / row["deltalake_vacuum_s"]
            results.append(row)
            print(
                f"{n:>7} files: ours {row['ours_s']:.2f}s ({row['ours_files_per_s']:,.0f}/s), "
                f"with orphan scan {row['ours_with_orphan_scan_s']:.2f}s, "
                f"deltalake vacuum {row['deltalake_vacuum_s']:.2f}s "
                f"({row['deltalake_files_per_s']:,.0f}/s), ratio {row['ratio_ours_over_deltalake']:.2f}",
                flush=True,
            )
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
