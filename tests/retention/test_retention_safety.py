"""Retention never deletes what a concurrent actor still needs (real ZooKeeper,
real files): passes over one table never overlap, a location registered again
is never deleted, and a push that starts while a pass plans is never judged
stale. Each test makes the interleaving happen at a named failpoint."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.segments import write_segment
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import PassRunningError
from segment_lineage.lineage.core.failpoints import set_hook
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.lineage.storage.errors import StorageError
from segment_lineage.lineage.zk.store import ZkStore
from segment_lineage.retention.deletes import THROUGH_A_LINK, UNKNOWN
from segment_lineage.retention.errors import FencedError
from segment_lineage.retention.executor import PassOptions, run_table

ZERO = PassOptions(force=True, min_grace_ms=0)


@pytest.fixture
def events(zk_manager: LineageManager, tmp_path: Path) -> LineageManager:
    zk_manager.create_table(
        TableConfig.build(
            "events",
            str(tmp_path / "events"),
            replaced_segments_retention="0s",
            lineage_entry_cleanup_retention="0s",
        )
    )
    return zk_manager


def part(label: str) -> pa.Table:
    return pa.table({"label": [label] * 3, "i": [0, 1, 2]})


@pytest.fixture
def at() -> Iterator[Callable[[str, Callable[[], None]], None]]:
    """Run ``action`` once, the first time the code reaches failpoint ``name``."""
    armed: list[str] = []

    def arm(name: str, action: Callable[[], None]) -> None:
        done: list[bool] = []

        def hook() -> None:
            if not done:
                done.append(True)
                action()

        armed.append(name)
        set_hook(name, hook)

    yield arm
    for name in armed:
        set_hook(name, None)


def test_two_passes_over_one_table_never_overlap(
    events: LineageManager, other: LineageManager, at: Callable[[str, Callable[[], None]], None]
) -> None:
    push_arrow(events, "events", [part("v1")])
    push_arrow(events, "events", [part("v2")])
    refused: list[PassRunningError] = []

    def second_pass() -> None:
        with pytest.raises(PassRunningError) as caught:
            run_table(other, "events", ZERO)
        refused.append(caught.value)

    at("retention.after-mark", second_pass)
    report = run_table(events, "events", ZERO)
    assert refused and "another retention pass" in refused[0].message
    assert "killed lets go when its ZooKeeper session times out" in (refused[0].remedy or "")
    assert report.files_deleted == 1 and events.table("events").pending == {}
    # Once the first pass is done, the table is free again.
    assert run_table(other, "events", ZERO).errors == []


def test_a_location_registered_again_while_a_pass_is_paused_is_never_deleted(
    events: LineageManager,
    other: LineageManager,
    tmp_path: Path,
    at: Callable[[str, Callable[[], None]], None],
) -> None:
    """A second actor frees the condemned location (as an overlapping pass
    did before passes held their table) and registers a new file there, which
    is what 'lineage segment add NAME' does by default: the paused pass must
    not delete it."""
    push_arrow(events, "events", [part("v1")])
    push_arrow(events, "events", [part("v2")])
    old = next(iter(events.table("events").segments.values()))
    assert old.name not in {s.name for s in events.visible_segments("events")}
    store = DeepStore.for_root(str(tmp_path / "events"))

    def free_and_register_again() -> None:
        location = old.location
        other.commit("events", lambda s, now: transitions.clear_pending(s, [location]))
        written = write_segment(store, part("again"), location, None)
        other.register_segments("events", [Segment("again", location, written.rows, written.size_bytes)])

    at("retention.after-mark", free_and_register_again)
    report = run_table(events, "events", ZERO)
    assert report.files_deleted == 0 and report.kept >= 1
    assert (tmp_path / "events" / old.location).exists()
    assert "again" in {s.name for s in events.visible_segments("events")}


def test_a_pass_that_lost_its_hold_on_the_table_deletes_nothing(
    events: LineageManager,
    other: LineageManager,
    tmp_path: Path,
    at: Callable[[str, Callable[[], None]], None],
) -> None:
    push_arrow(events, "events", [part("v1")])
    push_arrow(events, "events", [part("v2")])
    assert isinstance(events.store, ZkStore) and isinstance(other.store, ZkStore)
    hold = events.store.paths.pass_lock("events")

    def lose_the_hold() -> None:  # as when the pass's session lapses
        other.store.client.delete(hold)

    at("retention.after-mark", lose_the_hold)
    with pytest.raises(FencedError):
        run_table(events, "events", ZERO)
    assert len(list((tmp_path / "events").rglob("*.parquet"))) == 2
    assert len(events.table("events").pending) == 1  # the intent stays for the next pass
    assert run_table(other, "events", ZERO).files_deleted == 1


def test_a_push_that_starts_while_a_pass_plans_is_never_judged_stale(
    events: LineageManager,
    other: LineageManager,
    tmp_path: Path,
    at: Callable[[str, Callable[[], None]], None],
) -> None:
    """With a zero entry cleanup retention, an IN_PROGRESS entry is stale as
    soon as its owner is gone. The push below starts, writes and registers
    after the pass began and before its mark commits; the mark then retries
    against a head that shows the entry, and must see its owner too."""
    push_arrow(events, "events", [part("v1")])
    entry = str(uuid.uuid4())
    store = DeepStore.for_root(str(tmp_path / "events"))
    location = f"push_x_{entry[:8]}/late.parquet"

    def push_in_between() -> None:
        other.store.holds("owner").hold("events", entry)
        other.start_replace("events", [], ["late"], entry_id=entry)
        written = write_segment(store, part("late"), location, None)
        other.register_segments(
            "events", [Segment("late", location, written.rows, written.size_bytes)], entry_id=entry
        )

    at("retention-mark.before-commit", push_in_between)
    report = run_table(events, "events", ZERO)
    assert report.errors == []
    assert (tmp_path / "events" / location).exists()
    assert "late" in events.table("events").segments and "late" not in events.table("events").pending
    other.end_replace("events", entry)
    assert "late" in {s.name for s in events.visible_segments("events")}


def test_a_fresh_upload_whose_file_time_runs_behind_is_never_deleted(
    events: LineageManager, tmp_path: Path
) -> None:
    """A host whose clock runs two days behind (or a ZooKeeper server two
    days ahead) makes a fresh upload look old: the file system's time alone
    never gets it deleted. It is recorded when first seen, and an operator's
    'segment add' afterwards takes it over."""
    import os

    push_arrow(events, "events", [part("v1")])
    upload = tmp_path / "events" / "manual" / "day1.parquet"
    written = write_segment(
        DeepStore.for_root(str(tmp_path / "events")), part("m"), "manual/day1.parquet", None
    )
    then = upload.stat().st_mtime - 2 * 86_400
    os.utime(upload, (then, then))
    for _ in range(3):
        report = run_table(events, "events", PassOptions(force=True, min_grace_ms=0))  # default orphan grace
        assert report.files_deleted == 0
    assert upload.exists()
    events.register_segments(
        "events", [Segment("day1", "manual/day1.parquet", written.rows, written.size_bytes)]
    )
    assert "manual/day1.parquet" not in events.table("events").pending
    assert (
        run_table(events, "events", PassOptions(force=True, min_grace_ms=0, orphan_grace_ms=0)).files_deleted
        == 0
    )
    assert upload.exists()


def test_a_pass_that_would_condemn_most_of_the_visible_rows_stops_unless_allowed(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    """Times that read as 1970 (values too small to look like any instant,
    so the declared unit is taken on trust) made a whole visible table look
    old: a pass that would condemn more than half of what readers see
    asks for --allow-large-cut instead, and changes nothing, forced or not."""
    from segment_lineage.lineage.core.errors import RefusedError

    m = zk_manager
    m.create_table(
        TableConfig.build(
            "logs", str(tmp_path / "logs"), "APPEND", time_column="ts", time_unit="ms", time_retention="30d"
        )
    )
    now = m.store.now_ms()
    seventies = pa.table({"ts": pa.array([1_000, 1_100, 1_200], pa.int64()), "v": [1, 2, 3]})
    recent = pa.table({"ts": pa.array([now], pa.int64()), "v": [4]})
    push_arrow(m, "logs", [seventies], mode="APPEND")
    push_arrow(m, "logs", [recent], mode="APPEND")
    before = m.table("logs").version
    dry = run_table(m, "logs", PassOptions(dry_run=True, min_grace_ms=0))
    assert dry.errors and "3 of 4 rows" in dry.errors[0]
    with pytest.raises(RefusedError, match="more than 50"):
        run_table(m, "logs", PassOptions(min_grace_ms=0))
    assert m.table("logs").version == before and len(list((tmp_path / "logs").rglob("*.parquet"))) == 2
    with pytest.raises(RefusedError, match="more than 50"):
        run_table(m, "logs", PassOptions(force=True, min_grace_ms=0))
    assert m.table("logs").version == before and len(list((tmp_path / "logs").rglob("*.parquet"))) == 2
    allowed = run_table(m, "logs", PassOptions(force=True, allow_large_cut=True, min_grace_ms=0))
    assert allowed.condemned == 1 and allowed.files_deleted == 1


def test_the_share_guard_counts_segments_when_rows_are_not_known(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    """'segment add' records 0 rows unless told: the guard counts segments too."""
    from segment_lineage.lineage.core.errors import RefusedError

    m = zk_manager
    m.create_table(
        TableConfig.build("logs", str(tmp_path / "logs"), "APPEND", time_column="ts", time_retention="7d")
    )
    now = m.store.now_ms()
    store = DeepStore.for_root(str(tmp_path / "logs"))
    for i, when in enumerate([1_700_000, 1_700_100, now]):  # two look like January 1970
        written = write_segment(store, part(f"s{i}"), f"s{i}.parquet", None)
        m.register_segments(
            "logs", [Segment(f"s{i}", f"s{i}.parquet", 0, written.size_bytes, min_time=when, max_time=when)]
        )
    with pytest.raises(RefusedError, match="2 of the 3 segments"):
        run_table(m, "logs", PassOptions(min_grace_ms=0))
    assert len(list((tmp_path / "logs").glob("*.parquet"))) == 3


def test_two_passes_of_one_process_never_overlap(
    events: LineageManager, at: Callable[[str, Callable[[], None]], None]
) -> None:
    """One session, two passes (two threads sharing a manager): the second
    is refused too, and the first one's hold stays its own."""
    push_arrow(events, "events", [part("v1")])
    push_arrow(events, "events", [part("v2")])
    refused: list[bool] = []

    def second_pass() -> None:
        with pytest.raises(PassRunningError):
            run_table(events, "events", ZERO)
        refused.append(True)

    at("retention.after-mark", second_pass)
    report = run_table(events, "events", ZERO)
    assert refused and report.files_deleted == 1


