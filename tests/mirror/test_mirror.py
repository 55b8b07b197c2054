"""The Delta mirror through the CLI on real ZooKeeper, and its pure planning:
enable, publish after every commit, sync, status, versions both ways,
disable; what it refuses (another writer's commit, a leftover log, a type
Delta lacks, a root deltalake cannot open); two publishers at once."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.errors import NoColumnsError
from segment_lineage.ingest.readers import SnapshotReader, duckdb_connection
from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.lineage.core.model import (
    Audit,
    EntryState,
    LineageEntry,
    Segment,
    TableConfig,
    TableState,
)
from segment_lineage.lineage.core.names import check_location, good_locations
from segment_lineage.lineage.core.schema import DataType, Field
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.mirror.errors import MirrorRefusedError
from segment_lineage.mirror.plan import Columns, Shown, plan_step, published_schema
from segment_lineage.mirror.publisher import sync
from segment_lineage.mirror.views import mirror_commits
from tests.helpers.delta_reads import read_delta
from tests.helpers.run import cli as run
from tests.helpers.run import wait_for

UTC = dt.UTC


def write_month(path: Path, month: int, values: list[int], extra: bool = False) -> str:
    data: dict[str, object] = {
        "ts": pa.array(
            [dt.datetime(2024, month, 1 + i, tzinfo=UTC) for i in range(len(values))],
            pa.timestamp("us", tz="UTC"),
        ),
        "value": pa.array(values, pa.int64()),
    }
    if extra:
        data["note"] = pa.array([f"n{v}" for v in values])
    pq.write_table(pa.table(data), path)
    return str(path)


def duck_rows(root: str, version: int | None = None) -> list[tuple[object, ...]]:
    con = duckdb_connection()
    if version is None:
        query = "SELECT value FROM delta_scan(?) ORDER BY value"
        return [tuple(r) for r in con.execute(query, [root]).fetchall()]
    query = "SELECT value FROM delta_scan(?, version => ?) ORDER BY value"
    return [tuple(r) for r in con.execute(query, [root, version]).fetchall()]


# ---- planning (pure) ----------------------------------------------------------------------------


def state_with(*segments: Segment, schema: tuple[Field, ...] | None = None, version: int = 5) -> TableState:
    config = TableConfig.build("t", "/data/t", "APPEND", time_column="ts")
    config = TableConfig(**{**config.__dict__, "schema": schema})
    return TableState(config, version, {s.name: s for s in segments})


COLS = (Field("ts", DataType("timestamp")), Field("value", DataType("int64")))


def test_a_version_that_changes_nothing_shown_is_no_step() -> None:
    a = Segment("a", "p/a.parquet", rows=3, size_bytes=10)
    state = state_with(a, schema=COLS)
    shown = Shown(4, 4, frozenset({"p/a.parquet"}), ("ts", "value"))
    assert plan_step(shown, state, COLS, ("ts", "value"), None) is None
    b = Segment("b", "p/b.parquet", rows=1, size_bytes=10)
    step = plan_step(shown, state_with(b, schema=COLS), COLS, ("ts", "value"), None)
    assert step is not None and step.columns is Columns.SAME
    assert [s.location for s in step.adds] == ["p/b.parquet"] and step.removes == ("p/a.parquet",)


@pytest.mark.parametrize("seed", range(12))
def test_a_step_planned_from_the_change_is_the_step_planned_from_the_whole_set(seed: int) -> None:
    """A publisher that published ``base`` plans the next version from what
    changed between them (its cost follows the change): the same files to
    add and remove as from the version's whole visible set, whatever
    happened between (appends, replacements, reverts, deletes, rollbacks,
    several versions at once)."""
    import random

    from segment_lineage.lineage.core.errors import LineageError
    from segment_lineage.lineage.core.visibility import visible_segments
    from segment_lineage.lineage.store.memory import MemoryStore

    rng = random.Random(seed)
    m = LineageManager(MemoryStore())
    config = TableConfig.build("t", "/data/t", "APPEND", time_column="ts")
    m.create_table(config)
    made = 0

    def new_segment() -> Segment:
        nonlocal made
        made += 1
        return Segment(f"s{made:04d}", f"p/{made:04d}.parquet", rows=1, size_bytes=10)

    fields = ("ts", "value")
    for _ in range(30):
        base = m.table("t")
        for _ in range(rng.randint(1, 3)):  # several versions may come between two publishes
            visible = [seg.name for seg in visible_segments(m.table("t"))]
            completed = [e.entry_id for e in m.table("t").entries.values() if e.state is EntryState.COMPLETED]
            op = rng.choice(["append", "replace", "revert", "delete", "rollback"])
            try:
                if op == "append":
                    m.register_segments("t", [new_segment() for _ in range(rng.randint(1, 3))])
                elif op == "replace" and visible:
                    gone = rng.sample(visible, rng.randint(1, min(3, len(visible))))
                    ups = [new_segment() for _ in range(rng.randint(0, 2))]
                    entry = m.start_replace("t", gone, [u.name for u in ups])
                    m.register_segments("t", ups, entry_id=entry)
                    if rng.random() < 0.8:
                        m.end_replace("t", entry)
                elif op == "revert" and completed:
                    m.revert_replace("t", rng.choice(completed))
                elif op == "delete" and visible:
                    m.delete_segments("t", rng.sample(visible, 1))
                elif op == "rollback" and m.table("t").version > 2:
                    m.rollback("t", rng.randint(max(1, base.version - 3), m.table("t").version - 1))
            except LineageError:
                pass  # a rule refused it: nothing changed
        state = m.table("t")
        shown = Shown(3, base.version, frozenset(seg.location for seg in visible_segments(base)), fields)
        whole = plan_step(shown, state, COLS, fields, None)
        changed = plan_step(shown, state, COLS, fields, None, base)
        assert (whole is None) == (changed is None), (whole, changed)
        if whole is not None and changed is not None:
            assert [seg.location for seg in changed.adds] == [seg.location for seg in whole.adds]
            assert changed.removes == whole.removes


def test_hidden_segments_are_not_published() -> None:
    a = Segment("a", "p/a.parquet", rows=3)
    b = Segment("b", "p/b.parquet", rows=1)
    entry = LineageEntry(
        "e" * 8 + "-0000-4000-8000-" + "0" * 12, ("a",), ("b",), EntryState.IN_PROGRESS, 1, 1, Audit("x")
    )
    state = TableState(state_with(a, b, schema=COLS).config, 5, {"a": a, "b": b}, {entry.entry_id: entry})
    step = plan_step(Shown(None, 0, frozenset(), ()), state, COLS, ("ts", "value"), None)
    assert step is not None and [s.name for s in step.adds] == ["a"]  # b waits for its push to end


def test_columns_added_or_replaced() -> None:
    a = Segment("a", "p/a.parquet", rows=3)
    shown = Shown(2, 4, frozenset({"p/a.parquet"}), ("ts", "value"))
    grown = plan_step(shown, state_with(a), COLS, ("ts", "value", "note"), None)
    assert grown is not None and grown.columns is Columns.ADDED and not grown.adds
    # A column typed null (left out) typed later, before the others: added all the same.
    typed = plan_step(shown, state_with(a), COLS, ("early", "ts", "value"), None)
    assert typed is not None and typed.columns is Columns.ADDED
    assert (
        plan_step(
            Shown(3, 5, frozenset({"p/a.parquet"}), ("ts", "value", "early")),
            state_with(a),
            COLS,
            ("early", "ts", "value"),
            None,
        )
        is None
    )  # the same columns, in another order
    b = Segment("b", "p/b.parquet", rows=1)
    other = plan_step(shown, state_with(b), COLS, ("ts", "amount"), None)  # a refresh replaced the schema
    assert other is not None and other.columns is Columns.REPLACED
    assert [s.location for s in other.adds] == ["p/b.parquet"] and other.removes == ("p/a.parquet",)
    # A file that stays cannot change its columns' types: one commit may not add and remove it.
    with pytest.raises(MirrorRefusedError, match=r"file 'p/a\.parquet' stays"):
        plan_step(shown, state_with(a), COLS, ("ts", "amount"), None)


def test_published_schema_leaves_null_columns_out_and_refuses_a_time_of_day() -> None:
    schema = (*COLS, Field("later", DataType("null")))
    assert published_schema(schema, "t") == COLS
    with pytest.raises(MirrorRefusedError, match="column 'at' of table 't' has type time"):
        published_schema((*COLS, Field("at", DataType("time"))), "t")
    nested = DataType("list", (), (Field("element", DataType("time")),))
    with pytest.raises(MirrorRefusedError, match="type time"):
        published_schema((Field("times", nested),), "t")


def test_no_segment_lives_in_the_mirror_log() -> None:
    for bad in ("_delta_log/00000000000000000000.json", "_delta_log"):
        with pytest.raises(InvalidInputError, match="holds the table's Delta mirror"):
            check_location(bad)
        assert not good_locations([bad]) and not good_locations(["a.parquet", bad])
    assert check_location("x/_delta_log/a.parquet") and check_location("_delta_logs/a.parquet")


def test_mirror_settings_are_validated() -> None:
    with pytest.raises(InvalidInputError, match="invalid mirror format 'iceberg': use delta"):
        TableConfig.build("t", "/data/t", mirror="iceberg")
    with pytest.raises(InvalidInputError, match="invalid mirror retention '0s'"):
        TableConfig.build("t", "/data/t", mirror="delta", mirror_retention="0s")
    assert (
        TableConfig.build("t", "/data/t", mirror="DELTA", mirror_retention="2d").mirror_window_ms
        == 172_800_000
    )


# ---- through the CLI, on real ZooKeeper ---------------------------------------------------------

pytestmark_zk = pytest.mark.zk


@pytest.mark.zk
def test_a_mirrored_table_through_the_cli(zk_hosts: str, tmp_path: Path) -> None:
    root = str(tmp_path / "events")
    create = (
        "table",
        "create",
        "events",
        "--root",
        root,
        "--type",
        "APPEND",
        "--time-column",
        "ts",
        "--time-granularity",
        "month",
        "--mirror",
        "delta",
    )
    code, out, err = run(zk_hosts, "--json", *create)
    assert code == 0, err
    assert json.loads(out)["mirror"] == "delta" and json.loads(out)["mirror_retention"] == "7d"
    code, out, _ = run(zk_hosts, "mirror", "status", "events")
    assert code == 0 and "no columns yet" in out  # nothing to publish before the first push
    for month, values in ((1, [1, 2]), (2, [3]), (3, [4, 5])):
        code, _, err = run(
            zk_hosts,
            "push",
            "events",
            "--input",
            write_month(tmp_path / f"m{month}.parquet", month, values),
            "--mode",
            "append",
        )
        assert code == 0 and "warning" not in err, err
    fix = write_month(tmp_path / "fix.parquet", 2, [30])
    code, _, err = run(
        zk_hosts, "push", "events", "--input", fix, "--mode", "replace-range", "--interval", "2024-02/2024-03"
    )
    assert code == 0, err
    assert duck_rows(root) == [(1,), (2,), (4,), (5,), (30,)]
    code, out, err = run(zk_hosts, "rollback", "events")
    assert code == 0, err
    assert duck_rows(root) == [(1,), (2,), (3,), (4,), (5,)]
    # Versions both ways: the history names each version's Delta version, and back.
    code, out, _ = run(zk_hosts, "--json", "mirror", "versions", "events")
    versions = json.loads(out)
    assert [v["delta_version"] for v in versions] == [0, 1, 2, 3, 4]
    _, out, _ = run(zk_hosts, "--json", "history", "events")
    history = json.loads(out)
    by_lineage = {r["version"]: r["delta_version"] for r in history}
    for v in versions:
        assert by_lineage[v["lineage_version"]] == v["delta_version"]
        code, out, _ = run(zk_hosts, "--json", "read", "events", "--as-of", str(v["lineage_version"]))
        ours = sorted(row["value"] for row in json.loads(out)["rows"])
        assert [(x,) for x in ours] == duck_rows(root, v["delta_version"])
    assert by_lineage[1] is None  # the table's creation changed nothing a reader sees
    code, out, _ = run(zk_hosts, "--json", "mirror", "status", "events")
    status = json.loads(out)
    assert status["behind_versions"] == 0 and status["delta_version"] == 4 and status["problem"] is None
    code, out, _ = run(zk_hosts, "mirror", "sync", "events")
    assert code == 0 and "up to date" in out
    code, out, _ = run(zk_hosts, "mirror", "disable", "events")
    assert code == 0 and "removed its Delta log" in out and not (Path(root) / "_delta_log").exists()
    code, _, err = run(zk_hosts, "mirror", "sync", "events")
    assert code == 1 and "has no mirror" in err and "lineage mirror enable events" in err
    code, out, err = run(zk_hosts, "mirror", "enable", "events", "--retention", "2d")
    assert code == 0 and "published" in out, err
    assert duck_rows(root) == [(1,), (2,), (3,), (4,), (5,)] and duck_rows(root, 0) == duck_rows(root)
    _, out, _ = run(zk_hosts, "--json", "table", "show", "events")
    assert json.loads(out)["mirror_retention"] == "2d"


@pytest.mark.zk
def test_the_mirror_refuses_a_log_another_writer_changed(
    zk_manager: LineageManager, tmp_path: Path, zk_hosts: str
) -> None:
    from deltalake import write_deltalake

    root = str(tmp_path / "t")
    zk_manager.create_table(TableConfig.build("t", root, "APPEND", time_column="ts", mirror="delta"))
    push_arrow(zk_manager, "t", [pq.read_table(write_month(tmp_path / "a.parquet", 1, [1]))], mode="append")
    sync(zk_manager, "t")
    write_deltalake(root, pq.read_table(tmp_path / "a.parquet"), mode="append")  # another writer's commit
    code, _, err = run(zk_hosts, "mirror", "sync", "t")
    assert code == 1 and "another writer made" in err and "lineage mirror repair t" in err
    code, _, err = run(zk_hosts, "mirror", "status", "t")
    assert code == 1 and "another writer" in err  # a problem reported: a script sees it
    before = duck_rows(root, 0)
    code, out, err = run(zk_hosts, "mirror", "repair", "t")
    assert code == 0 and "repaired" in out, err
    commits = mirror_commits(zk_manager, "t")  # the numbers go on: version 0 still reads as it did
    assert [c.delta_version for c in commits] == [0, 1, 2] and commits[-1].lineage_version is not None
    assert duck_rows(root) == [(1,)] and duck_rows(root, 0) == before
    assert run(zk_hosts, "mirror", "sync", "t")[0] == 0
    # A repair with nothing to repair says so (it ran as a sync), not "repaired".
    code, out, err = run(zk_hosts, "mirror", "repair", "t")
    assert code == 0 and "needed no repair" in out and "repaired" not in out, (out, err)
    code, out, err = run(zk_hosts, "--json", "mirror", "repair", "t")
    assert code == 0 and json.loads(out)["repaired"] is False, (out, err)
    assert [c.delta_version for c in mirror_commits(zk_manager, "t")] == [0, 1, 2]  # no empty commit


def test_a_publish_starts_from_the_log_this_process_wrote_unless_it_moved(
    zk_manager: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next publish does not read the log again when this process wrote
    its newest commit and nothing came after it; another writer's commit, or
    the log removed and begun again, is read as it is."""
    from deltalake import write_deltalake

    from segment_lineage.mirror import publisher
    from segment_lineage.mirror.delta import DeltaLog

    reads: list[str] = []
    real_open = DeltaLog.open

    def counted(root: str) -> DeltaLog:
        reads.append(root)
        return real_open(root)

    monkeypatch.setattr(DeltaLog, "open", staticmethod(counted))
    root = str(tmp_path / "t")
    zk_manager.create_table(TableConfig.build("t", root, "APPEND", time_column="ts", mirror="delta"))
    for month in (1, 2, 3):
        data = pq.read_table(write_month(tmp_path / f"{month}.parquet", month, [month]))
        push_arrow(zk_manager, "t", [data], mode="append")
        sync(zk_manager, "t")
    assert len(reads) == 1  # the first publish reads (no log yet); the next two start where it left off
    assert duck_rows(root) == [(1,), (2,), (3,)]
    write_deltalake(root, pq.read_table(tmp_path / "1.parquet"), mode="append")  # another writer's commit
    with pytest.raises(MirrorRefusedError, match="another writer made"):
        sync(zk_manager, "t")
    assert len(reads) == 2
    publisher.sync(zk_manager, "t", repair=True)
    push_arrow(zk_manager, "t", [pq.read_table(tmp_path / "2.parquet")], mode="append")
    sync(zk_manager, "t")
    assert duck_rows(root) == [(1,), (2,), (2,), (3,)]


