"""Lineage operations at 1k, 10k and 100k segments on a real ZooKeeper.

Reports start/end/revert latency (p50, p99) of a one-segment replacement on a
table of N segments, the same for a replacement of all N at once, the time to
read the visible set (cold: a new client; warm: cached blobs), and the znode
count and largest znode. Starts its own ZooKeeper on loopback.

    .venv/bin/python benchmarks/lineage_ops.py [--sizes 1000,10000,100000] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import percentile, scratch_zookeeper

from lineage.manager import LineageManager
from lineage.model import Segment, TableConfig
from lineage.retry import RetryPolicy
from lineage.zk_client import ZkSettings, connect
from lineage.zk_store import ZkStore


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def znodes(store: ZkStore) -> tuple[int, int]:
    count = largest = 0
    stack = [store.root]
    while stack:
        path = stack.pop()
        data, stat = store.client.get(path)
        count += 1
        largest = max(largest, len(data))
        if stat.numChildren:
            stack.extend(f"{path}/{c}" for c in store.client.get_children(path))
    return count, largest


def bench_size(hosts: str, n: int, rounds: int) -> dict[str, Any]:
    chroot = f"{hosts}/bench{uuid.uuid4().hex[:8]}"
    store = ZkStore(connect(ZkSettings(hosts=chroot)))
    m = LineageManager(store, retry=RetryPolicy())
    m.create_table(TableConfig.build("bench", "/bench", "APPEND"))
    names = [f"bench_segment_{i:07d}" for i in range(n)]
    load = timed(
        lambda: m.register_segments(
            "bench",
            [Segment(s, s + ".parquet", rows=1000, size_bytes=10**6, checksum="c" * 16) for s in names],
        )
    )
    start_t: list[float] = []
    end_t: list[float] = []
    revert_t: list[float] = []
    for i in range(rounds):
        new = f"bench_new_{i:05d}"
        t0 = time.perf_counter()
        entry = m.start_replace("bench", [names[i]], [new])
        start_t.append(time.perf_counter() - t0)
        m.register_segments("bench", [Segment(new, new + ".parquet", rows=1000)])
        t0 = time.perf_counter()
        m.end_replace("bench", entry)
        end_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        m.revert_replace("bench", entry)
        revert_t.append(time.perf_counter() - t0)
    warm = [timed(lambda: m.visible_segments("bench")) for _ in range(5)]
    cold = []
    for _ in range(3):
        fresh = ZkStore(connect(ZkSettings(hosts=chroot)))
        cold.append(timed(lambda fresh=fresh: LineageManager(fresh).visible_segments("bench")))
        fresh.close()
    # One replacement of every segment at once.
    full_to = [f"bench_full_{i:07d}" for i in range(n)]
    holder: list[str] = []
    full_start = timed(lambda: holder.append(m.start_replace("bench", names, full_to)))
    full_register = timed(lambda: m.register_segments("bench", [Segment(s, s + ".parquet") for s in full_to]))
    full_end = timed(lambda: m.end_replace("bench", holder[0]))
    count, largest = znodes(store)
    store.close()
    ms = 1000.0
    return {
        "segments": n,
        "rounds": rounds,
        "register_all_s": round(load, 3),
        "start_p50_ms": round(statistics.median(start_t) * ms, 1),
        "start_p99_ms": round(percentile(start_t, 0.99) * ms, 1),
        "end_p50_ms": round(statistics.median(end_t) * ms, 1),
        "end_p99_ms": round(percentile(end_t, 0.99) * ms, 1),
        "revert_p50_ms": round(statistics.median(revert_t) * ms, 1),
        "revert_p99_ms": round(percentile(revert_t, 0.99) * ms, 1),
        "read_visible_warm_ms": round(statistics.median(warm) * ms, 1),
        "read_visible_cold_ms": round(statistics.median(cold) * ms, 1),
        "replace_all_start_s": round(full_start, 3),
        "replace_all_register_s": round(full_register, 3),
        "replace_all_end_s": round(full_end, 3),
        "znodes": count,
        "largest_znode_bytes": largest,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with scratch_zookeeper("lineage-ops-") as (_, server):
        rows = [bench_size(server.hosts, n, 30 if n <= 10_000 else 10) for n in sizes]
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in columns) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
