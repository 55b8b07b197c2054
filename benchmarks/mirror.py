"""The Delta mirror: publishing a version after its commit, catching up, and
reading through it.

For each N (segments of the table), in the same run and on the same disk:

* publish: one segment replaced (a commit), then ``sync`` publishes that
  version as one Delta commit (read the log, pin the version, plan, commit);
  beside it, deltalake's ``write_deltalake`` appending one file to a Delta
  table of the same N files (the same change, written by the format's own
  writer);
* catch-up: the mirror is ``BEHIND`` versions behind (commits made without
  the publish hook); one ``sync`` publishes them all, in order; the report
  gives versions per second;
* read: DuckDB's ``delta_scan`` over the mirror beside DuckDB's
  ``read_parquet`` over the same files listed by hand (what a reader without
  the mirror would have to do), ``count(*)`` and a sum over every row;
* one day of a year: a table of day-chunked files (one a day), and a query
  for one day through the mirror, with the statistics its add actions carry
  and through a copy of the same log without them (as the mirror was
  before it wrote any): DuckDB by a day number (its delta reader skips no
  file on a timestamp), Polars and delta-rs (in a worker process) by time;
  the files each opened are in the notes.

Each segment is a real one-row Parquet file, so every read is real.
"""

from __future__ import annotations

import io
import shutil
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import OURS, Context, Suite, close_and_drop, fresh_manager, register_many
from benchmarks.measure import case, measure
from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.mirror.publisher import sync
from segment_lineage.mirror.views import status

BEHIND = 20
DELTA_WRITER = "deltalake write_deltalake"
BY_HAND = "DuckDB read_parquet, files listed by hand"


def one_row_file() -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table({"k": pa.array([1], pa.int64()), "v": pa.array([1], pa.int64())}), out)
    return out.getvalue()


class Mirrored:
    """A mirrored table of N one-row segment files, published once."""

    def __init__(self, ctx: Context, n: int) -> None:
        self.m: LineageManager = fresh_manager(ctx.hosts)
        self.root = ctx.work / f"mirror-{n}-{uuid.uuid4().hex[:8]}"
        self.n = n
        self.payload = one_row_file()
        self.m.create_table(TableConfig.build("bench", str(self.root), "APPEND", mirror="delta"))
        first = pa.table({"k": pa.array([0], pa.int64()), "v": pa.array([1], pa.int64())})
        push_arrow(self.m, "bench", [first], mode="append")  # records the schema
        segments = [self._segment(f"seg_{i:07d}") for i in range(n - 1)]
        register_many(self.m, "bench", segments)
        sync(self.m, "bench")
        self.turn = 0

    def _segment(self, name: str) -> Segment:
        location = f"data/{name[-3:]}/{name}.parquet"
        path = self.root / location
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.payload)
        return Segment(name, location, rows=1, size_bytes=len(self.payload))

    def replace_one(self) -> None:
        """One commit that replaces a segment by a new one (no publish)."""
        self.turn += 1
        old = f"seg_{self.turn % (self.n - 1):07d}" if self.turn < self.n else None
        new = self._segment(f"new_{self.turn:07d}")
        gone = [old] if old is not None and old in self.m.table("bench").segments else []
        entry = self.m.start_replace("bench", gone, [new.name])
        self.m.register_segments("bench", [new], entry_id=entry)
        self.m.end_replace("bench", entry)

    def files(self) -> list[str]:
        return [str(self.root / s.location) for s in self.m.visible_segments("bench")]

    def close(self) -> None:
        close_and_drop(self.m)
        shutil.rmtree(self.root, ignore_errors=True)


def publish(table: Mirrored) -> Callable[[], Callable[[], Any]]:
    def prepare() -> Callable[[], Any]:
        table.replace_one()
        return lambda: sync(table.m, "bench")

    return prepare


def published_one(report: Any) -> None:
    assert len(report.published) == 1, report.line()


def delta_writer(ctx: Context, table: Mirrored) -> Callable[[], Callable[[], Any]]:
    """A Delta table referencing the same N files, and one append to it."""
    from deltalake import write_deltalake
    from deltalake.transaction import AddAction, create_table_with_add_actions

    from segment_lineage.mirror.delta import encode_fields
    from segment_lineage.mirror.plan import published_schema

    path = ctx.work / f"delta-{table.n}-{uuid.uuid4().hex[:8]}"
    shutil.copytree(table.root / "data", path / "data")
    adds = [
        AddAction(str(p.relative_to(path)), len(table.payload), {}, 0, True, "")
        for p in sorted((path / "data").rglob("*.parquet"))
    ]
    schema = published_schema(table.m.table("bench").config.schema, "bench")
    create_table_with_add_actions(str(path), encode_fields(schema)[1], adds, mode="error")
    row = pa.table({"k": pa.array([2], pa.int64()), "v": pa.array([1], pa.int64())})
    return lambda: lambda: write_deltalake(str(path), row, mode="append")


