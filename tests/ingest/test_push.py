"""The consistent-push protocol with real files: modes, conflicts, failures, readers."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.errors import PushError, PushInputError, PushRefusedError, SnapshotTooOldError
from segment_lineage.ingest.push import (
    PushMode,
    PushTarget,
    Written,
    consistent_push,
    parse_interval,
)
from segment_lineage.ingest.readers import SnapshotReader, arrow_dataset
from segment_lineage.ingest.segments import write_segment
from segment_lineage.lineage.core.errors import (
    ConflictError,
    InvalidInputError,
    RefusedError,
    RunningEntryConflict,
)
from segment_lineage.lineage.core.model import (
    DeletionReason,
    EntryState,
    Operation,
    Segment,
    TableConfig,
    TimeUnit,
)
from segment_lineage.lineage.core.periods import parse_time, parse_version_or_time
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.deep import DeepStore

DAY = 86_400_000


def rows(label: str, n: int, ts0: int = 0, step: int = 1) -> pa.Table:
    return pa.table({"label": [label] * n, "i": list(range(n)), "ts": [ts0 + k * step for k in range(n)]})


def content(m: LineageManager, table: str) -> list[tuple[str, int]]:
    with SnapshotReader(m, table) as reader:
        data = reader.to_arrow()
    if data.num_rows == 0:
        return []
    return sorted(zip(data.column("label").to_pylist(), data.column("i").to_pylist(), strict=True))


@pytest.fixture
def refresh(manager: LineageManager, tmp_path: Path) -> str:
    manager.create_table(TableConfig.build("snap", str(tmp_path / "snap")))
    return "snap"


@pytest.fixture
def appends(manager: LineageManager, tmp_path: Path) -> str:
    manager.create_table(TableConfig.build("log", str(tmp_path / "log"), "APPEND"))
    return "log"


@pytest.fixture
def timed(manager: LineageManager, tmp_path: Path) -> str:
    # Small integers (days after 1970, in ms) fit no unit's plausible window: declared.
    manager.create_table(
        TableConfig.build("events", str(tmp_path / "events"), "APPEND", time_column="ts", time_unit="ms")
    )
    return "events"


def test_refresh_replaces_the_whole_snapshot(manager: LineageManager, refresh: str) -> None:
    first = push_arrow(manager, refresh, [rows("a", 3), rows("a", 2)])
    assert (first.segments, first.rows, first.replaced) == (2, 5, 0)
    assert len(content(manager, refresh)) == 5
    second = push_arrow(manager, refresh, [rows("b", 4)], reason="nightly")
    assert second.replaced == 2
    assert content(manager, refresh) == [("b", i) for i in range(4)]
    entry = manager.table(refresh).entries[second.entry_id]
    assert entry.state is EntryState.COMPLETED and entry.audit.reason == "nightly"


def test_append_adds_atomically(manager: LineageManager, appends: str) -> None:
    push_arrow(manager, appends, [rows("a", 2)])
    push_arrow(manager, appends, [rows("b", 1), rows("c", 1)], mode="append")
    assert [label for label, _ in content(manager, appends)] == ["a", "a", "b", "c"]


def test_an_append_into_a_refresh_table_is_refused_before_anything_is_written(
    manager: LineageManager, refresh: str, tmp_path: Path
) -> None:
    push_arrow(manager, refresh, [rows("a", 2)])
    version = manager.table(refresh).version
    with pytest.raises(PushRefusedError, match=r"append into REFRESH table 'snap'.*--mode refresh"):
        push_arrow(manager, refresh, [rows("b", 1)], mode="append")
    assert manager.table(refresh).version == version
    assert content(manager, refresh) == [("a", 0), ("a", 1)]
    assert len(list((tmp_path / "snap").rglob("*.parquet"))) == 1  # no file of the refused push


def test_replace_range_replaces_exactly_the_interval(manager: LineageManager, timed: str) -> None:
    push_arrow(manager, timed, [rows("d1", 3, 0 * DAY, 1000)], mode="append")
    push_arrow(manager, timed, [rows("d2", 3, 1 * DAY, 1000)], mode="append")
    push_arrow(manager, timed, [rows("d3", 3, 2 * DAY, 1000)], mode="append")
    result = push_arrow(
        manager, timed, [rows("d2-fixed", 2, 1 * DAY, 1000)], mode="replace-range", interval=(DAY, 2 * DAY)
    )
    assert result.replaced == 1
    labels = [label for label, _ in content(manager, timed)]
    assert labels == ["d1"] * 3 + ["d2-fixed"] * 2 + ["d3"] * 3


def test_replace_range_refuses_rows_outside_the_interval_before_writing(
    manager: LineageManager, timed: str, tmp_path: Path
) -> None:
    before = manager.table(timed)
    with pytest.raises(PushRefusedError, match="outside the interval"):
        push_arrow(manager, timed, [rows("x", 3, DAY - 1)], mode="replace-range", interval=(DAY, 2 * DAY))
    assert manager.table(timed) == before
    assert not (tmp_path / "events").exists()


def test_replace_range_refuses_a_segment_straddling_the_edge(manager: LineageManager, timed: str) -> None:
    push_arrow(manager, timed, [rows("wide", 3, DAY - 10, 10)], mode="append")  # spans DAY-10 .. DAY+10
    with pytest.raises(PushRefusedError, match="straddles the interval's edge"):
        push_arrow(manager, timed, [rows("y", 1, DAY)], mode="replace-range", interval=(DAY, 2 * DAY))
    assert [label for label, _ in content(manager, timed)] == ["wide"] * 3


def test_modes_are_checked(manager: LineageManager, refresh: str, timed: str) -> None:
    with pytest.raises(PushRefusedError, match="needs an APPEND table with a time column"):
        push_arrow(manager, refresh, [rows("a", 1)], mode="replace-range", interval=(0, 1))
    with pytest.raises(PushInputError, match="needs --interval"):
        push_arrow(manager, timed, [rows("a", 1)], mode="replace-range")
    with pytest.raises(PushInputError, match="only goes with --mode replace-range"):
        push_arrow(manager, timed, [rows("a", 1)], mode="append", interval=(0, 1))
    version = manager.table(refresh).version
    with pytest.raises(PushRefusedError, match="no rows"):
        push_arrow(manager, refresh, [rows("a", 0)])
    assert manager.table(refresh).version == version and not manager.table(refresh).entries  # not started


def test_overlapping_range_pushes_conflict_on_intent(manager: LineageManager, timed: str) -> None:
    blocker_started = threading.Event()
    release = threading.Event()

    def slow_write(target: PushTarget) -> Written:
        blocker_started.set()
        assert release.wait(30)
        return Written(())

    errors: list[BaseException] = []

    def first_push() -> None:
        try:
            consistent_push(
                manager, timed, slow_write, partitions=1, mode=PushMode.REPLACE_RANGE, interval=(0, 2 * DAY)
            )
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=first_push)
    thread.start()
    try:
        assert blocker_started.wait(30)
        running = next(e for e in manager.table(timed).entries.values() if e.state is EntryState.IN_PROGRESS)
        # Overlapping interval, disjoint (empty) segment sets: still a conflict, naming the entry.
        with pytest.raises(ConflictError, match=f"of running entry {running.entry_id}"):
            push_arrow(
                manager,
                timed,
                [rows("o", 1, DAY)],
                mode="replace-range",
                interval=(DAY, 3 * DAY),
                owner_wait_s=0,
            )
        # Disjoint interval: proceeds while the first is running.
        push_arrow(manager, timed, [rows("d", 1, 5 * DAY)], mode="replace-range", interval=(5 * DAY, 6 * DAY))
        # An append never conflicts with a running replace.
        push_arrow(manager, timed, [rows("app", 2, DAY // 2)], mode="append")
    finally:
        release.set()
        thread.join()
    assert len(errors) == 1 and isinstance(errors[0], PushRefusedError)  # it wrote no rows


def test_two_refreshes_of_an_empty_table_never_both_land(
    manager: LineageManager, refresh: str, timed: str
) -> None:
    """A refresh replaces the whole table, so two never run at once, even on
    a table with no segment yet, where their ``from`` share nothing (an
    outsider's trial: both landed, and the table showed their rows twice).
    A replace-range push meets a running refresh too; an append does not."""
    started, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def slow_write(target: PushTarget) -> Written:
        started.set()
        assert release.wait(30)
        return Written(())

    for table in (refresh, timed):
        started.clear()
        release.clear()

        def first_push(table: str = table) -> None:
            try:
                consistent_push(manager, table, slow_write, partitions=1, mode=PushMode.REFRESH)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=first_push)
        thread.start()
        try:
            assert started.wait(30)
            running = next(
                e for e in manager.table(table).entries.values() if e.state is EntryState.IN_PROGRESS
            )
            assert running.whole
            with pytest.raises(ConflictError, match=f"running entry {running.entry_id} is a refresh"):
                push_arrow(manager, table, [rows("again", 1, DAY)], mode="refresh", owner_wait_s=0)
            if table == timed:
                with pytest.raises(ConflictError, match="a refresh replaces the whole table"):
                    push_arrow(
                        manager, table, [rows("r", 1, DAY)], mode="replace-range", interval=(0, 2 * DAY),
                        owner_wait_s=0,
                    )  # fmt: skip
                push_arrow(manager, table, [rows("app", 1, DAY)], mode="append")  # appends never conflict
        finally:
            release.set()
            thread.join()
    assert len(errors) == 2 and all(isinstance(e, PushRefusedError) for e in errors)  # they wrote no rows
    push_arrow(manager, refresh, [rows("one", 2, DAY)], mode="refresh")
    assert sum(s.rows for s in manager.table(refresh).segments.values()) == 2


def test_an_append_during_a_replace_is_not_lost(manager: LineageManager, timed: str) -> None:
    push_arrow(manager, timed, [rows("old", 2, 10)], mode="append")

    def write_with_an_append_landing_meanwhile(target: PushTarget) -> Written:
        push_arrow(manager, timed, [rows("appended", 1, 20)], mode="append")
        store = DeepStore.for_root(target.root)
        from segment_lineage.ingest.segments import write_segment

        done = write_segment(
            store, rows("new", 3, 30), f"{target.push_dir}/{target.names[0]}.a0.parquet", "ts", TimeUnit.MS
        )
        return Written(
            (
                Segment(
                    target.names[0],
                    done.location,
                    done.rows,
                    done.size_bytes,
                    done.checksum,
                    done.min_time,
                    done.max_time,
                ),
            )
        )

    consistent_push(
        manager,
        timed,
        write_with_an_append_landing_meanwhile,
        partitions=1,
        mode=PushMode.REPLACE_RANGE,
        interval=(0, DAY),
    )
    labels = sorted({label for label, _ in content(manager, timed)})
    assert labels == ["appended", "new"]  # "old" replaced, the append kept


def test_a_failing_writer_reverts_and_queues_what_it_wrote(manager: LineageManager, refresh: str) -> None:
    push_arrow(manager, refresh, [rows("a", 2)])

    def write_then_fail(target: PushTarget) -> Written:
        store = DeepStore.for_root(target.root)
        store.write_bytes(f"{target.push_dir}/partial.parquet", b"half")
        raise RuntimeError("executor lost")

    with pytest.raises(PushError, match="failed and was reverted: RuntimeError: executor lost"):
        consistent_push(manager, refresh, write_then_fail, partitions=2)
    state = manager.table(refresh)
    assert content(manager, refresh) == [("a", 0), ("a", 1)]
    failed = [e for e in state.entries.values() if e.state is EntryState.REVERTED]
    assert len(failed) == 1
    assert manager.store.holds("owner").live(refresh) == frozenset()


def test_a_push_that_wrote_nothing_leaves_no_empty_directory(
    manager: LineageManager, refresh: str, tmp_path: Path
) -> None:
    def make_dirs_then_fail(target: PushTarget) -> Written:
        (tmp_path / "snap" / target.push_dir / "_temporary" / "0").mkdir(parents=True)
        raise RuntimeError("executor lost")

    with pytest.raises(PushError, match="and was reverted"):
        consistent_push(manager, refresh, make_dirs_then_fail, partitions=1)
    leftovers = [p.name for p in (tmp_path / "snap").iterdir() if p.name.startswith("push_")]
    assert leftovers == []


def test_strays_are_queued_for_retention(manager: LineageManager, refresh: str) -> None:
    def write_with_a_failed_attempt(target: PushTarget) -> Written:
        store = DeepStore.for_root(target.root)
        store.write_bytes(f"{target.push_dir}/{target.names[0]}.a0.parquet", b"failed attempt")
        done = write_segment(store, rows("w", 2), f"{target.push_dir}/{target.names[0]}.a1.parquet", None)
        return Written(
            (Segment(target.names[0], done.location, done.rows, done.size_bytes, done.checksum),),
            strays=(f"{target.push_dir}/{target.names[0]}.a0.parquet",),
        )

    consistent_push(manager, refresh, write_with_a_failed_attempt, partitions=1)
    pending = [p for p in manager.table(refresh).pending.values() if p.reason is DeletionReason.STRAY]
    assert len(pending) == 1 and pending[0].location.endswith(".a0.parquet")
    assert content(manager, refresh) == [("w", 0), ("w", 1)]


def test_a_push_is_two_commits_its_start_and_one_that_registers_queues_and_ends(
    manager: LineageManager, refresh: str
) -> None:
    before = manager.table(refresh).version

    def write_with_a_failed_attempt(target: PushTarget) -> Written:
        store = DeepStore.for_root(target.root)
        store.write_bytes(f"{target.push_dir}/{target.names[0]}.a0.parquet", b"failed attempt")
        done = write_segment(store, rows("w", 2), f"{target.push_dir}/{target.names[0]}.a1.parquet", None)
        return Written(
            (Segment(target.names[0], done.location, done.rows, done.size_bytes, done.checksum),),
            strays=(f"{target.push_dir}/{target.names[0]}.a0.parquet",),
        )

    result = consistent_push(manager, refresh, write_with_a_failed_attempt, partitions=2)
    new = [(h.operation, h.entry_id, h.rows) for h in manager.history(refresh) if h.version > before]
    assert new == [
        (Operation.END_REPLACE, result.entry_id, 2),
        (Operation.START_REPLACE, result.entry_id, 0),
    ]
    state = manager.table(refresh)
    entry = state.entries[result.entry_id]
    assert entry.state is EntryState.COMPLETED and len(entry.segments_to) == 1  # the subset written
    assert [p.reason for p in state.pending.values()] == [DeletionReason.STRAY]


def test_a_refused_last_commit_registers_nothing_and_queues_no_live_file(
    manager: LineageManager, refresh: str
) -> None:
    push_arrow(manager, refresh, [rows("a", 2)])
    live = next(iter(manager.visible_segments(refresh)))

    def write_naming_a_live_file_as_stray(target: PushTarget) -> Written:
        store = DeepStore.for_root(target.root)
        done = write_segment(store, rows("b", 1), f"{target.push_dir}/{target.names[0]}.parquet", None)
        return Written(
            (Segment(target.names[0], done.location, done.rows, done.size_bytes, done.checksum),),
            strays=(live.location,),
        )

    with pytest.raises(RefusedError, match="belongs to registered segment"):
        consistent_push(manager, refresh, write_naming_a_live_file_as_stray, partitions=1)
    state = manager.table(refresh)
    assert content(manager, refresh) == [("a", 0), ("a", 1)]
    assert live.location not in state.pending
    assert {s.name for s in state.segments.values()} == {live.name}
    assert [p.reason for p in state.pending.values()] == [DeletionReason.STRAY]  # the push's own upload


def test_a_reader_keeps_its_snapshot_and_detects_reclaimed_files(
    manager: LineageManager, refresh: str
) -> None:
    push_arrow(manager, refresh, [rows("a", 2)])
    data, reader = arrow_dataset(manager, refresh)
    push_arrow(manager, refresh, [rows("b", 2)])
    assert sorted(data.to_table().column("label").to_pylist()) == ["a", "a"]  # still the pinned one
    assert [i.lease_id for i in manager.store.pins.leases(refresh)] == [reader.lease.lease_id]
    # Files reclaimed from under a reader (as if its lease had been lost):
    store = DeepStore.for_root(manager.table(refresh).config.root)
    for seg in reader.segments:
        assert store.delete(seg.location)
    third = push_arrow(manager, refresh, [rows("c", 1)])  # a's segments are proactively cleaned up
    assert third.replaced == 1
    with pytest.raises(SnapshotTooOldError, match="snapshot too old"):
        reader.to_arrow()
    reader.close()
    assert manager.store.pins.leases(refresh) == []


def test_intervals_parse() -> None:
    assert parse_interval("ms:0/ms:86400000") == (0, DAY)
    assert parse_interval("2026-11-01/2026-11-02") == (
        parse_time("2026-11-01T00:00:00Z"),
        parse_time("2026-11-02T00:00:00+00:00"),
    )
    assert parse_interval("2013-02/2013-03") == (parse_time("2013-02-01"), parse_time("2013-03-01"))
    new_york = parse_interval("2013-02-01T00:00:00-05:00/2013-03-01T00:00:00-05:00")
    assert new_york[0] - parse_time("2013-02-01") == 5 * 3_600_000
    for bad in [
        "",
        "2026-11-01",
        "b/a",
        "2026-11-02/2026-11-01",
        "x/y",
        "0/86400000",
        "\uff12\uff10\uff11\uff13-02-01/2013-03",
    ]:
        with pytest.raises(InvalidInputError, match="invalid interval"):
            parse_interval(bad)


def test_a_time_finer_than_a_millisecond_is_refused_not_cut() -> None:
    """Times are kept in milliseconds: a nanosecond start cut down would
    widen a replace-range over rows the user left out."""
    assert parse_time("2026-11-04T00:00:00.123Z") == parse_time("2026-11-04") + 123
    assert parse_time("2026-11-04T00:00:00.123000Z") == parse_time("2026-11-04") + 123  # zeros say nothing
    assert parse_time("2026-11-04T00:00:00,5Z") == parse_time("2026-11-04") + 500
    assert parse_time("1969-12-31T23:59:59.999Z") == -1
    for bad in [
        "2026-11-04T00:00:00.123456789Z",
        "2026-11-04T00:00:00.0001",
        "2026-11-04T00:00:00.000000001Z",
    ]:
        with pytest.raises(InvalidInputError, match="finer than a millisecond"):
            parse_time(bad)
    with pytest.raises(InvalidInputError, match="finer than a millisecond"):
        parse_interval("2026-11-04T00:00:00.123456789Z/2026-11-05")
    # A zone offset's fraction of a second, which the parser drops (the
    # time would be off by it), and a fraction after the first one:
    for bad in ["2026-01-01T00:00:00+00:00:00.5", "2026-01-01T00:00:00.001+00:00:00.0005"]:
        with pytest.raises(InvalidInputError, match="finer than a"):
            parse_time(bad)
    assert parse_time("2026-01-01T00:00:00+00:00:30") == parse_time("2026-01-01") - 30_000


def test_a_version_or_time_has_one_spelling() -> None:
    """Digits are ASCII digits (int() reads Arabic-Indic ones as a version
    too), and ms: takes the number right after it."""
    assert parse_version_or_time(" 123 ") == (123, None)
    assert parse_version_or_time("ms:-5") == (None, -5)
    for bad in ["\u0661\u0662\u0663", "ms: 5", "ms:+5", "\uff11\uff12"]:
        with pytest.raises(InvalidInputError):
            parse_version_or_time(bad)


def test_a_writer_failing_partway_queues_every_file_it_wrote(
    manager: LineageManager, refresh: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    push_arrow(manager, refresh, [rows("a", 2)])
    monkeypatch.setenv("LINEAGE_FAILPOINT", "push.mid-write:raise")
    with pytest.raises(PushError, match="and was reverted"):
        push_arrow(manager, refresh, [rows("b", 2), rows("b", 2)])
    state = manager.table(refresh)
    queued = [p for p in state.pending.values() if p.reason is DeletionReason.STRAY]
    assert len(queued) == 1 and queued[0].location.endswith(".a0.parquet")
    assert content(manager, refresh) == [("a", 0), ("a", 1)]


def test_a_failure_at_the_last_commit_queues_the_uploads(
    manager: LineageManager, refresh: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    push_arrow(manager, refresh, [rows("a", 2)])
    monkeypatch.setenv("LINEAGE_FAILPOINT", "end.before-commit:raise")
    with pytest.raises(PushError):
        push_arrow(manager, refresh, [rows("b", 1), rows("b", 1)])
    state = manager.table(refresh)
    # Nothing of the push was registered; its two uploads wait for retention.
    assert {s.name for s in state.segments.values()} == {s.name for s in manager.visible_segments(refresh)}
    assert content(manager, refresh) == [("a", 0), ("a", 1)]
    queued = [p for p in state.pending.values() if p.reason is DeletionReason.STRAY]
    assert len(queued) == 2 and all(p.location.endswith(".parquet") for p in queued)


def test_a_push_starting_meanwhile_is_not_mistaken_for_a_dead_one(
    manager: LineageManager, timed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uuid as uuid_

    real_read = manager.store.read
    competitor = str(uuid_.uuid4())
    calls = {"n": 0}

    def read_with_a_competitor_arriving(table: str, **kw: bool) -> object:
        calls["n"] += 1
        if calls["n"] == 2:  # after our push read the table, before its start commits
            manager.store.holds("owner").hold(timed, competitor)
            manager.start_replace(timed, [], ["c1"], entry_id=competitor, interval=(0, DAY))
        return real_read(table, **kw)

    monkeypatch.setattr(manager.store, "read", read_with_a_competitor_arriving)
    with pytest.raises(ConflictError, match=f"of running entry {competitor}"):
        push_arrow(
            manager, timed, [rows("o", 1, 10)], mode="replace-range", interval=(0, DAY), owner_wait_s=0
        )
    assert manager.table(timed).entries[competitor].state is EntryState.IN_PROGRESS


def test_nulls_do_not_hide_rows_outside_the_interval(manager: LineageManager, timed: str) -> None:
    with pytest.raises(PushRefusedError, match="1 row\\(s\\) of the input have no 'ts'"):
        push_arrow(
            manager,
            timed,
            [pa.table({"label": ["n", "n"], "i": [0, 1], "ts": [None, 5000]})],
            mode="replace-range",
            interval=(0, 1000),
        )


def test_registered_segments_must_fit_their_entrys_interval(manager: LineageManager, timed: str) -> None:
    entry = manager.start_replace(timed, [], ["r1"], interval=(0, DAY))
    from segment_lineage.lineage.core.errors import RefusedError

    with pytest.raises(RefusedError, match="outside the interval"):
        manager.register_segments(
            timed, [Segment("r1", "r1.parquet", min_time=0, max_time=DAY)], entry_id=entry
        )


def test_sub_millisecond_timestamps_convert() -> None:
    from segment_lineage.ingest.segments import time_as_ms

    for unit, value in (("s", 2), ("ms", 2000), ("us", 2_000_999), ("ns", 2_000_999_999)):
        array = pa.chunked_array([pa.array([value], pa.timestamp(unit, tz="UTC"))])
        assert time_as_ms(array).to_pylist() == [2000]


def test_arrow_dataset_on_reclaimed_files_says_too_old_and_releases(
    manager: LineageManager, refresh: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from segment_lineage.lineage.store.contract import Lease

    push_arrow(manager, refresh, [rows("a", 2)])
    with SnapshotReader(manager, refresh) as old_reader:
        old = old_reader.lease.state
        old_segments = old_reader.segments
    push_arrow(manager, refresh, [rows("b", 2)])
    push_arrow(manager, refresh, [rows("c", 2)])  # "a" is reclaimed proactively
    store = DeepStore.for_root(manager.table(refresh).config.root)
    for seg in old_segments:
        store.delete(seg.location)
    real_pin = manager.pin_readable

    def pin_the_old_version(table: str, version: int | None = None) -> Lease:
        lease = real_pin(table, version)
        # A reader that pinned "a" long ago (verified then), whose files went all the same:
        return Lease(table, lease.lease_id, old)

    monkeypatch.setattr(manager, "pin_readable", pin_the_old_version)
    with pytest.raises(SnapshotTooOldError):
        arrow_dataset(manager, refresh)
    assert manager.store.pins.leases(refresh) == []


def test_file_roots_with_a_host_are_refused() -> None:
    from segment_lineage.ingest.errors import StorageError

    with pytest.raises(StorageError, match="use file:///absolute/path"):
        DeepStore.for_root("file://tmp/x")
    assert DeepStore.for_root("file:///tmp/x").base == "/tmp/x"


def test_a_push_names_the_stale_entries_it_cleans_up_and_spares_one_opened_by_hand(
    manager: LineageManager, refresh: str
) -> None:
    push_arrow(manager, refresh, [rows("a", 2)])
    visible = [s.name for s in manager.visible_segments(refresh)]
    by_hand = manager.start_replace(refresh, visible, ["manual_1"], reason="operator's fix")
    before = manager.table(refresh)
    with pytest.raises(ConflictError, match=f"entry {by_hand} overlaps this push and was opened by hand"):
        push_arrow(manager, refresh, [rows("b", 1)], owner_wait_s=0)
    after = manager.table(refresh)
    assert after.entries[by_hand] == before.entries[by_hand]  # the operator's entry is untouched
    manager.revert_replace(refresh, by_hand, force=True)
    dead = manager.start_replace(refresh, visible, ["dead_1"], hold="0s")  # a push whose process died
    said: list[str] = []
    result = push_arrow(manager, refresh, [rows("b", 1)], progress=said.append)
    assert result.cleaned == (dead,)
    assert f"cleaned up stale entry {dead}" in result.summary()
    assert any(dead in line for line in said)
    start = next(h for h in manager.history(refresh) if h.operation.value == "START_REPLACE")
    assert start.entry_id == result.entry_id and start.cleaned == (dead,)
    assert content(manager, refresh) == [("b", 0)]


def test_a_push_reads_time_only_through_the_clocks_it_is_given(manager: LineageManager, refresh: str) -> None:
    """The owner wait runs on the given clock and sleep (no real waiting), the
    segment names carry the given wall clock's stamp, and the result's
    duration is measured on the given clock."""
    push_arrow(manager, refresh, [rows("a", 1)])
    visible = [s.name for s in manager.visible_segments(refresh)]
    running = manager.start_replace(refresh, visible, ["other_1"], hold="0s")
    manager.store.holds("owner").hold(refresh, running)  # its pusher is alive
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    wall = 1_749_945_600.25  # 2025-06-15T00:00:00.250Z
    clocks = {"clock": lambda: now[0], "sleep": sleep, "wall": lambda: wall}
    began = time.monotonic()
    with pytest.raises(RunningEntryConflict, match=running):
        push_arrow(manager, refresh, [rows("b", 1)], owner_wait_s=3, **clocks)
    assert time.monotonic() - began < 2  # waited on the given clock, not the real one
    assert sum(slept) >= 3 and all(s == 0.5 for s in slept)
    manager.store.holds("owner").release(refresh, running)
    before = now[0]
    result = push_arrow(manager, refresh, [rows("b", 1)], owner_wait_s=0, **clocks)
    assert result.seconds == 0.0 and now[0] == before  # nothing waited
    assert [s.name.split("_")[1] for s in manager.visible_segments(refresh)] == ["20250615T000000250Z"]
    assert result.cleaned == (running,)  # its owner is gone now: cleaned up


# ---- job ids: a retried job never applies its data twice ------------------------


def test_a_retried_job_returns_its_earlier_result_instead_of_pushing_again(
    manager: LineageManager, appends: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from segment_lineage.lineage.core import transitions

    push_arrow(manager, appends, [rows("a", 2)])
    # The answer is lost: the push completed, its caller saw an error.
    monkeypatch.setenv("LINEAGE_FAILPOINT", "push.after-end:raise")
    with pytest.raises(PushError, match="but its entry had completed"):
        push_arrow(manager, appends, [rows("b", 1)], mode="append", job_id="nightly-42")
    monkeypatch.delenv("LINEAGE_FAILPOINT")
    landed = next(e for e in manager.table(appends).entries.values() if e.audit.job_id == "nightly-42")
    assert landed.state is EntryState.COMPLETED
    version = manager.table(appends).version
    again = push_arrow(manager, appends, [rows("b", 1)], mode="append", job_id="nightly-42")
    assert again.repeated and again.entry_id == landed.entry_id
    assert (again.segments, again.rows, again.replaced) == (1, 1, 0)
    assert "already pushed" in again.summary()
    assert manager.table(appends).version == version  # nothing committed
    assert content(manager, appends) == [("a", 0), ("a", 1), ("b", 0)]  # b once, not twice
    # Still recognised once retention removed the finished entry (its end is in history).
    manager.commit(appends, lambda s, now: transitions.retention_mark(s, {}, [landed.entry_id], now))
    assert landed.entry_id not in manager.table(appends).entries
    later = push_arrow(manager, appends, [rows("b", 1)], mode="append", job_id="nightly-42")
    assert later.repeated and later.entry_id == landed.entry_id and later.rows == 1
    assert content(manager, appends) == [("a", 0), ("a", 1), ("b", 0)]
    other = push_arrow(manager, appends, [rows("c", 1)], mode="append", job_id="nightly-43")
    assert not other.repeated and other.job_id == "nightly-43"
    assert manager.table(appends).entries[other.entry_id].audit.job_id == "nightly-43"


def test_a_job_whose_attempt_failed_pushes_again(manager: LineageManager, refresh: str) -> None:
    def fail(target: PushTarget) -> Written:
        raise RuntimeError("executor lost")

    with pytest.raises(PushError):
        consistent_push(manager, refresh, fail, partitions=1, job_id="j1")
    result = push_arrow(manager, refresh, [rows("a", 1)], job_id="j1")
    assert not result.repeated and content(manager, refresh) == [("a", 0)]


def test_a_job_waits_for_its_running_attempt_and_one_completing_meanwhile_wins(
    manager: LineageManager, appends: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = manager.for_job("j2").start_replace(appends, [], ["other_attempt"], hold="0s")
    manager.store.holds("owner").hold(appends, running)
    with pytest.raises(ConflictError, match=f"job 'j2' is already running as entry {running}"):
        push_arrow(manager, appends, [rows("a", 1)], mode="append", job_id="j2", owner_wait_s=0)
    manager.store.holds("owner").release(appends, running)
    # Another attempt completes between this one's look at the history and its start.
    real_read = manager.store.read
    calls = {"n": 0}
    winner: dict[str, str] = {}

    def read_with_the_other_attempt_finishing(table: str, **kw: bool) -> object:
        calls["n"] += 1
        if calls["n"] == 2:
            m = manager.for_job("j3")
            entry = m.start_replace(appends, [], ["winner_0"], hold="0s")
            m.register_segments(appends, [Segment("winner_0", "winner_0.parquet", rows=5)], entry_id=entry)
            m.end_replace(appends, entry)
            winner["entry"] = entry
        return real_read(table, **kw)

    monkeypatch.setattr(manager.store, "read", read_with_the_other_attempt_finishing)
    result = push_arrow(manager, appends, [rows("a", 1)], mode="append", job_id="j3")
    monkeypatch.undo()
    assert result.repeated and result.entry_id == winner["entry"] and result.rows == 5
    assert [s.name for s in manager.visible_segments(appends)] == ["winner_0"]


@pytest.mark.parametrize("bad", ["", " j", "j\n", "x" * 257])
def test_bad_job_ids_are_refused_before_anything_changes(
    manager: LineageManager, refresh: str, bad: str
) -> None:
    before = manager.table(refresh)
    with pytest.raises(InvalidInputError, match="job id"):
        push_arrow(manager, refresh, [rows("a", 1)], job_id=bad)
    assert manager.table(refresh) == before


def test_the_push_command_with_a_completed_job_id_pushes_nothing_again(
    zk_manager: LineageManager, zk_hosts: str, tmp_path: Path
) -> None:
    import json

    from typer.testing import CliRunner

    from segment_lineage.cli import app

    zk_manager.create_table(TableConfig.build("jobs", str(tmp_path / "jobs"), "APPEND"))
    first = push_arrow(zk_manager, "jobs", [rows("a", 3)], mode="append", job_id="daily-7")
    version = zk_manager.table("jobs").version
    args = [
        "--zk",
        zk_hosts,
        "--json",
        "push",
        "jobs",
        "--input",
        str(tmp_path / "never-read"),
        "--mode",
        "append",
    ]
    result = CliRunner().invoke(app, [*args, "--job-id", "daily-7"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["repeated"] is True and out["entry"] == first.entry_id and out["rows"] == 3
    assert zk_manager.table("jobs").version == version
    bad = CliRunner().invoke(app, [*args, "--job-id", " daily-7"])
    assert bad.exit_code == 2 and "invalid job id" in bad.stderr


def test_a_push_whose_input_is_a_tables_root_or_holds_one_is_refused(zk_hosts: str, tmp_path: Path) -> None:
    """Pushing a table's own root read every segment file under it, replaced
    ones too, and brought hidden rows back; an input inside any table's root,
    or holding one, is refused (a dry run too, a push set too), and nothing
    changes. A folder beside the roots is pushed as ever."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.helpers.run import cli, cli_history

    lake = tmp_path / "lake"
    assert cli(zk_hosts, "table", "create", "rr", "--root", str(lake / "rr"))[0] == 0
    for label in ("x", "y"):
        source = tmp_path / "in" / label
        source.mkdir(parents=True)
        pq.write_table(pa.table({"label": [label] * 3}), source / "part.parquet")
        assert cli(zk_hosts, "push", "rr", "--input", str(source), "--engine", "arrow")[0] == 0
    (lake / "rr" / "nested").mkdir()
    linked = {}  # an input of its own files and a link its readers follow (an outside trial's bypass)
    a_file = next((lake / "rr").rglob("*.parquet"))
    for name, target in (("into", lake / "rr" / "nested"), ("above", lake), ("file", a_file)):
        folder = tmp_path / f"linked-{name}" / "deep"
        folder.mkdir(parents=True)
        pq.write_table(pa.table({"label": ["z"]}), folder / "part.parquet")
        (folder / "sub").symlink_to(target)
        linked[name] = folder.parent
    before = cli_history(zk_hosts, "rr")
    for given, says in (
        (lake / "rr", "lies inside the root of table 'rr'"),
        (lake / "rr" / "nested", "lies inside the root of table 'rr'"),
        (lake, "holds the root of table 'rr'"),
        (str(lake / "rr") + "/*/*.parquet", "lies inside the root of table 'rr'"),
        (linked["into"], "leading into the root of table 'rr'"),
        (linked["above"], "leading to a folder that holds the root of table 'rr'"),
        (linked["file"], "leading into the root of table 'rr'"),
    ):
        for dry in ([], ["--dry-run"]):
            code, _, err = cli(zk_hosts, "push", "rr", "--input", str(given), "--engine", "arrow", *dry)
            assert code == 2 and says in err, (given, err)
    spec = tmp_path / "set.toml"
    spec.write_text(f'[[push]]\ntable = "rr"\ninput = "{lake / "rr"}"\n')
    code, _, err = cli(zk_hosts, "push-set", str(spec), "--engine", "arrow")
    assert code == 2 and "lies inside the root of table 'rr'" in err, err
    assert cli_history(zk_hosts, "rr") == before
    code, out, _ = cli(zk_hosts, "read", "rr", "--limit", "10")
    assert code == 0 and "x" not in out.split() and out.split().count("y") == 3, out


def test_a_push_whose_output_reader_goes_away_still_lands(zk_hosts: str, tmp_path: Path) -> None:
    """`lineage push ... 2>&1 | head -1`: the progress lines meet a closed
    pipe; the push goes on and lands (it was reverted for a BrokenPipeError
    in a progress line), with no traceback."""
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.helpers.run import cli, cli_history

    assert cli(zk_hosts, "table", "create", "pp", "--root", str(tmp_path / "pp"))[0] == 0
    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(pa.table({"label": ["x"] * 30}), source / "part.parquet")
    lineage = Path(sys.executable).parent / "lineage"
    push = f"'{lineage}' --zk '{zk_hosts}' push pp --input '{source}' --engine arrow --segments 3"
    line = f"{push} 2>&1 | head -1"
    done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.startswith("engine: arrow") and "Traceback" not in done.stdout + done.stderr, done
    assert [r["operation"] for r in cli_history(zk_hosts, "pp")][:2] == ["END_REPLACE", "START_REPLACE"]