def test_a_pass_that_lapsed_never_releases_the_next_pass_hold(
    events: LineageManager, other: LineageManager
) -> None:
    """Pass 1's session lapsed and pass 2 holds the table: pass 1's release
    leaves pass 2's hold alone."""
    assert isinstance(events.store, ZkStore) and isinstance(other.store, ZkStore)
    events.store.holds("pass").hold("events")
    other.store.client.delete(events.store.paths.pass_lock("events"))  # as when pass 1's session lapses
    other.store.holds("pass").hold("events")
    events.store.holds("pass").release("events")
    assert other.store.holds("pass").holds("events")
    with pytest.raises(PassRunningError):
        events.store.holds("pass").hold("events")
    other.store.holds("pass").release("events")


def test_allow_large_cut_lifts_the_share_guard_and_nothing_else(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    from segment_lineage.lineage.core.errors import RefusedError

    m = zk_manager
    m.create_table(
        TableConfig.build(
            "logs", str(tmp_path / "logs"), "APPEND", time_column="ts", time_unit="ms", time_retention="30d"
        )
    )
    now = m.store.now_ms()
    for ts in (1_000, 1_001, now, now):
        push_arrow(m, "logs", [pa.table({"ts": pa.array([ts], pa.int64()), "v": [1]})], mode="APPEND")
    seventies = [s for s in m.visible_segments("logs") if s.max_time is not None and s.max_time < now]
    recent = [s.name for s in m.visible_segments("logs") if s.max_time == now]
    m.delete_segments("logs", recent[:1])  # queued now
    with pytest.raises(RefusedError, match="2 of the 3 segments"):
        run_table(m, "logs", PassOptions())
    report = run_table(m, "logs", PassOptions(allow_large_cut=True))  # the default minimum grace applies
    assert report.condemned == 2 and report.files_deleted == 0  # all too young to delete yet
    assert all((tmp_path / "logs" / s.location).exists() for s in seventies)
    assert len(m.table("logs").pending) == 3


def test_retention_run_force_keeps_the_large_cut_guard(zk_hosts: str, tmp_path: Path) -> None:
    """`lineage retention run --force` (the runbook's "delete now") on a
    table whose time retention would take most of it: refused, nothing
    deleted; only --allow-large-cut lifts the guard. --force lifted it, and
    a table with a wrong time unit lost every row."""
    import subprocess
    import sys

    from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
    from segment_lineage.lineage.zk.client import ZkSettings, connect

    m = LineageManager(ZkStore(connect(ZkSettings(hosts=zk_hosts))), claims=RootClaimFiles())
    try:
        m.create_table(
            TableConfig.build(
                "tr", str(tmp_path / "tr"), "APPEND", time_column="ts", time_unit="ms", time_retention="30d"
            )
        )
        now = m.store.now_ms()
        for ts in (1_000, 1_001, now):
            push_arrow(m, "tr", [pa.table({"ts": pa.array([ts], pa.int64()), "v": [1]})], mode="APPEND")
    finally:
        m.store.close()
    before = sorted(p.name for p in (tmp_path / "tr").rglob("*.parquet"))
    lineage = [str(Path(sys.executable).parent / "lineage"), "--zk", zk_hosts, "retention", "run"]
    env = dict(os.environ, LINEAGE_HOME=str(tmp_path / "home"))

    def run(*flags: str) -> subprocess.CompletedProcess[str]:
        argv = [*lineage, "--table", "tr", *flags]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)

    planned = run("--dry-run")  # what it would condemn, and that a pass would be refused
    assert planned.returncode == 1 and "refused: a pass would change nothing" in planned.stdout, (
        planned.stdout
    )
    forced = run("--force")
    assert forced.returncode != 0 and "--allow-large-cut" in forced.stderr, forced.stdout + forced.stderr
    assert "2 of the 3 segments" in forced.stderr, forced.stderr
    as_json = run("--force", "--json")  # the refusal on stderr too, as a JSON object (it was in stdout only)
    told = json.loads(as_json.stderr.strip().splitlines()[-1])
    assert as_json.returncode == 1 and "--allow-large-cut" in told["error"] and told["table"] == "tr", told
    assert json.loads(as_json.stdout)[0]["errors"], as_json.stdout
    assert sorted(p.name for p in (tmp_path / "tr").rglob("*.parquet")) == before
    allowed = run("--force", "--allow-large-cut")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert len(list((tmp_path / "tr").rglob("*.parquet"))) == 1


