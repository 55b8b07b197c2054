"""Round trips to ZooKeeper, counted: a fresh client's first contact, a
rollback from a fresh client and from a warm one, a push's second commit.

A round trip here is a batch of requests sent before the first answer is
awaited: requests sent together and then awaited count once, however many
they are (ZooKeeper answers a pipelined batch in one round trip). Counted
on this thread only, so a background pass cannot blur the count.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.handlers.utils import AsyncResult

from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import StoreUnavailableError
from segment_lineage.lineage.core.model import Change, Segment, TableConfig, TableState
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.manager.together import Together
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.store import ZkStore
from segment_lineage.lineage.zk.store import blobs as blobs_module
from segment_lineage.lineage.zk.store.blobs import BlobStore
from tests.conftest import fast_retry

T = "rt"


class Rounds:
    """The batches of requests this thread sent, each a list of (request, path)."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, str]]] = []
        self._awaited = True
        self.thread = threading.current_thread()

    def sent(self, request: Any) -> None:
        if threading.current_thread() is not self.thread:
            return
        if self._awaited:
            self.batches.append([])
            self._awaited = False
        self.batches[-1].append((type(request).__name__, str(getattr(request, "path", ""))))

    def awaited(self) -> None:
        if threading.current_thread() is self.thread:
            self._awaited = True

    def __len__(self) -> int:
        return len(self.batches)

    def __str__(self) -> str:
        return "\n".join(f"{i}: {batch}" for i, batch in enumerate(self.batches, 1))


