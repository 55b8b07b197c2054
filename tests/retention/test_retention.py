"""Retention: the pure planner's rules, and passes on real ZooKeeper with real files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.model import DeletionReason, Segment, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
from segment_lineage.lineage.storage.claims import CLAIM_FILE
from segment_lineage.lineage.storage.deep import FileInfo
from segment_lineage.retention.executor import PassOptions, run_pass, run_table
from segment_lineage.retention.planner import Policy, plan

HOUR = 3_600_000
DAY = 24 * HOUR


def seg(name: str, size: int = 10) -> Segment:
    return Segment(name, f"{name}.parquet", rows=1, size_bytes=size)


# ---- the planner (pure, in-memory store) -----------------------------------------


@pytest.fixture
def mem() -> LineageManager:
    from segment_lineage.lineage.store.memory import MemoryStore

    clock = {"now": 1_000 * DAY}
    m = LineageManager(MemoryStore(clock=lambda: clock["now"]))
    m.clock = clock  # type: ignore[attr-defined]
    m.create_table(TableConfig.build("t", "/d/t"))
    m.register_segments("t", [seg("a"), seg("b")])
    return m


def completed(m: LineageManager, src: list[str], dst: list[str], table: str = "t") -> str:
    entry = m.start_replace(table, src, dst)
    m.register_segments(table, [seg(n) for n in dst])
    m.end_replace(table, entry)
    return entry


def test_replaced_segments_go_after_their_retention(mem: LineageManager) -> None:
    completed(mem, ["a", "b"], ["c"])
    state = mem.table("t")
    now = mem.clock["now"]  # type: ignore[attr-defined]
    assert plan(state, Policy(now)).condemn == {}
    later = plan(state, Policy(now + DAY))
    assert later.condemn == {"a": DeletionReason.REPLACED, "b": DeletionReason.REPLACED}
    assert [d.location for d in later.deletions] == ["a.parquet", "b.parquet"]


def test_an_entry_goes_once_its_replaced_segments_are_gone(mem: LineageManager) -> None:
    entry = completed(mem, ["a", "b"], ["c"])
    now = mem.clock["now"] + DAY  # type: ignore[attr-defined]
    first = plan(mem.table("t"), Policy(now))
    mem.commit(
        "t",
        lambda s, n: transitions.retention_mark(s, first.condemn, first.remove_entries, n),
    )
    second = plan(mem.table("t"), Policy(now))
    assert second.remove_entries == (entry,)


def test_condemning_a_segment_no_longer_registered_records_nothing_for_it(mem: LineageManager) -> None:
    completed(mem, ["a"], ["n"])
    state = mem.table("t")
    ghost = transitions.retention_mark(state, {"gone": DeletionReason.DELETED}, (), 5)
    assert not ghost.changed and ghost.segments == 0
    both = {"gone": DeletionReason.DELETED, "a": DeletionReason.DELETED}
    one = transitions.retention_mark(state, both, (), 5)
    assert one.changed and one.segments == 1 and set(one.state.pending) == {state.segments["a"].location}


def test_reverted_outputs_wait_for_the_cleanup_retention(mem: LineageManager) -> None:
    entry = completed(mem, ["a"], ["n"])
    mem.revert_replace("t", entry)
    now = mem.clock["now"]  # type: ignore[attr-defined]
    assert plan(mem.table("t"), Policy(now + HOUR)).condemn == {}
    assert plan(mem.table("t"), Policy(now + DAY)).condemn == {"n": DeletionReason.REVERTED_OUTPUT}


def test_a_stale_push_is_reclaimed_only_when_its_owner_is_gone(mem: LineageManager) -> None:
    entry = mem.start_replace("t", ["a"], ["n"])
    mem.register_segments("t", [seg("n")])
    later = mem.clock["now"] + 2 * DAY  # type: ignore[attr-defined]
    state = mem.table("t")
    assert plan(state, Policy(later), live_owners=frozenset({entry})).condemn == {}
    assert plan(state, Policy(later)).condemn == {"n": DeletionReason.STALE_PUSH}
    assert plan(state, Policy(mem.clock["now"])).condemn == {}  # type: ignore[attr-defined]


def test_queued_files_wait_for_the_minimum_grace_unless_forced(mem: LineageManager) -> None:
    mem.delete_segments("t", ["a"])
    now = mem.clock["now"]  # type: ignore[attr-defined]
    assert plan(mem.table("t"), Policy(now, min_grace_ms=HOUR)).deletions == ()
    assert [
        d.location for d in plan(mem.table("t"), Policy(now, min_grace_ms=HOUR, force=True)).deletions
    ] == ["a.parquet"]
    assert len(plan(mem.table("t"), Policy(now + HOUR, min_grace_ms=HOUR)).deletions) == 1


def test_pinned_and_visible_segments_are_never_planned(mem: LineageManager) -> None:
    pinned = mem.table("t")
    completed(mem, ["a", "b"], ["c"])
    now = mem.clock["now"]  # type: ignore[attr-defined]
    result = plan(mem.table("t"), Policy(now + DAY, force=True), pinned=[pinned])
    assert result.condemn == {} and {(k.what, k.why) for k in result.kept} == {
        ("a", "pinned by a reader"),
        ("b", "pinned by a reader"),
    }
    visible = plan(mem.table("t"), Policy(now + 10 * DAY, force=True))
    assert "c" not in visible.condemn


def test_each_default(mem: LineageManager) -> None:
    completed(mem, ["a"], ["c"])
    now = mem.clock["now"]  # type: ignore[attr-defined]
    assert Policy(now).min_grace_ms == 10 * 60_000 and Policy(now).orphan_grace_ms == DAY
    assert plan(mem.table("t"), Policy(now + DAY - 1)).condemn == {}  # REFRESH keeps replaced data 1d
    assert plan(mem.table("t"), Policy(now + DAY)).condemn == {"a": DeletionReason.REPLACED}
    mem.create_table(TableConfig.build("ap", "/ap", "APPEND", time_column="ts"))
    mem.register_segments("ap", [seg("x")])
    completed(mem, ["x"], ["y"], "ap")
    assert plan(mem.table("ap"), Policy(now + 4 * HOUR - 1)).condemn == {}  # APPEND: 4h
    assert plan(mem.table("ap"), Policy(now + 4 * HOUR)).condemn == {"x": DeletionReason.REPLACED}
    reverted = mem.start_replace("t", ["c"], ["r"])
    mem.register_segments("t", [seg("r")])
    mem.revert_replace("t", reverted, force=True)
    assert "r" not in plan(mem.table("t"), Policy(now + DAY - 1)).condemn  # entry cleanup: 1d
    assert plan(mem.table("t"), Policy(now + DAY)).condemn["r"] is DeletionReason.REVERTED_OUTPUT


def test_zero_retention_reclaims_at_once_but_never_what_is_visible(mem: LineageManager) -> None:
    mem.create_table(
        TableConfig.build("z", "/z", replaced_segments_retention="0s", lineage_entry_cleanup_retention="0s")
    )
    mem.register_segments("z", [seg("old")])
    entry = mem.start_replace("z", ["old"], ["new"])
    mem.register_segments("z", [seg("new")])
    now = mem.clock["now"]  # type: ignore[attr-defined]
    running = frozenset({entry})
    assert plan(mem.table("z"), Policy(now), live_owners=running).condemn == {}  # its pusher is alive
    assert plan(mem.table("z"), Policy(now)).condemn == {"new": DeletionReason.STALE_PUSH}  # gone
    mem.end_replace("z", entry)
    assert plan(mem.table("z"), Policy(now)).condemn == {"old": DeletionReason.REPLACED}


def test_unparseable_periods_are_refused_by_name() -> None:
    from segment_lineage.lineage.core.errors import InvalidInputError

    for bad in ("soon", "-1d", "1 day", "", "5x", "99999d"):
        with pytest.raises(InvalidInputError, match="invalid period"):
            TableConfig.build("t", "/d", replaced_segments_retention=bad)
    with pytest.raises(InvalidInputError, match="APPEND tables only"):
        TableConfig.build("t", "/d", "REFRESH", time_column="ts", time_retention="30d")
    with pytest.raises(InvalidInputError, match="needs a time column"):
        TableConfig.build("t", "/d", "APPEND", time_retention="30d")
    with pytest.raises(InvalidInputError, match="invalid period"):
        TableConfig.build("t", "/d", "APPEND", time_column="ts", time_retention="a month")


def timed(name: str, max_time: int) -> Segment:
    return Segment(name, f"{name}.parquet", rows=1, size_bytes=5, min_time=max_time - HOUR, max_time=max_time)


def test_time_retention_expires_old_data_unless_a_reader_or_a_push_holds_it(mem: LineageManager) -> None:
    now = mem.clock["now"]  # type: ignore[attr-defined]
    mem.create_table(TableConfig.build("ap", "/ap", "APPEND", time_column="ts", time_retention="7d"))
    mem.register_segments(
        "ap", [timed("old", now - 8 * DAY), timed("edge", now - 7 * DAY), timed("new", now)]
    )
    state = mem.table("ap")
    assert plan(state, Policy(now)).condemn == {"old": DeletionReason.EXPIRED}  # visible, but expired
    held = plan(state, Policy(now), pinned=[state])
    assert held.condemn == {} and [(k.what, k.why) for k in held.kept] == [("old", "pinned by a reader")]
    entry = mem.start_replace("ap", ["old"], ["fresh"])
    running = plan(mem.table("ap"), Policy(now), live_owners=frozenset({entry}))
    assert running.condemn == {} and [k.why for k in running.kept] == ["part of a running push"]
    assert plan(mem.table("ap"), Policy(now + DAY)).condemn.keys() == {"old", "edge"}
    mem.create_table(TableConfig.build("keep", "/k", "APPEND", time_column="ts"))
    mem.register_segments("keep", [timed("ancient", 0)])
    assert plan(mem.table("keep"), Policy(now)).condemn == {}  # no time retention set: kept forever


def info(location: str, age_ms: int, now: int) -> FileInfo:
    return FileInfo(location, 7, now - age_ms)


def test_orphans_are_unknown_files_seen_twice_a_grace_apart(mem: LineageManager) -> None:
    from segment_lineage.lineage.core import transitions

    now = mem.clock["now"]  # type: ignore[attr-defined]
    entry = mem.start_replace("t", ["a"], ["n"])
    running_dir = f"push_20260101T000000000Z_{entry[:8]}"
    mem.delete_segments("t", ["b"])  # b.parquet is pending now
    crashed = "push_x_deadbeef/_temporary/0/part-0.parquet"
    listing = [
        info("a.parquet", 2 * DAY, now),  # a segment
        info("b.parquet", 2 * DAY, now),  # pending already
        info(crashed, 2 * DAY, now),  # a crashed native push
        info("push_y_cafecafe/seg.a1.parquet", -DAY, now),  # its file time runs ahead
        info(f"{running_dir}/n.a0.parquet", 2 * DAY, now),  # a running push's
        FileInfo("nomtime.parquet", 1, None),  # an age the file system cannot tell
        info("upload.parquet", 2 * DAY, now),  # an operator's upload, registered later
    ]
    owners = frozenset({entry})
    first = plan(mem.table("t"), Policy(now), live_owners=owners, files=listing)
    # First sight: recorded with the store's clock, whatever the file times say; nothing deleted.
    assert first.orphans == (crashed, "push_y_cafecafe/seg.a1.parquet", "nomtime.parquet", "upload.parquet")
    assert not [d for d in first.deletions if d.reason is DeletionReason.ORPHAN]
    mem.commit(
        "t", lambda s, n: transitions.retention_mark(s, first.condemn, first.remove_entries, n, first.orphans)
    )
    assert {p.reason for p in mem.table("t").pending.values()} == {
        DeletionReason.DELETED,
        DeletionReason.ORPHAN_SEEN,
    }
    mem.register_segments("t", [Segment("up", "upload.parquet")])  # takes the seen file over
    assert "upload.parquet" not in mem.table("t").pending
    # Less than a grace later by the store's clock: kept, however old the files look.
    early = plan(mem.table("t"), Policy(now + DAY - 1), live_owners=owners, files=listing)
    assert early.convict == () and early.orphans == ()
    # A grace later: condemned, unless the file system says the file is younger.
    later = plan(mem.table("t"), Policy(now + DAY), live_owners=owners, files=listing[:-1])
    assert later.convict == (crashed, "nomtime.parquet")
    assert {d.location for d in later.deletions if d.reason is DeletionReason.ORPHAN} == set(later.convict)
    gone = plan(mem.table("t"), Policy(now + DAY), live_owners=owners, files=[listing[0]])
    assert set(gone.forget) == {crashed, "nomtime.parquet", "push_y_cafecafe/seg.a1.parquet"}
    # Once the push's owner is gone, its leftovers are seen too.
    assert f"{running_dir}/n.a0.parquet" in plan(mem.table("t"), Policy(now), files=listing).orphans
    assert plan(mem.table("t"), Policy(now), files=None).orphans == ()


# ---- passes on real ZooKeeper with real files -----------------------------------


@pytest.fixture
def zk(zk_manager: LineageManager, tmp_path: Path) -> LineageManager:
    m = zk_manager
    m.create_table(
        TableConfig.build(
            "events",
            str(tmp_path / "events"),
            replaced_segments_retention="0s",
            lineage_entry_cleanup_retention="0s",
        )
    )
    return m


def part(label: str) -> pa.Table:
    return pa.table({"label": [label] * 3, "i": [0, 1, 2]})


def files(tmp_path: Path) -> set[str]:
    return {str(p.relative_to(tmp_path / "events")) for p in (tmp_path / "events").rglob("*.parquet")}


def test_a_pass_reclaims_the_replaced_snapshot(zk: LineageManager, tmp_path: Path) -> None:
    push_arrow(zk, "events", [part("v1")])
    push_arrow(zk, "events", [part("v2")])
    assert len(files(tmp_path)) == 2
    young = run_table(zk, "events", PassOptions(dry_run=True))  # the files are minutes old
    assert young.condemned == 1 and young.planned == ()
    dry = run_table(zk, "events", PassOptions(dry_run=True, min_grace_ms=0))
    assert len(dry.planned) == 1 and len(files(tmp_path)) == 2 and dry.condemned == 1
    report = run_table(zk, "events", PassOptions(min_grace_ms=0))
    assert (report.files_deleted, report.condemned) == (1, 1)
    kept = {s.location for s in zk.visible_segments("events")}
    assert files(tmp_path) == kept and zk.table("events").pending == {}
    again = run_table(zk, "events", PassOptions(min_grace_ms=0))  # the entry is gone once nothing is left
    assert again.entries_removed == 1 and again.files_deleted == 0
    assert zk.entries("events") == []  # the append's entry went in the first pass, this one now


def test_a_pass_whose_holds_release_goes_unanswered_still_reports_what_it_did(
    zk: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer to the pass hold's release lost (a pause, a dropped
    connection): the pass's report stands and the failure is a warning;
    kazoo's OperationTimeoutError escaped before, and a pass that had
    deleted its files was told as failed with an empty message."""
    from kazoo.exceptions import OperationTimeoutError

    from segment_lineage.lineage.zk.store import ZkStore

    push_arrow(zk, "events", [part("v1")])
    push_arrow(zk, "events", [part("v2")])
    store = zk.store
    assert isinstance(store, ZkStore)
    real_delete = store.zk.delete

    def delete(path: str, **kwargs: object) -> None:
        if path.endswith("/lock") and "pass" in path:
            raise OperationTimeoutError()
        real_delete(path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store.zk, "delete", delete)
    report = run_table(zk, "events", PassOptions(min_grace_ms=0))
    assert (report.files_deleted, list(report.errors)) == (1, []), report.line()


