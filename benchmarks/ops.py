"""Lineage operations under 1, 8, 32 and 64 concurrent writers, beside peers' appends.

A table of 1,000 segments (deltalake and pyiceberg: 1,000 data files). Each
writer is a process of its own, like separate jobs, with its own client (its
own ZooKeeper session; its own DeltaTable or catalog). All writers start
together, once every one is connected, and commit a one-row Parquet file,
over and over, until the run's 192 commits are done or 90 seconds have
passed (then no writer starts another; the report counts what was done):

* ours: a consistent push of the file, as ``lineage push`` makes it:
  ``start_replace`` (nothing to replace), the file written, then
  ``complete_replace`` (register the file into the entry and end it); two
  compare-and-set commits on the table's head. Latency p50/p99 of start,
  end and the whole push, and commits per second. Then every writer reverts
  its own entries, all together: revert p50/p99.
* deltalake: ``write_deltalake(mode="append")``; delta-rs retries a commit
  that lost the race; a failure is retried here too (bounded).
* pyiceberg: ``table.append`` on a SQL catalog (SQLite); a commit that lost
  the race (``CommitFailedException``) reloads the table and retries (bounded).
"""

from __future__ import annotations

import multiprocessing
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pyarrow.parquet as pq

from benchmarks.common import OURS, Context, Suite, chroot, close_and_drop, register_many
from benchmarks.measure import Meter, Round, case
from benchmarks.peers import delta_table, iceberg_catalog, iceberg_table, one_row
from segment_lineage.lineage.core.errors import ContentionError
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.store import ZkStore

T = TypeVar("T")
WRITERS = (1, 8, 32, 64)
BASE = 1_000
BUDGET_S = 90.0  # a writer starts no new commit after this long in a phase
PEER_ATTEMPTS = 100
PEERS = ("deltalake", "pyiceberg")


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


# ---- one writer, in a process of its own -------------------------------------------


def phase(items: Iterable[T], spec: dict[str, Any], ready: Any, go: Any) -> Iterator[T]:
    """Wait until every writer is ready and the parent says go; then the items,
    until the phase's time budget is spent."""
    ready.wait()
    go.wait()
    stop_at = time.monotonic() + spec["budget_s"]
    for item in items:
        if time.monotonic() > stop_at:
            return
        yield item


def ours_commit(m: LineageManager, root: Path, lat: dict[str, list[float]]) -> str:
    """A consistent push of one one-row file; its start, end and whole latency into ``lat``."""
    name = f"seg_{uuid.uuid4().hex[:12]}"
    t0 = time.perf_counter()
    entry = m.start_replace("bench", [], [name])
    t1 = time.perf_counter()
    pq.write_table(one_row(), root / f"{name}.parquet")
    t2 = time.perf_counter()
    m.complete_replace("bench", entry, [Segment(name, f"{name}.parquet", rows=1)])
    t3 = time.perf_counter()
    lat["start"].append(t1 - t0)
    lat["end"].append(t3 - t2)
    lat["commit"].append(t3 - t0)
    return entry


def ours_writer(spec: dict[str, Any], rounds: int, ready: Any, go: Any, results: Any) -> None:
    m = LineageManager(ZkStore(connect(ZkSettings(hosts=spec["hosts"]))))
    lat: dict[str, list[float]] = {"start": [], "end": [], "commit": [], "revert": []}
    counts = {"failed": 0, "revert failed": 0}
    entries = []
    for _ in phase(range(rounds), spec, ready, go):
        try:
            entries.append(ours_commit(m, Path(spec["root"]), lat))
        except ContentionError:
            counts["failed"] += 1
    results.put((lat, counts))
    # The revert phase: every writer reverts its own entries, all together.
    for entry in phase(list(entries), spec, ready, go):
        began = time.perf_counter()
        try:
            m.revert_replace("bench", entry)
        except ContentionError:
            counts["revert failed"] += 1
            continue
        lat["revert"].append(time.perf_counter() - began)
    results.put((lat, counts))
    m.store.close()


def peer_writer(spec: dict[str, Any], rounds: int, ready: Any, go: Any, results: Any) -> None:
    if spec["system"] == "deltalake":
        from deltalake import write_deltalake
        from deltalake.exceptions import CommitFailedError

        def commit() -> None:
            write_deltalake(spec["path"], one_row(), mode="append")

        lost: tuple[type[BaseException], ...] = (CommitFailedError,)
    else:
        from pyiceberg.exceptions import CommitFailedException
        from sqlalchemy.exc import OperationalError

        catalog = iceberg_catalog(Path(spec["work"]), "ops")

        def commit() -> None:
            catalog.load_table("bench.t").append(one_row())

        lost = (CommitFailedException, OperationalError)
    lat: dict[str, list[float]] = {"commit": []}
    counts = {"retries": 0, "failed": 0}
    for _ in phase(range(rounds), spec, ready, go):
        began = time.perf_counter()
        retried(commit, lost, counts)
        lat["commit"].append(time.perf_counter() - began)
    results.put((lat, counts))