def test_a_kept_log_loads_the_version_it_wrote_in_the_background(
    zk_manager: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync's last Delta commit is not followed by a reload of the log on
    the publish's path (on a big log, about as long as the commit itself):
    the log this process keeps loads the version it wrote in the background,
    exactly that one, and the next publish does not load it again."""
    import threading

    from deltalake import DeltaTable

    loads: list[tuple[int, str]] = []
    real_load = DeltaTable.load_as_version

    def counted(self: DeltaTable, version: int) -> None:
        loads.append((version, threading.current_thread().name))
        real_load(self, version)

    monkeypatch.setattr(DeltaTable, "load_as_version", counted)
    root = str(tmp_path / "t")
    zk_manager.create_table(TableConfig.build("t", root, "APPEND", time_column="ts", mirror="delta"))
    for month in (1, 2, 3):
        data = pq.read_table(write_month(tmp_path / f"{month}.parquet", month, [month]))
        push_arrow(zk_manager, "t", [data])
        report = sync(zk_manager, "t")
        done = (report.published[-1][1], "lineage-mirror-prefetch")
        if done[0]:  # Delta version 0 was the log's first: the next publish opens it at that version
            wait_for("the written version's load", lambda done=done: done in loads)
    background = "lineage-mirror-prefetch"
    assert loads == [(1, background), (2, background)]  # none on the publish's path
    assert duck_rows(root) == [(1,), (2,), (3,)]


def test_the_process_exit_waits_for_a_background_load(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A kept log's background load is waited for at exit (registered with
    atexit), so no load is left inside deltalake while the interpreter shuts
    down: a CLI push to a mirrored table exits right after its publish."""
    import atexit
    import time

    from segment_lineage.mirror import publisher
    from segment_lineage.mirror.delta import DeltaLog

    registered: list[object] = []
    monkeypatch.setattr(atexit, "register", registered.append)
    written = publisher._Written()
    assert registered == [written.drain]
    finished: list[float] = []

    def slow_load(self: DeltaLog) -> None:
        time.sleep(0.5)
        finished.append(time.monotonic())

    monkeypatch.setattr(DeltaLog, "prefetch", slow_load)
    monkeypatch.setattr(DeltaLog, "mark", lambda self: ((3, 100), None))
    monkeypatch.setattr(DeltaLog, "written_since", True)
    written.keep("t", str(tmp_path), DeltaLog(str(tmp_path)))
    assert not finished  # under way
    written.drain()
    assert len(finished) == 1


def test_a_table_made_again_elsewhere_is_published_to_its_own_log_not_the_one_kept(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    """This process kept table t's log at its first root; t is dropped and
    made again at another root under its name. Its next publish goes to the
    new root's log, read there; the old log is left as it was."""
    from segment_lineage.mirror import admin

    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    zk_manager.create_table(TableConfig.build("t", first, "APPEND", time_column="ts", mirror="delta"))
    push_arrow(zk_manager, "t", [pq.read_table(write_month(tmp_path / "1.parquet", 1, [1]))], mode="append")
    sync(zk_manager, "t")
    admin.drop_table(zk_manager, "t", force=True)
    zk_manager.create_table(TableConfig.build("t", second, "APPEND", time_column="ts", mirror="delta"))
    push_arrow(zk_manager, "t", [pq.read_table(write_month(tmp_path / "2.parquet", 2, [2]))], mode="append")
    report = sync(zk_manager, "t")
    assert report.published and duck_rows(second) == [(2,)]
    assert not (Path(first) / "_delta_log").exists() or duck_rows(first) == [(1,)]


def test_an_unexpected_failure_of_one_mirror_is_that_tables_and_the_others_go_on(
    zk_manager: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in one table's publish (any exception) is that table's failed
    result, told with its traceback; the daemon's catch-up goes on to the
    others and counts it (it escaped the daemon's pass before)."""
    from prometheus_client import CollectorRegistry

    from segment_lineage.mirror import publisher
    from segment_lineage.mirror.job import MirrorJob

    for name in ("a", "b"):
        zk_manager.create_table(
            TableConfig.build(name, str(tmp_path / name), "APPEND", time_column="ts", mirror="delta")
        )
        push_arrow(
            zk_manager,
            name,
            [pq.read_table(write_month(tmp_path / f"{name}.parquet", 1, [1]))],
            mode="append",
        )
    real = publisher.sync

    def broken(manager: LineageManager, table: str, **options: object) -> object:
        if table == "a":
            raise OverflowError("date value out of range")
        return real(manager, table, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(publisher, "sync", broken)
    job = MirrorJob(zk_manager, CollectorRegistry())
    job.run(None, lambda: False)
    assert job.failures._value.get() == 1
    assert job.lag_versions.labels("a")._value.get() >= 1 and job.lag_versions.labels("b")._value.get() == 0
    assert duck_rows(str(tmp_path / "b")) == [(1,)]


@pytest.mark.zk
def test_a_leftover_log_is_refused_until_removed(zk_hosts: str, tmp_path: Path) -> None:
    root = tmp_path / "t"
    assert run(zk_hosts, "table", "create", "t", "--root", str(root), "--mirror", "delta")[0] == 0
    assert run(zk_hosts, "push", "t", "--input", write_month(tmp_path / "a.parquet", 1, [1]))[0] == 0
    assert (root / "_delta_log").is_dir()
    # A crash of disable between its commit and the log's removal leaves the log behind.
    assert run(zk_hosts, "table", "alter", "t", "--mirror-retention", "1d")[0] == 0
    from segment_lineage.lineage.core.settings import SettingsChange
    from segment_lineage.lineage.zk.connect import open_store

    store = open_store(zk_hosts)
    try:
        LineageManager(store).alter_table("t", SettingsChange(mirror="none"))
    finally:
        store.close()
    code, _, err = run(zk_hosts, "mirror", "enable", "t")
    assert code == 1 and "a Delta log from an earlier mirror remains" in err
    code, out, _ = run(zk_hosts, "--json", "mirror", "status", "t")
    assert code == 1 and "lineage mirror disable t" in json.loads(out)["problem"]
    assert run(zk_hosts, "mirror", "disable", "t")[0] == 0
    assert run(zk_hosts, "mirror", "enable", "t")[0] == 0


@pytest.mark.zk
@pytest.mark.parametrize("damage", ["missing", "garbled", "every"])
def test_a_log_no_engine_can_read_says_so_and_is_rebuilt_from_the_table(
    zk_hosts: str, tmp_path: Path, damage: str
) -> None:
    """A commit file deleted or garbled by hand: every mirror command said a
    raw delta-kernel error with no hint, and nothing could mend it.
    Now the error names the way out (`mirror repair --rebuild`), which
    publishes the table's current version as a new log engines read."""
    root = tmp_path / "t"
    create = ("table", "create", "t", "--root", str(root), "--type", "APPEND", "--time-column", "ts")
    assert run(zk_hosts, *create, "--mirror", "delta")[0] == 0
    for month in (1, 2, 3):
        given = write_month(tmp_path / f"{month}.parquet", month, [month])
        assert run(zk_hosts, "push", "t", "--input", given)[0] == 0
    second = root / "_delta_log" / f"{1:020d}.json"
    if damage == "missing":
        second.unlink()
    elif damage == "garbled":
        second.write_text('{"garbage')
    else:  # no commit reads (a log of one commit, damaged, as right after an enable): nothing to keep
        for commit in (root / "_delta_log").glob("*.json"):
            commit.write_text("")
    lineage = [str(Path(sys.executable).parent / "lineage"), "--zk", zk_hosts, "--json"]  # a fresh process
    sync = subprocess.run([*lineage, "mirror", "sync", "t"], capture_output=True, text=True, check=False)
    code, err = sync.returncode, sync.stderr
    told = json.loads(err.strip().splitlines()[-1])
    assert code == 1 and "cannot be read" in told["error"] and "--rebuild" in told["hint"], err
    assert len(told["error"]) < 400, told["error"]
    code, _, err = run(zk_hosts, "mirror", "repair", "t", "--rebuild", "--dry-run")
    assert code == 2, err  # a rebuild writes: no dry run of it
    code, out, err = run(zk_hosts, "mirror", "repair", "t", "--rebuild")
    assert code == 0 and "rebuilt" in out, err
    assert sorted(v for (v,) in duck_rows(str(root))) == [1, 2, 3]  # engines read the table again
    assert run(zk_hosts, "mirror", "status", "t")[0] == 0
    code, _, err = run(zk_hosts, "mirror", "repair", "t", "--rebuild")
    assert code == 1 and "reads: nothing to rebuild" in err, err


@pytest.mark.zk
def test_bad_mirror_input_changes_nothing(zk_hosts: str, tmp_path: Path) -> None:
    code, _, err = run(
        zk_hosts, "table", "create", "h", "--root", "hdfs://nn:8020/data/h", "--mirror", "delta"
    )
    assert code == 1 and "needs a local, s3:// or gs:// root" in err
    assert run(zk_hosts, "table", "show", "h")[0] == 3  # not found
    code, _, err = run(zk_hosts, "table", "create", "d", "--root", str(tmp_path / "d"), "--mirror", "hudi")
    assert code == 2 and "invalid mirror format 'hudi'" in err
    root = str(tmp_path / "times")
    assert run(zk_hosts, "table", "create", "times", "--root", root, "--mirror", "delta")[0] == 0
    data = tmp_path / "times.parquet"
    pq.write_table(pa.table({"at": pa.array([dt.time(1, 2)], pa.time64("us")), "v": [1]}), data)
    code, _, err = run(zk_hosts, "push", "times", "--input", str(data))
    assert code == 1 and "type time, which Delta Lake cannot hold" in err
    assert run(zk_hosts, "--json", "segments", "times")[1].strip() == "[]"
    assert not list(Path(root).rglob("*.parquet"))  # refused before writing
    _, out, _ = run(zk_hosts, "--json", "history", "times")
    assert [r["operation"] for r in json.loads(out)] == ["CREATE_TABLE"]
    listing = tmp_path / "segments.json"
    listing.write_text(json.dumps([{"name": "s1", "location": "_delta_log/x.parquet"}]))
    code, _, err = run(zk_hosts, "segment", "add", "times", "--file", str(listing), "--no-check")
    assert code == 2 and "holds the table's Delta mirror" in err


@pytest.mark.zk
def test_two_publishers_at_once_publish_each_version_once(
    zk_manager: LineageManager, other: LineageManager, tmp_path: Path
) -> None:
    root = str(tmp_path / "t")
    zk_manager.create_table(TableConfig.build("t", root, "APPEND", time_column="ts", mirror="delta"))
    for month in range(1, 7):
        push_arrow(
            zk_manager,
            "t",
            [pq.read_table(write_month(tmp_path / f"{month}.parquet", month, [month]))],
            mode="append",
        )
    errors: list[BaseException] = []

    def publish(manager: LineageManager) -> None:
        try:
            sync(manager, "t")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=publish, args=(m,)) for m in (zk_manager, other, zk_manager)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    commits = mirror_commits(zk_manager, "t")
    published = [c.lineage_version for c in commits]
    assert published == sorted(set(published))  # each once, in order
    with SnapshotReader(zk_manager, "t") as reader:
        assert sorted(reader.to_arrow().column("value").to_pylist()) == [v for (v,) in duck_rows(root)]


@pytest.mark.zk
def test_pinned_snapshot_readers_for_duckdb_and_polars(zk_manager: LineageManager, tmp_path: Path) -> None:
    import duckdb

    zk_manager.create_table(TableConfig.build("plain", str(tmp_path / "plain"), "APPEND", time_column="ts"))
    with SnapshotReader(zk_manager, "plain") as snap:  # no push yet: no rows, no columns
        assert snap.polars().collect().height == 0
        with pytest.raises(NoColumnsError, match="has no columns yet"):
            snap.duckdb()
    push_arrow(
        zk_manager, "plain", [pq.read_table(write_month(tmp_path / "a.parquet", 1, [1, 2]))], mode="append"
    )
    push_arrow(
        zk_manager,
        "plain",
        [pq.read_table(write_month(tmp_path / "b.parquet", 2, [3], extra=True))],
        mode="append",
        schema_policy="evolve",
    )
    with SnapshotReader(zk_manager, "plain") as snap:
        con = duckdb.connect()
        rows = snap.duckdb(con).filter("value > 1").order("value").fetchall()
        assert [(r[1], r[2]) for r in rows] == [(2, None), (3, "n3")]
        frame = snap.polars().collect()
        assert sorted(frame["value"].to_list()) == [1, 2, 3] and frame["note"].null_count() == 2
    with SnapshotReader(zk_manager, "plain", as_of=zk_manager.table("plain").version - 2) as old:
        assert sorted(old.polars().collect()["value"].to_list()) == [1, 2]


@pytest.mark.zk
def test_a_publish_that_fails_warns_and_the_commit_stands(zk_hosts: str, tmp_path: Path) -> None:
    root = tmp_path / "t"
    create = ("table", "create", "t", "--root", str(root), "--type", "APPEND", "--mirror", "delta")
    assert run(zk_hosts, *create)[0] == 0
    assert run(zk_hosts, "push", "t", "--input", write_month(tmp_path / "a.parquet", 1, [1]))[0] == 0
    log = root / "_delta_log"
    shutil.move(log, tmp_path / "moved")
    log.write_text("not a directory")  # the log cannot be read
    second = write_month(tmp_path / "b.parquet", 2, [2])
    code, out, err = run(zk_hosts, "push", "t", "--input", second, "--mode", "append")
    assert code == 0 and "pushed t" in out, err
    assert "the Delta mirror of table 't' was not updated" in err and "lineage mirror sync t" in err
    code, out, _ = run(zk_hosts, "--json", "read", "t")
    assert sorted(r["value"] for r in json.loads(out)["rows"]) == [1, 2]  # the push stands
    log.unlink()
    shutil.move(tmp_path / "moved", log)
    code, out, _ = run(zk_hosts, "--json", "mirror", "status", "t")
    assert json.loads(out)["behind_versions"] == 1
    code, out, err = run(zk_hosts, "mirror", "sync", "t")
    assert code == 0 and "published" in out, err
    assert duck_rows(str(root)) == [(1,), (2,)]


# ---- from an adversarial review ------------------------------------------------------------------


@pytest.mark.zk
def test_a_publisher_clock_behind_never_shortens_the_mirror_retention(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    """Retention measures the mirror's window on the times the log records
    (ZooKeeper's, at publish), made monotonic: a commit stamped two hours
    early (a publisher whose clock is behind) does not free the files of the
    version it superseded seconds ago."""
    from segment_lineage.retention.executor import PassOptions, run_table

    root = tmp_path / "skew"
    config = TableConfig.build("skew", str(root), "APPEND", time_column="ts", mirror="delta",
                               mirror_retention="1h", replaced_segments_retention="0s")  # fmt: skip
    zk_manager.create_table(config)
    push_arrow(
        zk_manager, "skew", [pq.read_table(write_month(tmp_path / "a.parquet", 1, [1]))], mode="append"
    )
    sync(zk_manager, "skew")
    first = {s.location for s in zk_manager.visible_segments("skew")}
    push_arrow(zk_manager, "skew", [pq.read_table(write_month(tmp_path / "b.parquet", 1, [2]))],
               mode="replace-range", interval=(1704067200000, 1706745600000))  # fmt: skip
    sync(zk_manager, "skew")
    commit = root / "_delta_log" / "00000000000000000001.json"
    lines = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
    for action in lines:
        info = action.get("commitInfo")
        if info is not None:  # two hours early
            info["timestamp"] -= 7_200_000
            info["segment_lineage.published_ms"] = str(int(info["segment_lineage.published_ms"]) - 7_200_000)
    commit.write_text("\n".join(json.dumps(a) for a in lines) + "\n")
    report = run_table(zk_manager, "skew", PassOptions(force=True, min_grace_ms=0))
    assert not report.errors and report.files_deleted == 0
    assert all((root / loc).exists() for loc in first)
    assert duck_rows(str(root), 0) == [(1,)]


@pytest.mark.zk
def test_a_size_registered_by_hand_is_not_what_the_mirror_records(zk_hosts: str, tmp_path: Path) -> None:
    root = tmp_path / "hand"
    assert run(zk_hosts, "table", "create", "hand", "--root", str(root), "--mirror", "delta")[0] == 0
    assert run(zk_hosts, "push", "hand", "--input", write_month(tmp_path / "a.parquet", 1, [1]))[0] == 0
    write_month(root / "extra.parquet", 2, [7])
    code, _, err = run(zk_hosts, "segment", "add", "hand", "extra", "--bytes", "12345", "--no-check")
    assert code == 0, err

    assert sorted(read_delta(str(root)).column("value").to_pylist()) == [1, 7]


@pytest.mark.zk
def test_a_log_left_by_another_table_is_never_taken_as_this_ones(
    zk_hosts: str, zk_manager: LineageManager, tmp_path: Path
) -> None:
    from segment_lineage.lineage.core.settings import SettingsChange

    root = str(tmp_path / "ev")
    assert run(zk_hosts, "table", "create", "ev", "--root", root, "--mirror", "delta")[0] == 0
    for month in (1, 2, 3):
        data = write_month(tmp_path / f"{month}.parquet", month, [month])
        assert run(zk_hosts, "push", "ev", "--input", data, "--mode", "refresh")[0] == 0
    kept = tmp_path / "kept_log"
    shutil.copytree(Path(root) / "_delta_log", kept)
    code, out, _ = run(zk_hosts, "table", "drop", "ev", "--force")
    assert code == 0 and "removed the Delta log under its root" in out  # engines find no table there
    assert not (Path(root) / "_delta_log").exists()
    shutil.copytree(kept, Path(root) / "_delta_log")  # as a drop by an older build leaves it
    again = ("table", "create", "ev2", "--root", root, "--existing-files", "--mirror", "delta")
    code, _, err = run(zk_hosts, *again)
    assert code == 1 and "a Delta log is already under" in err
    assert run(zk_hosts, "table", "create", "ev", "--root", root, "--existing-files")[0] == 0
    assert run(zk_hosts, "push", "ev", "--input", write_month(tmp_path / "n.parquet", 5, [50]))[0] == 0
    zk_manager.alter_table("ev", SettingsChange(mirror="delta"))  # as a script might, past the CLI's check
    code, _, err = run(zk_hosts, "mirror", "sync", "ev")
    assert code == 1 and "was not written for this table" in err and "lineage mirror repair ev" in err
    assert run(zk_hosts, "mirror", "repair", "ev")[0] == 0
    assert duck_rows(root) == [(50,)]
    code, out, _ = run(zk_hosts, "--json", "mirror", "versions", "ev")
    shown = [(v["lineage_version"], "another table's" in v["operation"]) for v in json.loads(out)]
    assert shown[:3] == [(None, True)] * 3  # the dropped table's versions are not this table's
    assert shown[3][0] is not None and not shown[3][1]
    assert run(zk_hosts, "mirror", "sync", "ev")[0] == 0


@pytest.mark.zk
def test_odd_mirror_inputs_are_refused_and_change_nothing(zk_hosts: str, tmp_path: Path) -> None:
    code, _, err = run(
        zk_hosts, "table", "create", "pct", "--root", str(tmp_path / "a%41"), "--mirror", "delta"
    )
    assert code == 1 and "cannot live under" in err and "'%'" in err
    assert run(zk_hosts, "table", "show", "pct")[0] == 3  # not found
    root = tmp_path / "nulls"
    assert run(zk_hosts, "table", "create", "nulls", "--root", str(root), "--mirror", "delta")[0] == 0
    pq.write_table(pa.table({"x": pa.array([None, None], pa.null())}), tmp_path / "nulls.parquet")
    code, _, err = run(zk_hosts, "push", "nulls", "--input", str(tmp_path / "nulls.parquet"))
    assert code == 1 and "every column of table 'nulls' is typed null" in err
    assert not list(root.rglob("*.parquet"))
    # A mirror that cannot publish its first version is not left on.
    assert run(zk_hosts, "table", "create", "gone", "--root", str(tmp_path / "gone"))[0] == 0
    assert run(zk_hosts, "push", "gone", "--input", write_month(tmp_path / "g.parquet", 1, [1]))[0] == 0
    listing = tmp_path / "missing.json"
    listing.write_text(json.dumps([{"name": "lost", "location": "lost.parquet", "rows": 1, "bytes": 10}]))
    assert run(zk_hosts, "segment", "add", "gone", "--file", str(listing), "--no-check")[0] == 0
    code, _, err = run(zk_hosts, "mirror", "enable", "gone")
    assert code == 1 and "'lost.parquet'" in err and "is missing" in err
    _, out, _ = run(zk_hosts, "--json", "table", "show", "gone")
    assert json.loads(out)["mirror"] is None and not (tmp_path / "gone" / "_delta_log").exists()


@pytest.mark.zk
def test_sync_all_goes_on_past_a_table_that_fails_and_history_past_a_bad_log(
    zk_hosts: str, tmp_path: Path
) -> None:
    from deltalake import write_deltalake

    for name in ("a", "b"):
        assert (
            run(zk_hosts, "table", "create", name, "--root", str(tmp_path / name), "--mirror", "delta")[0]
            == 0
        )
        assert (
            run(zk_hosts, "push", name, "--input", write_month(tmp_path / f"{name}.parquet", 1, [1]))[0] == 0
        )
    write_deltalake(str(tmp_path / "a"), pq.read_table(tmp_path / "a.parquet"), mode="append")  # foreign
    from segment_lineage.lineage.zk.connect import open_store

    store = open_store(zk_hosts)
    try:
        later = pq.read_table(write_month(tmp_path / "b2.parquet", 2, [2]))
        push_arrow(LineageManager(store), "b", [later], mode="refresh")  # no publish hook: b lags
    finally:
        store.close()
    code, out, err = run(zk_hosts, "mirror", "sync", "--all")
    assert code == 1 and "a: failed: " in out and "b: published" in out and "for 1 table(s): a" in err
    commit = tmp_path / "b" / "_delta_log" / "00000000000000000001.json"
    commit.write_text(commit.read_text()[:40])  # a torn commit
    code, out, err = run(zk_hosts, "history", "b")
    assert code == 0 and "END_REPLACE" in out and "Delta versions are not shown" in err
    code, out, _ = run(zk_hosts, "--json", "mirror", "status", "b")
    assert code == 1 and json.loads(out)["problem"]


@pytest.mark.zk
def test_status_says_when_files_the_mirror_shows_are_gone(zk_hosts: str, tmp_path: Path) -> None:
    root = tmp_path / "v"
    assert run(zk_hosts, "table", "create", "v", "--root", str(root), "--mirror", "delta")[0] == 0
    assert run(zk_hosts, "push", "v", "--input", write_month(tmp_path / "a.parquet", 1, [1]))[0] == 0
    for path in root.rglob("*.parquet"):
        path.unlink()  # a vacuum that wrote no commit of its own
    code, out, _ = run(zk_hosts, "--json", "mirror", "status", "v")
    problem = json.loads(out)["problem"]
    assert code == 1 and "1 file(s) the mirror's Delta version 0 references are missing" in problem


@pytest.mark.zk
def test_status_says_when_the_whole_log_is_gone(zk_hosts: str, tmp_path: Path) -> None:
    """A deleted _delta_log: engines find no table, and the status said
    nothing was wrong (an outside trial's finding). A new table with nothing
    to publish yet has no log either, and nothing is wrong with it."""
    import shutil

    root = tmp_path / "g"
    assert run(zk_hosts, "table", "create", "g", "--root", str(root), "--mirror", "delta")[0] == 0
    assert run(zk_hosts, "mirror", "status", "g")[0] == 0  # nothing to publish yet
    assert run(zk_hosts, "push", "g", "--input", write_month(tmp_path / "a.parquet", 1, [1]))[0] == 0
    assert run(zk_hosts, "mirror", "status", "g")[0] == 0
    shutil.rmtree(root / "_delta_log")
    code, out, _ = run(zk_hosts, "--json", "mirror", "status", "g")
    assert code == 1 and "no Delta log under the root" in json.loads(out)["problem"], out
    assert run(zk_hosts, "mirror", "sync", "g")[0] == 0
    assert run(zk_hosts, "mirror", "status", "g")[0] == 0


@pytest.mark.zk
def test_columns_appear_in_the_mirror_with_the_version_that_added_them(zk_hosts: str, tmp_path: Path) -> None:
    """Versions published late (a push without the publish hook) are read
    with the table's current columns: a column added by a later push is
    published with that push's version, not with the earlier ones."""
    from segment_lineage.lineage.zk.connect import open_store

    root = tmp_path / "e"
    create = ("table", "create", "e", "--root", str(root), "--type", "APPEND", "--time-column", "ts",
              "--mirror", "delta")  # fmt: skip
    assert run(zk_hosts, *create)[0] == 0
    assert (
        run(
            zk_hosts, "push", "e", "--input", write_month(tmp_path / "a.parquet", 1, [1]), "--mode", "append"
        )[0]
        == 0
    )
    store = open_store(zk_hosts)
    try:  # no publish hook: this version waits for the next publish
        push_arrow(LineageManager(store), "e", [pq.read_table(write_month(tmp_path / "b.parquet", 2, [2]))],
                   mode="append")  # fmt: skip
    finally:
        store.close()
    evolved = write_month(tmp_path / "c.parquet", 3, [3], extra=True)
    code, _, err = run(zk_hosts, "push", "e", "--input", evolved, "--mode", "append", "--evolve-schema")
    assert code == 0 and "warning" not in err, err
    from deltalake import DeltaTable

    names = [DeltaTable(str(root), version=v).schema().to_arrow().names for v in range(4)]
    assert names == [["ts", "value"], ["ts", "value"], ["ts", "value", "note"], ["ts", "value", "note"]]
    _, out, _ = run(zk_hosts, "--json", "mirror", "versions", "e")
    kinds = [(v["operation"], v["columns_only"]) for v in json.loads(out)]
    assert kinds == [("CREATE TABLE", False), ("WRITE", False), ("ADD COLUMN", True), ("WRITE", False)]


@pytest.mark.zk
def test_the_mirrors_history_says_what_each_commit_did(zk_hosts: str, tmp_path: Path) -> None:
    """DESCRIBE HISTORY (delta-rs's history) on the mirror: an append is a
    blind append; a refresh an overwrite; a replace-range carries its
    predicate; a rollback the lineage version it restores; a revert says it
    deletes; every commit says in words what the lineage commit did."""
    from deltalake import DeltaTable

    root = tmp_path / "h"
    code, _, err = run(
        zk_hosts, "table", "create", "h", "--root", str(root), "--type", "APPEND", "--time-column", "ts",
        "--mirror", "delta",
    )  # fmt: skip
    assert code == 0, err
    for month in (1, 2):
        code, _, err = run(
            zk_hosts, "push", "h", "--input", write_month(tmp_path / f"m{month}.parquet", month, [month])
        )
        assert code == 0, err
    fix = write_month(tmp_path / "fix.parquet", 2, [20])
    code, _, err = run(
        zk_hosts, "push", "h", "--input", fix, "--mode", "replace-range", "--interval", "2024-02/2024-03"
    )
    assert code == 0, err
    code, _, err = run(zk_hosts, "rollback", "h")
    assert code == 0, err
    code, _, err = run(zk_hosts, "push", "h", "--input", fix, "--mode", "refresh")
    assert code == 0, err
    history = list(reversed(DeltaTable(str(root)).history()))  # oldest first
    append, second, ranged, rolled, refreshed = history[-5:]
    assert append["isBlindAppend"] is True and second["isBlindAppend"] is True
    assert ranged["isBlindAppend"] is False
    assert ranged["operationParameters"]["predicate"] == (
        "ts >= '2024-02-01T00:00:00Z' AND ts < '2024-03-01T00:00:00Z'"
    ), ranged
    assert "replace-range" in ranged["userMetadata"]
    assert rolled["isBlindAppend"] is False and "RESTORE of lineage version" in rolled["userMetadata"], rolled
    assert rolled["operationParameters"]["restoredLineageVersion"].isdigit()
    assert refreshed["operationParameters"]["mode"] == "Overwrite", refreshed
    assert refreshed["isBlindAppend"] is False and "refresh (overwrite)" in refreshed["userMetadata"]
    assert read_delta(str(root)).column("value").to_pylist() == [20]
    code, out, err = run(zk_hosts, "--json", "entries", "h")
    last = json.loads(out)[-1]["id"]
    code, _, err = run(zk_hosts, "revert", "h", last)
    assert code == 0, err
    reverted = DeltaTable(str(root)).history(1)[0]
    assert reverted["isBlindAppend"] is False and f"DELETE of entry {last}'s rows" in reverted["userMetadata"]


@pytest.mark.zk
def test_a_rollback_across_a_schema_replacement_is_published_with_the_old_columns(
    zk_hosts: str, tmp_path: Path
) -> None:
    """Rolled back across a --replace-schema refresh, the mirror's newest
    version has the old columns and the old rows (Delta, DuckDB); the
    versions between keep theirs."""
    root = tmp_path / "s"
    code, _, err = run(zk_hosts, "table", "create", "s", "--root", str(root), "--mirror", "delta")
    assert code == 0, err
    pq.write_table(pa.table({"carrier": ["UA"], "name": ["United"]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"faa": ["JFK"], "seats": [3]}), tmp_path / "b.parquet")
    assert run(zk_hosts, "push", "s", "--input", str(tmp_path / "a.parquet"))[0] == 0
    first = json.loads(run(zk_hosts, "--json", "history", "s")[1])[0]["version"]
    code, _, err = run(zk_hosts, "push", "s", "--input", str(tmp_path / "b.parquet"), "--replace-schema")
    assert code == 0, err
    code, _, err = run(zk_hosts, "rollback", "s", "--to-version", str(first))
    assert code == 0 and "warning" not in err, err
    newest = read_delta(str(root))
    assert newest.column_names == ["carrier", "name"] and newest.column("carrier").to_pylist() == ["UA"]
    from deltalake import DeltaTable

    log = DeltaTable(str(root))
    names = [DeltaTable(str(root), version=v).schema().to_arrow().names for v in range(log.version() + 1)]
    assert names[-2:] == [["faa", "seats"], ["carrier", "name"]], names
    con = duckdb_connection()
    assert con.execute("SELECT carrier, name FROM delta_scan(?)", [str(root)]).fetchall() == [
        ("UA", "United")
    ]


@pytest.mark.zk
def test_mirror_status_is_steady_while_nothing_changes(zk_hosts: str, tmp_path: Path) -> None:
    """Nothing committed, nothing published: the same status, however long
    one waits between two looks (no lag that grows on an idle table)."""
    import time

    root = tmp_path / "idle"
    assert run(zk_hosts, "table", "create", "idle", "--root", str(root), "--mirror", "delta")[0] == 0
    pq.write_table(pa.table({"v": [1, 2]}), tmp_path / "a.parquet")
    assert run(zk_hosts, "push", "idle", "--input", str(tmp_path / "a.parquet"))[0] == 0
    first = run(zk_hosts, "--json", "mirror", "status", "idle")
    time.sleep(1.5)
    second = run(zk_hosts, "--json", "mirror", "status", "idle")
    assert first[0] == 0 and first[1] == second[1], (first, second)
    assert json.loads(first[1])["lag_seconds"] == 0