def test_a_reader_lease_keeps_its_files_through_a_zero_grace_pass(zk: LineageManager, tmp_path: Path) -> None:
    push_arrow(zk, "events", [part("v1")])
    with SnapshotReader(zk, "events") as reader:
        push_arrow(zk, "events", [part("v2")])
        report = run_table(zk, "events", PassOptions(force=True, min_grace_ms=0))
        assert report.files_deleted == 0 and report.kept >= 1
        assert reader.to_arrow().column("label").to_pylist() == ["v1"] * 3
    report = run_table(zk, "events", PassOptions(force=True, min_grace_ms=0))
    assert report.files_deleted == 1


def test_a_crash_between_intent_and_delete_is_finished_by_the_next_pass(
    zk: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    push_arrow(zk, "events", [part("v1")])
    push_arrow(zk, "events", [part("v2")])
    monkeypatch.setenv("LINEAGE_FAILPOINT", "retention.after-mark:raise")
    from segment_lineage.lineage.core.failpoints import FailpointError

    with pytest.raises(FailpointError):
        run_table(zk, "events", PassOptions(min_grace_ms=0))
    assert len(files(tmp_path)) == 2 and len(zk.table("events").pending) == 1  # intent recorded
    monkeypatch.delenv("LINEAGE_FAILPOINT")
    report = run_table(zk, "events", PassOptions(force=True))
    assert report.files_deleted == 1 and zk.table("events").pending == {}
    assert len(files(tmp_path)) == 1


def test_a_location_escaping_the_root_is_refused_and_the_outside_file_survives(
    zk: LineageManager, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    sentinel = outside / "secret.parquet"
    sentinel.write_text("keep me")
    root = tmp_path / "events"
    root.mkdir(exist_ok=True)
    (root / "link").symlink_to(outside)
    zk.register_segments("events", [Segment("trap", "link/secret.parquet")])
    zk.delete_segments("events", ["trap"])
    report = run_table(zk, "events", PassOptions(force=True))
    assert report.files_deleted == 0 and "outside the table root" in report.errors[0]
    assert sentinel.read_text() == "keep me"
    assert "link/secret.parquet" in zk.table("events").pending  # left for an operator to see


def test_retention_run_cli(zk_hosts: str, tmp_path: Path) -> None:
    from segment_lineage.cli import app

    runner = CliRunner()
    root = tmp_path / "c"
    assert (
        runner.invoke(
            app, ["--zk", zk_hosts, "table", "create", "c", "--root", str(root), "--replaced-retention", "0s"]
        ).exit_code
        == 0
    )
    from segment_lineage.lineage.zk.client import ZkSettings, connect
    from segment_lineage.lineage.zk.store import ZkStore

    m = LineageManager(ZkStore(connect(ZkSettings(hosts=zk_hosts))))
    push_arrow(m, "c", [part("a")])
    push_arrow(m, "c", [part("b")])
    dry = runner.invoke(
        app, ["--zk", zk_hosts, "--json", "retention", "run", "--dry-run", "--min-grace", "0s"]
    )
    assert dry.exit_code == 0, dry.output
    planned = json.loads(dry.stdout)[0]["planned"]
    assert [p["reason"] for p in planned] == ["REPLACED"]
    for flags in (["--json", "retention", "run"], ["retention", "run", "--json"]):  # a dry run by default
        told = runner.invoke(app, ["--zk", zk_hosts, *flags, "--min-grace", "0s"])
        assert told.exit_code == 0, told.output
        notes = [json.loads(line) for line in told.stderr.splitlines() if line.strip()]  # each line JSON
        assert {"note": "dry run: nothing was deleted; run again with --yes to delete"} in notes, told.stderr
    done = runner.invoke(app, ["--zk", zk_hosts, "retention", "run", "--table", "c", "--force"])
    assert done.exit_code == 0 and "c: deleted 1 file(s)" in done.stdout
    bad = runner.invoke(app, ["--zk", zk_hosts, "retention", "run", "--min-grace", "soon"])
    assert bad.exit_code == 2 and "invalid period" in bad.stderr
    m.store.close()
    assert len(list(root.rglob("*.parquet"))) == 1
    assert os.path.exists(root)


def aged(path: Path, days: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_bytes(b"leftover")
    then = path.stat().st_mtime - days * 86_400
    os.utime(path, (then, then))
    return path


def test_orphans_past_the_grace_go_through_the_intent_log(zk: LineageManager, tmp_path: Path) -> None:
    push_arrow(zk, "events", [part("v1")])
    root = tmp_path / "events"
    crashed = aged(root / "push_20260101T000000000Z_deadbeef" / "_temporary" / "0" / "part-0.parquet", 2)
    young = aged(root / "push_20260101T000000000Z_feedface" / "seg.a1.parquet", -0.5)  # file time ahead
    hidden = aged(root / ".DS_Store", 5)
    dry = run_table(zk, "events", PassOptions(dry_run=True))
    assert dry.orphans == 2 and dry.planned == () and crashed.exists()
    first = run_table(zk, "events", PassOptions(min_grace_ms=0, orphan_grace_ms=DAY))
    assert (first.orphans, first.files_deleted, first.errors) == (2, 0, [])  # seen, not deleted
    assert run_table(zk, "events", PassOptions(min_grace_ms=0, orphan_grace_ms=DAY)).files_deleted == 0
    report = run_table(zk, "events", PassOptions(min_grace_ms=0, orphan_grace_ms=0))
    assert (report.orphans, report.files_deleted, report.errors) == (0, 1, [])
    assert not crashed.exists() and young.exists() and hidden.exists()
    assert not (root / "push_20260101T000000000Z_deadbeef").exists() and report.dirs_removed == 3
    assert set(zk.table("events").pending) == {young.relative_to(root).as_posix()}  # seen, younger on disk
    ops = [h.operation.value for h in zk.history("events", limit=2)]
    assert ops == ["RETENTION_CLEAR", "RETENTION_MARK"]  # condemned before the delete, cleared after
    assert run_table(zk, "events", PassOptions(orphans=False)).orphans == 0
    visible = {s.location for s in zk.visible_segments("events")}
    assert visible and all((root / loc).exists() for loc in visible)


def test_a_spark_marker_beside_the_tables_files_is_theirs_and_goes_with_the_last(
    zk: LineageManager, tmp_path: Path
) -> None:
    """Files registered by hand from a Spark job's output folder keep its
    ``_SUCCESS``: no orphan while a file of the table is beside it; an
    orphan once the folder holds none. Hidden files (a ``.crc``) are never
    touched, and the kept list says so."""
    root = tmp_path / "events"
    push_arrow(zk, "events", [part("v1")])
    folder = root / "spark_out"
    folder.mkdir(parents=True)
    pa.parquet.write_table(part("s"), folder / "part-00000.parquet")
    zk.register_segments("events", [Segment("s0", "spark_out/part-00000.parquet", rows=3)])
    markers = [aged(folder / "_SUCCESS", 2), aged(folder / ".part-00000.parquet.crc", 2)]
    stray = aged(root / "crashed_out" / "_SUCCESS", 2)  # beside nothing of the table's
    options = PassOptions(min_grace_ms=0, orphan_grace_ms=0)
    assert run_table(zk, "events", PassOptions(dry_run=True)).stray_bytes == len(b"leftover")
    for _ in range(2):  # seen, then past the grace
        report = run_table(zk, "events", options)
        assert report.errors == []
    assert all(m.exists() for m in markers) and not stray.exists()
    dry = run_table(zk, "events", PassOptions(dry_run=True))
    whys = {k.what: k.why for k in dry.kept_items}
    assert "marker" in whys.get("spark_out/_SUCCESS", ""), whys
    assert "hidden" in whys.get("spark_out/.part-00000.parquet.crc", ""), whys  # never touched
    assert dry.kept == len(dry.kept_items) and dry.stray_bytes == 0
    zk.delete_segments("events", ["s0"])
    for _ in range(2):  # the file goes, then its marker alone, with no grace of its own
        assert (
            run_table(zk, "events", PassOptions(min_grace_ms=0, orphan_grace_ms=DAY, force=True)).errors == []
        )
    assert [m.name for m in markers if m.exists()] == [".part-00000.parquet.crc"]  # hidden: the operator's


def test_traversal_attempts_are_refused_and_sentinels_outside_survive(
    zk: LineageManager, tmp_path: Path
) -> None:
    from segment_lineage.lineage.core.errors import InvalidInputError

    root = tmp_path / "events"
    root.mkdir(exist_ok=True)
    twin = tmp_path / "events2"  # a table `events2` beside `events`
    sentinel = aged(twin / "push_x_00000000" / "keep.parquet", 3)
    outside = aged(tmp_path / "outside" / "secret.parquet", 3)
    (root / "to_twin").symlink_to(twin)
    (root / "to_outside").symlink_to(outside)
    for bad in ("../events2/push_x_00000000/keep.parquet", "s3://bucket/keep.parquet", "/etc/passwd"):
        with pytest.raises(InvalidInputError):
            zk.register_segments("events", [Segment("trap", bad)])
    before = zk.table("events").version
    report = run_table(zk, "events", PassOptions(min_grace_ms=0, orphan_grace_ms=0, force=True))
    assert sentinel.read_bytes() == b"leftover" and outside.read_bytes() == b"leftover"
    assert report.files_deleted == 0
    assert report.errors == [] and report.orphans == 0  # links are never followed, nor listed
    assert zk.table("events").version == before  # nothing recorded for them


def test_time_retention_deletes_expired_append_data_on_real_files(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    m = zk_manager
    m.create_table(
        TableConfig.build("logs", str(tmp_path / "logs"), "APPEND", time_column="ts", time_retention="7d")
    )
    now = m.store.now_ms()
    old = pa.table({"ts": pa.array([now - 10 * DAY, now - 9 * DAY], pa.timestamp("ms")), "v": [1, 2]})
    new = pa.table({"ts": pa.array([now - DAY, now], pa.timestamp("ms")), "v": [3, 4]})
    push_arrow(m, "logs", [old], mode="APPEND")
    push_arrow(m, "logs", [new], mode="APPEND")
    report = run_table(m, "logs", PassOptions(min_grace_ms=0))
    assert (report.condemned, report.files_deleted) == (1, 1)
    remaining = m.visible_segments("logs")
    assert [s.max_time for s in remaining] == [now]
    assert len(list((tmp_path / "logs").rglob("*.parquet"))) == 1


def test_a_pass_on_s3_deletes_through_the_pool_and_spares_the_sibling_table(
    zk_manager: LineageManager, s3: str
) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    m = zk_manager
    m.create_table(TableConfig.build("t", "s3://lake/warehouse/t", replaced_segments_retention="0s"))
    push_arrow(m, "t", [part(f"old-{i}") for i in range(5)])
    push_arrow(m, "t", [part("new")])
    for key in ("warehouse/t2/push_x_00000000/keep.parquet", "warehouse/t/push_y_deadbeef/left.parquet"):
        client.put_object(Bucket="lake", Key=key, Body=b"x")

    def keys() -> set[str]:  # the table's files, its claim marker aside
        listed = {o["Key"] for o in client.list_objects_v2(Bucket="lake").get("Contents", [])}
        return listed - {f"warehouse/t/{CLAIM_FILE}"}

    assert len(keys()) == 8
    report = run_table(m, "t", PassOptions(min_grace_ms=0, orphan_grace_ms=0))
    assert (report.files_deleted, report.orphans, report.errors) == (5, 1, [])  # the orphan is seen
    second = run_table(m, "t", PassOptions(min_grace_ms=0, orphan_grace_ms=0))
    assert (second.files_deleted, second.orphans, second.errors) == (1, 0, [])  # and deleted
    visible = {f"warehouse/t/{s.location}" for s in m.visible_segments("t")}
    # Emptied prefixes leave no directory markers behind (the root's own may stay).
    assert keys() - {"warehouse/t/"} == visible | {"warehouse/t2/push_x_00000000/keep.parquet"}
    assert report.dirs_removed + second.dirs_removed == 2


def test_a_pass_on_a_corrupted_table_fails_closed_and_deletes_nothing(
    zk: LineageManager, tmp_path: Path
) -> None:
    from segment_lineage.lineage.zk.store import ZkStore

    push_arrow(zk, "events", [part("v1")])
    push_arrow(zk, "events", [part("v2")])
    store = zk.store
    assert isinstance(store, ZkStore)
    path = store.paths.head("events")
    raw, stat = store.client.get(path)
    doc = json.loads(raw)
    doc["v"] = 99
    store.client.set(path, json.dumps(doc).encode(), version=stat.version)
    from segment_lineage.retention.executor import run_pass

    fresh = LineageManager(ZkStore(store.client, owns_client=False))
    reports = run_pass(fresh, ["events"], PassOptions(min_grace_ms=0, orphan_grace_ms=0))
    assert "unknown format version 99" in reports[0].errors[0]
    assert len(files(tmp_path)) == 2  # nothing deleted, not even as an orphan


def test_a_delete_failing_halfway_converges_on_the_next_pass(
    zk: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from segment_lineage.lineage.core.failpoints import FailpointError

    push_arrow(zk, "events", [part(f"a{i}") for i in range(4)])
    push_arrow(zk, "events", [part("b")])
    monkeypatch.setenv("LINEAGE_FAILPOINT", "retention.mid-delete:raise")
    with pytest.raises(FailpointError):
        run_table(zk, "events", PassOptions(min_grace_ms=0))
    assert len(files(tmp_path)) == 4 and len(zk.table("events").pending) == 4  # one of four gone
    monkeypatch.delenv("LINEAGE_FAILPOINT")
    report = run_table(zk, "events", PassOptions(min_grace_ms=0))
    assert (report.files_deleted, report.files_already_gone) == (3, 1)
    assert "deleted 3 file(s) (" in report.line() and "and found 1 already gone" in report.line()
    assert zk.table("events").pending == {} and len(files(tmp_path)) == 1


def test_a_table_dropped_before_its_turn_in_a_pass_is_no_failure(zk: LineageManager, tmp_path: Path) -> None:
    from segment_lineage.retention.executor import run_pass

    push_arrow(zk, "events", [part("a")])
    zk.create_table(TableConfig.build("later", str(tmp_path / "later")))
    zk.drop_table("later")
    reports = run_pass(zk, ["events", "later"], PassOptions(min_grace_ms=0))
    assert [r.errors for r in reports] == [[], []]
    assert "dropped before its pass finished" in reports[1].line()


def test_revert_racing_retention_leaves_nothing_visible_pointing_at_a_missing_file(
    zk: LineageManager, tmp_path: Path
) -> None:
    import threading

    from segment_lineage.lineage.core.errors import LineageError

    root = tmp_path / "events"
    for round_ in range(6):
        entry = push_arrow(zk, "events", [part(f"r{round_}-{i}") for i in range(3)]).entry_id
        outcomes: list[str] = []

        def revert(entry: str = entry, outcomes: list[str] = outcomes) -> None:
            try:
                zk.revert_replace("events", entry)
                outcomes.append("reverted")
            except LineageError as exc:
                outcomes.append(f"refused: {exc.message}")

        racer = threading.Thread(target=revert)
        racer.start()
        run_table(zk, "events", PassOptions(min_grace_ms=0, force=True))
        racer.join()
        visible = zk.visible_segments("events")
        assert all((root / s.location).exists() for s in visible), (round_, outcomes)


def test_clocks_off_by_an_hour_get_nothing_deleted_early(
    zk_manager: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time as time_module

    m = zk_manager
    m.create_table(
        TableConfig.build(
            "skew",
            str(tmp_path / "skew"),
            replaced_segments_retention="30m",
            lineage_entry_cleanup_retention="30m",
        )
    )
    real = time_module.time
    for offset in (-3600.0, 3600.0):  # the pushing client, then the cleaning one, an hour off
        monkeypatch.setattr(time_module, "time", lambda offset=offset: real() + offset)
        push_arrow(m, "skew", [part(f"at{offset}")])
        report = run_table(m, "skew", PassOptions(min_grace_ms=0, orphan_grace_ms=0))
        assert (report.condemned, report.files_deleted) == (0, 0), offset
    monkeypatch.setattr(time_module, "time", real)
    entries = m.entries("skew")
    zk_now = m.store.now_ms()
    assert all(abs(zk_now - e.timestamp_ms) < 60_000 for e in entries)  # stamped by ZooKeeper
    assert len(list((tmp_path / "skew").rglob("*.parquet"))) == 2


def test_a_condemned_segment_younger_than_the_minimum_grace_keeps_its_file(mem: LineageManager) -> None:
    mem.create_table(
        TableConfig.build("y", "/y", replaced_segments_retention="0s", lineage_entry_cleanup_retention="0s")
    )
    mem.register_segments("y", [seg("fresh")])
    completed(mem, ["fresh"], ["next"], "y")
    now = mem.clock["now"]  # type: ignore[attr-defined]
    young = plan(mem.table("y"), Policy(now, min_grace_ms=HOUR))
    assert young.condemn == {"fresh": DeletionReason.REPLACED} and young.deletions == ()
    assert [
        d.segment for d in plan(mem.table("y"), Policy(now, min_grace_ms=HOUR, force=True)).deletions
    ] == ["fresh"]
    assert len(plan(mem.table("y"), Policy(now + HOUR, min_grace_ms=HOUR)).deletions) == 1


def test_a_fence_lost_mid_pass_stops_the_deletes_and_every_deleted_file_is_reported(
    mem: LineageManager, tmp_path: Path
) -> None:
    import threading

    from segment_lineage.retention.errors import FencedError

    mem.create_table(TableConfig.build("big", str(tmp_path / "big")))
    LineageManager(mem.store, claims=RootClaimFiles()).claim_root("big")
    names = [f"s{i:04d}" for i in range(2_000)]
    for name in names:
        path = tmp_path / "big" / f"{name}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    mem.register_segments("big", [seg(n) for n in names])
    mem.delete_segments("big", names)
    lock = threading.Lock()
    calls = [0]

    def fence() -> None:
        with lock:
            calls[0] += 1
            if calls[0] > 700:
                raise FencedError("the session was lost")

    reported: list[str] = []
    options = PassOptions(min_grace_ms=0, orphans=False, fence=fence, on_deleted=reported.append)
    with pytest.raises(FencedError, match="the session was lost") as stopped:
        run_pass(mem, ["big"], options)
    gone = {f"{n}.parquet" for n in names if not (tmp_path / "big" / f"{n}.parquet").exists()}
    assert len(gone) == 699  # the pass checks the fence once before any delete
    assert set(reported) == gone and len(reported) == len(gone)
    (done,) = stopped.value.done  # what the stopped pass deleted is told, not lost with it
    assert (done.table, done.files_deleted, done.bytes_deleted) == ("big", 699, 699 * seg("x").size_bytes)
    assert len(mem.table("big").pending) == 2_000  # cleared only by a pass that finishes

    again: list[str] = []
    report = run_table(mem, "big", PassOptions(min_grace_ms=0, orphans=False, on_deleted=again.append))
    assert (report.files_deleted, report.files_already_gone) == (1_301, 699)
    assert not gone & set(again) and mem.table("big").pending == {}
    assert not list((tmp_path / "big").rglob("*.parquet"))


def test_a_pass_leaves_an_entry_opened_by_hand_alone_while_it_is_held(zk: LineageManager) -> None:
    zk.register_segments("events", [seg("a"), seg("b")])
    held = zk.start_replace("events", ["a"], ["n1"], hold="1h")  # longer than the entry cleanup retention
    dead = zk.start_replace("events", ["b"], ["n2"], hold="0s")
    zk.register_segments("events", [seg("n1"), seg("n2")])
    report = run_table(zk, "events", PassOptions(force=True, min_grace_ms=0))
    state = zk.table("events")
    assert "n1" in state.segments and state.entries[held].state.value == "IN_PROGRESS"
    assert "n2" not in state.segments and report.condemned == 1  # the unheld one is a stale push
    assert dead in state.entries
