"""Many writer processes pushing their own segments to one table: how many give up.

    python -m benchmarks.writers --zk 127.0.0.1:2181/bench --writers 32 --pushes 6

Each writer is a process with its own client and the default retry policy;
each push is ``start_replace`` of one new segment, ``register_segments``,
``end_replace`` (three commits). Prints pushes that gave up (ContentionError),
the push latency p50/p99/max and pushes per second. Without ``--zk`` it starts
a ZooKeeper server on loopback for the run. Bounded: every push either lands
or gives up within the retry policy's deadline.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any


def writer(hosts: str, table: str, index: int, pushes: int, start: Any, out: Any) -> None:
    from segment_lineage import ContentionError, LineageManager, Segment, open_store

    manager = LineageManager(open_store(hosts))
    gave_up: list[str] = []
    latencies: list[float] = []
    start.wait()
    for round_ in range(pushes):
        name = f"w{index:03d}_{round_:04d}"
        began = time.perf_counter()
        try:
            entry = manager.start_replace(table, [], [name])
            manager.register_segments(table, [Segment(name, f"{name}.parquet", rows=1)], entry_id=entry)
            manager.end_replace(table, entry)
        except ContentionError as exc:
            gave_up.append(exc.message)
        latencies.append(time.perf_counter() - began)
    manager.store.close()
    out.put((gave_up, latencies))


def run(hosts: str, writers: int, pushes: int) -> str:
    from segment_lineage import LineageManager, TableConfig, open_store

    table = f"writers_{uuid.uuid4().hex[:8]}"
    setup = LineageManager(open_store(hosts))
    setup.create_table(TableConfig.build(table, f"/bench/{table}", "APPEND"))
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=writer, args=(hosts, table, i, pushes, start, out)) for i in range(writers)]
    for proc in procs:
        proc.start()
    time.sleep(1.0)  # let the processes import and connect before the clock starts
    began = time.perf_counter()
    start.set()
    results = [out.get(timeout=900) for _ in procs]
    elapsed = time.perf_counter() - began
    for proc in procs:
        proc.join(timeout=60)
    setup.drop_table(table, force=True)
    setup.store.close()
    lat: list[float] = sorted(x for _, latencies in results for x in latencies)
    gave_up = sum(len(g) for g, _ in results)

    def at(q: float) -> float:
        return lat[min(len(lat) - 1, int(len(lat) * q))] * 1000

    return (
        f"{writers} writers x {pushes} pushes: gave up {gave_up}, p50 {at(0.5):.0f} ms, "
        f"p99 {at(0.99):.0f} ms, max {lat[-1] * 1000:.0f} ms, {len(lat) / elapsed:.1f} pushes/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zk", help="ZooKeeper hosts[/chroot]; default: a server started for the run")
    parser.add_argument("--writers", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--pushes", type=int, default=4, help="pushes per writer")
    args = parser.parse_args()
    if args.zk:
        for n in args.writers:
            print(run(args.zk, n, args.pushes), flush=True)
        return
    from segment_lineage.lineage.zk.server import ZkServer, free_port

    with tempfile.TemporaryDirectory() as work:
        server = ZkServer(Path(work) / "zk", free_port())
        server.start()
        try:
            for n in args.writers:
                print(run(f"{server.hosts}/writers", n, args.pushes), flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
