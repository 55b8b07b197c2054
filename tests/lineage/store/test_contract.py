"""The contract suite: every test runs on the in-memory store and on real ZooKeeper.

It covers the store's promises (create-if-absent, one consistent version per
read, compare-and-set, history, own-commit recognition, drop) and Pinot's
lineage scenarios through the manager.
"""

from __future__ import annotations

import time
import uuid

import pytest

from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import (
    ConflictError,
    EntryNotFoundError,
    InvalidInputError,
    MirrorHeldError,
    RefusedError,
    SegmentNotFoundError,
    StoreUnavailableError,
    TableExistsError,
    TableNotFoundError,
    VersionGoneError,
)
from segment_lineage.lineage.core.model import (
    Change,
    DeletionReason,
    EntryState,
    Operation,
    Segment,
    TableConfig,
)
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.store.contract import LOCK, VersionConflict

T = "events"


def seg(name: str, rows: int = 10) -> Segment:
    return Segment(name, f"{name}.parquet", rows=rows, size_bytes=rows * 100)


def visible(m: LineageManager, table: str = T) -> list[str]:
    return [s.name for s in m.visible_segments(table)]


@pytest.fixture
def table(manager: LineageManager) -> str:
    manager.create_table(TableConfig.build(T, "/data/events"))
    manager.register_segments(T, [seg("s1"), seg("s2"), seg("s3")])
    return T


def push(m: LineageManager, src: list[str], dst: list[str], **kw: object) -> str:
    entry = m.start_replace(T, src, dst, **kw)  # type: ignore[arg-type]
    if dst:
        m.register_segments(T, [seg(n) for n in dst])
    m.end_replace(T, entry)
    return entry


# ---- store contract ---------------------------------------------------------------


def test_create_is_create_if_absent_and_refuses_case_twins(manager: LineageManager) -> None:
    manager.create_table(TableConfig.build("Orders", "/d/orders"))
    with pytest.raises(TableExistsError, match="already exists"):
        manager.create_table(TableConfig.build("Orders", "/d/other"))
    with pytest.raises(TableExistsError, match="differs only in case"):
        manager.create_table(TableConfig.build("orders", "/d/other"))
    assert manager.table("Orders").config.root == "/d/orders"
    assert manager.list_tables() == ["Orders"]
    manager.create_table(TableConfig.build("Bids", "/d/bids"))
    listing = manager.table_listing()
    assert (listing.readable, dict(listing.unreadable)) == (("Bids", "Orders"), {})


def test_unknown_table_is_a_clear_error(manager: LineageManager) -> None:
    with pytest.raises(TableNotFoundError, match="'nope' does not exist"):
        manager.table("nope")
    with pytest.raises(TableNotFoundError):
        manager.register_segments("nope", [seg("a")])


def test_every_commit_bumps_the_version_and_writes_history(manager: LineageManager, table: str) -> None:
    entry = push(manager, ["s1"], ["n1"])
    state = manager.table(T)
    history = manager.history(T)
    assert [h.version for h in history] == list(range(state.version, 0, -1))
    assert [h.operation for h in history[:3]] == [
        Operation.END_REPLACE,
        Operation.REGISTER,
        Operation.START_REPLACE,
    ]
    assert history[0].entry_id == entry and history[0].actor == "tester@host"
    assert manager.history(T, limit=2) == history[:2]


def test_a_read_brings_the_versions_newest_history_records(manager: LineageManager, table: str) -> None:
    """``Snapshot.recent``: the history's newest records, newest first, the
    first the version read's own, as far as the store has them at hand;
    every read of a version (read, read_now, read_now_many) brings the same."""
    for n in range(40):  # past a tail that restarts: 16 in memory; 64 on ZooKeeper's head
        push(manager, [], [f"m{n}"])
        history = manager.history(T)
        for snap in (
            manager.store.read(T),
            manager.store.read_now(T)[0],
            manager.store.read_now_many([T])[0][0],
        ):
            assert snap.recent, "the version's own record at least"
            assert list(snap.recent) == history[: len(snap.recent)]
            assert snap.recent[0].version == snap.state.version


def test_read_now_is_a_read_and_then_the_clock(manager: LineageManager, table: str) -> None:
    store = manager.store
    before = store.now_ms()
    snap, now = store.read_now(table)
    after = store.now_ms()
    assert snap.state.version == store.read(table).state.version
    assert before <= now <= after
    with pytest.raises(TableNotFoundError):
        store.read_now("no_such_table")


def test_read_version_now_is_a_past_version_with_a_commits_read(manager: LineageManager, table: str) -> None:
    """A rollback's read: the version asked, and the table's current version
    with its queue and the clock, as ``read_now`` gives them."""
    store = manager.store
    past = store.read(table).state.version
    push(manager, ["s1"], ["s4"])
    before = store.now_ms()
    state, snap, now = store.read_version_now(table, past)
    after = store.now_ms()
    assert state.version == past and sorted(state.segments) == ["s1", "s2", "s3"]
    assert snap.state.version == store.read(table).state.version > past
    assert snap.queue == () and before <= now <= after
    with pytest.raises(VersionGoneError):
        store.read_version_now(table, 10**6)
    with pytest.raises(TableNotFoundError):
        store.read_version_now("no_such_table", 1)


