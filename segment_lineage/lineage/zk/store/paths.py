"""Where a store's nodes live under its root (``/segment-lineage`` below any chroot)."""

from __future__ import annotations

from dataclasses import dataclass

from segment_lineage.lineage.core.acl import GUARD_NODES
from segment_lineage.lineage.core.names import check_role, check_table_name

ROOT = "/segment-lineage"
VERSIONS = "versions"


@dataclass(frozen=True)
class Paths:
    root: str

    def head(self, table: str) -> str:
        return f"{self.root}/tables/{check_table_name(table)}"

    def blob(self, table: str, blob: str) -> str:
        return f"{self.head(table)}/blobs/{blob}"

    def blobs(self, table: str) -> str:
        return f"{self.head(table)}/blobs"

    def version(self, table: str, version: int) -> str:
        return f"{self.head(table)}/{VERSIONS}/v-{version:010d}"

    def folder(self, table: str, folder: str) -> str:
        """One of a table's folders (``versions``, ``owners``, ``leases``, ``passes``...)."""
        return f"{self.head(table)}/{folder}"

    def gc(self, table: str) -> str:
        return f"{self.head(table)}/gc"

    def floor(self, table: str) -> str:
        return f"{self.head(table)}/floor"

    def lock(self, table: str, folder: str) -> str:
        """A table's exclusive hold of one kind (``passes``, ``mirror``)."""
        return f"{self.head(table)}/{folder}/lock"

    def pass_lock(self, table: str) -> str:
        return self.lock(table, "passes")

    def guard(self, table: str) -> str:
        """The create-if-absent guard against case twins."""
        return f"{self.root}/names/{table.casefold()}"

    @property
    def tables(self) -> str:
        return f"{self.root}/tables"

    @property
    def roots(self) -> str:
        return f"{self.root}/roots"

    @property
    def clock(self) -> str:
        return f"{self.root}/clock"

    def guard_node(self, role: str) -> str:
        """Set by every commit only ``role`` (and admins) may make (GUARD_NODES)."""
        return f"{self.root}/{GUARD_NODES[role]}"

    @property
    def store_id(self) -> str:
        return f"{self.root}/id"

    @property
    def leaders(self) -> str:
        return f"{self.root}/leaders"

    def election(self, role: str) -> str:
        return f"{self.root}/leaders/{check_role(role)}"
