"""Lineage operations under 1, 8 and 32 concurrent writers, beside peers' appends.

A table of 1,000 segments (deltalake and pyiceberg: 1,000 data files). Each
writer is a thread with its own client (its own ZooKeeper session; its own
DeltaTable or catalog). All writers start together and commit a one-row
Parquet file, over and over, until the run's commits are done:

* ours: a consistent push of the file: ``start_replace`` (nothing to replace),
  the file written, ``register_segments`` into the entry, ``end_replace``;
  three compare-and-set commits on the table's head. Latency p50/p99 of start,
  end and the whole commit, and commits per second. Then every writer reverts
  its own entries, all together: revert p50/p99.
* deltalake: ``write_deltalake(mode="append")``; delta-rs retries a commit
  that lost the race; a failure is retried here too (bounded).
* pyiceberg: ``table.append`` on a SQL catalog (SQLite); a commit that lost
  the race (``CommitFailedException``) reloads the table and retries (bounded).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from benchmarks.common import OURS, Context, Suite, chroot, register_many
from benchmarks.measure import Meter, case
from benchmarks.peers import delta_table, iceberg_catalog, iceberg_table, one_row
from lineage.errors import ContentionError
from lineage.manager import LineageManager
from lineage.model import Segment, TableConfig
from lineage.zk_client import ZkSettings, connect
from lineage.zk_store import ZkStore

WRITERS = (1, 8, 32)
BASE = 1_000
PEER_ATTEMPTS = 100


def concurrently(works: list[Callable[[], None]]) -> tuple[float, int]:
    """Release the writers together; wall time and peak added memory until the last is done."""
    barrier = threading.Barrier(len(works) + 1)
    errors: list[BaseException] = []

    def body(work: Callable[[], None]) -> None:
        barrier.wait()
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - raised again by the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(w,)) for w in works]
    for thread in threads:
        thread.start()
    meter = Meter()
    meter.start()
    barrier.wait()
    for thread in threads:
        thread.join()
    seconds, peak = meter.stop()
    if errors:
        raise errors[0]
    return seconds, peak


def retried(
    commit: Callable[[], None], lost: tuple[type[BaseException], ...], counts: dict[str, int]
) -> None:
    """A peer's commit, retried with jittered back-off when it lost a race (bounded)."""
    for attempt in range(PEER_ATTEMPTS):
        try:
            commit()
            return
        except lost:
            counts["retries"] += 1
            time.sleep(random.uniform(0, min(0.5, 0.005 * 2**attempt)))
    counts["failed"] += 1


class Ours:
    def __init__(self, ctx: Context) -> None:
        self.hosts = chroot(ctx.hosts)
        self.root = ctx.work / "ops-ours"
        self.root.mkdir()
        self.manager = self.client()
        self.manager.create_table(TableConfig.build("bench", str(self.root), "APPEND"))
        register_many(
            self.manager,
            "bench",
            [Segment(f"base_{i:05d}", f"base_{i:05d}.parquet", rows=1) for i in range(BASE)],
        )
        self.names = (f"seg_{i:06d}" for i in itertools.count())

    def client(self) -> LineageManager:
        return LineageManager(ZkStore(connect(ZkSettings(hosts=self.hosts))))

    def commit(self, m: LineageManager, lat: dict[str, list[float]]) -> str:
        name = next(self.names)
        t0 = time.perf_counter()
        entry = m.start_replace("bench", [], [name])
        t1 = time.perf_counter()
        pq.write_table(one_row(), self.root / f"{name}.parquet")
        m.register_segments("bench", [Segment(name, f"{name}.parquet", rows=1)], entry_id=entry)
        t2 = time.perf_counter()
        m.end_replace("bench", entry)
        t3 = time.perf_counter()
        lat["start"].append(t1 - t0)
        lat["end"].append(t3 - t2)
        lat["commit"].append(t3 - t0)
        return entry

    def run(self, suite: Suite, writers: int, rounds: int) -> None:
        clients = [self.client() for _ in range(writers)]
        lat: dict[str, list[float]] = {"start": [], "end": [], "commit": [], "revert": []}
        entries: list[list[str]] = [[] for _ in range(writers)]
        failed = {"commit": 0, "revert": 0}

        def pushes(w: int) -> Callable[[], None]:
            def work() -> None:
                for _ in range(rounds):
                    try:
                        entries[w].append(self.commit(clients[w], lat))
                    except ContentionError:
                        failed["commit"] += 1

            return work

        def reverts(w: int) -> Callable[[], None]:
            def work() -> None:
                for entry in entries[w]:
                    began = time.perf_counter()
                    try:
                        clients[w].revert_replace("bench", entry)
                    except ContentionError:
                        failed["revert"] += 1
                        continue
                    lat["revert"].append(time.perf_counter() - began)

            return work

        seconds, peak = concurrently([pushes(w) for w in range(writers)])
        done = len(lat["commit"])
        suite.add(
            case(
                "commit",
                writers,
                OURS,
                (lat["commit"], [peak]),
                per_s=done / seconds,
                failed=failed["commit"],
            )
        )
        suite.add(case("start", writers, OURS, (lat["start"], [peak])))
        suite.add(case("end", writers, OURS, (lat["end"], [peak])))
        seconds, peak = concurrently([reverts(w) for w in range(writers)])
        suite.add(
            case(
                "revert",
                writers,
                OURS,
                (lat["revert"], [peak]),
                per_s=len(lat["revert"]) / seconds,
                failed=failed["revert"],
            )
        )
        for c in clients:
            c.store.close()

    def one_commit(self) -> Callable[[], Any]:
        return lambda: self.commit(self.manager, {"start": [], "end": [], "commit": []})