def test_read_now_many_reads_each_table_with_its_queue_and_the_clock(
    manager: LineageManager, table: str
) -> None:
    store = manager.store
    manager.create_table(TableConfig.build("second", "/d2"))
    ticket = store.queues.join("second", "c1")
    before = store.now_ms()
    read = store.read_now_many([table, "second", table])
    after = store.now_ms()
    assert [snap.state.config.name for snap, _ in read] == [table, "second", table]
    version = store.read(table).state.version
    assert [snap.state.version for snap, _ in read] == [version, 1, version]
    assert read[1][0].queue == (ticket,) and read[0][0].queue == ()
    assert all(before <= now <= after for _, now in read)
    with pytest.raises(TableNotFoundError):
        store.read_now_many([table, "no_such_table"])


def test_the_commit_queue_keeps_tickets_in_order_until_they_leave(
    manager: LineageManager, table: str
) -> None:
    store = manager.store
    first, second = store.queues.join(table, "c1"), store.queues.join(table, "c2")
    assert first is not None and second is not None
    assert store.read_now(table)[0].queue == (first, second)
    assert store.queues.await_turn(table, first, 0.0) is False  # still there
    store.queues.leave(table, first)
    assert store.queues.await_turn(table, first, 0.0) is True
    assert store.read_now(table)[0].queue == (second,)
    store.queues.leave(table, second)
    store.queues.leave(table, second)  # twice: nothing to do
    assert store.read_now(table)[0].queue == ()
    with pytest.raises(TableNotFoundError):
        store.queues.join("no_such_table", "c3")


def test_a_stale_snapshot_cannot_be_swapped_in(manager: LineageManager, table: str) -> None:
    store = manager.store
    stale = store.read(T)
    manager.register_segments(T, [seg("other")])
    change = transitions.register_segments(stale.state, [seg("late")], store.now_ms())
    with pytest.raises(VersionConflict):
        store.write(T, stale, change, manager.audit(), uuid.uuid4().hex, store.now_ms())
    assert "late" not in manager.table(T).segments


def test_find_commit_recognises_only_its_own_write(manager: LineageManager, table: str) -> None:
    store = manager.store
    before = store.read(T)
    done = manager.register_segments(T, [seg("mine")])
    found = store.find_commit(T, done.commit_id, before.state.version)
    assert found is not None and found.version == before.state.version + 1
    assert store.find_commit(T, uuid.uuid4().hex, 0) is None
    assert store.find_commit(T, done.commit_id, found.version) is None


def test_drop_refuses_a_table_with_segments_unless_forced(manager: LineageManager, table: str) -> None:
    with pytest.raises(RefusedError, match="still has 3 segment"):
        manager.drop_table(T)
    manager.drop_table(T, force=True)
    with pytest.raises(TableNotFoundError):
        manager.table(T)
    manager.create_table(TableConfig.build(T, "/again"))  # the name is free again
    assert manager.table(T).segments == {}


def test_bad_input_changes_nothing(manager: LineageManager, table: str) -> None:
    before = manager.table(T)
    for call in (
        lambda: manager.register_segments(T, [seg("../evil")]),
        lambda: manager.register_segments(T, [Segment("x", "/etc/passwd")]),
        lambda: manager.register_segments(T, [Segment("y", "y.parquet", rows=-1)]),
        lambda: manager.start_replace(T, [], []),
        lambda: manager.start_replace(T, ["s1", "s1"], ["n"]),
        lambda: manager.end_replace(T, "not-a-uuid"),
    ):
        with pytest.raises(InvalidInputError):
            call()
    assert manager.table(T) == before


# ---- Pinot's scenarios -------------------------------------------------------------


def test_regular_replacement_hides_new_segments_until_end(manager: LineageManager, table: str) -> None:
    entry = manager.start_replace(T, ["s1", "s2"], ["n1"], reason="nightly")
    manager.register_segments(T, [seg("n1")])
    assert visible(manager) == ["s1", "s2", "s3"]
    done = manager.end_replace(T, entry)
    assert done.applied
    assert visible(manager) == ["n1", "s3"]
    e = manager.table(T).entries[entry]
    assert e.state is EntryState.COMPLETED and e.audit.reason == "nightly"
    assert manager.table(T).segments["n1"].entry_id == entry


def test_end_is_idempotent(manager: LineageManager, table: str) -> None:
    entry = push(manager, ["s1"], ["n1"])
    version = manager.table(T).version
    again = manager.end_replace(T, entry)
    assert not again.applied and manager.table(T).version == version


def test_complete_is_idempotent_and_refuses_other_uploads(manager: LineageManager, table: str) -> None:
    entry = manager.start_replace(T, ["s1"], ["n1"])
    done = manager.complete_replace(T, entry, [seg("n1")], strays=["tmp/n1.a0.parquet"])
    assert done.applied and manager.table(T).entries[entry].state is EntryState.COMPLETED
    version = manager.table(T).version
    again = manager.complete_replace(T, entry, [seg("n1")], strays=["tmp/n1.a0.parquet"])
    assert not again.applied and manager.table(T).version == version
    moved = Segment("n1", "elsewhere/n1.parquet", rows=10, size_bytes=1000)
    with pytest.raises(RefusedError, match="is COMPLETED"):
        manager.complete_replace(T, entry, [moved])
    assert manager.table(T).version == version


def test_complete_ends_uploads_registered_earlier_and_refuses_a_reverted_entry(
    manager: LineageManager, table: str
) -> None:
    entry = manager.start_replace(T, ["s1"], ["n1"])
    manager.register_segments(T, [seg("n1")], entry_id=entry)
    manager.complete_replace(T, entry, [])
    assert {s.name for s in manager.visible_segments(T)} == {"n1", "s2", "s3"}
    reverted = manager.start_replace(T, ["s2"], ["n2"])
    manager.revert_replace(T, reverted, force=True)
    version = manager.table(T).version
    with pytest.raises(RefusedError, match="was reverted and cannot be completed"):
        manager.complete_replace(T, reverted, [seg("n2")])
    assert manager.table(T).version == version