def test_a_queued_path_through_a_link_is_never_deleted(zk_manager: LineageManager, tmp_path: Path) -> None:
    """A file reached through a link may be registered meanwhile under its
    real path: retention never deletes through a link."""
    m = zk_manager
    m.create_table(TableConfig.build("t", str(tmp_path / "t")))
    root = tmp_path / "t"
    write_segment(DeepStore.for_root(str(root)), part("x"), "e/x.parquet", None)
    (root / "d").symlink_to(root / "e")
    m.commit("t", lambda s, now: transitions.queue_files(s, ["d/x.parquet"], now, None))
    report = run_table(m, "t", ZERO)
    assert report.files_deleted == 0 and (root / "e" / "x.parquet").exists()


def test_a_queued_file_that_is_a_link_is_kept_and_told_so(zk_manager: LineageManager, tmp_path: Path) -> None:
    """A queued location whose file is itself a link (beside plain files of
    the same folder, which go) names the file it leads to: kept, and the
    report says it is reached through a link; the links of a folder are
    learned from one listing of it."""
    m = zk_manager
    m.create_table(TableConfig.build("t", str(tmp_path / "t")))
    root = tmp_path / "t"
    store = DeepStore.for_root(str(root))
    for name in ("e/x.parquet", "q/plain.parquet"):
        write_segment(store, part("x"), name, None)
    (root / "q" / "link.parquet").symlink_to(root / "e" / "x.parquet")
    m.commit("t", lambda s, now: transitions.queue_files(s, ["q/link.parquet", "q/plain.parquet"], now, None))
    report = run_table(m, "t", ZERO)
    assert report.files_deleted == 1 and not (root / "q" / "plain.parquet").exists()
    assert (root / "q" / "link.parquet").is_symlink() and (root / "e" / "x.parquet").exists()
    assert ("q/link.parquet", THROUGH_A_LINK) in [(k.what, k.why) for k in report.kept_items]


