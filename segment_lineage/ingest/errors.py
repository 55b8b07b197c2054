"""Errors of the ingest package: one root, derived from the lineage root so the
CLI's single handler covers them; and deep storage's, under its own name."""

from __future__ import annotations

from segment_lineage.lineage.core.errors import InvalidInputError, LineageError, RefusedError
from segment_lineage.lineage.storage.errors import StorageError

__all__ = [
    "IngestError",
    "NoColumnsError",
    "PushError",
    "PushInputError",
    "PushInterrupted",
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


class NoColumnsError(IngestError, RefusedError):
    """A table read before its first push recorded any column."""


class SnapshotTooOldError(IngestError):
    """A snapshot's files were reclaimed by retention."""

    def __init__(self, table: str, version: int, detail: str) -> None:
        super().__init__(
            f"snapshot too old: version {version} of table {table!r} can no longer be read ({detail})",
            remedy="read the table again to get the current snapshot",
        )
        self.table = table
        self.version = version


class PushInterrupted(KeyboardInterrupt):
    """A push stopped by SIGINT or SIGTERM, after cleaning up (``cleanup``:
    nothing to undo, its entry reverted and files queued, it had completed,
    or left to the next push). An interrupt, not a LineageError: it ends the
    program unless caught."""

    def __init__(self, table: str, entry_id: str, signum: int, cleanup: str) -> None:
        name = {2: "SIGINT", 15: "SIGTERM"}.get(signum, f"signal {signum}")
        what = {
            "nothing": "it had not started; nothing changed",
            "reverted": f"entry {entry_id} reverted, its files queued for retention",
            "completed": f"entry {entry_id} had already completed; the push landed",
        }.get(cleanup, f"entry {entry_id} left for the next push to clean up (reverting it failed)")
        super().__init__(f"push to {table!r} interrupted by {name}: {what}")
        self.table = table
        self.entry_id = entry_id
        self.signum = signum
        self.cleanup = cleanup  # nothing, reverted, completed or left