def test_end_refuses_unregistered_to_and_missing_entry(manager: LineageManager, table: str) -> None:
    entry = manager.start_replace(T, ["s1"], ["n1", "n2"])
    manager.register_segments(T, [seg("n1")])
    with pytest.raises(RefusedError, match=r"n2 of entry .* are not registered"):
        manager.end_replace(T, entry)
    with pytest.raises(EntryNotFoundError):
        manager.end_replace(T, str(uuid.uuid4()))


def test_end_with_a_subset_of_to(manager: LineageManager, table: str) -> None:
    entry = manager.start_replace(T, ["s1"], ["n1", "n2", "n3"])
    manager.register_segments(T, [seg("n1"), seg("n2")])
    with pytest.raises(RefusedError, match="not in segmentsTo"):
        manager.end_replace(T, entry, ["n1", "zz"])
    manager.end_replace(T, entry, ["n1"])
    state = manager.table(T)
    assert state.entries[entry].segments_to == ("n1",)
    assert visible(manager) == ["n1", "s2", "s3"]
    # n2 was uploaded but left out: its file goes to retention, never visible.
    assert state.pending["n2.parquet"].reason is DeletionReason.END_SUBSET


def test_refresh_with_a_third_snapshot_cleans_the_oldest(manager: LineageManager, table: str) -> None:
    push(manager, ["s1", "s2", "s3"], ["a1", "a2"])
    assert manager.table(T).pending == {}
    manager.start_replace(T, ["a1", "a2"], ["b1"])
    # Snapshots kept: b (new) and a (current); s (previous) is one too many.
    state = manager.table(T)
    assert {p.segment for p in state.pending.values()} == {"s1", "s2", "s3"}
    assert all(p.reason is DeletionReason.PROACTIVE_CLEANUP for p in state.pending.values())
    assert visible(manager) == ["a1", "a2"]


def test_max_snapshots_three_keeps_one_more(manager: LineageManager) -> None:
    manager.create_table(TableConfig.build("three", "/d/three", max_snapshots=3))
    manager.register_segments("three", [seg("s1")])
    for src, dst in ((["s1"], ["a1"]), (["a1"], ["b1"])):
        entry = manager.start_replace("three", src, dst)
        manager.register_segments("three", [seg(n) for n in dst])
        manager.end_replace("three", entry)
    assert manager.table("three").pending == {}
    manager.start_replace("three", ["b1"], ["c1"])
    assert {p.segment for p in manager.table("three").pending.values()} == {"s1"}


def test_refused_revert_of_a_chained_entry(manager: LineageManager) -> None:
    manager.create_table(TableConfig.build("chain", "/d/chain", "APPEND"))
    manager.register_segments("chain", [seg("s1"), seg("s2")])

    def run(src: list[str], dst: list[str]) -> str:
        entry = manager.start_replace("chain", src, dst)
        manager.register_segments("chain", [seg(n) for n in dst])
        manager.end_replace("chain", entry)
        return entry

    first = run(["s1"], ["n1"])
    second = run(["n1"], ["m1"])
    with pytest.raises(RefusedError, match=f"replaced again by entry {second}"):
        manager.revert_replace("chain", first)
    manager.revert_replace("chain", second)
    assert visible(manager, "chain") == ["n1", "s2"]
    manager.revert_replace("chain", first)
    assert visible(manager, "chain") == ["s1", "s2"]


def test_revert_rules(manager: LineageManager, table: str) -> None:
    running = manager.start_replace(T, ["s1"], ["n1"])
    with pytest.raises(RefusedError, match="IN_PROGRESS"):
        manager.revert_replace(T, running)
    manager.revert_replace(T, running, force=True)
    with pytest.raises(RefusedError, match="already reverted"):
        manager.revert_replace(T, running)
    with pytest.raises(RefusedError, match="was reverted and cannot be completed"):
        manager.end_replace(T, running)
    assert visible(manager) == ["s1", "s2", "s3"]


def test_revert_of_a_completed_entry_whose_replaced_segments_are_gone(
    manager: LineageManager, table: str
) -> None:
    entry = push(manager, ["s1"], ["n1"])
    # Only retention removes replaced segments; emulate its outcome directly.
    store = manager.store
    snap = store.read(T)
    segments = dict(snap.state.segments)
    del segments["s1"]
    store.write(
        T,
        snap,
        Change(snap.state.replace(segments=segments), Operation.DELETE),
        manager.audit(),
        uuid.uuid4().hex,
        store.now_ms(),
    )
    with pytest.raises(RefusedError, match="replaced segments s1 were deleted"):
        manager.revert_replace(T, entry)


