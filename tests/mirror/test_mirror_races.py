"""A publish under way while its table is dropped or its mirror disabled, on
real ZooKeeper with real files: each holds the table's mirror, so the publish
finishes before the log is removed and never lands in the log of a table
created at the same root afterwards. A publisher whose hold lapsed commits
nothing. And the smaller findings: a repair of a healthy log, ``sync --all``
past a table dropped after the listing, versions of another table's log."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.lineage.core import failpoints
from segment_lineage.lineage.core.errors import LineageError, MirrorHeldError
from segment_lineage.lineage.core.model import TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.mirror import admin
from segment_lineage.mirror.delta import DeltaLog
from segment_lineage.mirror.errors import MirrorError
from segment_lineage.mirror.publisher import sync, sync_many
from segment_lineage.mirror.views import mirror_commits
from tests.helpers.run import cli as run
from tests.mirror.test_mirror import duck_rows, write_month

pytestmark = pytest.mark.zk


class Paused:
    """Stops the thread named ``who`` at failpoint ``name`` until released."""

    def __init__(self, name: str, who: str) -> None:
        self.name, self.who = name, who
        self.reached, self.go = threading.Event(), threading.Event()

    def __enter__(self) -> Paused:
        def hook() -> None:
            if threading.current_thread().name == self.who:
                self.reached.set()
                self.go.wait(60)

        failpoints.set_hook(self.name, hook)
        return self

    def __exit__(self, *_: object) -> None:
        self.go.set()
        failpoints.set_hook(self.name, None)


class Running:
    """A call in a thread of its own: its result, or what it raised."""

    def __init__(self, name: str, call: Callable[[], object]) -> None:
        self.result: object = None
        self.error: BaseException | None = None

        def body() -> None:
            try:
                self.result = call()
            except BaseException as exc:  # the test inspects it
                self.error = exc

        self.thread = threading.Thread(target=body, name=name, daemon=True)
        self.thread.start()

    def join(self, timeout: float = 60) -> bool:
        """Whether it finished within ``timeout``."""
        self.thread.join(timeout)
        return not self.thread.is_alive()


def push(manager: LineageManager, table: str, path: Path, month: int, value: int) -> None:
    data = pq.read_table(write_month(path / f"{table}-{month}-{value}.parquet", month, [value]))
    push_arrow(manager, table, [data], mode="append")


@pytest.fixture
def mirrored(zk_manager: LineageManager, tmp_path: Path) -> Iterator[str]:
    root = str(tmp_path / "w")
    zk_manager.create_table(TableConfig.build("w1", root, "APPEND", time_column="ts", mirror="delta"))
    yield root
    failpoints.set_hook("mirror.before-commit", None)


def test_a_publish_under_way_when_its_table_is_dropped_never_lands_in_the_next_tables_log(
    zk_manager: LineageManager, other: LineageManager, mirrored: str, tmp_path: Path
) -> None:
    push(zk_manager, "w1", tmp_path, 1, 1)
    sync(zk_manager, "w1")  # Delta version 0
    push(zk_manager, "w1", tmp_path, 2, 2)  # not published yet

    made: list[str] = []

    def second_table() -> None:
        made.append("w2")
        config = TableConfig.build("w2", mirrored, "APPEND", time_column="ts", mirror="delta")
        zk_manager.create_table(config, existing_files=True)
        push(zk_manager, "w2", tmp_path, 3, 3)
        sync(zk_manager, "w2")

    with Paused("mirror.before-commit", "stale") as paused:
        stale = Running("stale", lambda: sync(other, "w1"))
        assert paused.reached.wait(30)
        drop = Running("drop", lambda: admin.drop_table(zk_manager, "w1", force=True))
        if drop.join(1.0):  # the drop did not wait for the publish under way
            assert drop.error is None, drop.error
            second_table()
    assert stale.join() and drop.join()
    assert drop.error is None, drop.error
    assert (
        isinstance(drop.result, admin.Removal) and drop.result.removed
    )  # the log it removed was the dropped table's, with the publish in it
    if not made:
        second_table()
    # The new table's log holds only what the new table wrote.
    assert duck_rows(mirrored) == [(3,)]
    commits = mirror_commits(zk_manager, "w2")
    assert [c.lineage_version is not None for c in commits] == [True] * len(commits)
    assert sync(zk_manager, "w2").waiting is None  # no refusal: the log is its own


@pytest.mark.parametrize("how", ["disable", "drop"])
def test_a_first_publish_under_way_when_the_mirror_goes_leaves_no_log(
    zk_manager: LineageManager, other: LineageManager, mirrored: str, tmp_path: Path, how: str
) -> None:
    push(zk_manager, "w1", tmp_path, 1, 1)  # no log yet: the publish below writes the first commit
    with Paused("mirror.before-commit", "late") as paused:
        late = Running("late", lambda: sync(other, "w1"))
        assert paused.reached.wait(30)
        if how == "disable":
            going = Running("going", lambda: admin.disable(zk_manager, "w1"))
        else:
            going = Running("going", lambda: admin.drop_table(zk_manager, "w1", force=True))
        going.join(1.0)
    assert late.join() and going.join()
    assert going.error is None, going.error
    assert not (Path(mirrored) / "_delta_log").exists()  # engines find no table there
    if how == "disable":
        assert zk_manager.table("w1").config.mirror is None


def test_a_publisher_whose_hold_lapsed_commits_nothing(
    zk_manager: LineageManager, other: LineageManager, mirrored: str, tmp_path: Path
) -> None:
    push(zk_manager, "w1", tmp_path, 1, 1)
    sync(zk_manager, "w1")
    push(zk_manager, "w1", tmp_path, 2, 2)
    hold = other.store.holds("mirror").path("w1")
    with Paused("mirror.before-commit", "lapsing") as paused:
        lapsing = Running("lapsing", lambda: sync(other, "w1"))
        assert paused.reached.wait(30)
        assert other.store.client.exists(hold) is not None  # held while it publishes
        zk_manager.store.client.delete(hold)  # as when its session lapses
    assert lapsing.join()
    assert isinstance(lapsing.error, MirrorError) and "lapsed" in lapsing.error.message
    assert DeltaLog.open(mirrored).shown.version == 0  # nothing committed
    assert duck_rows(mirrored) == [(1,)]
    assert sync(zk_manager, "w1").published  # the next sync publishes it


def test_the_hold_is_exclusive_waited_for_and_released(
    zk_manager: LineageManager, other: LineageManager, mirrored: str
) -> None:
    zk_manager.store.holds("mirror").hold("w1")
    with pytest.raises(MirrorHeldError, match=r"another process \(.+ pid \d+\) holds"):
        other.store.holds("mirror").hold("w1")  # says who holds it
    with pytest.raises(MirrorHeldError):
        zk_manager.store.holds("mirror").hold("w1")  # two holders of one process never overlap either
    waiting = Running("waiting", lambda: admin.disable(other, "w1"))
    assert not waiting.join(0.5)  # it waits for the hold
    zk_manager.store.holds("mirror").release("w1")
    assert waiting.join() and waiting.error is None, waiting.error
    assert other.table("w1").config.mirror is None
    assert not zk_manager.store.holds("mirror").holds("w1") and not other.store.holds("mirror").holds("w1")


def test_a_refused_drop_leaves_the_log(
    zk_hosts: str, zk_manager: LineageManager, mirrored: str, tmp_path: Path
) -> None:
    push(zk_manager, "w1", tmp_path, 1, 1)
    sync(zk_manager, "w1")
    code, _, err = run(zk_hosts, "table", "drop", "w1")
    assert code == 1 and "still has 1 segment(s)" in err, err
    assert duck_rows(mirrored) == [(1,)]  # refused before the log was touched
    code, out, _ = run(zk_hosts, "table", "drop", "w1", "--force")
    assert code == 0 and "removed the Delta log under its root" in out
    assert not (Path(mirrored) / "_delta_log").exists()


def test_repair_of_a_healthy_log_commits_nothing(
    zk_hosts: str, zk_manager: LineageManager, mirrored: str, tmp_path: Path
) -> None:
    push(zk_manager, "w1", tmp_path, 1, 1)
    sync(zk_manager, "w1")
    before = DeltaLog.open(mirrored).shown.version
    for _ in range(2):
        code, out, err = run(zk_hosts, "mirror", "repair", "w1")
        assert code == 0 and "up to date" in out, err
    assert DeltaLog.open(mirrored).shown.version == before


def test_sync_all_passes_over_a_table_dropped_after_the_listing(
    zk_manager: LineageManager, mirrored: str, tmp_path: Path
) -> None:
    push(zk_manager, "w1", tmp_path, 1, 1)
    zk_manager.create_table(
        TableConfig.build("w9", str(tmp_path / "w9"), "APPEND", time_column="ts", mirror="delta")
    )
    admin.drop_table(zk_manager, "w9", force=True)
    results = sync_many(zk_manager, ["w1", "w9"], listed=True)
    assert [name for name, _ in results] == ["w1"] and not isinstance(results[0][1], LineageError)
    named = sync_many(zk_manager, ["w9"])  # named, not listed: its absence is an error
    assert isinstance(named[0][1], LineageError)


def test_a_publish_after_a_commit_waits_a_while_for_the_hold_then_warns(
    zk_manager: LineageManager,
    other: LineageManager,
    mirrored: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from segment_lineage.mirror import hook

    monkeypatch.setattr(hook, "HOLD_WAIT_S", 0.3)
    warnings: list[str] = []
    zk_manager.after_commit = hook.publish_after(warnings.append)
    push(zk_manager, "w1", tmp_path, 1, 1)
    assert not warnings and duck_rows(mirrored) == [(1,)]
    other.store.holds("mirror").hold("w1")  # a long sync elsewhere
    push(zk_manager, "w1", tmp_path, 2, 2)  # the push stands
    assert len(warnings) == 1 and "another process held it" in warnings[0], warnings
    assert "lineage mirror sync w1" in warnings[0]
    other.store.holds("mirror").release("w1")
    assert sync(zk_manager, "w1").published
    assert duck_rows(mirrored) == [(1,), (2,)]


def test_a_drop_removes_any_log_under_the_root_even_an_earlier_mirrors(
    zk_hosts: str, zk_manager: LineageManager, mirrored: str, tmp_path: Path
) -> None:
    from segment_lineage.lineage.core.settings import SettingsChange

    push(zk_manager, "w1", tmp_path, 1, 1)
    sync(zk_manager, "w1")
    zk_manager.alter_table("w1", SettingsChange(mirror="none"))  # as a script might: the log stays
    code, out, err = run(zk_hosts, "table", "drop", "w1", "--force")
    assert code == 0 and "removed the Delta log under its root" in out, err
    assert not (Path(mirrored) / "_delta_log").exists()


def test_a_drop_of_a_table_whose_metadata_cannot_be_read_removes_its_log(
    zk_hosts: str, zk_manager: LineageManager, mirrored: str, tmp_path: Path
) -> None:
    push(zk_manager, "w1", tmp_path, 1, 1)
    sync(zk_manager, "w1")
    zk_manager.store.client.set(zk_manager.store.paths.head("w1"), b"garbage")
    code, _, err = run(zk_hosts, "table", "drop", "w1")
    assert code == 1 and duck_rows(mirrored) == [(1,)], err  # refused: nothing changed
    code, out, err = run(zk_hosts, "table", "drop", "w1", "--force")
    assert code == 0 and "removed the Delta log under its root" in out, err  # its root, as registered
    assert not (Path(mirrored) / "_delta_log").exists()


def test_an_interrupted_drop_removes_the_log_when_run_again(
    zk_hosts: str, zk_manager: LineageManager, mirrored: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from segment_lineage.lineage.core.errors import StoreUnavailableError
    from segment_lineage.mirror.log_files import LogFiles

    push(zk_manager, "w1", tmp_path, 1, 1)
    sync(zk_manager, "w1")

    def unreachable(_self: LogFiles) -> bool:
        raise StoreUnavailableError("deep storage unreachable (simulated)")

    with monkeypatch.context() as patched:
        patched.setattr(LogFiles, "remove", unreachable)
        for _ in range(2):  # run again while deep storage is still away: still unfinished
            with pytest.raises(MirrorError, match="did not finish") as unfinished:
                admin.drop_table(zk_manager, "w1", force=True)
            assert unfinished.value.remedy is not None and "lineage table drop w1" in unfinished.value.remedy
    assert duck_rows(mirrored) == [(1,)]  # the log stays while the drop is unfinished
    code, _, err = run(zk_hosts, "table", "show", "w1")
    assert code == 3 and "is being dropped" in err and "lineage table drop w1 --force" in err, err
    code, out, err = run(zk_hosts, "table", "drop", "w1", "--force")  # run again
    assert code == 0 and "removed the Delta log under its root" in out, err
    assert not (Path(mirrored) / "_delta_log").exists()
    assert not (Path(mirrored) / ".segment-lineage-root.json").exists()  # its root's claim went too
    assert run(zk_hosts, "table", "show", "w1")[0] == 3  # not found


def test_a_drop_on_a_root_no_mirror_can_live_under_finishes(zk_manager: LineageManager) -> None:
    bare = LineageManager(zk_manager.store)  # no root claims: the root is not looked at
    bare.create_table(TableConfig.build("far", "hdfs://127.0.0.1:1/far"))
    assert admin.drop_table(bare, "far", force=True) == admin.Removal(False, None)
    assert "far" not in bare.list_tables()


def test_a_drop_that_finds_another_tables_log_leaves_it(
    zk_manager: LineageManager,
    other: LineageManager,
    mirrored: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A drop stopped before it opens the log, its hold lapsed; meanwhile
    the drop is finished by another process and a new mirrored table made at
    the root: the first drop must not remove the new table's log."""
    push(zk_manager, "w1", tmp_path, 1, 1)
    sync(zk_manager, "w1")
    reached, go = threading.Event(), threading.Event()
    opened = DeltaLog.open
    calls: list[str] = []

    def slow_open(root: str) -> DeltaLog:
        if threading.current_thread().name == "first":
            calls.append(root)
            if len(calls) == 2:  # the one when the table is marked dropping
                reached.set()
                go.wait(60)
        return opened(root)

    monkeypatch.setattr(DeltaLog, "open", staticmethod(slow_open))
    first = Running("first", lambda: admin.drop_table(zk_manager, "w1", force=True))
    assert reached.wait(30)
    zk_manager.store.client.delete(zk_manager.store.holds("mirror").path("w1"))  # as when its session lapses
    admin.drop_table(other, "w1", force=True)  # finishes the drop
    other.create_table(
        TableConfig.build("w2", mirrored, "APPEND", time_column="ts", mirror="delta"), existing_files=True
    )
    push(other, "w2", tmp_path, 2, 2)
    sync(other, "w2")
    go.set()
    assert first.join()
    assert duck_rows(mirrored) == [(2,)]  # the new table's log stands


