"""Readers against concurrent commits, on real ZooKeeper.

``as_of(V)`` answers version V or an error. The competing actor runs at an
exact point of the reader's protocol (a wrapped store method), never after a sleep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from lineage.manager import LineageManager
from lineage.memory_store import MemoryStore
from lineage.model import Segment, TableConfig
from lineage.zk_client import ZkSettings, connect
from lineage.zk_store import ZkStore
from tests.conftest import fast_retry

T = "events"


@pytest.fixture
def other(zk_hosts: str) -> Iterator[LineageManager]:
    """A second client (another process, in effect): the competing actor."""
    store = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    yield LineageManager(store, retry=fast_retry())
    store.close()


def seg(name: str) -> Segment:
    return Segment(name, f"{name}.parquet", rows=1)


def test_read_version_of_the_head_ignores_a_commit_after_its_read(
    zk_manager: LineageManager, other: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = zk_manager
    m.create_table(TableConfig.build(T, "/unused"))
    m.register_segments(T, [seg("s0")])
    store: ZkStore = m.store  # type: ignore[assignment]
    asked = store.read(T).state.version
    real = store._read_head
    commits: list[int] = []

    def read_head(table: str) -> Any:
        head = real(table)
        if not commits:  # another client commits right after our look at the head
            commits.append(other.register_segments(T, [seg("s1")]).state.version)
        return head

    monkeypatch.setattr(store, "_read_head", read_head)
    state = m.table_as_of(T, asked)
    assert commits == [asked + 1]
    assert state.version == asked and set(state.segments) == {"s0"}


def test_read_version_answers_the_version_asked_while_another_client_commits(
    zk_manager: LineageManager, other: LineageManager
) -> None:
    m = zk_manager
    m.create_table(TableConfig.build(T, "/unused"))
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


def test_the_memory_store_answers_its_head_version_in_one_look() -> None:
    m = LineageManager(MemoryStore())
    m.create_table(TableConfig.build(T, "/unused"))
    assert m.table_as_of(T, 1).version == 1  # the head itself, though no commit recorded it
    m.register_segments(T, [seg("s0")])
    assert m.table_as_of(T, 2).version == 2 and set(m.table_as_of(T, 2).segments) == {"s0"}