@pytest.mark.parametrize("enter", [True, False], ids=["mode-711", "mode-700"])
def test_a_file_behind_a_live_link_in_a_folder_that_cannot_be_listed_is_kept(
    zk_manager: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, enter: bool
) -> None:
    """A live segment registered through a link in a folder one may pass
    through but not list (mode 711, another owner): its link is looked at
    by itself, so the queued real file behind it stays (an unlistable folder
    was taken for one without links, and the live segment's file went)."""
    m = zk_manager
    m.create_table(TableConfig.build("t", str(tmp_path / "t")))
    root = tmp_path / "t"
    write_segment(DeepStore.for_root(str(root)), part("x"), "y/q.parquet", None)
    (root / "x").mkdir()
    (root / "x" / "l.parquet").symlink_to("../y/q.parquet")
    m.register_segments("t", [Segment("q", "y/q.parquet", rows=3), Segment("l", "x/l.parquet", rows=3)])
    m.delete_segments("t", ["q"])
    unlistable = str(root / "x")
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        if os.fspath(path) == unlistable:
            raise PermissionError(13, "Permission denied", unlistable)
        return real_scandir(path)

    real_lstat = os.lstat

    def lstat(path: Any, *args: Any, **kwargs: Any) -> Any:
        if not enter and os.fspath(path).startswith(unlistable + os.sep):  # not even entered (mode 700)
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "lstat", lstat)
    report = run_table(m, "t", ZERO)
    assert report.files_deleted == 0 and (root / "y" / "q.parquet").exists(), report.line()
    why = THROUGH_A_LINK if enter else UNKNOWN
    assert ("y/q.parquet", why) in [(k.what, k.why) for k in report.kept_items]
    assert enter or any("x/l.parquet" in e and "nothing deleted" in e for e in report.errors), report.errors