def test_a_drop_leaves_a_log_that_is_not_the_tables(
    zk_hosts: str, zk_manager: LineageManager, tmp_path: Path
) -> None:
    # Another writer's Delta table under the root (no commit of it is ours).
    import pyarrow as pa
    from deltalake import write_deltalake

    root = tmp_path / "theirs"
    write_deltalake(str(root), pa.table({"x": [1, 2]}))
    zk_manager.create_table(TableConfig.build("t1", str(root)), existing_files=True)
    code, out, err = run(zk_hosts, "mirror", "status", "t1")
    assert code == 0 and "remains" not in out + err and "warning" not in err, (out, err)  # not ours to judge
    code, out, err = run(zk_hosts, "table", "drop", "t1")
    assert code == 0 and "removed" not in out and "another writer's Delta table" in err, (out, err)
    assert (root / "_delta_log").is_dir()
    # A root that now leads to another table's (moved away, linked): that log is the other's.
    for name in ("sx", "sy"):
        zk_manager.create_table(
            TableConfig.build(name, str(tmp_path / name), "APPEND", time_column="ts", mirror="delta")
        )
        push(zk_manager, name, tmp_path, 1, 1 if name == "sx" else 9)
        sync(zk_manager, name)
    (tmp_path / "sx").rename(tmp_path / "sx.moved")
    (tmp_path / "sx").symlink_to(tmp_path / "sy")
    code, out, err = run(zk_hosts, "table", "drop", "sx", "--force")
    assert code == 0 and "another table's versions" in err, (out, err)
    assert duck_rows(str(tmp_path / "sy")) == [(9,)]