def catch_up(table: Mirrored) -> Callable[[], Callable[[], Any]]:
    def prepare() -> Callable[[], Any]:
        for _ in range(BEHIND):
            table.replace_one()
        assert len(status(table.m, "bench").behind) == BEHIND
        return lambda: sync(table.m, "bench")

    return prepare


def caught_up(report: Any) -> None:
    assert len(report.published) == BEHIND, report.line()


def duck_reads(table: Mirrored) -> tuple[Callable[[], Callable[[], Any]], Callable[[], Callable[[], Any]]]:
    from segment_lineage.ingest.readers import duckdb_connection

    con = duckdb_connection()
    files = table.files()
    mirror = "SELECT count(*), sum(v) FROM delta_scan(?)"
    by_hand = "SELECT count(*), sum(v) FROM read_parquet(?)"
    return (
        lambda: lambda: con.execute(mirror, [str(table.root)]).fetchone(),
        lambda: lambda: con.execute(by_hand, [files]).fetchone(),
    )


class Days:
    """A mirrored table of ``days`` day-chunked files, and a copy of its root
    whose log carries no statistics."""

    def __init__(self, ctx: Context, days: int, rows: int = 1_000) -> None:
        import datetime as dt
        import json

        self.m: LineageManager = fresh_manager(ctx.hosts)
        self.root = ctx.work / f"days-{days}-{uuid.uuid4().hex[:8]}"
        self.bare = ctx.work / f"days-bare-{days}-{uuid.uuid4().hex[:8]}"
        self.days = days
        config = TableConfig.build(
            "days", str(self.root), "APPEND", time_column="ts", time_granularity="day", mirror="delta"
        )
        self.m.create_table(config)
        start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
        step = dt.timedelta(days=1) / rows
        stamps = [start + d * dt.timedelta(days=1) + i * step for d in range(days) for i in range(rows)]
        data = pa.table(
            {
                "ts": pa.array(stamps, pa.timestamp("us", tz="UTC")),
                "day": pa.array([d for d in range(days) for _ in range(rows)], pa.int32()),
                "v": pa.array(range(days * rows), pa.int64()),
            }
        )
        push_arrow(self.m, "days", [data], mode="append")
        sync(self.m, "days")
        shutil.copytree(self.root, self.bare)
        for log in (self.bare / "_delta_log").iterdir():  # the same log, as JSON without statistics
            if log.suffix != ".json":
                log.unlink()
                continue
            actions = [json.loads(line) for line in log.read_text().splitlines() if line]
            for action in actions:
                action.get("add", {}).pop("stats", None)
            log.write_text("".join(json.dumps(a) + "\n" for a in actions))
        self.day = days // 2
        self.low = start + self.day * dt.timedelta(days=1)
        self.high = self.low + dt.timedelta(days=1)
        self.expected = (rows, sum(range(self.day * rows, (self.day + 1) * rows)))  # count, sum(v)

    def duck(self, root: Any) -> Callable[[], Callable[[], Any]]:
        from segment_lineage.ingest.readers import duckdb_connection

        con = duckdb_connection()
        query = "SELECT count(*), sum(v) FROM delta_scan(?) WHERE day = ?"
        return lambda: lambda: con.execute(query, [str(root), self.day]).fetchone()

    def duck_files(self, root: Any) -> str:
        import re

        from segment_lineage.ingest.readers import duckdb_connection

        query = "EXPLAIN ANALYZE SELECT count(*), sum(v) FROM delta_scan(?) WHERE day = ?"
        plan = str(duckdb_connection().execute(query, [str(root), self.day]).fetchall())
        read = re.findall(r"Total Files Read: (\d+)", plan)  # "Scanning Files: N/M" may wrap its box
        return f"{read[0] if read else '?'}/{self.days}"

    def polars(self, root: Any) -> Any:
        import polars as pl

        return (
            pl.scan_delta(str(root))
            .filter((pl.col("ts") >= self.low) & (pl.col("ts") < self.high))
            .select(pl.len(), pl.col("v").sum())
        )

    def close(self) -> None:
        close_and_drop(self.m)
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.bare, ignore_errors=True)


