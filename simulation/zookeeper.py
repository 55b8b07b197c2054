"""Runs on a real ZooKeeper: one embedded server (as tests/conftest.py
starts it), one chroot per seed, one client (one session) per actor, and a
switch point before every request a store sends. Sessions here are real: a
crash or an expiry ends the actor's session on the server (kazoo's harness
trick: a second client takes the session over and closes it), and its owner,
lease and pass nodes vanish. The clock is the server's: only the file
system's clock is moved."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from segment_lineage.lineage.store.election import SessionCheck
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.server import ZkServer, free_port
from segment_lineage.lineage.zk.store import ZkStore
from segment_lineage.retention.deletes import session_fence
from simulation.proxy import ClientProxy, StoreProxy
from simulation.scheduler import Actor
from simulation.world import World


@contextlib.contextmanager
def server(tmp: Path) -> Iterator[str]:
    directory = Path(tempfile.mkdtemp(prefix="sim-zk-", dir=tmp))
    zk = ZkServer(directory, free_port())
    zk.start()
    try:
        yield zk.hosts
    finally:
        zk.stop()
        shutil.rmtree(directory, ignore_errors=True)


def end_session(client: Any, hosts: str) -> None:
    """Expire ``client``'s session now: the server drops its ephemeral nodes."""
    if not client.client_id:
        return
    session_id, password = client.client_id
    other = KazooClient(hosts=hosts, client_id=(session_id, password))
    try:
        other.start(timeout=10)
        other.stop()
    finally:
        other.close()


@contextlib.contextmanager
def attach(world: World, hosts: str) -> Iterator[None]:
    chroot = f"{hosts}/sim-{world.seed}-{os.urandom(4).hex()}"
    observer = ZkStore(connect(ZkSettings(hosts=chroot)))
    world.store = observer
    world.clock.real = lambda: int(time.time() * 1000)
    world.clock.fs_lag_ms = 2 * 86_400_000  # the setup's files were written two days ago
    stores: list[ZkStore] = []

    def new_store(actor: Actor) -> StoreProxy:
        client = connect(ZkSettings(hosts=chroot))
        requests = ClientProxy(client, world.scheduler.switch)
        store = ZkStore(requests, env=world.env)
        stores.append(store)
        proxy = StoreProxy(
            store,
            world.scheduler.switch,
            world.sessions,
            world.ack(actor.name),
            zookeeper=True,
            expire=lambda: end_session(client, chroot),
        )
        requests.store = proxy
        return proxy

    def fence(proxy: StoreProxy) -> Any:
        inner = proxy.inner
        assert isinstance(inner, ZkStore)
        check = SessionCheck(inner, env=world.env)
        return session_fence(check, "the pass's ZooKeeper session ended")

    world.new_store = new_store
    world.fence = fence
    try:
        yield
    finally:
        for store in stores:
            with contextlib.suppress(Exception):
                store.close()
        observer.close()
