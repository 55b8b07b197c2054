"""The watch-fed table view on real ZooKeeper: served from memory until the head moves."""

from __future__ import annotations

import tempfile
import threading
import uuid
from pathlib import Path

import pytest
from kazoo.protocol.states import Callback, KazooState

from segment_lineage.lineage.core.errors import (
    InvalidNameError,
    RefusedError,
    StoreUnavailableError,
    TableNotFoundError,
)
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.server import ZkServer, free_port
from segment_lineage.lineage.zk.store import ZkStore
from segment_lineage.lineage.zk.watch import WatchedTable
from tests.conftest import fast_retry
from tests.helpers.run import wait_for


def seg(name: str) -> Segment:
    return Segment(name, f"{name}.parquet", rows=1)


def made(manager: LineageManager, *names: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="watch-")) / "events"  # a root of its own: create claims it
    manager.create_table(TableConfig.build("events", str(root)))
    manager.register_segments("events", [seg(n) for n in names])


def counting_reads(store: ZkStore) -> list[str]:
    """Record the table reads the store serves (the view's only way to ZooKeeper)."""
    calls: list[str] = []
    read = store.read

    def counted(table: str, **kw: bool) -> object:
        calls.append(table)
        return read(table, **kw)

    store.read = counted  # type: ignore[method-assign]
    return calls


def names(view: WatchedTable) -> list[str]:
    return [s.name for s in view.visible()]


def test_reads_come_from_memory_until_the_head_moves(zk_manager: LineageManager, zk_hosts: str) -> None:
    made(zk_manager, "a", "b")
    reader = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        with WatchedTable(reader, "events") as view:
            assert names(view) == ["a", "b"]
            reads = counting_reads(reader)
            first = view.visible()
            for _ in range(50):
                assert view.visible() is first
            assert reads == []
            # Another client commits: the watch fires and the next read shows it.
            entry = zk_manager.start_replace("events", ["a"], ["c"])
            zk_manager.register_segments("events", [seg("c")], entry_id=entry)
            zk_manager.end_replace("events", entry)
            wait_for("the watch to deliver the replace", lambda: names(view) == ["b", "c"], timeout=10)
            assert view.state().version == zk_manager.table("events").version
            settled = len(reads)
            assert view.visible() is view.visible()
            assert len(reads) == settled
    finally:
        reader.close()


def test_own_commits_are_seen_before_the_watch_event(zk_manager: LineageManager, zk_store: ZkStore) -> None:
    made(zk_manager, "a")
    with WatchedTable(zk_store, "events") as view:
        assert names(view) == ["a"]
        # Hold kazoo's callback thread, where watch events are delivered; replies
        # to our own requests do not need it.
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            held.set()
            release.wait(30)

        zk_store.client.handler.dispatch_callback(Callback("watch", hold, ()))
        assert held.wait(10)
        try:
            for i in range(3):
                zk_manager.register_segments("events", [seg(f"n{i}")])
                assert f"n{i}" in names(view)  # the store's own commit invalidated the view
        finally:
            release.set()


def test_a_replace_in_progress_stays_hidden(zk_manager: LineageManager, zk_store: ZkStore) -> None:
    made(zk_manager, "a")
    with WatchedTable(zk_store, "events") as view:
        entry = zk_manager.start_replace("events", ["a"], ["b"])
        zk_manager.register_segments("events", [seg("b")], entry_id=entry)
        assert names(view) == ["a"]
        zk_manager.end_replace("events", entry)
        assert names(view) == ["b"]
        zk_manager.revert_replace("events", entry)
        assert names(view) == ["a"]


def test_bad_tables_and_closed_views_are_refused(zk_manager: LineageManager, zk_store: ZkStore) -> None:
    with pytest.raises(TableNotFoundError):
        WatchedTable(zk_store, "events")
    with pytest.raises(InvalidNameError):
        WatchedTable(zk_store, "../events")
    made(zk_manager, "a")
    view = WatchedTable(zk_store, "events")
    view.close()
    view.close()
    with pytest.raises(RefusedError, match="closed"):
        view.visible()


def test_a_dropped_table_is_not_served_from_memory(zk_manager: LineageManager, zk_hosts: str) -> None:
    made(zk_manager, "a")
    reader = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        view = WatchedTable(reader, "events")
        assert names(view) == ["a"]
        zk_manager.drop_table("events", force=True)

        def gone() -> bool:
            try:
                view.visible()
            except TableNotFoundError:
                return True
            return False

        wait_for("the drop to reach the view", gone, timeout=10)
        view.close()
    finally:
        reader.close()


def test_no_answers_from_memory_while_disconnected(tmp_path: Path) -> None:
    server = ZkServer(tmp_path / "zk", free_port())
    server.start()
    hosts = f"{server.hosts}/w{uuid.uuid4().hex[:8]}"
    writer = LineageManager(ZkStore(connect(ZkSettings(hosts=hosts))), retry=fast_retry())
    reader = ZkStore(connect(ZkSettings(hosts=hosts, session_timeout_s=30)), op_timeout_s=2)
    try:
        made(writer, "a")
        view = WatchedTable(reader, "events")
        assert names(view) == ["a"]
        server.stop()
        wait_for("the reader to notice", lambda: reader.client.state != KazooState.CONNECTED, timeout=30)
        with pytest.raises(StoreUnavailableError):
            view.visible()
        server.start()
        wait_for("the reader to reconnect", lambda: reader.client.state == KazooState.CONNECTED, timeout=60)
        writer.register_segments("events", [seg("b")])
        wait_for("the watch, set again, to deliver", lambda: names(view) == ["a", "b"], timeout=10)
        view.close()
    finally:
        reader.close()
        writer.store.close()
        server.stop()