def writer_main(spec: dict[str, Any], rounds: int, ready: Any, go: Any, results: Any) -> None:
    import logging
    import tempfile

    logging.getLogger("pyiceberg").setLevel(logging.ERROR)  # its own commit retries, at WARNING
    # One-time library set-up (pyarrow's Parquet writer) happens before the
    # start, for every system alike, so the phase measures the commits.
    with tempfile.TemporaryDirectory() as scratch:
        pq.write_table(one_row(), Path(scratch) / "warm.parquet")
    try:
        (ours_writer if spec["system"] == OURS else peer_writer)(spec, rounds, ready, go, results)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the suite
        results.put(f"{type(exc).__name__}: {exc}")


# ---- the parent: phases of all writers together -------------------------------------


def run_writers(
    spec: dict[str, Any], writers: int, rounds: int, phases: int
) -> list[tuple[float, int, list[Any]]]:
    """Start the writers, then per phase: wait until all are ready, release them
    together, and time (and meter) until the last one reports."""
    mp = multiprocessing.get_context("spawn")
    ready, go, results = mp.Barrier(writers + 1), mp.Barrier(writers + 1), mp.Queue()
    procs = [mp.Process(target=writer_main, args=(spec, rounds, ready, go, results)) for _ in range(writers)]
    for proc in procs:
        proc.start()
    out = []
    try:
        for _ in range(phases):
            ready.wait(timeout=600)
            meter = Meter()
            meter.start()
            go.wait(timeout=60)
            reports = [results.get(timeout=1800) for _ in range(writers)]
            seconds, peak = meter.stop()
            failures = [r for r in reports if isinstance(r, str)]
            if failures:
                raise RuntimeError(f"a {spec['system']} writer failed: {failures[0]}")
            out.append((seconds, peak, reports))
    finally:
        for proc in procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.kill()
    return out


def merged(reports: list[Any], key: str) -> list[float]:
    return [v for lat, _ in reports for v in lat[key]]


def counted(reports: list[Any], key: str) -> int:
    return sum(counts[key] for _, counts in reports)


class Ours:
    def __init__(self, ctx: Context) -> None:
        self.root = ctx.work / "ops-ours"
        self.root.mkdir()
        self.spec = {"system": OURS, "hosts": chroot(ctx.hosts), "root": str(self.root), "budget_s": BUDGET_S}
        self.manager = LineageManager(ZkStore(connect(ZkSettings(hosts=self.spec["hosts"]))))
        self.manager.create_table(TableConfig.build("bench", str(self.root), "APPEND"))
        register_many(
            self.manager,
            "bench",
            [Segment(f"base_{i:05d}", f"base_{i:05d}.parquet", rows=1) for i in range(BASE)],
        )

    def run(self, suite: Suite, writers: int, rounds: int) -> None:
        (pushed, peak, reports), (reverted, revert_peak, final) = run_writers(self.spec, writers, rounds, 2)
        lat = {key: merged(reports, key) for key in ("commit", "start", "end")}
        failed = counted(reports, "failed")
        suite.add(
            case(
                "commit",
                writers,
                OURS,
                (lat["commit"], [peak]),
                per_s=len(lat["commit"]) / pushed,
                failed=failed,
            )
        )
        suite.add(case("start", writers, OURS, (lat["start"], [peak])))
        suite.add(case("end", writers, OURS, (lat["end"], [peak])))
        reverts = merged(final, "revert")
        suite.add(
            case(
                "revert",
                writers,
                OURS,
                (reverts, [revert_peak]),
                per_s=len(reverts) / reverted,
                failed=counted(final, "revert failed"),
            )
        )

    def one_commit(self) -> Callable[[], Any]:
        lat: dict[str, list[float]] = {"start": [], "end": [], "commit": []}
        return lambda: ours_commit(self.manager, self.root, lat)


def peer_run(suite: Suite, spec: dict[str, Any], writers: int, rounds: int) -> None:
    [(seconds, peak, reports)] = run_writers(spec, writers, rounds, 1)
    lat = merged(reports, "commit")
    counts = {key: counted(reports, key) for key in ("retries", "failed")}
    done = len(lat) - counts["failed"]
    suite.add(case("commit", writers, spec["system"], (lat, [peak]), per_s=done / seconds, **counts))


def run(ctx: Context) -> list[Suite]:
    suite = Suite("ops", "Lineage operations under concurrent writers", "writers", __doc__ or "")
    total = 32 if ctx.quick else 192
    ours = Ours(ctx)
    delta_table(ctx.work / "ops-delta", BASE)
    iceberg_table(ctx.work, "ops", BASE)
    peers = [
        {"system": "deltalake", "path": str(ctx.work / "ops-delta"), "budget_s": BUDGET_S},
        {"system": "pyiceberg", "work": str(ctx.work), "budget_s": BUDGET_S},
    ]
    one: Round = ours.one_commit
    for writers in WRITERS:
        rounds = max(1, total // writers)
        ours.run(suite, writers, rounds)
        for spec in peers:
            peer_run(suite, spec, writers, rounds)
    suite.profile_if_slower("commit", 1, one)
    close_and_drop(ours.manager)
    suite.notes.append(
        "A commit of ours is a push: two compare-and-set commits on ZooKeeper (start; register and end); "
        "a peer's append is one commit. Memory is the peak of the whole phase, all writer processes together."
    )
    return [suite]