def test_sync_all_passes_over_a_table_whose_mirror_was_turned_off_after_the_listing(
    zk_manager: LineageManager, mirrored: str, tmp_path: Path
) -> None:
    push(zk_manager, "w1", tmp_path, 1, 1)
    admin.disable(zk_manager, "w1")
    assert sync_many(zk_manager, ["w1"], listed=True) == []
    named = sync_many(zk_manager, ["w1"])
    assert isinstance(named[0][1], LineageError) and "has no mirror" in named[0][1].message


def test_a_lasting_lock_node_is_no_ones_hold(
    zk_manager: LineageManager, other: LineageManager, mirrored: str
) -> None:
    """A node at the hold's place that no session owns (made by hand, or by
    an identity that may create there) would hold the table for ever."""
    path = zk_manager.store.holds("mirror").path("w1")
    other.store.client.create(path, b"stuck")
    assert admin.disable(zk_manager, "w1").removed is False  # waited a moment, took the hold, and worked
    assert zk_manager.table("w1").config.mirror is None


@pytest.mark.parametrize("left", ["a broken hint", "checkpoints only"])
def test_a_drop_removes_what_a_removal_cut_short_left(
    zk_hosts: str, zk_manager: LineageManager, mirrored: str, tmp_path: Path, left: str
) -> None:
    """Object stores delete a directory file by file: a removal cut short
    leaves a log no engine reads (only a checkpoint hint), or one that reads
    from a checkpoint with no commits left (still the publisher's, by its
    application transaction). The drop run again removes either."""
    for month in (1, 2):
        push(zk_manager, "w1", tmp_path, month, month)
        sync(zk_manager, "w1")
    from deltalake import DeltaTable

    DeltaTable(mirrored).create_checkpoint()
    folder = Path(mirrored) / "_delta_log"
    for path in folder.iterdir():
        keep = path.name == "_last_checkpoint" or (left == "checkpoints only" and ".checkpoint." in path.name)
        if path.is_file() and not keep:
            path.unlink()
    if left == "a broken hint":
        (folder / "_last_checkpoint").write_text('{"version": 7, "size": 1}')
    code, out, err = run(zk_hosts, "table", "drop", "w1", "--force")
    assert code == 0 and "removed the Delta log under its root" in out and "warning" not in err, (out, err)
    assert not folder.exists()


