"""Conformance of the Delta mirror, measured: a seeded random history of
pushes (refresh, append, replace-range, with a column added), reverts,
rollbacks, undone rollbacks and retention passes on a time-partitioned table,
on real ZooKeeper and real files. After every step, for the current version
and for every version the mirror holds that the lineage can still read, the
row count and a checksum of the rows read by our SnapshotReader, by
deltalake, by Polars and by DuckDB's delta extension (loaded from the
``duckdb-extension-delta`` package) are equal."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.readers import SnapshotReader, duckdb_connection
from segment_lineage.lineage.core.errors import LineageError, VersionGoneError
from segment_lineage.lineage.core.model import EntryState, TableConfig
from segment_lineage.lineage.core.visibility import visible_segments
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.mirror.hook import publish_after
from segment_lineage.mirror.views import mirror_commits, status
from segment_lineage.retention.executor import PassOptions, run_table
from tests.helpers.delta_reads import read_delta

pytestmark = [pytest.mark.zk, pytest.mark.slow]

MONTHS = 6


def rows_of(table: pa.Table) -> tuple[int, str]:
    """(row count, checksum) of a table's rows, whatever their order, column
    order, or the time zone spelling of its timestamps."""
    if table.num_columns == 0:
        return 0, hashlib.sha256(b"").hexdigest()
    columns = sorted(table.column_names)
    arrays = []
    for name in columns:
        column = table.column(name)
        if pa.types.is_timestamp(column.type):
            column = pc.cast(pc.cast(column, pa.timestamp("us", tz="UTC")), pa.int64())
        arrays.append(column.to_pylist())
    rows = sorted(repr(row) for row in zip(*arrays, strict=True))
    digest = hashlib.sha256("\n".join([",".join(columns), *rows]).encode()).hexdigest()
    return len(rows), digest


def month_rows(rng: random.Random, month: int, tag: int, extra: bool) -> pa.Table:
    n = rng.randint(1, 5)
    days = [rng.randint(1, 28) for _ in range(n)]
    data: dict[str, Any] = {
        "ts": pa.array(
            [dt.datetime(2024, month, d, tzinfo=dt.UTC) for d in days], pa.timestamp("us", tz="UTC")
        ),
        "value": pa.array([tag * 100 + i for i in range(n)], pa.int64()),
        "flag": pa.array([(tag + i) % 2 == 0 for i in range(n)], pa.bool_()),  # (stats "" broke booleans)
    }
    if extra:
        data["note"] = pa.array([f"n{tag}-{i}" for i in range(n)])
    return pa.table(data)


def month_span(month: int) -> tuple[int, int]:
    start = dt.datetime(2024, month, 1, tzinfo=dt.UTC)
    end = dt.datetime(2024 + (month == 12), month % 12 + 1, 1, tzinfo=dt.UTC)
    return int(start.timestamp() * 1000), int(end.timestamp() * 1000)


class Engines:
    """The four readers, over one table."""

    def __init__(self, manager: LineageManager, table: str, root: str) -> None:
        self.manager, self.table, self.root = manager, table, root
        self.duck = duckdb_connection()

    def ours(self, version: int, columns: list[str] | None = None) -> tuple[int, str]:
        """Our reader's rows of ``version`` (with the columns it had then),
        on ``columns``: a column the mirror's commit shows and the version
        lacks is one its ADD COLUMN commit added before the files of the
        next version (null in every row); one the version has and the
        commit lacks must be null in every row too."""
        with SnapshotReader(self.manager, self.table, version) as reader:
            data = reader.to_arrow()
        if columns is not None:
            for name in set(data.column_names) - set(columns):
                assert data.column(name).null_count == data.num_rows, f"column {name} not published"
            for name in set(columns) - set(data.column_names):
                data = data.append_column(name, pa.nulls(data.num_rows))
            data = data.select(columns)
        return rows_of(data)

    def delta_rs(self, delta_version: int) -> pa.Table:
        return read_delta(self.root, delta_version)  # deltalake, in a worker (tests/helpers/delta_reads.py)

    def polars(self, delta_version: int) -> pa.Table:
        import polars as pl

        return pl.read_delta(self.root, version=delta_version).to_arrow()

    def duckdb(self, delta_version: int) -> pa.Table:
        query = "SELECT * FROM delta_scan(?, version => ?)"
        return self.duck.execute(query, [self.root, delta_version]).to_arrow_table()

    def check(self) -> int:
        """Every mirror version whose lineage version is still readable reads
        the same rows in all four; the newest is the table's current version.
        How many versions were compared."""
        current = self.manager.table(self.table).version
        commits = [c for c in mirror_commits(self.manager, self.table) if c.lineage_version is not None]
        assert commits, "the mirror has no version"
        newest = max(commits, key=lambda c: c.delta_version)
        found = status(self.manager, self.table)
        assert found.behind == () and found.problem is None, found
        assert found.lineage_version == current or self.ours(found.lineage_version) == self.ours(current)
        compared = 0
        for commit in commits:
            assert commit.lineage_version is not None
            dv = commit.delta_version
            seen = {name: read(dv) for name, read in (("deltalake", self.delta_rs), ("polars", self.polars),
                                                       ("duckdb", self.duckdb))}  # fmt: skip
            try:
                expected = self.ours(commit.lineage_version, seen["deltalake"].column_names)
            except VersionGoneError:
                continue  # retention took it: the lineage refuses it, so no engine's answer is owed
            for name, data in seen.items():
                assert rows_of(data) == expected, f"{name} at Delta {dv} (lineage {commit.lineage_version})"
            compared += 1
        latest = self.delta_rs(newest.delta_version)
        assert rows_of(latest) == self.ours(current, latest.column_names)
        return compared


@pytest.fixture
def mirrored(zk_manager: LineageManager, tmp_path: Path) -> Iterator[tuple[LineageManager, str, list[str]]]:
    warnings: list[str] = []
    manager = zk_manager
    manager.after_commit = publish_after(warnings.append)
    root = str(tmp_path / "events")
    config = TableConfig.build(
        "events", root, "APPEND", time_column="ts", time_granularity="month", mirror="delta",
        replaced_segments_retention="1s", lineage_entry_cleanup_retention="1s",
    )  # fmt: skip
    manager.create_table(config)
    yield manager, root, warnings


@pytest.mark.parametrize(
    "seed", [1, pytest.param(2, marks=pytest.mark.e2e), pytest.param(3, marks=pytest.mark.e2e)]
)
def test_every_engine_reads_every_version_as_the_lineage_does(
    mirrored: tuple[LineageManager, str, list[str]], seed: int
) -> None:
    manager, root, warnings = mirrored
    rng = random.Random(seed)
    engines = Engines(manager, "events", root)
    extra = False
    done: dict[str, int] = {}
    heads: list[int] = []
    kinds = ["append", "replace", "refresh", "rollback", "undo", "revert", "retention", "evolve"]
    # Two appends, then every kind once in a seeded order, then seeded choices.
    plan = ["append", "append", *rng.sample(kinds, len(kinds)), *rng.choices(["append", *kinds], k=14)]
    for tag, action in enumerate(plan, 1):
        if action == "evolve" and not extra:
            extra = True
            push_arrow(manager, "events", [month_rows(rng, rng.randint(1, MONTHS), tag, True)],
                       mode="append", schema_policy="evolve")  # fmt: skip
        elif action in ("append", "evolve"):
            push_arrow(
                manager, "events", [month_rows(rng, rng.randint(1, MONTHS), tag, extra)], mode="append"
            )
        elif action == "replace":
            month = rng.randint(1, MONTHS)
            push_arrow(manager, "events", [month_rows(rng, month, tag, extra)], mode="replace-range",
                       interval=month_span(month))  # fmt: skip
        elif action == "refresh":
            parts = [month_rows(rng, m, tag, extra) for m in range(1, rng.randint(2, MONTHS) + 1)]
            push_arrow(manager, "events", [pa.concat_tables(parts)], mode="refresh")
        elif action == "rollback":
            try:
                heads.append(manager.table("events").version)
                manager.rollback("events", manager.resolve_version("events"))
            except LineageError:
                heads.pop()
        elif action == "undo" and heads:
            with contextlib.suppress(LineageError):  # that version is gone since
                manager.rollback("events", heads.pop())
        elif action == "revert":
            completed = [e for e in manager.entries("events") if e.state is EntryState.COMPLETED]
            if completed:
                with contextlib.suppress(LineageError):  # Pinot's rules refuse some reverts
                    manager.revert_replace("events", rng.choice(completed).entry_id)
        elif action == "retention":
            report = run_table(manager, "events", PassOptions(force=True, min_grace_ms=0))
            assert not report.errors, report.errors
        done[action] = done.get(action, 0) + 1
        assert not warnings, warnings
        engines.check()
    assert engines.check() >= 5
    assert set(done) == set(kinds)


def test_retention_keeps_what_the_mirror_still_references(
    mirrored: tuple[LineageManager, str, list[str]],
) -> None:
    """A replaced segment past its retention, no reader pinning it, is kept
    while a mirror version within the mirror's retention references it; with
    the mirror's retention shortened to a second, it goes."""
    import time

    from segment_lineage.lineage.core.settings import SettingsChange

    manager, root, warnings = mirrored
    rng = random.Random(7)
    push_arrow(manager, "events", [month_rows(rng, 1, 1, False)], mode="append")
    first = {s.location for s in manager.visible_segments("events")}
    push_arrow(
        manager, "events", [month_rows(rng, 1, 2, False)], mode="replace-range", interval=month_span(1)
    )
    time.sleep(1.2)  # the replaced segment's retention (1s) passes
    report = run_table(manager, "events", PassOptions(force=True, min_grace_ms=0))
    assert not report.errors and report.files_deleted == 0
    assert all((Path(root) / loc).exists() for loc in first)
    engines = Engines(manager, "events", root)
    assert engines.check() == 2  # the first mirror version still reads, in every engine
    manager.alter_table("events", SettingsChange(mirror_retention="1s"))
    time.sleep(1.2)
    report = run_table(manager, "events", PassOptions(force=True, min_grace_ms=0))
    assert not report.errors and report.files_deleted == 1
    assert not any((Path(root) / loc).exists() for loc in first)
    assert (Path(root) / "_delta_log").is_dir()  # the log is never an orphan
    assert not warnings


