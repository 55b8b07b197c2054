"""Retention scaled out: N daemons over many tables, pass throughput and failover.

    .venv/bin/python -m benchmarks.daemons [--tables 200] [--daemons 1,2,4] [--window 60]

Starts its own ZooKeeper on loopback, creates ``--tables`` tables (each with
one replaced segment, so the first passes delete), then for each daemon count:
starts that many ``lineage retention daemon --interval 1s`` processes over
every table, waits until the tables are spread (every table owned, each
daemon owning some), counts the tables passed over during ``--window``
seconds (the daemons' ``lineage_retention_table_passes_total``), and, with
two daemons or more, kills the daemon owning the most with SIGKILL and times
how long until the others own every table. No peer does this (Pinot's
retention runs in its controller's leader), so the figures stand alone,
beside the session timeout that bounds the failover.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow as pa

from benchmarks.common import scratch_zookeeper
from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.lineage.core.model import TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.server import free_port
from segment_lineage.lineage.zk.store import ZkStore

ROOT = Path(__file__).resolve().parent.parent
SESSION_S = 10.0  # the default session timeout


class DaemonProc:
    def __init__(self, hosts: str, work: Path, name: str) -> None:
        self.port = free_port()
        self.log_path = work / f"{name}.log"
        env = {**os.environ, "LINEAGE_ZK_SESSION_TIMEOUT": str(SESSION_S), "PYTHONPATH": str(ROOT)}
        args = [sys.executable, "-m", "segment_lineage", "--zk", hosts, "retention", "daemon"]
        args += ["--interval", "1s", "--min-grace", "0s", "--metrics-port", str(self.port)]
        with self.log_path.open("wb") as log:
            self.popen = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)

    def metric(self, name: str) -> float:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return 0.0
        found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        return float(found.group(1)) if found else 0.0

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def wait(what: str, predicate: object, timeout: float) -> float:
    """Seconds until ``predicate()`` holds (polled every 0.1 s); raises after ``timeout``."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if predicate():  # type: ignore[operator]
            return time.monotonic() - began
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def make_tables(hosts: str, work: Path, count: int) -> None:
    store = ZkStore(connect(ZkSettings(hosts=hosts)))
    m = LineageManager(store, claims=RootClaimFiles())
    rows = pa.table({"i": [1, 2, 3]})
    try:
        for i in range(count):
            name = f"t{i:04d}"
            m.create_table(
                TableConfig.build(
                    name,
                    str(work / "lake" / name),
                    replaced_segments_retention="0s",
                    lineage_entry_cleanup_retention="0s",
                )
            )
            push_arrow(m, name, [rows])
            push_arrow(m, name, [rows])  # the first segment is replaced: the first pass deletes it
    finally:
        store.close()


def run(hosts: str, work: Path, tables: int, n: int, window: float) -> dict[str, float]:
    procs = [DaemonProc(hosts, work, f"d{n}-{k}") for k in range(n)]
    try:

        def owned() -> list[float]:
            return [p.metric("lineage_retention_tables_owned") for p in procs]

        spread_s = wait(
            f"{n} daemon(s) to own the {tables} tables",
            lambda: sum(owned()) == tables and min(owned()) > 0,
            300,
        )
        shares = owned()
        before = sum(p.metric("lineage_retention_table_passes_total") for p in procs)
        time.sleep(window)
        passed = sum(p.metric("lineage_retention_table_passes_total") for p in procs) - before
        result = {
            "daemons": n,
            "spread_s": spread_s,
            "min_share": min(shares),
            "max_share": max(shares),
            "table_passes_per_min": passed * 60 / window,
            "sweeps_per_min": passed * 60 / window / tables,
        }
        if n >= 2:
            victim = max(procs, key=lambda p: p.metric("lineage_retention_tables_owned"))
            survivors = [p for p in procs if p is not victim]
            victim.popen.kill()
            victim.popen.wait()
            result["failover_s"] = wait(
                "the survivors to own every table",
                lambda: sum(p.metric("lineage_retention_tables_owned") for p in survivors) == tables,
                SESSION_S * 6,
            )
        return result
    finally:
        for p in procs:
            p.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.daemons", description=__doc__.split("\n")[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--daemons", default="1,2,4", help="comma-separated daemon counts")
    parser.add_argument("--window", type=float, default=60.0, help="seconds of passes counted per count")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.daemons.split(",") if c.strip()]
    if args.tables < 1 or not counts or min(counts) < 1 or not 1 <= args.window <= 600:
        parser.error("--tables and --daemons at least 1, --window 1 to 600 seconds")
    with scratch_zookeeper("segment-lineage-daemons-") as (work, server):
        began = time.monotonic()
        make_tables(server.hosts, work, args.tables)
        print(
            f"{args.tables} tables made in {time.monotonic() - began:.0f}s; session timeout {SESSION_S:.0f}s"
        )
        print("| daemons | spread in | tables per daemon | table passes/min | sweeps/min | failover |")
        print("|---|---|---|---|---|---|")
        for n in counts:
            r = run(server.hosts, work, args.tables, n, args.window)
            failover = f"{r['failover_s']:.1f} s" if "failover_s" in r else "-"
            print(
                f"| {n} | {r['spread_s']:.1f} s | {r['min_share']:.0f}-{r['max_share']:.0f} | "
                f"{r['table_passes_per_min']:.0f} | {r['sweeps_per_min']:.1f} | {failover} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