def test_a_drop_whose_hold_lapsed_does_not_finish_until_run_again(
    zk_hosts: str, zk_manager: LineageManager, mirrored: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    push(zk_manager, "w1", tmp_path, 1, 1)
    sync(zk_manager, "w1")
    opened = DeltaLog.open
    calls: list[str] = []

    def lapsing(root: str) -> DeltaLog:
        calls.append(root)
        if len(calls) == 2:  # when the table is marked dropping: its session lapsed meanwhile
            zk_manager.store.client.delete(zk_manager.store.holds("mirror").path("w1"))
        return opened(root)

    with monkeypatch.context() as patched:
        patched.setattr(DeltaLog, "open", staticmethod(lapsing))
        with pytest.raises(MirrorError, match=r"did not finish.*lapsed"):
            admin.drop_table(zk_manager, "w1", force=True)
    assert duck_rows(mirrored) == [(1,)]
    code, out, err = run(zk_hosts, "table", "drop", "w1", "--force")
    assert code == 0 and "removed the Delta log" in out and not (Path(mirrored) / "_delta_log").exists(), err


def test_another_tables_log_with_a_foreign_commit_on_top_is_still_another_tables(
    zk_hosts: str, zk_manager: LineageManager, mirrored: str, tmp_path: Path
) -> None:
    from deltalake import DeltaTable

    for month in (1, 2, 3):
        push(zk_manager, "w1", tmp_path, month, month)
        sync(zk_manager, "w1")
    theirs = tmp_path / "theirs"
    zk_manager.create_table(TableConfig.build("b", str(theirs), "APPEND", time_column="ts"))
    for month in range(1, 9):  # past the version w1's log names
        push(zk_manager, "b", tmp_path, month, 10 + month)
    shutil.copytree(Path(mirrored) / "_delta_log", theirs / "_delta_log")  # an earlier table's, left
    DeltaTable(str(theirs)).alter.set_table_properties({"delta.appendOnly": "false"})  # another writer's
    code, _, err = run(zk_hosts, "mirror", "enable", "b")
    assert code == 1 and "not this table's mirror" in err and "another table's versions" in err, err
    code, out, err = run(zk_hosts, "table", "drop", "b", "--force")
    assert code == 0 and "another table's versions" in err and "removed" not in out, (out, err)
    assert (theirs / "_delta_log").is_dir()


def test_a_repair_that_loses_a_race_to_another_writer_still_repairs(
    zk_manager: LineageManager, mirrored: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repair of a healthy log publishes as a plain sync; when another
    writer's commit beats that attempt, the next attempt is a repair again
    (it was a plain sync, and refused the log the user had asked to repair)."""
    from deltalake import write_deltalake

    from segment_lineage.mirror import publisher
    from segment_lineage.mirror.errors import MirrorConflict

    push(zk_manager, "w1", tmp_path, 1, 1)
    sync(zk_manager, "w1")
    push(zk_manager, "w1", tmp_path, 2, 2)  # to publish
    real = publisher.publish
    repairs: list[bool] = []

    def beaten(*args: Any, **kwargs: Any) -> Any:
        repairs.append(bool(args[5]))
        if len(repairs) == 1:
            foreign = pq.read_table(next(tmp_path.glob("w1-1-1.parquet")))
            write_deltalake(mirrored, foreign, mode="append")  # another writer's commit first
            raise MirrorConflict("another commit reached the log")
        return real(*args, **kwargs)

    monkeypatch.setattr(publisher, "publish", beaten)
    report = sync(zk_manager, "w1", repair=True)
    assert repairs == [False, True]
    assert report.published and duck_rows(mirrored) == [(1,), (2,)]