def _delta_rs_day(root: str, low: Any, high: Any, rounds: int) -> tuple[list[float], int, int]:
    """In a worker process (deltalake's reads can abort the process that
    made them as it exits): one day read ``rounds`` times, each from a fresh
    look at the log; the times, the files kept by the filter, the rows."""
    import time

    import pyarrow.dataset as pds
    from deltalake import DeltaTable

    times, kept, rows = [], 0, 0
    for _ in range(rounds):
        began = time.perf_counter()
        data = DeltaTable(root).to_pyarrow_dataset()
        kind = data.schema.field("ts").type
        where = (pds.field("ts") >= pa.scalar(low, kind)) & (pds.field("ts") < pa.scalar(high, kind))
        rows = data.to_table(filter=where, columns=["v"]).num_rows
        times.append(time.perf_counter() - began)
        kept = len(list(data.get_fragments(filter=where)))
    return times, kept, rows


def delta_rs_day(pool: Any, root: str, low: Any, high: Any, rounds: int) -> tuple[list[float], int, int]:
    """:func:`_delta_rs_day` in ``pool``'s worker process."""
    found: tuple[list[float], int, int] = pool.submit(_delta_rs_day, root, low, high, rounds).result(600)
    return found


def polars_sources(plan: str) -> int:
    """The files a Polars plan scans ("[first, ... N other sources]")."""
    import re

    more = re.search(r"\.\.\. (\d+) other sources", plan)
    return 1 + int(more.group(1)) if more else plan.count(".parquet")


def one_day(ctx: Context, suite: Suite) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    days, rounds = (20, 3) if ctx.quick else (365, 5)
    table = Days(ctx, days)
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))  # delta-rs's reads
    try:

        def same(found: Any) -> None:
            row = tuple(found.row(0)) if hasattr(found, "row") else tuple(found)
            assert row == table.expected, row

        op = "one day of a year"
        for label, root in (("with statistics", table.root), ("without statistics", table.bare)):
            suite.add(case(op, days, f"DuckDB, {label}", measure(table.duck(root), rounds, same)))
            query = table.polars(root)
            suite.add(case(op, days, f"Polars, {label}", measure(lambda q=query: q.collect, rounds, same)))
            times, kept, rows = delta_rs_day(pool, str(root), table.low, table.high, rounds)
            assert rows == table.expected[0], rows
            suite.add(case(op, days, f"delta-rs, {label}", (times, [0] * len(times))))
            polars_files = polars_sources(table.polars(root).explain())
            suite.notes.append(
                f"one day of {days} ({label}): DuckDB opened {table.duck_files(root)} files, "
                f"Polars {polars_files} of {days}, delta-rs {kept} of {days}"
            )
    finally:
        pool.shutdown()
        table.close()


def run(ctx: Context) -> list[Suite]:
    suite = Suite(
        "mirror", "Mirror: publishing to Delta Lake, and reading through it", "segments", __doc__ or ""
    )
    sizes = [200, 1_000] if ctx.quick else [1_000, 10_000, 100_000]
    for n in sizes:
        table = Mirrored(ctx, n)
        try:
            rounds = 5 if n >= 100_000 else 10
            suite.add(case("publish", n, OURS, measure(publish(table), rounds, published_one, warm=True)))
            suite.add(case("publish", n, DELTA_WRITER, measure(delta_writer(ctx, table), rounds, warm=True)))
            if n <= 10_000:
                made = case("catch-up", n, OURS, measure(catch_up(table), 1, caught_up))
                suite.add(made)
                suite.notes.append(
                    f"catch-up at {n:,} segments: {BEHIND} versions in {made.median_s:.2f} s, "
                    f"{BEHIND / made.median_s:.1f} versions/s"
                )
                expected = (len(table.files()), len(table.files()))
                mirror, by_hand = duck_reads(table)

                def same(found: Any, expected: tuple[int, int] = expected) -> None:
                    assert tuple(found) == expected, found

                suite.add(case("read", n, f"{OURS} (DuckDB delta_scan)", measure(mirror, 3, same, warm=True)))
                suite.add(case("read", n, BY_HAND, measure(by_hand, 3, same, warm=True)))
        finally:
            table.close()
            for leftover in ctx.work.glob(f"delta-{n}-*"):
                shutil.rmtree(leftover, ignore_errors=True)
    one_day(ctx, suite)
    suite.notes.append(
        "publish: p50 and p99 over the rounds, each after one commit replacing one segment; "
        "the Delta peer appends one file to a Delta table of the same files with write_deltalake."
    )
    return [suite]
