"""What the benchmarks share: a scratch ZooKeeper, percentiles, bulk registration."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from lineage.manager import LineageManager
from lineage.model import Segment
from lineage.zk_client import ZkSettings, connect
from lineage.zk_server import ZkServer, free_port
from lineage.zk_store import ZkStore

BATCH = 5000  # segments per registration commit


@contextmanager
def scratch_zookeeper(prefix: str) -> Iterator[tuple[Path, ZkServer]]:
    """A temporary directory and a ZooKeeper server on loopback inside it
    (1 GB heap: tables of 100,000 segments with retained versions)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = Path(tmp)
        server = ZkServer(work / "zk", free_port(), heap_mb=1024)
        server.start()
        try:
            yield work, server
        finally:
            server.stop()


def fresh_manager(hosts: str) -> LineageManager:
    """A manager on a chroot of its own, with the default retry policy."""
    return LineageManager(ZkStore(connect(ZkSettings(hosts=f"{hosts}/bench{uuid.uuid4().hex[:8]}"))))


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def register_many(m: LineageManager, table: str, segments: Sequence[Segment]) -> None:
    for start in range(0, len(segments), BATCH):
        m.register_segments(table, list(segments[start : start + BATCH]))