def test_force_cleanup_rerun_reuses_names(manager: LineageManager, table: str) -> None:
    # Opened with no hold: Pinot's rule, any force cleanup may take it.
    stale = manager.start_replace(T, ["s1", "s2"], ["n1", "n2", "n3"], hold="0s")
    manager.register_segments(T, [seg("n1"), seg("n3")])
    with pytest.raises(ConflictError, match=f"already being replaced by entry {stale}"):
        manager.start_replace(T, ["s1"], ["n1"])
    done = manager.open_replace(T, ["s1", "s2"], ["n1", "n2"], force_cleanup=True)
    rerun = done.change.entry_id
    assert done.change.cleaned == (stale,)
    state = manager.table(T)
    old = state.entries[stale]
    assert old.state is EntryState.REVERTED and old.segments_to == ("n3",)
    # Like Pinot, the upload the rerun names again is kept, now the rerun's;
    # only the one it does not reuse is queued for retention.
    assert state.segments["n1"].entry_id == rerun and "n1.parquet" not in state.pending
    assert "n3" not in state.segments
    assert state.pending["n3.parquet"].reason is DeletionReason.FORCE_CLEANUP
    assert manager.history(T, limit=1)[0].cleaned == (stale,)
    # A retry uploads it again, at the same location: it takes the old one's place.
    manager.register_segments(T, [seg("n1", rows=7), Segment("n2", "rerun/n2.parquet", rows=1)])
    assert manager.table(T).segments["n1"].rows == 7
    manager.end_replace(T, rerun)
    assert visible(manager) == ["n1", "n2", "s3"]


def test_force_cleanup_keeps_a_reused_upload(manager: LineageManager, table: str) -> None:
    stale = manager.start_replace(T, ["s1"], ["n1", "n2"], hold="0s")
    manager.register_segments(T, [seg("n1"), seg("n2")])
    rerun = manager.start_replace(T, ["s1"], ["n2", "n4"], force_cleanup=True)
    manager.register_segments(T, [Segment("n4", "n4.parquet")])
    manager.end_replace(T, rerun)  # n2 is still registered: end takes it
    assert visible(manager) == ["n2", "n4", "s2", "s3"]
    state = manager.table(T)
    assert state.entries[stale].segments_to == ("n1",) and state.pending["n1.parquet"].segment == "n1"
    # A re-upload somewhere else replaces the registration and queues the old file.
    other = manager.start_replace(T, ["s2"], ["x1"], hold="0s")
    manager.register_segments(T, [seg("x1")])
    manager.register_segments(T, [Segment("x1", "retry/x1.parquet")], entry_id=other)
    state = manager.table(T)
    assert state.segments["x1"].location == "retry/x1.parquet"
    assert state.pending["x1.parquet"].reason is DeletionReason.STRAY
    # Only hidden uploads of a running replacement can be uploaded again.
    with pytest.raises(RefusedError, match="already registered"):
        manager.register_segments(T, [Segment("n2", "again/n2.parquet")])


def test_force_cleanup_removes_a_stale_entry_whose_names_are_all_reused(
    manager: LineageManager, table: str
) -> None:
    stale = manager.start_replace(T, ["s1"], ["n1"], hold="0s")
    manager.start_replace(T, ["s1"], ["n1"], force_cleanup=True)
    assert stale not in manager.table(T).entries


def test_force_cleanup_spares_an_entry_opened_by_hand_until_its_hold_ends(
    manager: LineageManager, table: str
) -> None:
    by_hand = manager.start_replace(T, ["s1"], ["n1"], reason="manual fix")
    entry = manager.table(T).entries[by_hand]
    assert entry.held_until_ms == entry.created_ms + 86_400_000  # the table's entry cleanup retention
    before = manager.table(T)
    # A push's force cleanup (no owner node for it) must not take it.
    with pytest.raises(ConflictError, match=f"entry {by_hand} overlaps this push and was opened by hand"):
        manager.start_replace(T, ["s1", "s2"], ["m1"], force_cleanup=True, live_owners=frozenset())
    assert manager.table(T) == before
    short = manager.start_replace(T, ["s2"], ["n2"], hold="1s")
    with pytest.raises(ConflictError, match="opened by hand"):
        manager.start_replace(T, ["s2"], ["m2"], force_cleanup=True, live_owners=frozenset())
    deadline = manager.store.now_ms() + 1500
    while manager.store.now_ms() < deadline:
        time.sleep(0.1)
    done = manager.open_replace(T, ["s2"], ["m2"], force_cleanup=True, live_owners=frozenset())
    assert done.change.cleaned == (short,)
    assert manager.table(T).entries[short].state is EntryState.REVERTED
    assert manager.history(T, limit=1)[0].cleaned == (short,)
    with pytest.raises(InvalidInputError, match="invalid period"):
        manager.start_replace(T, ["s3"], ["n3"], hold="soon")


def test_name_conflicts(manager: LineageManager, table: str) -> None:
    manager.start_replace(T, ["s1"], ["n1"])
    with pytest.raises(ConflictError, match="already named by entry"):
        manager.start_replace(T, ["s2"], ["n1"])
    with pytest.raises(ConflictError, match="already exist"):
        manager.start_replace(T, ["s2"], ["s3"])
    with pytest.raises(RefusedError, match="not visible"):
        manager.start_replace(T, ["ghost"], ["n9"])


def test_empty_from_is_an_atomic_add(manager: LineageManager, table: str) -> None:
    entry = manager.start_replace(T, [], ["a1", "a2"])
    manager.register_segments(T, [seg("a1"), seg("a2")], entry_id=entry)
    assert visible(manager) == ["s1", "s2", "s3"]
    manager.end_replace(T, entry)
    assert visible(manager) == ["a1", "a2", "s1", "s2", "s3"]


def test_empty_to_is_an_atomic_delete(manager: LineageManager, table: str) -> None:
    entry = manager.start_replace(T, ["s1", "s2"], [])
    assert visible(manager) == ["s1", "s2", "s3"]
    manager.end_replace(T, entry)
    assert visible(manager) == ["s3"]


