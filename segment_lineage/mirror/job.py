"""The mirror's maintenance job, run by the retention daemon after each
pass: publish the versions a commit's own publish missed, clean the log's
old files, and say how far behind each mirrored table is (its lag gauges)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.mirror.publisher import mirrored_tables, sync_many
from segment_lineage.mirror.views import status

log = logging.getLogger("lineage.retention")


@dataclass(frozen=True)
class Lag:
    """How far a mirror is behind its table after the job."""

    table: str
    versions: int
    seconds: float
    failed: bool  # its publish failed (said in the log)


def catch_up(
    manager: LineageManager, tables: Sequence[str] | None, stopping: Callable[[], bool]
) -> list[Lag]:
    """Publish every mirrored table's versions not yet published (of
    ``tables``; None: every table), until ``stopping``. Raises LineageError
    only when the tables cannot be listed; a table's own failure is logged
    and reported as its lag."""
    mirrored = mirrored_tables(manager, None if tables is None else list(tables))
    out = []
    for table, result in sync_many(manager, mirrored, listed=True, clean=True, stopping=stopping):
        behind, lag_ms = 0, 0  # published up to the head the sync read
        if isinstance(result, LineageError):
            log.warning("mirror of %s: publish failed: %s", table, result.message)
            try:
                found = status(manager, table)
            except LineageError:
                continue
            behind, lag_ms = len(found.behind), found.lag_ms
        elif result.published or result.cleaned:
            log.info("mirror: %s; %d old log file(s) removed", result.line(), result.cleaned)
        out.append(Lag(table, behind, lag_ms / 1000, isinstance(result, LineageError)))
    return out