@pytest.fixture
def rounds(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``with rounds() as counted:``: the round trips made inside the block."""
    counting: list[Rounds] = []
    real_call, real_get = KazooClient._call, AsyncResult.get

    def call(self: KazooClient, request: Any, async_object: Any) -> Any:
        for r in counting:
            r.sent(request)
        return real_call(self, request, async_object)

    def get(self: AsyncResult, block: bool = True, timeout: float | None = None) -> Any:
        for r in counting:
            r.awaited()
        return real_get(self, block, timeout)

    monkeypatch.setattr(KazooClient, "_call", call)
    monkeypatch.setattr(AsyncResult, "get", get)

    @contextmanager
    def count() -> Iterator[Rounds]:
        counted = Rounds()
        counting.append(counted)
        try:
            yield counted
        finally:
            counting.remove(counted)

    yield count


def seg(name: str) -> Segment:
    return Segment(name, f"{name}.parquet", rows=1)


@pytest.fixture
def m(zk_store: ZkStore) -> LineageManager:
    manager = LineageManager(zk_store, retry=fast_retry())
    manager.create_table(TableConfig.build(T, "/d"))
    manager.register_segments(T, [seg(f"s{i:04d}") for i in range(2000)])  # name lists in chunks
    return manager


def push_one(m: LineageManager, name: str) -> int:
    """A one-row push; the version before it."""
    before = m.table(T).version
    entry = m.start_replace(T, [], [name])
    m.complete_replace(T, entry, [seg(name)])
    return before


def test_a_fresh_clients_rollback_takes_five_round_trips_at_most(
    m: LineageManager, zk_hosts: str, rounds: Any
) -> None:
    """The policy with the shared nodes (the role is checked before
    anything is read); the target's record with the head and the rest of
    the commit's read (its floor, queue and the clock); both versions'
    entries and the buckets where they differ; the name chunks; the commit
    (six with the commit's read apart; ten before: each of those apart, and
    the versions folder asked before the first commit)."""
    target = push_one(m, "extra")
    store = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        with rounds() as counted:
            plan = LineageManager(store).rollback(T, target)
        assert plan.committed_version == target + 3  # the push was two commits
        assert len(counted) <= 5, str(counted)
        contact, read = ({path.rsplit("/", 1)[-1] for _, path in batch} for batch in counted.batches[:2])
        assert {"acl", "tables", "names", "clock"} <= contact, contact  # the first contact: one round trip
        # The commit's read goes with the version's: one round trip.
        assert {T, f"v-{target:010d}", "floor", "queue", "clock"} <= read, read
    finally:
        store.close()
    assert "extra" not in {s.name for s in m.visible_segments(T)}


def test_a_warm_clients_rollback_takes_two_round_trips(m: LineageManager, rounds: Any) -> None:
    """The target's record with the head and the commit's read, then the
    commit: the writer knows what it wrote (its entries and name chunks
    too). Three before, the commit's read apart."""
    target = push_one(m, "extra")
    with rounds() as counted:
        m.rollback(T, target)
    assert len(counted) == 2, str(counted)


def test_a_fresh_clients_read_of_a_whole_table_fetches_its_buckets_together(
    m: LineageManager, zk_hosts: str, rounds: Any
) -> None:
    """The head; then every bucket of every kind at once (entries,
    segments, pending deletions), and the entries' name chunks: three round
    trips, where loading kind by kind took one per kind after the head's
    entries (five here). A CLI command that reads a table is such a client."""
    push_one(m, "extra")
    m.delete_segments(T, ["s0001", "s0002"])  # pending deletions: a third kind to load
    store = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        with rounds() as counted:
            state = LineageManager(store).table(T)
        assert len(state.segments) == 1999 and len(state.pending) == 2 and state.entries
        kinds = {
            kind: len(ids) for kind, ids in store.heads.read_head(T)[0].buckets.items()
        }  # more than one bucket of segments: the fetch is not trivially one blob
        assert kinds["segments"] > 1, kinds
        assert len(counted) <= 3, str(counted)
    finally:
        store.close()


def test_a_register_of_many_segments_loads_the_buckets_it_rewrites_together(
    m: LineageManager, rounds: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Segments landing in every bucket, on the version this writer wrote
    (its records known, the buckets it wrote gone from its cache, as a
    writer's are on a large table): the buckets the commit rewrites are
    loaded in one round trip, not one each (a 1,000-segment push into a
    table of 100,000 spent 1.5 s there, 26 s at 1,000,000)."""
    monkeypatch.setattr(blobs_module, "CACHE_RECORDS", 10)
    m.register_segments(T, [seg("first")])
    count = len(m.store.heads.read_head(T)[0].buckets["segments"])
    assert count > 4, count  # enough buckets that one load each would show
    with rounds() as counted:
        m.register_segments(T, [seg(f"n{i:04d}") for i in range(20 * count)])
    blobs = [batch for batch in counted.batches if all("/blobs/" in path for _, path in batch)]
    assert len(blobs) <= 1, str(counted)  # one each before
    assert len(m.table(T).segments) == 2001 + 20 * count


def test_a_pushs_second_commit_reads_no_blob(m: LineageManager, rounds: Any) -> None:
    """The push's end reads the version its start wrote: the writer has every
    blob of it already, so the end is its read and its multi."""
    entry = m.start_replace(T, [], ["late"])
    with rounds() as counted:
        m.complete_replace(T, entry, [seg("late")])
    assert len(counted) == 2, str(counted)


def test_a_table_made_before_versions_were_recorded_gets_its_folder_at_its_first_commit(
    m: LineageManager, zk_hosts: str
) -> None:
    """The folder is made when a commit finds it missing (it is not asked
    before every client's first commit): the commit lands, once."""
    store = m.store
    assert isinstance(store, ZkStore)
    folder = f"{store.paths.head(T)}/versions"
    store.client.delete(folder, recursive=True)
    fresh = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        before = m.table(T).version
        LineageManager(fresh).register_segments(T, [seg("after")])
        assert m.table(T).version == before + 1
        assert store.client.get_children(folder) == [f"v-{before + 1:010d}"]
        assert LineageManager(fresh).table_as_of(T, before + 1).segments["after"].location == "after.parquet"
    finally:
        fresh.close()


def test_a_set_commits_reads_go_out_together(m: LineageManager, rounds: Any) -> None:
    """A set commit of five tables: every table's head, floor and queue and
    the clock in one round trip; the blobs of the versions this client has
    not built yet, every table's in one more; then the multi. Each table
    was read apart before: five round trips, and two more for each table
    not built yet."""
    names = [f"set{i}" for i in range(5)]
    for name in names:
        m.create_table(TableConfig.build(name, f"/{name}"))

    def register(name: str, segment: str) -> Any:
        def update(state: TableState, now: int) -> Change:
            return transitions.register_segments(state, [seg(f"{name}_{segment}")], now_ms=now)

        return update

    with rounds() as cold:
        done = m.commit_together([Together(name, register(name, "a")) for name in names])
    assert [c.state.version for c in done] == [2] * 5
    assert len(cold) == 3, str(cold)
    assert len(cold.batches[0]) == 5 * 3 + 1  # floor, head, queue of each; the clock
    assert {path.split("/")[-3] for _, path in cold.batches[1]} == set(names)
    with rounds() as warm:  # the writer knows the versions it wrote
        done = m.commit_together([Together(name, register(name, "b")) for name in names])
    assert [c.state.version for c in done] == [3] * 5
    assert len(warm) == 2, str(warm)


def test_a_set_commit_whose_blobs_went_meanwhile_reads_again_and_lands(
    m: LineageManager, zk_hosts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table of the set moves on between the batch's read and the fetch of
    its blobs, and the sweep takes what only the old version had: the set
    reads again and lands on the new version."""
    for name in ("g1", "g2"):
        m.create_table(TableConfig.build(name, f"/{name}"))
    fresh = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    real = BlobStore._send
    old: set[str] = set(m.store.read("g2").token.head.bucket_blobs())  # type: ignore[attr-defined]
    swept: set[str] = set()
    refused: list[str] = []

    def sweep_after_the_batch(self: BlobStore, table: str, blobs: Any) -> dict[str, Any]:
        wanted = list(blobs)
        if self is fresh.blobs and table == "g2" and not swept:
            m.register_segments("g2", [seg("moved")])
            swept.update(old - set(m.store.read("g2").token.head.bucket_blobs()))  # type: ignore[attr-defined]
            for blob in swept:  # as the sweep takes them once no version references them
                m.store.client.delete(m.store.paths.blob("g2", blob))  # type: ignore[attr-defined]
        if self is fresh.blobs:
            refused.extend(b for b in wanted if b in swept)
        return real(self, table, wanted)

    monkeypatch.setattr(BlobStore, "_send", sweep_after_the_batch)

    def register(name: str) -> Any:
        def update(state: TableState, now: int) -> Change:
            return transitions.register_segments(state, [seg(f"{name}_x")], now_ms=now)

        return update

    try:
        done = LineageManager(fresh).commit_together([Together(n, register(n)) for n in ("g1", "g2")])
    finally:
        fresh.close()
    assert swept and refused and [c.applied for c in done] == [True, True]
    assert {"moved", "g2_x"} == set(m.table("g2").segments)


def test_reading_a_past_version_never_fails_for_what_it_fetches_ahead(
    m: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fetching ahead and keeping the head are best effort: a connection lost
    there leaves the version asked read as before (its own blobs, its loads)."""
    target = push_one(m, "extra")
    fresh = ZkStore(m.store.client, owns_client=False)  # type: ignore[attr-defined]
    real_load = fresh.heads.load

    def head_unavailable(table: str, head: Any, zversion: int, raw: bytes = b"") -> Any:
        if zversion != -1:  # the current head, kept after the read: not the version asked
            raise StoreUnavailableError("simulated: the connection was lost")
        return real_load(table, head, zversion, raw)

    def ahead_unavailable(*args: Any, partial: bool = False) -> Any:
        if partial:
            raise StoreUnavailableError("simulated: the connection was lost")
        return real_many(*args)

    real_many = fresh.blobs.decoded_many
    monkeypatch.setattr(fresh.heads, "load", head_unavailable)
    monkeypatch.setattr(fresh.blobs, "decoded_many", ahead_unavailable)
    state = LineageManager(fresh).table_as_of(T, target)
    assert state.version == target and "extra" not in state.segments


def test_a_set_over_two_tables_without_versions_folders_lands_with_one_resend(
    m: LineageManager, zk_hosts: str
) -> None:
    """ZooKeeper names only the first operation that failed: every table's
    folder is made on the first refusal, and the set is sent twice, not once
    per table."""
    store = m.store
    assert isinstance(store, ZkStore)
    names = ["old1", "old2"]
    for name in names:
        m.create_table(TableConfig.build(name, f"/{name}"))
        store.client.delete(f"{store.paths.head(name)}/versions", recursive=True)
    fresh = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:

        def register(name: str) -> Any:
            def update(state: TableState, now: int) -> Change:
                return transitions.register_segments(state, [seg(f"{name}_x")], now_ms=now)

            return update

        before = fresh.zk.commits_sent
        done = LineageManager(fresh).commit_together([Together(n, register(n)) for n in names])
        assert [c.applied for c in done] == [True, True]
        assert fresh.zk.commits_sent - before == 2
    finally:
        fresh.close()
    for name in names:
        assert store.client.get_children(f"{store.paths.head(name)}/versions") == ["v-0000000002"]


def test_a_mirror_publish_of_one_push_by_the_process_that_published_the_last_takes_eight_round_trips(
    zk_store: ZkStore, tmp_path: Path, rounds: Any
) -> None:
    """Fourteen before: the table's root read apart, its history walked and
    its versions listed. Now the table is read once with its newest history
    records, a short backlog is not listed (a pin finds a reclaimed version
    gone), the log's root is the one this process left, and the current
    version's lease builds on that read (eleven before). Ten until the
    pin's read went behind its lease and the hold's check before the commit
    with the clock. What is left: the mirror's hold (take; its check with
    the clock before the commit, and after it; release in two), the table's
    read, the pin (the lease and a read behind it), the lease's release."""
    import pyarrow as pa

    from segment_lineage.ingest.arrow_push import push_arrow
    from segment_lineage.mirror.publisher import sync

    m = LineageManager(zk_store, retry=fast_retry())
    m.create_table(TableConfig.build("mt", str(tmp_path / "mt"), "APPEND", mirror="delta"))
    for value in (1, 2):
        push_arrow(m, "mt", [pa.table({"v": pa.array([value], pa.int64())})], mode="append")
        if value == 1:
            sync(m, "mt")
    with rounds() as counted:
        report = sync(m, "mt")
    assert report.published, report
    assert len(counted) <= 8, str(counted)
