"""Fixtures: one real ZooKeeper server per test session, a fresh chroot per test.

The server is started from the ZooKeeper jars inside the pyspark wheel with
the machine's Java, on a free loopback port, with its data in a temporary
directory. Nothing here talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from segment_lineage.lineage.core.retry import RetryPolicy
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
from segment_lineage.lineage.store.contract import Store
from segment_lineage.lineage.store.memory import MemoryStore
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.server import ZkEnsemble, ZkServer, free_port
from segment_lineage.lineage.zk.store import ZkStore


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZkServer]:
    server = ZkServer(tmp_path_factory.mktemp("zk"), free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk_hosts(zk_server: ZkServer) -> str:
    """A connection string with a chroot no other test uses."""
    return f"{zk_server.hosts}/t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk_store(zk_hosts: str) -> Iterator[ZkStore]:
    store = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    yield store
    store.close()


@pytest.fixture(params=["memory", "zookeeper"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """The contract suite's store: each test runs on both implementations."""
    if request.param == "memory":
        yield MemoryStore()
        return
    hosts = request.getfixturevalue("zk_hosts")
    zk = ZkStore(connect(ZkSettings(hosts=hosts)))
    yield zk
    zk.close()


def fast_retry() -> RetryPolicy:
    return RetryPolicy(max_attempts=200, deadline_s=120, base_delay_s=0.002, max_delay_s=0.1)


@pytest.fixture
def zk_manager(zk_store: ZkStore) -> LineageManager:
    """A manager on real ZooKeeper, retrying fast, claiming the roots of the tables it creates."""
    return LineageManager(zk_store, retry=fast_retry(), claims=RootClaimFiles())


@pytest.fixture
def other(zk_hosts: str) -> Iterator[LineageManager]:
    """A second process's manager on the same chroot: its own ZooKeeper
    session, the competing actor of interleaving tests."""
    store = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    yield LineageManager(store, retry=fast_retry())
    store.close()


@pytest.fixture
def manager(store: Store) -> LineageManager:
    return LineageManager(store, actor="tester@host", retry=fast_retry())


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZkEnsemble]:
    group = ZkEnsemble(tmp_path_factory.mktemp("ensemble"), size=3)
    group.start()
    yield group
    group.stop()


@pytest.fixture
def lineage_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LINEAGE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LINEAGE_ZK", raising=False)
    monkeypatch.delenv("LINEAGE_ZK_AUTH", raising=False)
    return tmp_path / "home"


def docker_engine_reachable() -> bool:
    sock = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if sock.startswith("unix://"):
        return Path(sock[len("unix://") :]).exists()
    return False


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "LINEAGE_S3_ENDPOINT": endpoint,
    }.items():
        monkeypatch.setenv(key, value)
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="lake")
    yield endpoint
    # moto keeps its buckets in the process, across servers: leave none behind.
    for item in client.list_objects_v2(Bucket="lake").get("Contents", []):
        client.delete_object(Bucket="lake", Key=item["Key"])
    client.delete_bucket(Bucket="lake")
    server.stop()
