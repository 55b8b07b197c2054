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
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.handlers.utils import AsyncResult

from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.store import ZkStore
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


def test_a_fresh_clients_rollback_takes_six_round_trips_at_most(
    m: LineageManager, zk_hosts: str, rounds: Any
) -> None:
    """The policy with the shared nodes; the target's record with the head;
    both versions' entries and the buckets where they differ; the name
    chunks; the commit's read; the commit (ten before: each of those
    apart, and the versions folder asked before the first commit)."""
    target = push_one(m, "extra")
    store = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        with rounds() as counted:
            plan = LineageManager(store).rollback(T, target)
        assert plan.committed_version == target + 3  # the push was two commits
        assert len(counted) <= 6, str(counted)
        first = {path.rsplit("/", 1)[-1] for _, path in counted.batches[0]}
        assert {"acl", "tables", "names", "clock"} <= first  # the first contact is one round trip
    finally:
        store.close()
    assert "extra" not in {s.name for s in m.visible_segments(T)}


def test_a_warm_clients_rollback_takes_three_round_trips(m: LineageManager, rounds: Any) -> None:
    """The target's record with the head, the commit's read, the commit: the
    writer knows what it wrote (its entries and name chunks too)."""
    target = push_one(m, "extra")
    with rounds() as counted:
        m.rollback(T, target)
    assert len(counted) == 3, str(counted)


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
