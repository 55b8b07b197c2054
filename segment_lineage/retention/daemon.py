"""The retention daemon: retention passes on a schedule, as a cron service.

Several daemons may run against one ZooKeeper, and they share the work:
each table is owned by exactly one daemon at a time, through an election of
its own (:class:`segment_lineage.lineage.store.election.Ownership`).
Daemons given different tables each own theirs; daemons given the same
tables spread them evenly; a daemon that dies leaves its tables to the
others once its session expires. A pass runs over the tables this daemon
owns, each in its ownership *term*, and every file delete first checks that
the term still holds: a daemon that lost its session or a table, or that was
paused past its session timeout, deletes nothing more there. The interrupted
work is finished by the table's next owner, because the intent was recorded
first (see :mod:`segment_lineage.retention.executor`).

ZooKeeper restarts and session expiry do not stop the daemon: passes fail
while the ensemble is away, and resume (in a new term) when it is back.
SIGTERM and SIGINT stop it cleanly: the running pass stops at its next file,
the daemon leaves the election so a standby takes over at once, and exits 0.

One log line per pass. Prometheus metrics and a ``/healthz`` endpoint are
served on ``--metrics-port``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import signal
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Protocol

from prometheus_client import CollectorRegistry

from segment_lineage.lineage.core.errors import LineageError, StoreUnavailableError
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.retention.errors import FencedError
from segment_lineage.retention.executor import PassOptions, run_pass
from segment_lineage.retention.metrics import Metrics, serve
from segment_lineage.retention.report import PassSummary, TableReport
from segment_lineage.retention.schedule import Schedule

log = logging.getLogger("lineage.retention")
HEARTBEAT_S = 5.0


class Owners(Protocol):
    """A candidacy for many tables (see segment_lineage.lineage.store.election.Ownership)."""

    def check(self, tables: Sequence[str], *, keep: Collection[str] = ()) -> dict[str, str]: ...

    def holds(self, table: str, term: str) -> bool: ...

    def owners(self) -> dict[str, str | None]: ...

    def resign(self) -> None: ...

    @property
    def connected(self) -> bool: ...


@dataclass
class Status:
    passes: int = 0
    failures: int = 0
    last_success_ms: int | None = None
    last_error: str | None = None
    last_pass_failed: bool = False
    last_pass_s: float | None = None  # when the last pass completed (with or without errors)
    leading_since_s: float | None = None  # since when this daemon has owned tables; None: standby
    owned: tuple[str, ...] = ()  # the tables it owned at the last check
    unowned: tuple[str, ...] = ()  # tables nobody owned at the last two checks


class Job(Protocol):
    """A maintenance job the daemon runs after each pass, over the tables it owns."""

    def run(self, tables: Sequence[str] | None, stopping: Callable[[], bool]) -> None: ...


JobFactory = Callable[[LineageManager, CollectorRegistry], Job]


class Daemon:
    """Retention passes on a schedule over the tables this daemon owns, then
    the maintenance jobs registered on it; elections kept between passes,
    health and metrics served (see the module's docstring)."""

    def __init__(
        self,
        manager: LineageManager,
        owners: Owners,
        schedule: Schedule,
        options: PassOptions,
        tables: Sequence[str] | None = None,
        *,
        clock: Callable[[], float] | None = None,
        wall: Callable[[], float] | None = None,
        jobs: Sequence[JobFactory] | None = None,
    ) -> None:
        """``clock`` (monotonic seconds) times the passes, and is the passes'
        clock unless ``options`` names one; ``wall`` (seconds since the epoch)
        dates the last success and the first scheduled run. By default the
        manager's env's (:mod:`segment_lineage.lineage.core.env`). ``jobs`` make the maintenance
        jobs run after each pass, each given the manager and the daemon's
        metrics registry for its own metrics (by default the mirror's
        catch-up, :class:`segment_lineage.mirror.job.MirrorJob`)."""
        self.manager = manager
        self.owners = owners
        self.schedule = schedule
        self.options = options
        self.tables = list(tables) if tables else None
        self.metrics = Metrics()
        if jobs is None:
            from segment_lineage.mirror.job import MirrorJob  # the mirror's modules load only for a daemon

            jobs = (MirrorJob,)
        self.jobs = tuple(make(manager, self.metrics.registry) for make in jobs)
        self.status = Status()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._clock = clock or manager.env.monotonic
        self._wall = wall or manager.env.wall
        self._labelled: set[str] = set()  # tables the ownership gauges name
        self._unowned: set[str] = set()  # tables nobody owned at the last check
        self._busy: str | None = None  # the table a pass is on (not handed over meanwhile)

    def clock(self) -> float:
        """The pass clock (monotonic seconds)."""
        return self._clock()

    def wall(self) -> float:
        """Seconds since the epoch."""
        return self._wall()

    # ---- one pass --------------------------------------------------------------

    def tick(self) -> None:
        """One scheduled pass over the tables this daemon owns. Never raises."""
        if self._stopping.is_set():
            return
        try:
            terms = self._check()
        except LineageError as exc:  # refused (the role's rights), say: no pass, and say why
            self.metrics.leader.set(0)
            self._failed(f"pass skipped: the election failed: {exc.message}", self.clock())
            return
        if not terms:
            self._say_idle()
            return
        self._pass(terms)

    def _pass(self, terms: dict[str, str]) -> None:
        """A pass over the tables owned, each in its term (one handed over
        since the check is left to its owner), then the maintenance jobs."""
        began = self.clock()
        with self._lock:
            self.status.passes += 1
        self.metrics.passes.inc()
        reports: list[TableReport] = []
        stopped: list[str] = []
        handed = 0
        for table, term in sorted(terms.items()):
            if self._stopping.is_set():
                stopped.append("the daemon is stopping")
                break
            self._busy = table
            try:
                if not self.owners.holds(table, term):
                    handed += 1  # handed over (or lost) since the check: the owner now passes over it
                    continue
                reports += run_pass(self.manager, [table], self._options(table, term))
            except FencedError as exc:  # lost mid-pass (a hand-over waits for the pass): said as a stop
                stopped.append(exc.message)
                reports += exc.done  # what it deleted before the stop counts
            except LineageError as exc:  # run_pass reports a table's own failures; this is the rest
                reports.append(self._failed_table(table, exc.message))
            except Exception as exc:
                log.exception("pass on %s failed unexpectedly", table)
                reports.append(self._failed_table(table, f"{type(exc).__name__}: {exc}"))
            finally:
                self._busy = None
        if handed:
            log.info("%d table(s) went to other daemons before their turn in this pass", handed)
        self._finished(reports, began, stopped)
        if not stopped:
            self.after_pass(sorted(terms))

    def _failed_table(self, table: str, error: str) -> TableReport:
        """The report of a table whose pass raised ``error``."""
        failed = TableReport(table, self.options.dry_run)
        failed.errors.append(error)
        return failed

    def _say_idle(self) -> None:
        """Why a pass did nothing: ZooKeeper away, no table, or a standby."""
        if not self.owners.connected:
            log.warning("pass skipped: ZooKeeper is unreachable; waiting for it to come back")
            return
        owners = self.owners.owners()
        if not owners:
            log.info("pass skipped: no table to keep (none of those given exists, or none at all yet)")
            return
        seen = sorted({o for o in owners.values() if o})
        log.info(
            "pass skipped: standby, owns none of its %d table(s) (owned by: %s)",
            len(owners),
            ", ".join(seen[:5]) + (", ..." if len(seen) > 5 else "") if seen else "nobody yet",
        )

    def _options(self, table: str, term: str) -> PassOptions:
        """The pass options for ``table``, fenced by its ownership term."""

        def fence() -> None:
            if self._stopping.is_set():
                raise FencedError("the daemon is stopping: deleting nothing more")
            if not self.owners.holds(table, term):
                raise FencedError(
                    f"ownership of {table!r} or the ZooKeeper session was lost: deleting nothing more"
                )

        return dataclasses.replace(
            self.options,
            fence=fence,
            progress=log.info,
            clock=self.options.clock or self._clock,
        )

    def _wanted(self) -> list[str] | None:
        """The tables this daemon stands for: those it was given that exist,
        else every table (listed anew each time: a table created later is
        cleaned too, and a dropped one left). None: the store is unavailable."""
        try:
            listing = self.manager.table_listing()
        except StoreUnavailableError:
            return None
        there = sorted([*listing.readable, *listing.unreadable])
        if self.tables is not None:
            present = set(there)
            return [t for t in self.tables if t in present]
        return there

    def _check(self) -> dict[str, str]:
        """Stand for the tables, and note what this daemon owns (the
        gauges, the health report). Raises LineageError when refused."""
        tables = self._wanted()
        busy = self._busy
        terms = {} if tables is None else self.owners.check(tables, keep=() if busy is None else (busy,))
        owners = self.owners.owners()
        unowned = {t for t, owner in owners.items() if owner is None} if tables is not None else set()
        self._gauge_owners(owners, terms)
        with self._lock:
            self.status.owned = tuple(sorted(terms))
            self.status.unowned = tuple(sorted(unowned & self._unowned))
        self._unowned = unowned
        self._leading(bool(terms))
        return terms

    def _gauge_owners(self, owners: dict[str, str | None], terms: dict[str, str]) -> None:
        """Set the ownership gauges: which tables this daemon owns, and which
        have an owner at all (a table no longer there leaves them)."""
        for gone in self._labelled - set(owners):
            for gauge in (self.metrics.table_owned, self.metrics.table_has_owner):
                with contextlib.suppress(KeyError):
                    gauge.remove(gone)
        self._labelled = set(owners)
        for table, owner in owners.items():
            self.metrics.table_owned.labels(table).set(1 if table in terms else 0)
            self.metrics.table_has_owner.labels(table).set(0 if owner is None else 1)
        self.metrics.tables_owned.set(len(terms))

    def after_pass(self, tables: Sequence[str] | None = None) -> None:
        """Run the maintenance jobs registered on the daemon (the mirror's
        catch-up, by default) over ``tables``: the ones this daemon owns,
        after each pass (None: those it was given, else every table). A
        job never raises; it logs and counts its own failures."""
        for job in self.jobs:
            job.run(self.tables if tables is None else tables, self._stopping.is_set)

    def _record_failure(self, error: str) -> None:
        self.metrics.failures.inc()
        with self._lock:
            self.status.failures += 1
            self.status.last_error = error
            self.status.last_pass_failed = True

    def _failed(self, message: str, began: float) -> None:
        self._record_failure(message)
        log.warning("%s (%.1fs)", message, self.clock() - began)

    def _finished(self, reports: list[TableReport], began: float, stopped: Sequence[str] = ()) -> None:
        if stopped:  # what the tables before the stop did still counts
            self._record_failure(f"pass stopped on {len(stopped)} table(s): {stopped[0]}")
        else:
            with self._lock:
                self.status.last_pass_s = self.wall()
            self.metrics.overdue.set(0)
        done = PassSummary.of(reports)
        for note in done.notes:
            log.info("%s", note)
        age_s = done.oldest_age_s(self._now_ms())
        self.metrics.record(done, age_s)
        line = done.line(age_s, self.clock() - began)
        if stopped:
            log.warning("pass stopped on %d table(s): %s; %s", len(stopped), stopped[0], line)
            return
        if done.errors:
            self._record_failure(done.errors[0])
            log.warning("%s; first error: %s", line, done.errors[0])
            return
        succeeded = self.wall()
        with self._lock:
            self.status.last_success_ms = int(succeeded * 1000)
            self.status.last_pass_failed = False
        self.metrics.last_success.set(succeeded)
        log.info("%s", line)

    def _now_ms(self) -> int | None:
        try:
            return self.manager.now_ms()
        except LineageError:
            return None

    def heartbeat(self) -> None:
        """Keep the elections (and the ownership gauges) current between
        passes: a dead daemon's tables are taken over here, and tables are
        handed to higher-ranked daemons that joined."""
        if self._stopping.is_set():
            return
        try:
            self._check()
        except LineageError:
            self._leading(False)  # the next pass says why

    def _leading(self, leading: bool) -> None:
        """Note whether this daemon owns tables (since when), and whether
        its passes are overdue."""
        with self._lock:
            if not leading:
                self.status.leading_since_s = None
            elif self.status.leading_since_s is None:
                self.status.leading_since_s = self.wall()
        self.metrics.leader.set(1 if leading else 0)
        self.metrics.overdue.set(1 if self.overdue() else 0)

    def overdue(self) -> bool:
        """Whether this daemon owns tables and has completed no pass since it
        began to own them or since its last pass, by the second run its
        schedule set after either (a cron that never fires, a pass that hangs)."""
        with self._lock:
            since = self.status.leading_since_s
            if since is None:
                return False
            reference = max(since, self.status.last_pass_s or since)
        return self.wall() > self.schedule.second_run_after(reference)

    # ---- health ----------------------------------------------------------------

    def health(self) -> tuple[bool, dict[str, object]]:
        with self._lock:
            status = dataclasses.replace(self.status)
        connected = self.owners.connected
        overdue = self.overdue()
        healthy = (
            connected
            and not (status.last_pass_failed and status.owned)  # a standby's old failure is not its health
            and not overdue
            and not status.unowned
            and not self._stopping.is_set()
        )
        owners = self.owners.owners()
        return healthy, {
            "healthy": healthy,
            "connected": connected,
            "overdue": overdue,
            "last_pass_ms": None if status.last_pass_s is None else int(status.last_pass_s * 1000),
            "leader": bool(status.owned),
            "tables": len(owners),
            "owned": list(status.owned),
            "unowned": list(status.unowned),
            "owners": owners,
            "schedule": self.schedule.describe(),
            "passes": status.passes,
            "failures": status.failures,
            "last_success_ms": status.last_success_ms,
            "last_error": status.last_error,
        }

    # ---- the service -----------------------------------------------------------

    def serve(self, metrics_host: str = "127.0.0.1", metrics_port: int | None = None) -> None:
        """Run until SIGTERM/SIGINT (or :meth:`stop`). Call from the main thread."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        server = (
            serve(metrics_host, metrics_port, self.metrics, self.health) if metrics_port is not None else None
        )
        scheduler = self.schedule.start(self.tick, self.heartbeat, self.heartbeat_s, self.wall())
        log.info(
            "retention daemon started: %s, tables: %s%s",
            self.schedule.describe(),
            ", ".join(self.tables) if self.tables else "all",
            f", metrics on http://{metrics_host}:{server.server_address[1]}/metrics" if server else "",
        )
        try:
            while not self._stopping.wait(1.0):
                pass
        finally:
            scheduler.shutdown(wait=True)
            self.owners.resign()
            if server is not None:
                server.shutdown()
                server.server_close()
            log.info("retention daemon stopped")

    @property
    def heartbeat_s(self) -> float:
        """How often the elections are checked between passes: often enough
        that a dead daemon's tables move within its session timeout of the
        expiry."""
        return max(0.5, min(HEARTBEAT_S, self.manager.session_timeout_s / 3))

    def stop(self) -> None:
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: stopping after the current file", signal.Signals(signum).name)
        self.stop()
