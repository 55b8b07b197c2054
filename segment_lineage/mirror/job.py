"""The mirror's maintenance job, registered on the retention daemon and run
after each pass: publish the versions a commit's own publish missed, clean
the log's old files, and say how far behind each mirrored table is (its lag
gauges, in the daemon's metrics registry)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge

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


class MirrorJob:
    """The catch-up as the daemon's job, with its metrics."""

    def __init__(self, manager: LineageManager, registry: CollectorRegistry) -> None:
        self.manager = manager
        self.lag_versions = Gauge(
            "lineage_mirror_lag_versions",
            "Versions of a mirrored table not yet published to its mirror (after the last publish).",
            ["table"],
            registry=registry,
        )
        self.lag_seconds = Gauge(
            "lineage_mirror_lag_seconds",
            "Age of the oldest version of a mirrored table not yet published (0 when none).",
            ["table"],
            registry=registry,
        )
        self.failures = Counter(
            "lineage_mirror_publish_failures", "Publishes to a table's mirror that failed.", registry=registry
        )
        self._lagging: set[str] = set()  # the tables the lag gauges name

    def run(self, tables: Sequence[str] | None, stopping: Callable[[], bool]) -> None:
        """Catch up ``tables`` and set the lag gauges to what is left. Never raises."""
        try:
            lags = catch_up(self.manager, tables, stopping)
        except LineageError as exc:
            log.warning("mirror publish skipped: %s", exc.message)
            return
        for gone in self._lagging - {lag.table for lag in lags}:  # no gauges for a table without a mirror
            for gauge in (self.lag_versions, self.lag_seconds):
                with contextlib.suppress(KeyError):
                    gauge.remove(gone)
        self._lagging = {lag.table for lag in lags}
        for lag in lags:
            self.failures.inc(int(lag.failed))
            self.lag_versions.labels(lag.table).set(lag.versions)
            self.lag_seconds.labels(lag.table).set(lag.seconds)
