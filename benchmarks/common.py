"""What the benchmark suites share: a scratch ZooKeeper, the run's context, a suite's results."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.measure import Case, Profile, Round, profile
from segment_lineage.lineage.core.model import Segment
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.server import ZkServer, free_port
from segment_lineage.lineage.zk.store import ZkStore

BATCH = 5000  # segments per registration commit
OURS = "ours"


@contextmanager
def scratch_zookeeper(prefix: str) -> Iterator[tuple[Path, ZkServer]]:
    """A temporary directory and a ZooKeeper server on loopback inside it
    (2 GB heap: tables of 100,000 segments with retained versions)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = Path(tmp)
        server = ZkServer(work / "zk", free_port(), heap_mb=2048)
        server.start()
        try:
            warm_up(server.hosts)
            yield work, server
        finally:
            server.stop()


WARM_UP_REQUESTS = 3_000


def warm_up(hosts: str) -> None:
    """A few thousand requests of each kind a lineage client sends (create,
    read, compare-and-set, multi, delete), untimed: a deployment's server
    has long run its request path into compiled code; a server just started
    would make whichever suite comes first pay for the JVM's warming."""
    client = connect(ZkSettings(hosts=hosts))
    try:
        base = f"/warmup{uuid.uuid4().hex[:8]}"
        client.create(base)
        for i in range(WARM_UP_REQUESTS // 6):
            path = f"{base}/n{i % 50}"
            if client.exists(path) is None:
                client.create(path, b"x" * 64)
            data, stat = client.get(path)
            client.set(path, data, version=stat.version)
            txn = client.transaction()
            txn.check(path, stat.version + 1)
            txn.set_data(path, data)
            txn.commit()
        client.delete(base, recursive=True)
    finally:
        client.stop()
        client.close()


def chroot(hosts: str) -> str:
    return f"{hosts}/bench{uuid.uuid4().hex[:8]}"


def drop_chroot(hosts_with_chroot: str) -> None:
    """Delete a finished benchmark's whole tree: the run's server keeps every
    suite's data in its heap otherwise (a full run outgrew 1 GB)."""
    hosts, _, path = hosts_with_chroot.partition("/")
    client = connect(ZkSettings(hosts=hosts))
    try:
        client.delete(f"/{path}", recursive=True)
    finally:
        client.stop()
        client.close()


def fresh_manager(hosts: str) -> LineageManager:
    """A manager on a chroot of its own, with the default retry policy."""
    return LineageManager(ZkStore(connect(ZkSettings(hosts=chroot(hosts)))), claims=RootClaimFiles())


def close_and_drop(m: LineageManager) -> None:
    """Close a fresh_manager's store and delete its chroot."""
    store = m.store
    assert isinstance(store, ZkStore)
    hosts = store.client.hosts  # kazoo keeps the chroot apart
    where = f"{','.join(f'{h}:{p}' for h, p in hosts)}{store.client.chroot}"
    store.close()
    drop_chroot(where)


def register_many(m: LineageManager, table: str, segments: Sequence[Segment], batch: int = BATCH) -> None:
    """``segments`` registered in commits of ``batch`` (a table of a million
    takes larger ones: each commit rewrites most of the table's buckets)."""
    for start in range(0, len(segments), batch):
        m.register_segments(table, list(segments[start : start + batch]))


@dataclass(frozen=True)
class Context:
    """One run of the benchmark command."""

    work: Path  # scratch space on the local disk
    hosts: str  # the run's ZooKeeper on loopback
    quick: bool  # small sizes: a smoke run of every suite
    master: str  # Spark master for the push suite


@dataclass
class Suite:
    """A suite's cases, the profiles of ours where a peer was faster, and notes."""

    name: str
    title: str
    axis: str  # what "size" counts: segments, rows, writers
    about: str  # what is measured, for the report
    cases: list[Case] = field(default_factory=list)
    profiles: list[Profile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    def add(self, item: Case) -> Case:
        self.cases.append(item)
        print(
            f"  {self.name} {item.operation} {item.size:,} {self.axis} {item.system}: "
            f"median {item.median_s * 1000:.2f} ms, p99 {item.p99_s * 1000:.2f} ms, "
            f"peak {item.peak_mb:.1f} MB",
            flush=True,
        )
        return item

    def profile_if_slower(self, operation: str, size: int, ours: Round) -> None:
        """Profile one more round of ours when a peer's median was lower."""
        mine = [c for c in self.cases if (c.operation, c.size, c.system) == (operation, size, OURS)]
        peers = [c for c in self.cases if (c.operation, c.size) == (operation, size) and is_peer(c.system)]
        if mine and any(p.median_s < mine[0].median_s for p in peers):
            self.profiles.append(profile(operation, size, ours))


def is_peer(system: str) -> bool:
    return not system.startswith(OURS)
