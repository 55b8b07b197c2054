"""Readers against retention and concurrent commits, on real ZooKeeper with real files.

Accepted at open means readable until closed, and ``as_of(V)`` answers
version V or an error. The competing actor runs at an exact point of the
reader's protocol (a wrapped store method, a failpoint hook), never after a sleep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from segment_lineage.cli import app
from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.errors import SnapshotTooOldError
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage.core import failpoints
from segment_lineage.lineage.core.errors import ContentionError, VersionGoneError
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.manager import PIN_ATTEMPTS, LineageManager
from segment_lineage.lineage.store.memory import MemoryStore
from segment_lineage.lineage.zk.store import ZkStore
from segment_lineage.retention.executor import PassOptions, run_table

T = "events"
NOW = PassOptions(force=True, min_grace_ms=0)


def files_table(m: LineageManager, root: Path) -> None:
    m.create_table(
        TableConfig.build(
            T, str(root), replaced_segments_retention="0s", lineage_entry_cleanup_retention="0s"
        )
    )


def push(m: LineageManager, label: str) -> int:
    push_arrow(m, T, [pa.table({"label": [label] * 3})])
    return m.table(T).version


def labels(reader: SnapshotReader) -> list[str]:
    return sorted(set(reader.to_arrow().column("label").to_pylist()))


def before_lease(store: ZkStore, monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]) -> list[int]:
    """Run ``act`` each time ``store`` is about to create a reader's lease
    (after its read of the head); returns a list counting the calls."""
    real = store.ephemerals.create
    calls: list[int] = []

    def ephemeral(table: str, folder: str, name: str, data: bytes, sequence: bool, behind: Any = None) -> str:
        if folder == "leases":
            calls.append(1)
            act()
        return real(table, folder, name, data, sequence, behind)

    monkeypatch.setattr(store.ephemerals, "create", ephemeral)
    return calls


# ---- hole 10: a current-snapshot reader paused between its read and its lease ------


def test_a_reader_paused_before_its_lease_pins_a_version_it_can_read(
    zk_manager: LineageManager, other: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = zk_manager
    files_table(m, tmp_path / "t")
    first = push(m, "a")

    def replace_and_reclaim() -> None:  # once: a push replaces "a", a zero-grace pass reclaims it
        if not reclaimed:
            reclaimed.append(push(other, "b"))
            assert run_table(other, T, NOW).files_deleted >= 1

    reclaimed: list[int] = []
    calls = before_lease(m.store, monkeypatch, replace_and_reclaim)  # type: ignore[arg-type]
    with SnapshotReader(m, T) as reader:
        assert len(calls) == 2  # the first lease was on the reclaimed version: released, pinned again
        assert reader.version == m.table(T).version > reclaimed[0] > first  # the pass's commits came after
        assert labels(reader) == ["b"]
        assert [i.version for i in m.store.pins.leases(T)] == [reader.version]
    assert m.store.pins.leases(T) == []


def test_a_readers_segments_are_the_pinned_versions_not_the_callers_to_edit(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    """An outside trial popped a segment off ``reader.segments`` and the
    reader then read fewer rows, silently: the list is a tuple now."""
    m = zk_manager
    files_table(m, tmp_path / "t")
    push(m, "a")
    push(m, "b")
    with SnapshotReader(m, T) as reader:
        shown = reader.to_arrow().num_rows
        with pytest.raises(AttributeError):
            reader.segments.pop()  # type: ignore[attr-defined]
        assert reader.to_arrow().num_rows == shown > 0


def test_a_reader_that_keeps_losing_its_version_gives_up_clearly(
    zk_manager: LineageManager, other: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = zk_manager
    files_table(m, tmp_path / "t")
    push(m, "a")

    def replace_and_reclaim() -> None:
        push(other, "x")
        run_table(other, T, NOW)

    calls = before_lease(m.store, monkeypatch, replace_and_reclaim)  # type: ignore[arg-type]
    with pytest.raises(ContentionError, match="gave up without pinning"):
        SnapshotReader(m, T)
    assert len(calls) == PIN_ATTEMPTS
    assert m.store.pins.leases(T) == []  # every refused lease was released


# ---- hole 9: an as-of reader on files a running pass already condemned ---------------


def test_an_as_of_reader_is_refused_files_a_pass_condemned(
    zk_manager: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = zk_manager
    files_table(m, tmp_path / "t")
    old = push(m, "a")
    new = push(m, "b")  # "a" is replaced, still registered: the pass condemns it now
    marked: list[bool] = []
    opened: dict[str, Any] = {}
    real_pins = m.store.pins.pinned_states

    def pinned_states(table: str) -> Any:
        pins = real_pins(table)
        if marked and not opened:  # the pass's re-read after its mark: it will not look again
            try:
                opened["reader"] = SnapshotReader(m, T, as_of=old)
            except VersionGoneError as exc:
                opened["refused"] = exc
        return pins

    monkeypatch.setattr(m.store.pins, "pinned_states", pinned_states)
    failpoints.set_hook("retention.after-mark", lambda: marked.append(True))
    try:
        report = run_table(m, T, NOW)
    finally:
        failpoints.set_hook("retention.after-mark", None)
    assert opened and report.files_deleted >= 1
    if "reader" in opened:  # accepted at open means readable until closed
        with opened["reader"] as reader:
            assert labels(reader) == ["a"]
    assert f"oldest readable version is {new}" in str(opened["refused"])
    assert m.store.pins.leases(T) == []


def test_a_version_whose_files_wait_in_pending_is_not_readable(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    m = zk_manager
    files_table(m, tmp_path / "t")
    first = push(m, "a")
    push(m, "b")
    third = push(m, "c")  # proactive cleanup queued "a"'s file: condemned, not yet deleted
    assert m.table(T).pending
    with pytest.raises(VersionGoneError, match="snapshot too old"):
        SnapshotReader(m, T, as_of=first)
    with SnapshotReader(m, T, as_of=third) as reader:
        assert labels(reader) == ["c"]
    assert m.store.pins.leases(T) == []


# ---- hole 11: as_of(V) answers V or an error ------------------------------------------


def seg(name: str) -> Segment:
    return Segment(name, f"{name}.parquet", rows=1)


def test_read_version_of_the_head_ignores_a_commit_after_its_read(
    zk_manager: LineageManager, other: LineageManager, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    m = zk_manager
    m.create_table(TableConfig.build(T, str(tmp_path / "unused")))
    m.register_segments(T, [seg("s0")])
    store: ZkStore = m.store  # type: ignore[assignment]
    asked = store.read(T).state.version
    real = store.heads.read_head_raw
    commits: list[int] = []

    def read_head_raw(table: str, behind: Any = None) -> Any:
        head = real(table, behind)
        if not commits:  # another client commits right after our look at the head
            commits.append(other.register_segments(T, [seg("s1")]).state.version)
        return head

    monkeypatch.setattr(store.heads, "read_head_raw", read_head_raw)
    state = m.table_as_of(T, asked)
    assert commits == [asked + 1]
    assert state.version == asked and set(state.segments) == {"s0"}


def test_read_version_answers_the_version_asked_while_another_client_commits(
    zk_manager: LineageManager, other: LineageManager, tmp_path: Path
) -> None:
    m = zk_manager
    m.create_table(TableConfig.build(T, str(tmp_path / "unused")))
    stop = threading.Event()
    failed: list[BaseException] = []

    def write() -> None:
        i = 0
        try:
            while not stop.is_set() and i < 3000:
                other.register_segments(T, [seg(f"w{i:05d}")])
                i += 1
        except BaseException as exc:  # reported by the test, not lost in the thread
            failed.append(exc)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    wrong = []
    deadline = time.monotonic() + 20
    try:
        for _ in range(300):
            if time.monotonic() > deadline:
                break
            asked = m.store.read(T).state.version
            got = m.store.read_version(T, asked)
            if got.version != asked or len(got.segments) != asked - 1:
                wrong.append((asked, got.version))
    finally:
        stop.set()
        writer.join(timeout=30)
    assert not failed
    assert m.table(T).version > 20  # the writer really committed meanwhile
    assert wrong == []


def test_the_memory_store_answers_its_head_version_in_one_look(tmp_path: Path) -> None:
    m = LineageManager(MemoryStore())
    m.create_table(TableConfig.build(T, str(tmp_path / "unused")))
    assert m.table_as_of(T, 1).version == 1  # the head itself, though no commit recorded it
    m.register_segments(T, [seg("s0")])
    assert m.table_as_of(T, 2).version == 2 and set(m.table_as_of(T, 2).segments) == {"s0"}


# ---- hole 11: `lineage segments --as-of` on a reclaimed version -----------------------


def test_segments_as_of_a_reclaimed_version_is_too_old(
    zk_hosts: str, zk_manager: LineageManager, tmp_path: Path
) -> None:
    m = zk_manager
    files_table(m, tmp_path / "t")
    first = push(m, "a")
    push(m, "b")
    third = push(m, "c")
    run_table(m, T, NOW)  # "a" and "b" are reclaimed
    runner = CliRunner()
    gone = runner.invoke(app, ["--zk", zk_hosts, "segments", T, "--as-of", str(first)])
    assert gone.exit_code == 3, gone.output  # not found: no longer kept
    assert "snapshot too old" in gone.stderr
    assert f"oldest readable version is {third}" in gone.stderr
    ok = runner.invoke(app, ["--zk", zk_hosts, "segments", T, "--as-of", str(third)])
    assert ok.exit_code == 0 and f"version {third}" in ok.stdout
    assert m.store.pins.leases(T) == []


def test_a_version_kept_whose_segments_were_cleaned_up_names_the_settings_that_did_it(
    zk_hosts: str, zk_manager: LineageManager, tmp_path: Path
) -> None:
    """Versions kept by the hundred, but a REFRESH table keeps two snapshots'
    segments: the error says the segment was cleaned up and points at the
    retention settings, not at --versions-kept, which was never the limit."""
    m = zk_manager
    m.create_table(TableConfig.build(T, str(tmp_path / "t"), versions_kept=500))
    first = push(m, "a")
    for label in "bcd":
        push(m, label)
    gone = CliRunner().invoke(app, ["--zk", zk_hosts, "segments", T, "--as-of", str(first)])
    assert gone.exit_code == 3, gone.output
    assert "was cleaned up" in gone.stderr and "--max-snapshots" in gone.stderr, gone.stderr
    assert "--versions-kept" not in gone.stderr and "reclaimed" not in gone.stderr, gone.stderr


def test_a_reader_opened_at_a_reclaimed_version_never_reads_a_missing_file(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    m = zk_manager
    files_table(m, tmp_path / "t")
    first = push(m, "a")
    push(m, "b")
    run_table(m, T, NOW)
    with pytest.raises(VersionGoneError):
        SnapshotReader(m, T, as_of=first)
    with SnapshotReader(m, T) as reader:  # the current one is always readable
        assert labels(reader) == ["b"]
    with pytest.raises((VersionGoneError, SnapshotTooOldError)):
        SnapshotReader(m, T, as_of=first).to_arrow()


def test_as_of_a_version_whose_location_was_reclaimed_and_reused_is_too_old(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    """A segment deleted, its file reclaimed, and the same name and location
    registered again (what 'lineage segment add NAME' does) holds other data:
    the old version is too old, never read with the new data."""
    from segment_lineage.ingest.segments import write_segment
    from segment_lineage.lineage.storage.deep import DeepStore

    m = zk_manager
    m.create_table(TableConfig.build("t", str(tmp_path / "t")))
    store = DeepStore.for_root(str(tmp_path / "t"))
    old = write_segment(store, pa.table({"v": ["OLD"]}), "s.parquet", None)
    m.register_segments("t", [Segment("s", "s.parquet", old.rows, old.size_bytes, old.checksum)])
    then = m.table("t").version
    m.delete_segments("t", ["s"])
    run_table(m, "t", PassOptions(force=True, min_grace_ms=0, orphans=False))
    new = write_segment(store, pa.table({"v": ["NEW"]}), "s.parquet", None)
    m.register_segments("t", [Segment("s", "s.parquet", new.rows, new.size_bytes, new.checksum)])
    with pytest.raises(VersionGoneError):
        SnapshotReader(m, "t", as_of=then)


def test_a_reader_whose_table_was_dropped_under_its_lost_pin_says_snapshot_too_old(tmp_path: Path) -> None:
    """A reader whose pin lapsed (its session ended) while its table was
    dropped and its files removed: SnapshotTooOldError naming the drop, not
    a bare "table does not exist" from the look that explains the missing file
    (found by the simulation, seed 130 with push sets in its cast)."""
    import shutil

    m = LineageManager(MemoryStore())
    m.create_table(TableConfig.build("gone", str(tmp_path / "gone")))
    push_arrow(m, "gone", [pa.table({"v": [1, 2]})])
    reader = SnapshotReader(m, "gone")
    m.release(reader.lease)  # as a lapsed session would
    shutil.rmtree(tmp_path / "gone")
    m.drop_table("gone", force=True)
    with pytest.raises(SnapshotTooOldError, match="the table was dropped since"):
        reader.to_arrow()
