"""Errors of the retention package: one root under the lineage root."""

from __future__ import annotations

from typing import TYPE_CHECKING

from segment_lineage.lineage.core.errors import LineageError

if TYPE_CHECKING:
    from segment_lineage.retention.report import TableReport


class RetentionError(LineageError):
    """Root of every error the retention package raises on purpose."""


class FencedError(RetentionError):
    """This process may no longer delete (its session or leadership is gone).
    ``done``: the reports of the tables the pass went over before it stopped,
    the stopped table's last (what it deleted before the fence fell counts)."""

    def __init__(self, message: str, *, remedy: str | None = None) -> None:
        super().__init__(message, remedy=remedy)
        self.done: list[TableReport] = []