def test_a_folder_swapped_for_a_link_after_the_checks_leads_no_delete_elsewhere(tmp_path: Path) -> None:
    """The checks place a file; its folder then becomes a link to live data
    (mv d d.old && ln -s ../live/d d). The delete never follows it: refused
    when the folder is walked to after the swap, and the original file
    removed when the remover had the folder open before it."""
    root = tmp_path / "t"
    for folder in ("q/a", "q/b", "live/a", "live/b"):
        (root / folder).mkdir(parents=True)
        for name in ("x.parquet", "y.parquet"):
            (root / folder / name).write_bytes(folder.encode())
    batch = DeepStore.for_root(str(root)).delete_batch()
    placed = {loc: batch.place(loc) for loc in ("q/a/x.parquet", "q/a/y.parquet", "q/b/x.parquet")}
    with batch.remover() as remove:
        assert remove("q/a/x.parquet", placed["q/a/x.parquet"]) is True  # q/a now open
        for folder in ("a", "b"):
            (root / "q" / folder).rename(root / "q" / f"{folder}.old")
            (root / "q" / folder).symlink_to(root / "live" / folder)
        assert remove("q/a/y.parquet", placed["q/a/y.parquet"]) is True  # in the folder it opened
        with pytest.raises(StorageError, match="no longer a directory"):
            remove("q/b/x.parquet", placed["q/b/x.parquet"])  # walked to now: the link is refused
    assert not (root / "q/a.old/y.parquet").exists() and (root / "q/b.old/x.parquet").exists()
    assert sorted(p.name for p in (root / "live").rglob("*.parquet")) == ["x.parquet"] * 2 + ["y.parquet"] * 2


