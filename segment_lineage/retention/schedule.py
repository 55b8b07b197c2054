"""When the retention daemon runs its passes: a crontab expression (UTC,
read as cron reads it: :mod:`segment_lineage.retention.cron`) or a fixed
interval, as an APScheduler trigger; the scheduler that runs the passes on
it; and when a leader that has completed no pass has missed two periods of
it (its health)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.lineage.core.periods import format_period, parse_period
from segment_lineage.retention.cron import crontab_fields


def crontab(expression: str) -> CronTrigger:
    """A crontab expression (UTC) as crontab reads it (:mod:`segment_lineage.retention.cron`)."""
    return CronTrigger(**crontab_fields(expression), timezone=UTC)


@dataclass(frozen=True)
class Schedule:
    """When passes run: a crontab expression (UTC) or a fixed interval."""

    cron: str | None = None
    interval_ms: int | None = None

    @staticmethod
    def parse(cron: str | None, interval: str | None) -> Schedule:
        if (cron is None) == (interval is None):
            raise InvalidInputError("give exactly one of --cron and --interval")
        if interval is not None:
            ms = parse_period(interval)
            if ms < 1000:
                raise InvalidInputError(f"invalid interval {interval!r}: at least 1s")
            return Schedule(interval_ms=ms)
        assert cron is not None
        try:
            trigger = crontab(cron)
        except ValueError as exc:
            raise InvalidInputError(f"invalid cron expression {cron!r}: {exc}") from None
        if trigger.get_next_fire_time(None, datetime.fromtimestamp(time.time(), UTC)) is None:
            raise InvalidInputError(f"cron expression {cron!r} never fires: no pass would ever run")
        return Schedule(cron=cron)

    def trigger(self) -> BaseTrigger:
        if self.cron is not None:
            return crontab(self.cron)
        assert self.interval_ms is not None
        return IntervalTrigger(seconds=self.interval_ms / 1000, timezone=UTC)

    def describe(self) -> str:
        return f"cron {self.cron!r} (UTC)" if self.cron else f"every {format_period(self.interval_ms or 0)}"

    def second_run_after(self, reference_s: float) -> float:
        """When (seconds since the epoch) the second run scheduled after
        ``reference_s`` is due: a leader that has completed no pass by then
        has missed two periods of its schedule."""
        if self.interval_ms is not None:
            return reference_s + 2 * self.interval_ms / 1000
        trigger = self.trigger()
        first = trigger.get_next_fire_time(None, datetime.fromtimestamp(reference_s, UTC))
        second = None if first is None else trigger.get_next_fire_time(first, first + timedelta(seconds=1))
        return float("inf") if second is None else second.timestamp()

    def start(
        self, tick: Callable[[], None], heartbeat: Callable[[], None], heartbeat_s: float, now_s: float
    ) -> BackgroundScheduler:
        """A started scheduler running ``tick`` on this schedule (an
        interval's first at once, ``now_s``; a cron's when it first fires)
        and ``heartbeat`` every ``heartbeat_s``; one of each at a time."""
        # APScheduler's own lines (jobs added, started, a run skipped because a
        # pass outlasted its interval) are not news: the daemon logs its own.
        logging.getLogger("apscheduler").setLevel(logging.ERROR)
        scheduler = BackgroundScheduler(timezone=UTC)
        # An explicit next_run_time of None would add the job paused.
        first = {"next_run_time": datetime.fromtimestamp(now_s, UTC)} if self.interval_ms else {}
        scheduler.add_job(
            tick,
            self.trigger(),
            id="retention-pass",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            **first,
        )
        scheduler.add_job(
            heartbeat, IntervalTrigger(seconds=heartbeat_s, timezone=UTC), id="election", max_instances=1
        )
        scheduler.start()
        return scheduler