def test_time_retention_expires_data_a_mirror_shows(zk_manager: LineageManager, tmp_path: Path) -> None:
    """The mirror's current version shows every visible segment, expired ones
    too: retention condemns them all the same, the mirror publishes the
    version without them, and their files go once no mirror version within
    the mirror's retention references them."""
    import time

    warnings: list[str] = []
    zk_manager.after_commit = publish_after(warnings.append)
    root = str(tmp_path / "old")
    config = TableConfig.build(
        "old", root, "APPEND", time_column="ts", time_retention="1d", mirror="delta", mirror_retention="1s"
    )
    zk_manager.create_table(config)
    stamps = pa.array([dt.datetime(2020, 1, 1, tzinfo=dt.UTC)], pa.timestamp("us", tz="UTC"))
    push_arrow(zk_manager, "old", [pa.table({"ts": stamps, "value": [1]})], mode="append")
    files = {s.location for s in zk_manager.visible_segments("old")}
    engines = Engines(zk_manager, "old", root)
    report = run_table(zk_manager, "old", PassOptions(force=True, allow_large_cut=True, min_grace_ms=0))
    assert not report.errors and report.condemned == 1 and report.files_deleted == 0
    assert zk_manager.visible_segments("old") == []
    assert rows_of(engines.delta_rs(max(c.delta_version for c in mirror_commits(zk_manager, "old")))) == (
        engines.ours(zk_manager.table("old").version)
    )
    assert all((Path(root) / loc).exists() for loc in files)  # an older mirror version still reads them
    time.sleep(1.2)
    report = run_table(zk_manager, "old", PassOptions(force=True, allow_large_cut=True, min_grace_ms=0))
    assert not report.errors and report.files_deleted == 1, report
    assert not warnings


