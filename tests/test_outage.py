"""A ZooKeeper outage, timed: a push fails within the documented bound
(about one operation timeout, 10 s by default: docs/operations.md), however
far it got, and the store works again once ZooKeeper is back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import ingest.push
from ingest.arrow_push import push_arrow
from ingest.storage import RootClaimFiles
from lineage.connect import store_for
from lineage.errors import LineageError, StoreUnavailableError
from lineage.manager import LineageManager
from lineage.model import TableConfig
from lineage.zk_client import ZkSettings
from lineage.zk_server import ZkServer, free_port

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
    "stop_at", ["push.before-start", "push.after-start", "push.after-write", "push.after-register"]
)
def test_a_push_fails_within_the_bound_when_zookeeper_stops(
    server: ZkServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_at: str
) -> None:
    store = store_for(ZkSettings(hosts=f"{server.hosts}/outage"))  # as the command line opens it
    assert store.op_timeout_s == OP_TIMEOUT_S
    try:
        m = LineageManager(store, claims=RootClaimFiles())
        m.create_table(TableConfig.build("t", str(tmp_path / "t")))
        push_arrow(m, "t", [part("v1")])
        visible = m.visible_segments("t")

        stopped: list[float] = []
        real = ingest.push.failpoint

        def stop_zookeeper_at(name: str) -> None:
            if name == stop_at:
                server.stop()
                stopped.append(time.monotonic())
            real(name)

        monkeypatch.setattr(ingest.push, "failpoint", stop_zookeeper_at)
        with pytest.raises(LineageError) as failed:
            push_arrow(m, "t", [part("v2")])
        took = time.monotonic() - stopped[0]
        assert isinstance(failed.value, StoreUnavailableError), failed.value
        assert took < BOUND_S, f"the push took {took:.1f}s to fail"

        monkeypatch.setattr(ingest.push, "failpoint", real)
        server.start()
        deadline = time.monotonic() + 30
        while not store.connected() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert m.visible_segments("t") == visible  # nothing of the failed push shows
    finally:
        store.close()
