"""Versions, time travel and rollback, on both stores."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import (
    ConflictError,
    InvalidInputError,
    LineageError,
    NotFoundError,
    RefusedError,
    VersionGoneError,
)
from segment_lineage.lineage.core.model import DeletionReason, Segment, TableConfig
from segment_lineage.lineage.core.periods import parse_version_or_time
from segment_lineage.lineage.core.visibility import visible_names
from segment_lineage.lineage.manager import LineageManager
from tests.helpers.files import parquet_file

T = "rb"


def seg(name: str, rows: int = 10) -> Segment:
    return Segment(name, f"{name}.parquet", rows=rows, size_bytes=rows * 10)


def push(m: LineageManager, label: str, replace: list[str], count: int = 2) -> tuple[str, list[str]]:
    names = [f"{label}_{i}" for i in range(count)]
    entry = m.start_replace(T, replace, names)
    m.register_segments(T, [seg(n) for n in names], entry_id=entry)
    m.end_replace(T, entry)
    return entry, names


@pytest.fixture
def snapshots(manager: LineageManager) -> tuple[LineageManager, list[tuple[int, set[str]]]]:
    """Five snapshots pushed one after another: (version, visible names) after each."""
    m = manager
    m.create_table(TableConfig.build(T, f"/d/{T}", replaced_segments_retention="0s", max_snapshots=10))
    seen: list[tuple[int, set[str]]] = []
    current: list[str] = []
    for label in ("s1", "s2", "s3", "s4", "s5"):
        _, current = push(m, label, current)
        state = m.table(T)
        seen.append((state.version, visible_names(state)))
    return m, seen


def test_as_of_reads_at_every_version(snapshots: tuple[LineageManager, list[tuple[int, set[str]]]]) -> None:
    m, seen = snapshots
    for version, names in seen:
        assert visible_names(m.table_as_of(T, version)) == names
    assert m.store.versions(T)[-1] == m.table(T).version
    for version in m.store.versions(T):  # every retained version reads, mid-push ones too
        assert m.table_as_of(T, version).version == version


def test_roll_back_to_each_of_five_versions_and_forward_again(
    snapshots: tuple[LineageManager, list[tuple[int, set[str]]]],
) -> None:
    m, seen = snapshots
    newest_version, newest = seen[-1]
    for version, names in seen[:-1]:
        done = m.rollback(T, version, reason="test")
        assert visible_names(m.table(T)) == names and done.committed_version is not None
        assert done.rows_appearing == 10 * len(names - visible_names(m.table_as_of(T, done.from_version)))
        forward = m.rollback(T, newest_version)  # the undo: roll forward
        assert visible_names(m.table(T)) == newest and forward.committed_version is not None
    assert [h.operation.value for h in m.history(T, limit=2)] == ["ROLLBACK", "ROLLBACK"]


def test_rollback_of_a_rollback_returns_to_the_rolled_back_state(
    snapshots: tuple[LineageManager, list[tuple[int, set[str]]]],
) -> None:
    m, seen = snapshots
    before = m.table(T).version
    m.rollback(T, m.resolve_version(T))  # no target: undo the newest completed push
    assert visible_names(m.table(T)) == seen[-2][1]
    m.rollback(T, before)
    assert visible_names(m.table(T)) == seen[-1][1]
    s4_entry = next(e for e in m.entries(T) if "s4_0" in e.segments_to)
    target = m.resolve_version(T, entry_id=s4_entry.entry_id)  # undo s4 and everything after
    m.rollback(T, target)
    assert visible_names(m.table(T)) == seen[2][1]


def test_a_dry_run_changes_nothing(snapshots: tuple[LineageManager, list[tuple[int, set[str]]]]) -> None:
    m, seen = snapshots
    version = m.table(T).version
    plan = m.rollback(T, seen[0][0], dry_run=True)
    assert plan.committed_version is None and m.table(T).version == version
    assert set(plan.appear) == seen[0][1] and set(plan.disappear) == seen[-1][1]
    assert (plan.rows_before, plan.rows_after) == (20, 20) and len(plan.reverted) == 4
    assert (plan.rows_appearing, plan.rows_disappearing) == (20, 20)


def test_rollback_while_a_push_is_in_progress(
    snapshots: tuple[LineageManager, list[tuple[int, set[str]]]],
) -> None:
    m, seen = snapshots
    running = m.start_replace(T, [], ["side"])  # an append: touches nothing the rollback changes
    m.register_segments(T, [seg("side")], entry_id=running)
    m.rollback(T, seen[3][0])  # allowed: the running push keeps going
    assert visible_names(m.table(T)) == seen[3][1]
    m.end_replace(T, running)
    assert visible_names(m.table(T)) == seen[3][1] | {"side"}
    overlapping = m.start_replace(T, sorted(seen[3][1]), ["next"])
    with pytest.raises(RefusedError, match=f"an entry opened by hand, {overlapping}, held until"):
        m.rollback(T, seen[0][0])
    m.revert_replace(T, overlapping, force=True)


def test_rollback_is_refused_once_retention_reclaimed_a_needed_segment(
    snapshots: tuple[LineageManager, list[tuple[int, set[str]]]],
) -> None:
    m, seen = snapshots
    version = m.table(T).version
    m.commit(T, lambda s, now: transitions.retention_mark(s, {"s1_0": DeletionReason.REPLACED}, (), now))
    with pytest.raises(RefusedError, match=r"s1_0.*no longer registered"):
        m.rollback(T, seen[0][0])
    assert m.table(T).version == version + 1  # only the retention mark landed
    m.rollback(T, seen[1][0])  # s2 is still whole


def test_two_concurrent_rollbacks_one_wins_and_the_other_changes_nothing(
    snapshots: tuple[LineageManager, list[tuple[int, set[str]]]],
) -> None:
    m, seen = snapshots
    start = m.table(T).version
    outcomes: list[object] = []
    barrier = threading.Barrier(2)
    store = m.store
    read = store.read_now  # what a commit attempt starts with
    read_version = store.read_version_now  # what a rollback's first attempt starts with

    planned = threading.local()

    def wait_once() -> None:
        if not getattr(planned, "done", False):
            planned.done = True
            barrier.wait(timeout=30)  # both plan against the same version before either commits

    def read_then_wait(table: str) -> object:
        found = read(table)
        wait_once()
        return found

    def read_version_then_wait(table: str, version: int) -> object:
        found = read_version(table, version)
        wait_once()
        return found

    store.read_now = read_then_wait  # type: ignore[method-assign,assignment]
    store.read_version_now = read_version_then_wait  # type: ignore[method-assign,assignment]

    def roll(version: int) -> None:
        try:
            outcomes.append(m.rollback(T, version))
        except LineageError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=roll, args=(v,)) for v in (seen[0][0], seen[1][0])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.read_now = read  # type: ignore[method-assign]
    store.read_version_now = read_version  # type: ignore[method-assign]
    assert sum(isinstance(o, ConflictError) for o in outcomes) == 1
    assert m.table(T).version == start + 1
    assert visible_names(m.table(T)) in (seen[0][1], seen[1][1])


def test_unknown_versions_and_bad_targets_are_refused(
    snapshots: tuple[LineageManager, list[tuple[int, set[str]]]],
) -> None:
    m, _ = snapshots
    newest = m.table(T).version
    with pytest.raises(VersionGoneError, match="no version"):
        m.rollback(T, newest + 5)
    with pytest.raises(InvalidInputError):
        m.resolve_version(T, version=0)
    # Past any version there can be: bad input on every way in, not a version not found.
    huge = 12345678901234567890123
    for attempt in (
        lambda: m.resolve_version(T, version=huge),
        lambda: m.rollback(T, huge),
        lambda: m.rollback(T, 10_000_000_000, dry_run=True),
        lambda: m.table_as_of(T, huge),
        lambda: m.pin_readable(T, huge),
        lambda: m.resolve_as_of(T, huge),
    ):
        with pytest.raises(InvalidInputError, match="out of range"):
            attempt()
    with pytest.raises(InvalidInputError, match="at most one"):
        m.resolve_version(T, version=1, at_ms=5)
    assert m.resolve_version(T, at_ms=m.store.now_ms()) == newest
    with pytest.raises(InvalidInputError, match="in the future"):
        m.resolve_version(T, at_ms=m.store.now_ms() + 60_000)
    with pytest.raises(NotFoundError, match="did not exist"):
        m.resolve_version(T, at_ms=0)
    assert m.rollback(T, newest).committed_version is None  # already there: nothing to do


def test_versions_or_times_parse_without_ambiguity() -> None:
    assert parse_version_or_time("42") == (42, None)
    assert parse_version_or_time("2026-11-22T00:00:00Z") == (None, 1_795_305_600_000)
    assert parse_version_or_time("ms:1795305600000") == (None, 1_795_305_600_000)
    for bad in ("1795305600000", "yesterday", "v3"):
        with pytest.raises(InvalidInputError):
            parse_version_or_time(bad)


# ---- with real files on real ZooKeeper ----------------------------------------------


def labels(reader: Any) -> list[str]:
    return sorted(set(reader.to_arrow().column("label").to_pylist()))


def test_as_of_reads_pin_old_files_and_refuse_reclaimed_ones(
    zk_manager: LineageManager, tmp_path: object
) -> None:
    import pyarrow as pa

    from segment_lineage.ingest.arrow_push import push_arrow
    from segment_lineage.ingest.readers import SnapshotReader
    from segment_lineage.retention.executor import PassOptions, run_table

    m = zk_manager
    m.create_table(
        TableConfig.build(
            "files",
            f"{tmp_path}/files",
            replaced_segments_retention="0s",
            lineage_entry_cleanup_retention="0s",
        )
    )
    versions = {}
    for label in ("v1", "v2", "v3"):
        push_arrow(m, "files", [pa.table({"label": [label] * 4})])
        versions[label] = m.table("files").version
    # The third push queued v1's file in pending (proactive cleanup): condemned, so not readable.
    with pytest.raises(VersionGoneError, match=f"oldest readable version is {versions['v2']}"):
        SnapshotReader(m, "files", as_of=versions["v1"])
    for label in ("v2", "v3"):
        with SnapshotReader(m, "files", as_of=versions[label]) as reader:
            assert labels(reader) == [label] and reader.version == versions[label]
    with SnapshotReader(m, "files", as_of="ms:" + str(m.store.now_ms())) as reader:
        assert labels(reader) == ["v3"]
    with SnapshotReader(m, "files", as_of=versions["v2"]) as pinned:
        report = run_table(m, "files", PassOptions(min_grace_ms=0, force=True))
        assert report.kept >= 1
        assert labels(pinned) == ["v2"]  # its files survived the zero-grace pass
    run_table(m, "files", PassOptions(min_grace_ms=0, force=True))
    with pytest.raises(VersionGoneError, match=f"oldest readable version is {versions['v3']}"):
        SnapshotReader(m, "files", as_of=versions["v2"])
    assert m.store.pins.leases("files") == []  # the refused reader released its pin


def test_rollback_and_as_of_from_the_command_line(zk_hosts: str, tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from segment_lineage.cli import app

    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(app, ["--zk", zk_hosts, *args])

    assert run("table", "create", T, "--root", str(tmp_path / "rb-cli")).exit_code == 0
    for label in ("a", "b"):
        entry = json.loads(run("--json", "start-replace", T, "--to", f"{label}_0").stdout)["entry"]
        parquet_file(tmp_path / "rb-cli" / f"{label}_0.parquet", 5)
        assert run("segment", "add", T, f"{label}_0", "--rows", "5", "--entry", entry).exit_code == 0
        assert run("end-replace", T, entry).exit_code == 0
    dry = run("rollback", T, "--dry-run")
    assert dry.exit_code == 0 and "would" in dry.stdout, dry.output
    done = run("--json", "rollback", T, "--reason", "bad b")
    plan = json.loads(done.stdout)
    assert plan["reverted"] and plan["committed_version"]
    seen = json.loads(run("--json", "segments", T).stdout)
    assert [s["name"] for s in seen] == ["a_0"]
    back = run("--json", "segments", T, "--as-of", str(plan["from_version"]))
    assert [s["name"] for s in json.loads(back.stdout)] == ["a_0", "b_0"]
    undo = run("rollback", T, "--to-version", str(plan["from_version"]))
    assert undo.exit_code == 0 and "rolled" in undo.stdout
    bad = run("rollback", T, "--to-version", "1", "--entry", "x")
    assert bad.exit_code == 2 and "at most one" in bad.stderr
    bad = run("segments", T, "--as-of", "1795305600000")
    assert bad.exit_code == 2 and "ms:" in bad.stderr
    gone = run("segments", T, "--as-of", "999")
    assert gone.exit_code == 3 and "no version 999" in gone.stderr


def test_the_history_graph_shows_each_push_and_each_rollback(
    snapshots: tuple[LineageManager, list[tuple[int, set[str]]]],
) -> None:
    import xml.etree.ElementTree as ET

    from segment_lineage.lineage.core.graph import COLOURS, history_svg

    m, seen = snapshots
    m.rollback(T, seen[2][0], reason="bad s4 & s5")
    svg = history_svg(m.history(T), m.table(T), m.store.versions(T))
    root = ET.fromstring(svg)  # well-formed, text escaped
    ns = "{http://www.w3.org/2000/svg}"
    bars = [r for r in root.iter(f"{ns}rect") if r.find(f"{ns}title") is not None]
    fills = [r.get("fill") for r in bars if "entry" in (r.findtext(f"{ns}title") or "")]
    # s3 shows again; s1 and s2 were replaced by it (kept for rollback); s4 and s5 rolled back
    assert fills == [COLOURS["replaced"]] * 2 + [COLOURS["live"]] + [COLOURS["reverted"]] * 2
    marks = [p for p in root.iter(f"{ns}polygon")]
    assert len(marks) == 1 and "bad s4 &amp; s5" in svg
    assert "readable versions" in svg


def test_history_graph_from_the_command_line(zk_hosts: str, tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from segment_lineage.cli import app

    runner = CliRunner()
    assert (
        runner.invoke(app, ["--zk", zk_hosts, "table", "create", T, "--root", str(tmp_path / "g")]).exit_code
        == 0
    )
    target = tmp_path / "h.svg"
    done = runner.invoke(app, ["--zk", zk_hosts, "history", T, "--graph", str(target)])
    assert done.exit_code == 0 and target.read_text().startswith("<svg")
    bad = runner.invoke(app, ["--zk", zk_hosts, "history", T, "--graph", str(tmp_path / "h.png")])
    assert bad.exit_code == 2 and "SVG" in bad.stderr


def test_memory_store_history_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import segment_lineage.lineage.store.memory
    from segment_lineage.lineage.store.memory import MemoryStore

    monkeypatch.setattr(segment_lineage.lineage.store.memory, "MAX_HISTORY", 10)
    m = LineageManager(MemoryStore())
    m.create_table(TableConfig.build(T, f"/d/{T}"))
    for i in range(20):
        m.register_segments(T, [seg(f"m{i}")])
    assert [r.version for r in m.history(T)] == list(range(21, 11, -1))


def test_a_rollback_costs_the_same_requests_whatever_the_table_size(zk_store: Any) -> None:
    """Counted at the ZooKeeper client: undoing one push on a table of 40
    segments and on one of 4,000 sends the same requests, and reading the
    rolled-back table shares the segment map with the version before."""
    m = LineageManager(zk_store)
    sent: list[object] = []
    client = zk_store.client
    original = client._call

    def counting(request: object, async_object: object) -> object:
        sent.append(type(request).__name__)
        return original(request, async_object)

    counts = []
    for table, size in (("small_rb", 40), ("large_rb", 4000)):
        m.create_table(TableConfig.build(table, f"/d/{table}"))
        for start in range(0, size, 1000):
            m.register_segments(table, [seg(f"base_{i}") for i in range(start, min(size, start + 1000))])
        entry = m.start_replace(table, [], ["extra"])
        m.register_segments(table, [seg("extra")], entry_id=entry)
        m.end_replace(table, entry)
        target = m.resolve_version(table)
        sent.clear()
        client._call = counting
        try:
            plan = m.rollback(table, target)
        finally:
            client._call = original
        assert plan.disappear == ("extra",) and plan.committed_version is not None
        counts.append(sorted(map(str, sent)))
        rolled = m.table(table)
        assert rolled.segments is m.table_as_of(table, target).segments
        assert len(visible_names(rolled)) == size
    assert counts[0] == counts[1], counts


def test_appends_roll_back_after_retention_removed_their_finished_entries(
    zk_manager: LineageManager, zk_hosts: str, tmp_path: Path
) -> None:
    import json

    import pyarrow as pa
    from typer.testing import CliRunner

    from segment_lineage.cli import app
    from segment_lineage.ingest.arrow_push import push_arrow
    from segment_lineage.ingest.readers import SnapshotReader
    from segment_lineage.retention.executor import PassOptions, run_table

    m = zk_manager
    m.create_table(TableConfig.build("ap", str(tmp_path / "ap"), "APPEND"))

    def labels() -> list[str]:
        with SnapshotReader(m, "ap") as reader:
            data = reader.to_arrow()
        return sorted(data.column("label").to_pylist()) if data.num_rows else []

    first = push_arrow(m, "ap", [pa.table({"label": ["a"]})], mode="append")
    second = push_arrow(m, "ap", [pa.table({"label": ["b"]})], mode="append")
    both = m.table("ap").version
    report = run_table(m, "ap", PassOptions(min_grace_ms=0))
    assert report.entries_removed == 2 and m.entries("ap") == [] and report.files_deleted == 0
    cleaned = m.table("ap").version

    def cli(*args: str) -> Any:
        result = CliRunner().invoke(app, ["--zk", zk_hosts, "--json", *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    undo = cli("rollback", "ap")  # the newest push: the second append
    assert undo["reverted"] == [second.entry_id] and len(undo["disappear"]) == 1
    assert labels() == ["a"]
    assert m.table("ap").entries[second.entry_id].state.value == "REVERTED"  # back, to hide its segment
    undo = cli("rollback", "ap", "--entry", first.entry_id)
    assert undo["reverted"] == [first.entry_id] and labels() == []
    forward = cli("rollback", "ap", "--to-version", str(both))  # and forward again: nothing was lost
    assert sorted(forward["restored"]) == sorted([first.entry_id, second.entry_id])
    assert labels() == ["a", "b"]
    cli("rollback", "ap", "--entry", first.entry_id)
    assert labels() == []
    # Forward to the version right after retention removed both entries: their
    # segments, which name them, show there, so both count as completed there.
    forward = cli("rollback", "ap", "--to-version", str(cleaned))
    assert sorted(forward["restored"]) == sorted([first.entry_id, second.entry_id])
    assert labels() == ["a", "b"]


def test_a_pin_built_on_a_read_the_table_moved_past_is_pinned_again_from_the_store(
    snapshots: tuple[LineageManager, list[tuple[int, set[str]]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mirror publish pins the version it read on that read (no second
    head read). When the table moved meanwhile, that version's records may
    have been collected before the lease named them, and retention ignores
    a lease whose records are gone: the lease is taken again from the
    store (outside trial, F7). A table that did not move keeps the saving."""
    m, seen = snapshots
    read = m.store.read(T)
    pinned: list[bool] = []
    pin = m.store.pins.pin

    def counted(table: str, version: int | None, handed: Any = None, *, look: bool = False) -> Any:
        pinned.append(handed is not None)
        return pin(table, version, handed, look=look)

    monkeypatch.setattr(m.store.pins, "pin", counted)
    lease = m.pin_readable(T, read.state.version, read=read)
    assert pinned == [True] and lease.state.version == read.state.version  # nothing moved: one lease
    m.store.pins.release(lease)
    push(m, "s6", [])  # the table moves past the read
    pinned.clear()
    lease = m.pin_readable(T, read.state.version, read=read)
    assert pinned == [True, False] and lease.state.version == read.state.version
    assert visible_names(lease.state) == seen[-1][1]
    m.store.pins.release(lease)
