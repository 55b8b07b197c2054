"""Closing shared nodes that an anonymous run left open to anyone.

A command run without ``LINEAGE_ZK_AUTH`` creates the project's shared
nodes (the root, ``tables``, ``names``, ``clock``, ``leaders``...) with
ZooKeeper's open ACL: anyone may then delete the clock, create a name guard
(squat a table name or make a case twin) or create a head under ``tables``.
Setting ``LINEAGE_ZK_AUTH`` later does not change nodes that exist already,
so the first authenticated store closes them: every node that grants anyone
more than reading gets the ACL this store would create it with (the single
identity's, or the policy's for the node's place).

Nodes below ``names``, ``tables`` and ``leaders`` are visited only while
their folder is still open, and are closed before it: a run cut short leaves
the folder open, so the next run finishes the job.

The client is used directly here (the walk is made of raw pipelined
requests); every wait is bounded by the caller's timeout, and failures are
translated by :func:`segment_lineage.lineage.zk.connection.translated`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoAuthError, NoNodeError
from kazoo.security import ACL

from segment_lineage.lineage.core.acl import READ, Place, place_of
from segment_lineage.lineage.core.errors import AuthError, StoreUnavailableError
from segment_lineage.lineage.zk.connection import translated

log = logging.getLogger(__name__)

BATCH = 512
ATTEMPTS = 3  # per node: another process closing it at the same moment moves its ACL version

# Below the project root: the nodes every table and every role shares.
SHARED = ("", "/tables", "/names", "/clock", "/leaders", "/leaders/retention", "/roots", "/id")
FOLDERS_WITH_CHILDREN = ("/names", "/tables", "/leaders")


def is_open(acls: Sequence[ACL]) -> bool:
    """Whether an ACL lets anyone (``world:anyone``) do more than read."""
    return any(a.id.scheme == "world" and a.perms & ~READ for a in acls)


def walk(client: KazooClient, top: str, timeout: float, skip_hidden: bool = False) -> Iterator[str]:
    """Every node under ``top`` (itself included), level by level, children
    fetched in batches; ``skip_hidden``: a node this identity may not list is
    not descended into (else NoAuthError)."""
    level = [top]
    while level:
        yield from level
        following: list[str] = []
        for batch in batches(iter(level)):
            pending = [(path, client.get_children_async(path)) for path in batch]
            for path, result in pending:
                try:
                    children = result.get(timeout=timeout)
                except NoNodeError:
                    continue
                except NoAuthError:
                    if not skip_hidden:
                        raise
                    continue
                following.extend(f"{path}/{child}" for child in sorted(children))
        level = following


def batches(paths: Iterator[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    for path in paths:
        batch.append(path)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def close_open_nodes(
    client: KazooClient,
    root: str,
    acl_at: Callable[[Place, str], list[ACL] | None],
    timeout: float,
) -> list[str]:
    """Give every open project node under ``root`` the ACL of its place
    (``acl_at(place, node name)``: the name tells whose own folder a node is);
    the paths closed.

    Raises AuthError when an open node cannot be closed by this identity (its
    ACL lets anyone write but not administer it), StoreUnavailableError when
    ZooKeeper does not answer. Either way nothing is half-closed that a rerun
    would not finish.
    """
    if acl_at(Place.FOLDER, "") is None:
        return []  # open mode: nothing to close to
    with translated("closing shared nodes", refused=None):
        return _close(client, root, acl_at, timeout)


def _close(
    client: KazooClient, root: str, acl_at: Callable[[Place, str], list[ACL] | None], timeout: float
) -> list[str]:
    top = [root + rel for rel in SHARED]
    found = _acls(client, top, timeout)
    closed: list[str] = []
    for batch in batches(iter(_under_open(client, root, found, timeout))):
        closed += _close_batch(client, root, acl_at, _acls(client, batch, timeout), timeout)
    # The root last: while it is open, the next run looks again.
    ordered = {p: found[p] for p in sorted(found, key=lambda p: (p == root, p))}
    closed += _close_batch(client, root, acl_at, ordered, timeout)
    if closed:
        log.warning("closed %d node(s) left open to anyone under %s", len(closed), root)
    return closed


def _under_open(
    client: KazooClient, root: str, found: dict[str, tuple[list[ACL], Any]], timeout: float
) -> list[str]:
    """The nodes under each shared folder left open to anyone (the folders themselves excepted)."""
    deep: list[str] = []
    for rel in FOLDERS_WITH_CHILDREN:
        folder = root + rel
        if folder in found and is_open(found[folder][0]):
            deep.extend(
                p for p in walk(client, folder, timeout, skip_hidden=True) if p != folder and p not in found
            )
    return deep


def _acls(client: KazooClient, paths: Sequence[str], timeout: float) -> dict[str, tuple[list[ACL], Any]]:
    pending = [(path, client.get_acls_async(path)) for path in paths]
    out = {}
    for path, result in pending:
        try:
            acls, stat = result.get(timeout=timeout)
        except (NoNodeError, NoAuthError):
            continue  # gone, or hidden from this identity: not one it made, nor open
        out[path] = (list(acls), stat)
    return out


def _close_batch(
    client: KazooClient,
    root: str,
    acl_at: Callable[[Place, str], list[ACL] | None],
    found: dict[str, tuple[list[ACL], Any]],
    timeout: float,
) -> list[str]:
    closed = []
    for path, (acls, stat) in found.items():
        if not is_open(acls):
            continue
        place = place_of(path[len(root) :])
        if place is None:
            log.warning("left alone a node the project does not know, open to anyone: %s", path)
            continue
        wanted = acl_at(place, path.rsplit("/", 1)[-1])
        if wanted is None:
            continue
        if _set(client, path, wanted, stat.aversion, timeout):
            closed.append(path)
    return closed


def _set(client: KazooClient, path: str, wanted: list[ACL], aversion: int, timeout: float) -> bool:
    """Compare-and-set one node's ACL; True when this call closed it."""
    for _ in range(ATTEMPTS):
        try:
            client.set_acls_async(path, wanted, version=aversion).get(timeout=timeout)
            return True
        except NoNodeError:
            return False
        except NoAuthError:
            raise AuthError(
                f"{path} is open to anyone, and this identity may not close it",
                remedy="close it as its creator, or run 'lineage acl apply' as an admin",
            ) from None
        except BadVersionError:
            try:
                acls, stat = client.get_acls_async(path).get(timeout=timeout)
            except NoNodeError:
                return False
            if not is_open(acls):
                return False  # another process closed it meanwhile
            aversion = stat.aversion
    raise StoreUnavailableError(f"closing {path}: its ACL kept changing")