def test_segments_of_a_reverted_entry_cannot_be_registered(manager: LineageManager, table: str) -> None:
    entry = manager.start_replace(T, ["s1"], ["n1"])
    manager.revert_replace(T, entry, force=True)
    with pytest.raises(RefusedError, match="belongs to reverted entry"):
        manager.register_segments(T, [seg("n1")])
    with pytest.raises(RefusedError, match="only be added to an IN_PROGRESS entry"):
        manager.register_segments(T, [seg("n2")], entry_id=entry)


def test_exclusive_delete_refuses_locked_segments(manager: LineageManager, table: str) -> None:
    entry = manager.start_replace(T, ["s1"], ["n1"])
    with pytest.raises(RefusedError, match=f"locked by lineage entry {entry}") as exc:
        manager.delete_segments(T, ["s1", "s3"])
    assert exc.value.remedy is not None and "end or revert" in exc.value.remedy
    assert "s3" in manager.table(T).segments  # the whole batch was refused
    manager.delete_segments(T, ["s3"])
    state = manager.table(T)
    assert "s3" not in state.segments and state.pending["s3.parquet"].reason is DeletionReason.DELETED
    with pytest.raises(SegmentNotFoundError):
        manager.delete_segments(T, ["s3"])


def test_exclusive_delete_can_be_turned_off(manager: LineageManager) -> None:
    manager.create_table(TableConfig.build("loose", "/d/loose", exclusive_delete=False))
    manager.register_segments("loose", [seg("a")])
    manager.start_replace("loose", ["a"], ["b"])
    manager.delete_segments("loose", ["a"])
    assert "a" not in manager.table("loose").segments


def test_register_refuses_duplicates_and_case_twins(manager: LineageManager, table: str) -> None:
    with pytest.raises(RefusedError, match="already registered"):
        manager.register_segments(T, [seg("s1")])
    with pytest.raises(RefusedError, match="differs only in case"):
        manager.register_segments(T, [seg("S1")])
    with pytest.raises(RefusedError, match="is used by segment"):
        manager.register_segments(T, [Segment("other", "s1.parquet")])


def test_reverted_names_need_force_cleanup_to_be_reused(manager: LineageManager, table: str) -> None:
    entry = push(manager, ["s1"], ["n1"])
    manager.revert_replace(T, entry)
    with pytest.raises(ConflictError, match="belong to reverted entry"):
        manager.start_replace(T, ["s1"], ["n1"])
    rerun = manager.start_replace(T, ["s1"], ["n1"], force_cleanup=True)
    manager.register_segments(T, [Segment("n1", "rerun/n1.parquet")])
    manager.end_replace(T, rerun)
    assert visible(manager) == ["n1", "s2", "s3"]


def test_time_ranges_need_a_time_column(manager: LineageManager) -> None:
    manager.create_table(TableConfig.build("timed", "/d/timed", "APPEND", time_column="ts"))
    manager.register_segments("timed", [Segment("a", "a.parquet", min_time=1, max_time=5)])
    assert manager.table("timed").segments["a"].max_time == 5
    with pytest.raises(InvalidInputError, match=r"min time 1970-01-01T00:00:00\.009Z is after max time"):
        manager.register_segments("timed", [Segment("b", "b.parquet", min_time=9, max_time=5)])
    manager.create_table(TableConfig.build("untimed", "/d/untimed"))
    with pytest.raises(InvalidInputError, match="no time column"):
        manager.register_segments("untimed", [Segment("c", "c.parquet", min_time=1, max_time=2)])


def test_a_late_upload_of_a_name_left_out_at_end_is_refused(manager: LineageManager, table: str) -> None:
    entry = manager.start_replace(T, ["s1"], ["x", "y"])
    manager.register_segments(T, [seg("x")])
    manager.end_replace(T, entry, ["x"])
    with pytest.raises(RefusedError, match="belongs to reverted entry"):
        manager.register_segments(T, [seg("y")])
    assert visible(manager) == ["s2", "s3", "x"]
    with pytest.raises(InvalidInputError, match="empty subset"):
        manager.end_replace(T, manager.start_replace(T, ["s2"], ["z"]), [])


def test_names_still_listed_as_replaced_cannot_come_back(manager: LineageManager, table: str) -> None:
    push(manager, ["s1", "s2", "s3"], ["a"])
    push(manager, ["a"], ["b"])  # s1..s3 are cleaned up proactively, still named by entry 1
    with pytest.raises(RefusedError, match="still listed as replaced"):
        manager.register_segments(T, [Segment("s1", "again/s1.parquet")])
    with pytest.raises(ConflictError, match="still listed as replaced"):
        manager.start_replace(T, ["b"], ["s1"])
    assert visible(manager) == ["b"]


def test_locations_and_names_are_unique_case_insensitively(manager: LineageManager, table: str) -> None:
    with pytest.raises(RefusedError, match="is used by segment 's1'"):
        manager.register_segments(T, [Segment("other", "S1.parquet")])
    with pytest.raises(ConflictError, match="case twin"):
        manager.start_replace(T, ["s2"], ["S3"])


