"""The places of a table's nodes under the project root."""

from __future__ import annotations

import logging

from segment_lineage.lineage.core.names import check_table_name

log = logging.getLogger(__name__)

ROOT = "/segment-lineage"

VERSIONS = "versions"


class _Paths:
    # ---- paths and plumbing ------------------------------------------------

    def head_path(self, table: str) -> str:
        return f"{self.root}/tables/{check_table_name(table)}"

    def blob_path(self, table: str, blob: str) -> str:
        return f"{self.head_path(table)}/blobs/{blob}"

    def version_path(self, table: str, version: int) -> str:
        return f"{self.head_path(table)}/{VERSIONS}/v-{version:010d}"
