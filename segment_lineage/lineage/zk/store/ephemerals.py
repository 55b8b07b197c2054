"""Ephemeral nodes in a table's folders: created in this identity's own
folder under a policy (``owners/by-<user>``, ``leases/by-<user>``), flat
without one; listed in both shapes; deleted quietly when already gone.
Owners, leases and pass holds are made of these."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from kazoo.exceptions import NodeExistsError, NoNodeError

from segment_lineage.lineage.core.acl import OWN_FOLDER_OF, OWN_PREFIX, TABLE_FOLDERS, child_place
from segment_lineage.lineage.core.errors import StoreUnavailableError, TableNotFoundError
from segment_lineage.lineage.zk.connection import ZkConnection, translated
from segment_lineage.lineage.zk.store.nodes import Nodes
from segment_lineage.lineage.zk.store.paths import Paths


class Ephemerals:
    def __init__(self, zk: ZkConnection, paths: Paths, nodes: Nodes) -> None:
        self.zk = zk
        self.paths = paths
        self.nodes = nodes

    def create(
        self,
        table: str,
        folder: str,
        name: str,
        data: bytes,
        sequence: bool,
        behind: Callable[[], None] | None = None,
    ) -> str:
        """Create an ephemeral node; its id relative to ``folder`` (``by-u/lease-N`` or ``lease-N``).
        NodeExistsError passes: the caller asks whose it is. ``behind``: sent
        right after each try's create (ZkConnection.create)."""
        base = self.paths.folder(table, folder)
        place = TABLE_FOLDERS[folder]
        holder = self.nodes.holder(folder)
        parent = base if holder is None else f"{base}/{holder}"
        for _ in range(3):
            try:
                with translated(
                    f"ZooKeeper {folder} of {table!r}",
                    refused=f"ZooKeeper refused {folder} of {table!r}: not authorised",
                    passing=(NoNodeError, NodeExistsError),
                ):
                    path = self.zk.create(
                        f"{parent}/{name}",
                        data,
                        acl=self.nodes.acl_at(child_place(place)),
                        ephemeral=True,
                        sequence=sequence,
                        behind=behind,
                    )
                return path[len(base) + 1 :]
            except NoNodeError:
                self.make_folder(table, folder, holder)
        raise TableNotFoundError(table)

    def make_folder(self, table: str, folder: str, holder: str | None) -> None:
        """Make a missing ephemerals folder (a table made before it existed),
        and this identity's own folder in it; only an admin may make the latter."""
        base = self.paths.folder(table, folder)
        place = TABLE_FOLDERS[folder]
        steps = [(base, self.nodes.acl_at(place))]
        identity = self.nodes.identity
        if holder is not None:
            steps.append((f"{base}/{holder}", self.nodes.acl_at(OWN_FOLDER_OF[place], identity)))
        for path, acl in steps:
            with translated(
                None,
                refused=f"ZooKeeper refused {folder} of {table!r}: not authorised; identity "
                f"{self.nodes.user!r} has no {folder} folder "
                f"there ({path})",
                remedy="an admin makes it: run 'lineage acl apply' again after adding the identity",
            ):
                try:
                    if self.zk.exists(path) is None:
                        self.zk.create(path, b"", acl=acl)
                except NodeExistsError:
                    pass
                except NoNodeError:
                    raise TableNotFoundError(table) from None

    def owned_now(self, path: str, doing: str) -> int | None:
        """The store's clock when this session owns the ephemeral at ``path``,
        else None: the look and the clock sent together, one round trip
        (asked again alone when an answer was lost or the clock node went)."""
        self.nodes.ensure_root()
        self.zk.check_answering()
        looked, clock = self.zk.send_exists(path), self.zk.send_set(self.paths.clock, b"")
        try:
            with self.zk.reading(doing):
                stat = self.zk.answer(looked)
            with self.zk.reading("clock read"):
                now = int(self.zk.answer(clock).mtime)
        except (NoNodeError, StoreUnavailableError):
            try:
                stat = self.zk.exists(path, doing=doing)
            except (NoNodeError, StoreUnavailableError):
                stat = None
            now = self.nodes.now_ms()
        return now if stat is not None and stat.ephemeralOwner == self.zk.session_id() else None

    def children(self, table: str, folder: str) -> list[str]:
        try:
            children = self.zk.get_children(self.paths.folder(table, folder), doing=folder)
        except NoNodeError:
            return []
        return sorted(children)

    def listing(self, table: str, folder: str) -> list[str]:
        """The ids of the ephemerals under ``folder``, relative to it, own folders looked into."""
        base = self.paths.folder(table, folder)
        children = self.children(table, folder)
        flat = [c for c in children if not c.startswith(OWN_PREFIX)]
        holders = [c for c in children if c.startswith(OWN_PREFIX)]

        def fetch() -> list[str]:
            pending = [(h, self.zk.send_get_children(f"{base}/{h}")) for h in holders]
            out: list[str] = []
            for holder, result in pending:
                try:
                    out.extend(f"{holder}/{c}" for c in self.zk.settle(result))
                except NoNodeError:
                    continue
            return out

        with translated(f"reading {base}", refused=f"ZooKeeper refused reading {base}: not authorised"):
            nested = self.zk.retry(fetch) if holders else []
        return sorted(flat + nested)

    def own_path(self, table: str, folder: str, name: str) -> str:
        holder = self.nodes.holder(folder)
        base = self.paths.folder(table, folder)
        return f"{base}/{name}" if holder is None else f"{base}/{holder}/{name}"

    def delete_quietly(self, path: str, what: str) -> None:
        """Delete an ephemeral node; gone already is fine, other failures are
        reported as the project's errors (the session's end removes it anyway)."""
        with (
            translated(
                f"releasing the {what} {path}",
                refused=f"ZooKeeper refused releasing the {what} {path}: not authorised",
            ),
            contextlib.suppress(NoNodeError),
        ):
            self.zk.delete(path, retry=True)