def test_a_write_racing_a_drop_makes_the_drop_recheck(
    manager: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager.create_table(TableConfig.build("racy", "/d/racy"))
    real = manager.store.drop_table
    raced = {"n": 0}

    def register_first(*args: object, **kw: object) -> None:
        if raced["n"] == 0:
            raced["n"] += 1
            manager.register_segments("racy", [seg("late")])  # acknowledged before the drop
        real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(manager.store, "drop_table", register_first)
    with pytest.raises(RefusedError, match="still has 1 segment"):
        manager.drop_table("racy")
    assert "late" in manager.table("racy").segments


def test_errors_after_an_unknown_outcome_are_reported_as_unknown(
    manager: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    from segment_lineage.lineage.core.errors import OutcomeUnknownError, StoreUnavailableError
    from segment_lineage.lineage.store.contract import WriteOutcomeUnknown

    manager.create_table(TableConfig.build("shaky", "/d/shaky"))
    real_write, real_read = manager.store.write, manager.store.read
    state = {"written": False}

    def write_and_lose_reply(*args: object, **kw: object) -> object:
        real_write(*args, **kw)  # type: ignore[arg-type]
        state["written"] = True
        raise WriteOutcomeUnknown("reply lost")

    def read_fails_after_write(table: str, **kw: bool) -> object:
        if state["written"]:
            raise StoreUnavailableError("connection down")
        return real_read(table, **kw)

    monkeypatch.setattr(manager.store, "write", write_and_lose_reply)
    monkeypatch.setattr(manager.store, "read", read_fails_after_write)
    with pytest.raises(OutcomeUnknownError, match="is unknown"):
        manager.register_segments("shaky", [seg("maybe")])


def test_an_unknown_outcome_tells_its_own_cause_not_a_later_attempts(
    manager: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reply of the first attempt was lost; later attempts were not even
    sent: the error says why the outcome is unknown, not "nothing was sent"."""
    from segment_lineage.lineage.core.errors import OutcomeUnknownError
    from segment_lineage.lineage.store.contract import RetryableStoreError, WriteOutcomeUnknown

    manager.create_table(TableConfig.build("shaky", "/d/shaky"))
    sent: list[int] = []

    def lost_then_unsent(*args: object, **kw: object) -> object:
        sent.append(1)
        if len(sent) == 1:
            raise WriteOutcomeUnknown("the reply was lost")
        raise RetryableStoreError("ZooKeeper is still unreachable; nothing was sent")

    monkeypatch.setattr(manager.store, "write", lost_then_unsent)
    monkeypatch.setattr(manager.store, "find_commit", lambda *a, **k: None)
    with pytest.raises(OutcomeUnknownError, match=r"is unknown \(the reply was lost\)") as unknown:
        manager.register_segments("shaky", [seg("maybe")])
    assert len(sent) > 1 and "nothing was sent" not in unknown.value.message
    assert "lineage history" in (unknown.value.remedy or "")


# ---- intents, push owners, leases -------------------------------------------------


def test_overlapping_replace_range_intents_conflict_even_with_no_segments(manager: LineageManager) -> None:
    manager.create_table(TableConfig.build("ranged", "/d/ranged", "APPEND", time_column="ts"))
    first = manager.start_replace("ranged", [], ["a"], interval=(0, 100))
    with pytest.raises(ConflictError, match=f"overlaps interval .* of running entry {first}"):
        manager.start_replace("ranged", [], ["b"], interval=(50, 150))
    manager.start_replace("ranged", [], ["c"], interval=(100, 200))  # disjoint: fine
    manager.start_replace("ranged", [], ["d"])  # an append never conflicts
    assert manager.table("ranged").entries[first].interval == (0, 100)
    with pytest.raises(InvalidInputError, match="is empty"):
        manager.start_replace("ranged", [], ["e"], interval=(300, 300))
    manager.create_table(TableConfig.build("plain", "/d/plain"))
    with pytest.raises(InvalidInputError, match="no time column"):
        manager.start_replace("plain", [], ["x"], interval=(0, 1))


def test_force_cleanup_spares_a_push_whose_owner_is_alive(manager: LineageManager, table: str) -> None:
    running = manager.start_replace(T, ["s1"], ["n1"], hold="0s")
    manager.store.holds("owner").hold(T, running)
    assert manager.store.holds("owner").live(T) == frozenset({running})
    with pytest.raises(ConflictError, match="still running"):
        manager.start_replace(
            T, ["s1"], ["m1"], force_cleanup=True, live_owners=manager.store.holds("owner").live(T)
        )
    manager.store.holds("owner").release(T, running)
    assert manager.store.holds("owner").live(T) == frozenset()
    manager.start_replace(T, ["s1"], ["m1"], force_cleanup=True, live_owners=frozenset())
    assert manager.table(T).entries[running].state is EntryState.REVERTED


def test_force_cleanup_takes_an_abandoned_entry_it_shares_nothing_with(
    manager: LineageManager, table: str
) -> None:
    """An append whose pusher died overlaps no later push: a push's force
    cleanup (live owners known) takes it all the same, once nobody owns or
    holds it; with the owners unknown (Pinot's rule) only overlaps go."""
    dead = manager.start_replace(T, [], ["a1"], hold="0s")
    alive = manager.start_replace(T, [], ["a2"], hold="0s")
    manager.store.holds("owner").hold(T, alive)
    by_hand = manager.start_replace(T, [], ["a3"])  # held for the table's entry cleanup retention
    manager.start_replace(T, [], ["b1"], force_cleanup=True)  # owners unknown: nothing taken
    assert manager.table(T).entries[dead].state is EntryState.IN_PROGRESS
    done = manager.open_replace(
        T, [], ["b2"], force_cleanup=True, live_owners=manager.store.holds("owner").live(T)
    )
    assert done.change.cleaned == (dead,)
    entries = manager.table(T).entries
    assert entries[dead].state is EntryState.REVERTED
    assert entries[alive].state is EntryState.IN_PROGRESS and entries[by_hand].state is EntryState.IN_PROGRESS
    manager.store.holds("owner").release(T, alive)


def test_leases_pin_a_version_until_released(manager: LineageManager, table: str) -> None:
    lease = manager.store.pins.pin(T)
    assert [s for s in lease.state.segments] == ["s1", "s2", "s3"]
    manager.register_segments(T, [seg("later")])
    infos = manager.store.pins.leases(T)
    assert [(i.lease_id, i.version) for i in infos] == [(lease.lease_id, lease.state.version)]
    manager.store.pins.release(lease)
    assert manager.store.pins.leases(T) == []


def test_a_pin_can_read_the_table_once_its_lease_exists(manager: LineageManager, table: str) -> None:
    """``look``: the table as read after the lease was made (a version a
    commit made meanwhile shows there, not in the pinned state)."""
    pinned = manager.table(T).version
    lease = manager.store.pins.pin(T, look=True)
    assert lease.state.version == pinned and lease.after is not None
    assert lease.after.version == pinned and sorted(lease.after.segments) == ["s1", "s2", "s3"]
    manager.register_segments(T, [seg("later")])
    past = manager.store.pins.pin(T, pinned, look=True)  # a past version: read after its lease too
    assert past.state.version == pinned and past.after is not None and past.after.version == pinned + 1
    assert "later" in past.after.segments and "later" not in past.state.segments
    assert manager.store.pins.pin(T).after is None  # not asked: not read
    for each in (lease, past):
        manager.store.pins.release(each)
    assert [i.version for i in manager.store.pins.leases(T)] == [pinned + 1]


def test_a_hold_answers_with_the_clock_while_it_stands(manager: LineageManager, table: str) -> None:
    """``holds_now``: the store's clock while this client holds it, None once
    it does not (released, or gone with the table)."""
    store = manager.store
    for kind, name in (("mirror", LOCK), ("pass", LOCK), ("owner", push(manager, [], ["o1"]))):
        holds = store.holds(kind)  # type: ignore[arg-type]
        assert holds.holds_now(T, name) is None
        holds.hold(T, name)
        before = store.now_ms()
        now = holds.holds_now(T, name)
        assert now is not None and before <= now <= store.now_ms()
        holds.release(T, name)
        assert holds.holds_now(T, name) is None
    store.holds("mirror").hold(T)
    manager.drop_table(T, force=True)
    assert store.holds("mirror").holds_now(T) is None


def test_a_drop_calls_back_once_the_table_is_marked_and_again_when_finished_later(
    manager: LineageManager, table: str
) -> None:
    """While a drop's call back runs, the table is gone to readers and
    writers but its name and root stay taken; a call back that fails leaves
    the drop to be run again, which calls it again and finishes."""
    seen: list[tuple[str | None, str | None]] = []

    def fails(root: str | None, config: TableConfig | None) -> None:
        seen.append((root, None if config is None else config.name))
        with pytest.raises(TableNotFoundError):
            manager.table(T)
        with pytest.raises((TableExistsError, RefusedError)):
            manager.create_table(TableConfig.build(T, "/data/elsewhere"))
        with pytest.raises(RefusedError):
            manager.create_table(TableConfig.build("other", "/data/events"))  # its root: still taken
        raise OSError("deep storage unreachable")

    with pytest.raises(OSError):
        manager.drop_table(T, force=True, on_marked=fails)
    assert seen == [("/data/events", T)]
    with pytest.raises(TableNotFoundError, match="is being dropped") as left:
        manager.table(T)
    assert left.value.remedy == f"finish the drop: lineage table drop {T} --force"
    manager.drop_table(T, force=True, on_marked=lambda root, config: seen.append((root, None)))
    assert seen[1] == ("/data/events", None)  # called again, with the root
    with pytest.raises(TableNotFoundError):
        manager.drop_table(T)
    manager.create_table(TableConfig.build(T, "/data/events"))  # free again


def test_a_mirror_hold_is_one_holders_until_released_and_goes_with_the_table(
    manager: LineageManager, table: str
) -> None:
    store = manager.store
    with pytest.raises(TableNotFoundError):
        store.holds("mirror").hold("nope")
    store.holds("mirror").hold(T)
    assert store.holds("mirror").holds(T)
    with pytest.raises(MirrorHeldError):
        store.holds("mirror").hold(T)  # held: not again, not even by its own holder
    store.holds("mirror").release(T)
    assert not store.holds("mirror").holds(T)
    store.holds("mirror").hold(T)
    manager.drop_table(T, force=True)
    assert not store.holds("mirror").holds(T)  # dropped with the table
    store.holds("mirror").release(T)  # and releasing what is gone is no error


def test_queue_files_refuses_registered_segments(manager: LineageManager, table: str) -> None:
    done = manager.commit(T, lambda s, now: transitions.queue_files(s, ["push/x.a1.parquet"], now))
    assert done.state.pending["push/x.a1.parquet"].reason is DeletionReason.STRAY
    with pytest.raises(RefusedError, match="belongs to registered segment 's1'"):
        manager.commit(T, lambda s, now: transitions.queue_files(s, ["s1.parquet"], now))


def test_pinned_states_rebuild_what_readers_hold(manager: LineageManager, table: str) -> None:
    lease = manager.store.pins.pin(T)
    entry = push(manager, ["s1", "s2", "s3"], ["n1"])
    pinned = manager.store.pins.pinned_states(T)
    assert [p.version for p in pinned] == [lease.state.version]
    assert sorted(pinned[0].segments) == ["s1", "s2", "s3"] and entry not in pinned[0].entries
    manager.store.pins.release(lease)
    assert manager.store.pins.pinned_states(T) == []


def test_an_election_leads_in_join_order_and_forgets_who_leaves(manager: LineageManager) -> None:
    store = manager.store
    session = store.session.id()
    assert session is not None and store.session.alive(session) and store.session.connected()
    store.session.confirm()
    assert store.elections.members("retention") == []
    first = store.elections.join("retention", "host-a:1")
    second = store.elections.join("retention", "hôst-b:2")
    assert store.elections.members("retention") == [first, second]
    member = store.elections.member("retention", second)
    assert member is not None and member.identity == "hôst-b:2" and member.session == session
    store.elections.leave("retention", first)
    store.elections.leave("retention", first)  # gone already: fine
    assert store.elections.members("retention") == [second]
    assert store.elections.member("retention", first) is None
    assert store.elections.members("other") == []


def test_a_leader_holds_its_term_until_it_resigns(manager: LineageManager) -> None:
    from segment_lineage.lineage.core.env import Env
    from segment_lineage.lineage.store.election import Leadership

    store = manager.store
    now = [0.0]
    # A join whose answer was lost leaves a member of this candidate first in
    # line: the candidate removes it rather than wait behind itself forever.
    leader = Leadership(store, "retention", "a", env=Env(monotonic=lambda: now[0]))
    joined: list[str] = []
    real_join = store.elections.join

    def lost_answer(role: str, identity: str) -> str:
        joined.append(real_join(role, identity))
        if len(joined) == 1:
            raise StoreUnavailableError("the answer was lost")
        return joined[-1]

    store.elections.join = lost_answer  # type: ignore[method-assign]
    try:
        assert leader.check() is None  # the join's answer was lost
        other = Leadership(store, "retention", "b", env=Env(monotonic=lambda: now[0]))  # same session
        assert leader.check() is None and leader.leader_identity == "a"
        assert joined[0] not in store.elections.members("retention")
        assert other.check() is None and other.leader_identity == "a"
    finally:
        del store.elections.join
    store.elections.leave("retention", store.elections.members("retention")[-1])
    term = leader.check()
    assert term is not None and leader.leading and leader.holds(term)
    now[0] += store.session.timeout_s  # past the trust window: it asks again, and still leads
    assert leader.holds(term)
    leader.resign()
    assert not leader.holds(term) and store.elections.members("retention") == []
    again = leader.check()
    assert again is not None and again != term  # a new term


def test_the_floor_is_taken_by_compare_and_set_and_fails_writes_that_read_before(
    manager: LineageManager, table: str
) -> None:
    store = manager.store
    before = store.read(T)
    assert before.floor is None or before.floor.holder is None
    assert store.floors.take(T, before.floor, "big", store.now_ms() + 30_000)
    assert not store.floors.take(T, before.floor, "other", store.now_ms() + 30_000)  # stale: refused
    taken = store.read(T).floor
    assert taken is not None and taken.holder == "big" and taken.held_against("small", store.now_ms(), 60_000)
    assert not taken.held_against("big", store.now_ms(), 60_000)
    change = transitions.register_segments(before.state, [seg("late")], store.now_ms())
    with pytest.raises(VersionConflict):  # read before the floor was taken
        store.write(T, before, change, manager.audit(), uuid.uuid4().hex, store.now_ms())
    store.floors.leave(T, "small")  # not the holder: nothing happens
    assert store.read(T).floor == taken
    store.floors.leave(T, "big")
    left = store.read(T).floor
    assert left is not None and left.holder is None
    manager.register_segments(T, [seg("after")])  # a fresh read commits


def test_no_map_a_commit_or_a_read_hands_out_can_be_edited(manager: LineageManager) -> None:
    """A version's segments, entries and pending deletions are frozen
    whatever made them (a table's first, empty maps; a start that cleans
    nothing up and passes maps on; a map a transition built anew): an edit
    raises TypeError and the table stays as it was."""
    from typing import cast

    manager.create_table(TableConfig.build(T, "/data/events", "REFRESH"))
    manager.create_table(TableConfig.build("appends", "/data/appends", "APPEND"))
    handed = [
        manager.open_replace("appends", [], ["a"], hold="1h").state,  # the first, empty maps passed on
        manager.register_segments(T, [seg("s1")]).state,
        manager.open_replace(T, ["s1"], ["s2"], hold="1h").state,  # entries built anew
        manager.table(T),
        manager.snapshot(T).state,
    ]
    before = {(t, k): sorted(getattr(manager.table(t), k)) for t in (T, "appends") for k in MAPS}
    for state in handed:
        for kind in MAPS:
            records = cast("dict[str, object]", getattr(state, kind))
            for edit in (
                lambda records=records: records.clear(),
                lambda records=records: records.__setitem__("ghost", None),
                lambda records=records: records.update({"ghost": None}),
                lambda records=records: records.pop("ghost", None),
            ):
                with pytest.raises((TypeError, AttributeError)):  # frozen, or a map with no edits at all
                    edit()
    after = {(t, k): sorted(getattr(manager.table(t), k)) for t in (T, "appends") for k in MAPS}
    assert after == before


MAPS = ("segments", "entries", "pending")
