"""The error deep storage raises: one class under the project's root, so storage needs nothing above it."""

from __future__ import annotations

from segment_lineage.lineage.core.errors import LineageError


class StorageError(LineageError, OSError):
    """Deep storage refused or failed an operation (a write, a listing, a
    delete, a location leading out of the root). Also ingest's
    ``StorageError``: ingest raises it too, for files it reads."""
