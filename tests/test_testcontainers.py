"""The contract round trip against a ZooKeeper container, where a Docker engine runs.

These machines have only the docker client and no engine, so this test is
skipped here with the reason; on a machine with an engine it runs for real.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.store import ZkStore
from tests.conftest import docker_engine_reachable


@pytest.fixture(scope="module")
def container_hosts() -> Iterator[str]:
    if not docker_engine_reachable():
        pytest.skip("no Docker engine reachable (docker client only): testcontainers ZooKeeper skipped")
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    with DockerContainer("zookeeper:3.9").with_exposed_ports(2181) as zk:
        wait_for_logs(zk, "binding to port", timeout=120)
        yield f"{zk.get_container_host_ip()}:{zk.get_exposed_port(2181)}"


def test_round_trip_on_a_container(container_hosts: str) -> None:
    m = LineageManager(ZkStore(connect(ZkSettings(hosts=container_hosts))))
    m.create_table(TableConfig.build("boxed", "/d/boxed"))
    m.register_segments("boxed", [Segment("a", "a.parquet")])
    entry = m.start_replace("boxed", ["a"], ["b"])
    m.register_segments("boxed", [Segment("b", "b.parquet")])
    m.end_replace("boxed", entry)
    assert [s.name for s in m.visible_segments("boxed")] == ["b"]
    m.store.close()
