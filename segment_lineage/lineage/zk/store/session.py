"""This client's ZooKeeper session, as the store's holds, tickets, pins and
election members see it: they live exactly as long as it does."""

from __future__ import annotations

from segment_lineage.lineage.zk.connection import ZkConnection, translated


class ZkSession:
    def __init__(self, zk: ZkConnection, root: str, timeout_s: float) -> None:
        self.zk = zk
        self.root = root
        self.timeout_s = timeout_s

    def connected(self) -> bool:
        return bool(self.zk.client.connected)

    def id(self) -> int | None:
        return self.zk.session_id()

    def alive(self, since: int) -> bool:
        """False once the connection is suspended or the session is lost, or
        once the session ``since`` was replaced by a new one."""
        return self.connected() and self.zk.session_id() == since

    def confirm(self) -> None:
        """One round trip to the server: a dead session fails it."""
        with translated("ZooKeeper did not answer", refused=None):
            self.zk.exists(self.root)