def peer_run(
    suite: Suite,
    system: str,
    writers: int,
    rounds: int,
    commit_of: Callable[[int], Callable[[], None]],
    lost: tuple[type[BaseException], ...],
) -> None:
    commits = [commit_of(w) for w in range(writers)]
    lat: list[float] = []
    counts = {"retries": 0, "failed": 0}

    def writer(w: int) -> Callable[[], None]:
        def work() -> None:
            for _ in range(rounds):
                began = time.perf_counter()
                retried(commits[w], lost, counts)
                lat.append(time.perf_counter() - began)

        return work

    seconds, peak = concurrently([writer(w) for w in range(writers)])
    done = len(lat) - counts["failed"]
    suite.add(case("commit", writers, system, (lat, [peak]), per_s=done / seconds, **counts))


def delta_commits(path: Path) -> Callable[[int], Callable[[], None]]:
    from deltalake import write_deltalake

    def commit_of(_w: int) -> Callable[[], None]:
        return lambda: write_deltalake(str(path), one_row(), mode="append")

    return commit_of


def iceberg_commits(work: Path) -> Callable[[int], Callable[[], None]]:
    def commit_of(_w: int) -> Callable[[], None]:
        catalog = iceberg_catalog(work, "ops")

        def commit() -> None:
            catalog.load_table("bench.t").append(one_row())

        return commit

    return commit_of


def run(ctx: Context) -> list[Suite]:
    from deltalake.exceptions import CommitFailedError
    from pyiceberg.exceptions import CommitFailedException
    from sqlalchemy.exc import OperationalError

    suite = Suite("ops", "Lineage operations under concurrent writers", "writers", __doc__ or "")
    total = 32 if ctx.quick else 192
    ours = Ours(ctx)
    delta = ctx.work / "ops-delta"
    delta_table(delta, BASE)
    iceberg_table(ctx.work, "ops", BASE)
    for writers in WRITERS:
        rounds = max(1, total // writers)
        ours.run(suite, writers, rounds)
        peer_run(suite, "deltalake", writers, rounds, delta_commits(delta), (CommitFailedError,))
        peer_run(
            suite,
            "pyiceberg",
            writers,
            rounds,
            iceberg_commits(ctx.work),
            (CommitFailedException, OperationalError),
        )
        if writers == 1:
            suite.profile_if_slower("commit", writers, ours.one_commit)
    ours.manager.store.close()
    suite.notes.append(
        "A commit of ours is three compare-and-set commits on ZooKeeper (start, register, end); "
        "a peer's append is one commit. Memory is the peak of the whole phase, all writers together."
    )
    return [suite]
