"""The error deep storage raises: one class under the project's root, so storage needs nothing above it."""

from __future__ import annotations

from segment_lineage.lineage.core.errors import LineageError


class StorageError(LineageError, OSError):
    """Deep storage refused or failed an operation (a write, a listing, a
    delete, a location leading out of the root). Also ingest's
    ``StorageError``: ingest raises it too, for files it reads."""


class LinkUnknownError(StorageError):
    """Whether a path is a symbolic link cannot be told: its folder may be
    neither listed nor entered. What it leads to is unknown, so nothing that
    hangs on it is deleted."""
