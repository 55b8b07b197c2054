"""Errors of the retention package: one root under the lineage root."""

from __future__ import annotations

from segment_lineage.lineage.core.errors import LineageError


class RetentionError(LineageError):
    """Root of every error the retention package raises on purpose."""


class FencedError(RetentionError):
    """This process may no longer delete (its session or leadership is gone)."""
