"""A 3-node ZooKeeper ensemble on loopback with a TCP proxy before each
server, so a test can stop servers, restart the ensemble, or cut, stall and
mute one client's traffic."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from faults.proxy import Mode, TcpProxy
from segment_lineage.lineage.zk.server import ZkEnsemble


class Cluster:
    def __init__(self, directory: Path, size: int = 3) -> None:
        self.ensemble = ZkEnsemble(directory, size)
        self._proxies: list[list[TcpProxy]] = []

    @property
    def direct_hosts(self) -> str:
        return self.ensemble.hosts

    def start(self) -> None:
        self.ensemble.start()

    def close(self) -> None:
        for group in self._proxies:
            for proxy in group:
                proxy.close()
        self.ensemble.stop()

    def route(self) -> tuple[str, list[TcpProxy]]:
        """A fresh set of proxies, one per server: hosts for one client whose
        traffic a scenario wants to control alone."""
        group = [TcpProxy(server.client_port) for server in self.ensemble.servers]
        self._proxies.append(group)
        return ",".join(p.address for p in group), group

    @staticmethod
    def set_mode(group: list[TcpProxy], mode: Mode) -> None:
        for proxy in group:
            proxy.set(mode)

    @contextmanager
    def down(self, *indexes: int) -> Iterator[None]:
        """Servers stopped for the block, started again after it (and a quorum formed)."""
        for index in indexes:
            self.ensemble.servers[index].stop()
        try:
            yield
        finally:
            self.ensemble.start()  # starts the stopped ones, waits until all serve

    def restart_all(self, down_for_s: float) -> None:
        """The whole ensemble killed, kept down ``down_for_s``, started again."""
        for server in self.ensemble.servers:
            server.kill()
        time.sleep(down_for_s)
        self.ensemble.start()
