"""Sustained pushes against one embedded ZooKeeper, its heap measured.

    .venv/bin/python -m benchmarks.sustained [--seconds 120] [--pushers 3]
        [--segments 3000] [--heap 256] [--big 0] [--pause 0]

Starts a server with the given heap (the old default was 256 MB), creates a
table of ``--segments`` segments, then runs ``--pushers`` processes' worth of
writers (threads, each with its own session) that each replace one segment
in a loop (``--pause`` seconds apart); with ``--big N`` one more writer registers N segments bound to one
entry while they commit. Every 5 s it samples the server's used heap
(``jstat -gc``, after the collector's own young collections) and prints one
line; at the end, the peak, the commits, the failures and whether the server
survived. Exits 1 when the server died or the big push did not land.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.server import ZkServer, free_port
from segment_lineage.lineage.zk.store import ZkStore

SAMPLE_S = 5.0


def used_heap_mb(pid: int) -> float | None:
    """Used heap of a JVM in MB from ``jstat -gc`` (eden, survivors, old)."""
    try:
        cmd = ["jstat", "-gc", str(pid)]
        out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.split("\n")
    if len(lines) < 2:
        return None
    fields = dict(zip(lines[0].split(), lines[1].split(), strict=False))
    try:
        used_kb = sum(float(fields[k]) for k in ("S0U", "S1U", "EU", "OU"))
    except (KeyError, ValueError):
        return None
    return used_kb / 1024


def percentiles(seconds: list[float]) -> str:
    if not seconds:
        return "no commit"
    ordered = sorted(seconds)
    p50 = ordered[len(ordered) // 2] * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    return f"commit p50 {p50:.0f} ms, p99 {p99:.0f} ms"


def seg(name: str) -> Segment:
    return Segment(name, f"p/{name}.parquet", rows=1, size_bytes=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sustained", description=__doc__)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--pushers", type=int, default=3)
    parser.add_argument("--segments", type=int, default=3_000)
    parser.add_argument("--heap", type=int, default=256, help="the server's heap in MB")
    parser.add_argument("--big", type=int, default=0, help="segments of one big push made meanwhile")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds each pusher waits between pushes")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="sustained-"))
    server = ZkServer(work / "zk", free_port(), heap_mb=args.heap)
    server.start()
    stores: list[ZkStore] = []
    stop = threading.Event()
    commits = [0] * args.pushers
    failures: list[str] = []
    latencies: list[float] = []  # seconds per commit, averaged over each push's three
    big_result: list[str] = []

    def manager() -> LineageManager:
        store = ZkStore(connect(ZkSettings(hosts=server.hosts)))
        stores.append(store)
        return LineageManager(store)

    def pusher(k: int) -> None:
        m = manager()
        n, force, last = 0, False, 0
        while not stop.is_set():
            old, new = f"w{k}-{last}", f"w{k}-{n + 1}"
            try:
                # After a failure, force cleanup reverts the entry left open.
                began = time.perf_counter()
                entry = m.start_replace("t", [old] if last else [], [new], force_cleanup=force)
                m.register_segments("t", [seg(new)], entry_id=entry)
                m.end_replace("t", entry)
                latencies.append((time.perf_counter() - began) / 3)
                commits[k] += 3
                n, force, last = n + 1, False, n + 1
                stop.wait(args.pause)
            except LineageError as exc:
                failures.append(f"pusher {k}: {type(exc).__name__}: {exc.message}")
                n, force = n + 1, True  # new names: the old ones may be queued for deletion
                if not server.is_serving():
                    return

    def big() -> None:
        m = manager()
        names = [f"big-{i:07d}" for i in range(args.big)]
        began = time.monotonic()
        try:
            entry = m.start_replace("t", [], names)
            m.register_segments("t", [seg(x) for x in names], entry_id=entry)
            m.end_replace("t", entry)
            big_result.append(f"landed in {time.monotonic() - began:.1f}s")
        except LineageError as exc:
            spent = time.monotonic() - began
            big_result.append(f"failed after {spent:.1f}s: {type(exc).__name__}: {exc.message}")

    try:
        setup = manager()
        setup.create_table(TableConfig.build("t", str(work / "t")))
        setup.register_segments("t", [seg(f"s{i:06d}") for i in range(args.segments)])
        threads = [threading.Thread(target=pusher, args=(k,)) for k in range(args.pushers)]
        if args.big:
            threads.append(threading.Thread(target=big))
        for t in threads:
            t.start()
        began = time.monotonic()
        peak = 0.0
        pid = server.pid()
        while time.monotonic() - began < args.seconds and server.is_serving():
            time.sleep(SAMPLE_S)
            used = used_heap_mb(pid) if pid else None
            peak = max(peak, used or 0.0)
            print(
                f"{time.monotonic() - began:6.0f}s heap used {used or 0:7.1f} MB of {args.heap}, "
                f"commits {sum(commits)}, failures {len(failures)}",
                flush=True,
            )
        alive = server.is_serving()
        stop.set()
        for t in threads:
            t.join(timeout=120)
        print(
            f"heap {args.heap} MB, {args.pushers} pushers, {args.segments} segments, {args.seconds:.0f}s: "
            f"peak used {peak:.0f} MB, {sum(commits)} commits ({percentiles(latencies)}), "
            f"{len(failures)} failures, "
            f"server {'alive' if alive else 'DIED'}"
            + (f"; big push of {args.big}: {(big_result or ['unfinished'])[0]}" if args.big else "")
        )
        for line in failures[:3]:
            print(f"  {line}")
        landed = not args.big or bool(big_result and big_result[0].startswith("landed"))
        return 0 if alive and landed else 1
    finally:
        stop.set()
        for store in stores:
            with contextlib.suppress(Exception):  # closing after a dead server
                store.close()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