def test_a_batch_refuses_every_folder_inside_a_servers_data_and_looks_at_each_folder_above_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delete batch never places a file in a folder at or below a marked
    ZooKeeper data directory, however deep, and however many folders it
    placed before; a folder above many of its files is looked at once."""
    from segment_lineage.lineage.core.errors import RefusedError
    from segment_lineage.lineage.core.roots import STATE_MARKER

    root = tmp_path / "t"
    plain = [f"push/{i:03d}/x.parquet" for i in range(50)]
    marked = ["home/zk/x.parquet", "home/zk/version-2/log.1", "home/zk/a/b/c/x.parquet"]
    for location in plain + marked:
        (root / location).parent.mkdir(parents=True, exist_ok=True)
        (root / location).write_bytes(b"x")
    (root / "home" / "zk" / STATE_MARKER).write_text("")
    looked: list[str] = []
    isfile = os.path.isfile

    def counted(path: Any) -> bool:
        looked.append(str(path))
        return isfile(path)

    monkeypatch.setattr(os.path, "isfile", counted)
    batch = DeepStore.for_root(str(root)).delete_batch()
    for location in plain:
        assert batch.place(location) == str(root / location)
    markers = [p for p in looked if p.endswith(STATE_MARKER)]
    assert len(markers) == len(set(markers)), "a folder above was looked at twice"
    assert len(markers) <= len(plain) + len(root.parts) + 2
    for location in marked:
        with pytest.raises(RefusedError, match="ZooKeeper server's data directory"):
            batch.place(location)
    assert all((root / location).exists() for location in marked)


def test_a_pass_whose_folders_become_links_to_live_files_mid_pass_deletes_no_live_file(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    """An outside trial's attack: replaced files under q/dK, live ones of the
    same names under lv/dK; while the pass deletes, each q/dK becomes a link
    to lv/dK. Every live file survives; each replaced file is deleted or
    left queued with an error, for a later pass."""
    import threading

    m = zk_manager
    root = tmp_path / "t"
    m.create_table(TableConfig.build("t", str(root), replaced_segments_retention="0s"))
    folders, per = 20, 50
    old, live = [], []
    for k in range(folders):
        for side, out in (("q", old), ("lv", live)):
            (root / side / f"d{k}").mkdir(parents=True)
            for i in range(per):
                location = f"{side}/d{k}/f{i}.parquet"
                (root / location).write_bytes(b"x")
                out.append(Segment(f"{side}_{k}_{i}", location, rows=1))
    m.register_segments("t", old + live)
    m.delete_segments("t", [s.name for s in old])
    lock, calls = threading.Lock(), [0]

    def swap_at_the_hundredth_delete() -> None:
        with lock:
            calls[0] += 1
            if calls[0] == 100:
                for k in range(folders):
                    (root / "q" / f"d{k}").rename(root / "q" / f"d{k}.old")
                    (root / "q" / f"d{k}").symlink_to(root / "lv" / f"d{k}")

    options = PassOptions(force=True, min_grace_ms=0, orphans=False, fence=swap_at_the_hundredth_delete)
    report = run_table(m, "t", options)
    assert all((root / s.location).is_file() for s in live), "a live file was deleted"
    assert report.files_deleted + len(report.errors) == len(old), report.line()
    left = {p.relative_to(root).as_posix() for p in (root / "q").rglob("*.parquet")}
    assert len(left) == len(report.errors) and set(m.table("t").pending) == {
        loc.replace(".old/", "/") for loc in left
    }