def test_a_publish_between_a_pass_plan_and_its_mark_keeps_its_files(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    """A lagging mirror publishes, between a retention pass's plan and its
    mark, a version showing a file the plan condemned (replaced before any
    publish saw it): the pass reads the log again after its mark and keeps
    the file, which that mirror version references."""
    from segment_lineage.lineage.core import failpoints
    from segment_lineage.mirror.publisher import sync

    root = str(tmp_path / "lag")
    config = TableConfig.build(
        "lag", root, "APPEND", time_column="ts", mirror="delta", replaced_segments_retention="0s"
    )
    zk_manager.create_table(config)  # no publish hook: the log lags behind the commits
    rng = random.Random(3)
    push_arrow(zk_manager, "lag", [month_rows(rng, 1, 1, False)], mode="append")
    sync(zk_manager, "lag")
    push_arrow(zk_manager, "lag", [month_rows(rng, 2, 2, False)], mode="append")
    added = zk_manager.table("lag").version
    condemned = {s.location for s in zk_manager.visible_segments("lag")} - {
        s.location for s in zk_manager.table_as_of("lag", added - 2).segments.values()
    }
    push_arrow(
        zk_manager, "lag", [month_rows(rng, 2, 3, False)], mode="replace-range", interval=month_span(2)
    )
    published: list[object] = []
    failpoints.set_hook("retention-mark.before-commit", lambda: published.append(sync(zk_manager, "lag")))
    try:
        report = run_table(zk_manager, "lag", PassOptions(force=True, min_grace_ms=0))
    finally:
        failpoints.set_hook("retention-mark.before-commit", None)
    assert published and not report.errors
    assert all((Path(root) / loc).exists() for loc in condemned), report
    delta = {c.lineage_version: c.delta_version for c in mirror_commits(zk_manager, "lag")}[added]
    data = Engines(zk_manager, "lag", root).delta_rs(delta)  # that mirror version reads: its files are there
    then = zk_manager.table_as_of("lag", added)  # (our readers refuse it: its segment waits in pending)
    assert data.num_rows == sum(s.rows for s in visible_segments(then)) > 0


def test_the_log_keeps_what_the_window_needs_and_sheds_the_rest(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    """``mirror sync`` removes commits older than the newest checkpoint at or
    before the version current when the mirror's retention began: every
    version from there still reads in every engine, and retention still
    keeps what they reference."""
    import time

    from deltalake import DeltaTable

    from segment_lineage.mirror.publisher import clean_log, sync

    warnings: list[str] = []
    zk_manager.after_commit = publish_after(warnings.append)
    root = str(tmp_path / "log")
    # A window long enough for five pushes on a loaded machine (1s was not, in a test run at load average 5).
    config = TableConfig.build("log", root, "APPEND", time_column="ts", mirror="delta", mirror_retention="4s")
    zk_manager.create_table(config)
    rng = random.Random(5)
    for tag in range(1, 6):
        push_arrow(zk_manager, "log", [month_rows(rng, tag, tag, False)], mode="append")
    DeltaTable(root, version=3).create_checkpoint()  # as delta-rs makes one every 100 commits
    assert clean_log(zk_manager, "log") == 0  # every version is within the window yet
    time.sleep(4.2)
    push_arrow(zk_manager, "log", [month_rows(rng, 6, 6, False)], mode="append")
    assert clean_log(zk_manager, "log") == 3  # commits 0, 1 and 2: the checkpoint at 3 stands for them
    names = sorted(p.name for p in (Path(root) / "_delta_log").iterdir())
    assert "00000000000000000000.json" not in names and "00000000000000000003.checkpoint.parquet" in names
    engines = Engines(zk_manager, "log", root)
    assert engines.check() == 3  # Delta versions 3, 4 and 5, each as the lineage reads it
    with pytest.raises(Exception, match=r"(?i)version|not found|no files in log"):
        DeltaTable(root, version=1)  # before the window: gone, as after Delta's own log cleanup
    report = run_table(zk_manager, "log", PassOptions(force=True, min_grace_ms=0))
    assert not report.errors
    assert sync(zk_manager, "log").published == () and not warnings
