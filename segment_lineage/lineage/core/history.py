"""A table's history: one frozen record per committed version, for the
audit trail (who, when, why, what it changed). No I/O here."""

from __future__ import annotations

from dataclasses import dataclass

from segment_lineage.lineage.core.model import Audit, Change, Detail, Operation


@dataclass(frozen=True)
class HistoryRecord:
    """One committed version of a table, for the audit trail."""

    version: int
    commit_id: str
    at_ms: int
    operation: Operation
    entry_id: str | None
    actor: str
    job_id: str | None
    reason: str | None
    segments: int
    rows: int
    size_bytes: int
    cleaned: tuple[str, ...] = ()  # entries force cleanup reverted (or removed) in this commit
    detail: Detail | None = None
    set_id: str | None = None  # committed with other tables' changes in one request (a push set)
    set_size: int = 0  # the tables that request changed, this one included (0: unknown, or no set)

    @staticmethod
    def of(version: int, commit_id: str, at_ms: int, change: Change, audit: Audit) -> HistoryRecord:
        """The record of committing ``change`` as ``version``."""
        return HistoryRecord(
            version,
            commit_id,
            at_ms,
            change.operation,
            change.entry_id,
            audit.actor,
            audit.job_id,
            audit.reason,
            change.segments,
            change.rows,
            change.size_bytes,
            change.cleaned,
            change.detail,
            audit.set_id,
            audit.set_size,
        )
