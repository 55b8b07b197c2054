"""Push sets: the set commit's latency beside a single table's, and the
largest set one request carries.

    .venv/bin/python -m benchmarks.sets [--sizes 2,5,20] [--repeat 15] [--largest 200]

Starts its own ZooKeeper on loopback. For each size N, N tables with a few
pushes of history each; then the last commit of a push (register one
segment and end the entry, as ``push`` sends it) is timed alone (one table)
and as a set of N tables in one multi (:meth:`commit_together`), ``--repeat``
times each, median and p90. Then sets of growing size (up to ``--largest``
tables, a 20-column schema each) until the request's size refuses one: the
largest that fits, and what the refusal says. The physical floor: one
round trip (measured as a single ``exists``).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from benchmarks.common import scratch_zookeeper
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import TooLargeError
from segment_lineage.lineage.core.model import Audit, Change, Segment, TableConfig, TableState
from segment_lineage.lineage.core.schema import DataType, Field, Schema
from segment_lineage.lineage.manager import LineageManager, together
from segment_lineage.lineage.manager.replace import complete_update
from segment_lineage.lineage.manager.together import Together
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.store import ZkStore

AUDIT = Audit(actor="bench")
_CAP = together.MAX_SET_TABLES


def _open(m: LineageManager, table: str, n: int) -> tuple[str, Segment]:
    entry = m.env.text_id()
    name = f"{table}_s{n}"
    m.commit(
        table,
        lambda s, now: transitions.start_replace(s, [], [name], entry_id=entry, audit=AUDIT, now_ms=now),
    )
    return entry, Segment(name=name, location=f"{table}/{name}.parquet", rows=1, size_bytes=100)


def _tables(m: LineageManager, prefix: str, count: int, schema: Schema | None = None) -> list[str]:
    names = [f"{prefix}{i}" for i in range(count)]
    for name in names:
        config = TableConfig.build(name, f"/tmp/bench-sets/{name}")
        m.create_table(config if schema is None else dataclasses.replace(config, schema=schema))
        for n in range(3):  # a little history
            entry, seg = _open(m, name, n)
            m.complete_replace(name, entry, [seg])
    return names


def latency(m: LineageManager, sizes: list[int], repeat: int) -> None:
    print("set commit (register one segment and end the entry, per table), ms:")
    single = _tables(m, "one", 1)[0]

    def one() -> None:
        entry, seg = _open(m, single, 100 + m.table(single).version)
        began = time.perf_counter()
        m.complete_replace(single, entry, [seg])
        one.took.append((time.perf_counter() - began) * 1000)  # type: ignore[attr-defined]

    one.took = []  # type: ignore[attr-defined]
    for _ in range(repeat):
        one()
    base = statistics.median(one.took)  # type: ignore[attr-defined]
    print(f"  1 table (a push's end):   median {base:6.1f}")
    for size in sizes:
        names = _tables(m, f"set{size}_", size)
        took = []
        for r in range(repeat):
            opened = {t: _open(m, t, 100 + r) for t in names}
            parts = [Together(t, complete_update(opened[t][0], [opened[t][1]])) for t in names]
            began = time.perf_counter()
            m.commit_together(parts)
            took.append((time.perf_counter() - began) * 1000)
        took.sort()
        med, p90 = statistics.median(took), took[int(len(took) * 0.9) - 1]
        ratio = med / base
        print(f"  {size:3d} tables in one multi: median {med:6.1f}  p90 {p90:6.1f}  ({ratio:.2f}x one table)")


def largest(m: LineageManager, limit: int) -> None:
    """Sets past the table cap (raised here, for the measure only) until the
    request's size refuses one."""
    together.MAX_SET_TABLES = max(limit, together.MAX_SET_TABLES)
    schema: Schema = tuple(Field(f"column_{i:02d}", DataType("double")) for i in range(20))
    names = _tables(m, "wide", limit, schema)
    fits = 0
    for size in (10, 25, 50, 75, 100, 125, 150, 175, 200):
        if size > limit:
            break

        def touch(s: TableState, now: int) -> Change:
            return transitions.start_replace(
                s, [], [f"t{now}"], entry_id=m.env.text_id(), audit=AUDIT, now_ms=now
            )

        try:
            m.commit_together([Together(t, touch) for t in names[:size]])
        except TooLargeError as exc:
            print(f"  {size} tables refused: {exc.message}")
            break
        fits = size
    print(f"largest set that fit (20-column tables, a few pushes of history each): {fits} tables")
    print(f"(a set is refused up front past {_CAP} tables)")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sets", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="2,5,20")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--largest", type=int, default=200)
    args = parser.parse_args()
    with scratch_zookeeper("bench-sets-") as (_, server):
        store = ZkStore(connect(ZkSettings(hosts=server.hosts)))
        m = LineageManager(store)
        began = time.perf_counter()
        for _ in range(20):
            store.client.exists("/")
        print(f"round trip (exists): {(time.perf_counter() - began) / 20 * 1000:.2f} ms")
        latency(m, [int(s) for s in args.sizes.split(",")], args.repeat)
        largest(m, args.largest)
        store.close()


if __name__ == "__main__":
    main()
