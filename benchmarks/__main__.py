"""Run every benchmark, ours beside the peers in the same run, and write the report.

    .venv/bin/python -m benchmarks [--out bench-report] [--quick] [--only push,ops,tables,retention]

Starts its own ZooKeeper on loopback; Spark runs in local mode (``--master``).
Writes report.md, report.json, one PNG per suite and profiles/ into ``--out``.
Exits 1 when a suite failed (the report says which and why).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
import platform
import subprocess
import sys
import time
import traceback
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.common import Context, Suite, scratch_zookeeper
from benchmarks.measure import Meter, resident_mb

SUITES = ("push", "ops", "tables", "retention", "mirror")
PACKAGES = ("pyspark", "kazoo", "pyarrow", "deltalake", "pyiceberg", "duckdb")


def machine() -> dict[str, Any]:
    meminfo = Path("/proc/meminfo").read_text().split("\n", 1)[0].split()
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    versions = []
    for name in PACKAGES:
        try:
            versions.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            versions.append(f"{name} (missing)")
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit.stdout.strip() or "unknown",
        "machine": f"{os.cpu_count()} cores, {int(meminfo[1]) / 2**20:.0f} GiB, {platform.platform()}",
        "python": platform.python_version(),
        "java": (java.stderr.splitlines() or ["unknown"])[0],
        "packages": ", ".join(versions),
        "zookeeper": "standalone server from the pyspark wheel, 2 GB heap, on loopback",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench-report"), help="report directory")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every suite")
    parser.add_argument("--only", default=",".join(SUITES), help=f"comma-separated, of: {', '.join(SUITES)}")
    parser.add_argument("--master", default=os.environ.get("SPARK_MASTER", "local[2]"), help="Spark master")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SUITES]
    if unknown or not chosen:
        parser.error(f"unknown suite {', '.join(unknown) or '(none)'}; choose from {', '.join(SUITES)}")
    meta = machine()
    meta["command"] = "python -m benchmarks " + " ".join(argv if argv is not None else sys.argv[1:])
    meta["size"] = "quick (smoke sizes)" if args.quick else "full"
    results: list[Suite] = []
    began = time.monotonic()
    with scratch_zookeeper("segment-lineage-bench-") as (work, server):
        ctx = Context(work=work, hosts=server.hosts, quick=args.quick, master=args.master)
        server_pid = server.pid()
        Meter.exclude = frozenset({server_pid} if server_pid else ())
        for name in chosen:
            print(f"== {name}", flush=True)
            module = importlib.import_module(f"benchmarks.{name}")
            try:
                results.extend(module.run(ctx))
            except Exception as exc:  # noqa: BLE001 - reported, and the run goes on to the next suite
                traceback.print_exc()
                results.append(
                    Suite(name, f"{name} (failed)", "size", "", error=f"{type(exc).__name__}: {exc}")
                )
        if server_pid:
            meta["zookeeper memory"] = f"{resident_mb(server_pid):,.0f} MB resident at the end of the run"
    meta["memory"] = f"{Meter.method}; the ZooKeeper server is not counted in the operations"
    meta["duration"] = f"{(time.monotonic() - began) / 60:.1f} min"
    written = report.write(args.out, meta, results)
    print(f"report: {written}", flush=True)
    return 1 if any(s.error for s in results) else 0


if __name__ == "__main__":
    sys.exit(main())
