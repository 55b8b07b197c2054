"""Looking at the znodes themselves, for tests that compare or inspect them."""

from __future__ import annotations

from collections.abc import Iterator

from kazoo.client import KazooClient

from segment_lineage.lineage.zk.store import ROOT


def walk(client: KazooClient, path: str = "/") -> Iterator[str]:
    """Every znode under ``path`` (itself included), children before parents."""
    for child in client.get_children(path):
        yield from walk(client, path.rstrip("/") + "/" + child)
    yield path


def dump(client: KazooClient, path: str = ROOT) -> dict[str, bytes]:
    """Every znode's path and bytes under ``path``, but the clock (its mtime is all it holds)."""
    return {node: client.get(node)[0] for node in walk(client, path) if not node.endswith("/clock")}
