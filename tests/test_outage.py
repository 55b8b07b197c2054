"""A ZooKeeper outage, timed: a push fails within the documented bound
(about one operation timeout, 10 s by default: docs/operations.md), however
far it got, whether the server is stopped (connections close) or frozen
(SIGSTOP: nothing answers, nothing closes), and the store works again once
ZooKeeper is back."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import segment_lineage.ingest.push
from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.lineage.core.errors import LineageError, StoreUnavailableError
from segment_lineage.lineage.core.model import TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.deep import RootClaimFiles
from segment_lineage.lineage.zk.client import ZkSettings
from segment_lineage.lineage.zk.connect import store_for
from segment_lineage.lineage.zk.server import ZkServer, free_port

pytestmark = [pytest.mark.zk, pytest.mark.slow]

OP_TIMEOUT_S = 10.0  # ZkStore's default, as every command uses it
BOUND_S = OP_TIMEOUT_S + 2.5  # "about 10 s": one bounded wait, and a little for the rest


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ZkServer]:
    zk = ZkServer(tmp_path / "zk", free_port())  # its own server: this test stops it
    zk.start()
    yield zk
    zk.stop()


def part(label: str) -> pa.Table:
    return pa.table({"label": [label] * 3, "i": [0, 1, 2]})


@pytest.mark.parametrize(
    ("how", "stop_at"),
    [
        ("stopped", "push.before-start"),
        ("stopped", "push.after-start"),
        ("stopped", "push.after-write"),
        ("frozen", "push.after-start"),
        ("frozen", "push.after-write"),
    ],
)
def test_a_push_fails_within_the_bound_when_zookeeper_goes_away(
    server: ZkServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, stop_at: str
) -> None:
    store = store_for(ZkSettings(hosts=f"{server.hosts}/outage"))  # as the command line opens it
    assert store.op_timeout_s == OP_TIMEOUT_S
    try:
        m = LineageManager(store, claims=RootClaimFiles())
        m.create_table(TableConfig.build("t", str(tmp_path / "t")))
        push_arrow(m, "t", [part("v1")])
        visible = m.visible_segments("t")

        stopped: list[float] = []
        real = segment_lineage.ingest.push.failpoint
        pid = server.pid()
        assert pid is not None

        def stop_zookeeper_at(name: str) -> None:
            if name == stop_at:
                if how == "stopped":
                    server.stop()
                else:
                    os.kill(pid, signal.SIGSTOP)
                stopped.append(time.monotonic())
            real(name)

        monkeypatch.setattr(segment_lineage.ingest.push, "failpoint", stop_zookeeper_at)
        with pytest.raises(LineageError) as failed:
            push_arrow(m, "t", [part("v2")])
        took = time.monotonic() - stopped[0]
        assert isinstance(failed.value, StoreUnavailableError), failed.value
        assert took < BOUND_S, f"the push took {took:.1f}s to fail"

        monkeypatch.setattr(segment_lineage.ingest.push, "failpoint", real)
        if how == "stopped":
            server.start()
        else:
            os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while not store.connected() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert m.visible_segments("t") == visible  # nothing of the failed push shows
    finally:
        frozen = server.pid() if how == "frozen" else None
        if frozen is not None:
            os.kill(frozen, signal.SIGCONT)
        store.close()
