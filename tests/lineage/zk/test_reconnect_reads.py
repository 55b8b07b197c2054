"""A translated read rides out a reconnect, fed answers without a server:
a process resumed after a pause past its session finds its connection
re-establishing, and its first read must wait for it (within the read's
op_timeout_s), not give up after kazoo's three quick tries and report
ZooKeeper unreachable."""

from __future__ import annotations

from typing import Any, cast

import pytest
from kazoo.exceptions import ConnectionLoss
from kazoo.retry import KazooRetry

from segment_lineage.lineage.core.errors import StoreUnavailableError
from segment_lineage.lineage.zk.connection import ZkConnection


class _Pending:
    def __init__(self, value: Any) -> None:
        self.value = value

    def get(self, timeout: float | None = None) -> Any:
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


class _Reconnecting:
    """A client whose first ``lost`` requests find the connection down."""

    connected = True
    chroot = ""

    def __init__(self, lost: int) -> None:
        self.lost = lost
        self.asked = 0
        # kazoo's command retry as the store's client has it
        self.retry = KazooRetry(max_tries=3, delay=0.05, max_delay=1.0, deadline=10.0)

    def add_listener(self, listener: Any) -> None:
        pass

    def get_async(self, path: str, watch: Any = None) -> _Pending:
        self.asked += 1
        return _Pending(ConnectionLoss() if self.asked <= self.lost else (b"data", None))


def test_a_read_waits_for_the_connection_to_come_back() -> None:
    client = _Reconnecting(lost=6)
    zk = ZkConnection(cast("Any", client), op_timeout_s=10.0)
    assert zk.get("/t", doing="reading t")[0] == b"data"
    assert client.asked == 7


def test_a_read_still_gives_up_within_its_timeout() -> None:
    client = _Reconnecting(lost=10_000)
    zk = ZkConnection(cast("Any", client), op_timeout_s=1.0)
    with pytest.raises(StoreUnavailableError, match="no ZooKeeper server answered"):
        zk.get("/t", doing="reading t")
    assert client.asked < 100
