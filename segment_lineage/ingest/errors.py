"""Errors of the ingest package: one root, derived from the lineage root so the
CLI's single handler covers them; and deep storage's, under its own name."""

from __future__ import annotations

from segment_lineage.lineage.core.errors import InvalidInputError, LineageError, RefusedError
from segment_lineage.lineage.storage.errors import StorageError

__all__ = [
    "IngestError",
    "PushError",
    "PushInputError",
    "PushRefusedError",
    "SnapshotTooOldError",
    "StorageError",
]


class IngestError(LineageError):
    """Root of the errors the ingest package defines. Deep storage's
    :class:`StorageError` (which ingest raises too) is named here as well,
    but derives from the lineage root, not from this one: storage lies below
    ingest."""


class PushError(IngestError):
    """A push failed; its entry was reverted (or is left for the next push to clean up)."""


class PushRefusedError(IngestError, RefusedError):
    """A push's input or mode does not fit the table. Nothing was written."""


class PushInputError(IngestError, InvalidInputError):
    """A push's arguments are malformed (an unknown mode, say). Nothing was written."""


class SnapshotTooOldError(IngestError):
    """A snapshot's files were reclaimed by retention."""

    def __init__(self, table: str, version: int, detail: str) -> None:
        super().__init__(
            f"snapshot too old: version {version} of table {table!r} can no longer be read ({detail})",
            remedy="read the table again to get the current snapshot",
        )
        self.table = table
        self.version = version
