"""The retention daemon on real ZooKeeper with real files: the election, fencing
(leader killed, session expired, ZooKeeper restarted, process stopped past
its session timeout), clean stops, metrics and the health check."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from kazoo.client import KazooClient
from typer.testing import CliRunner

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.lineage.core.model import TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
from segment_lineage.lineage.store.election import Ownership
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.server import ZkServer, free_port
from segment_lineage.lineage.zk.store import ZkStore
from segment_lineage.retention.daemon import Daemon
from segment_lineage.retention.executor import PassOptions
from segment_lineage.retention.report import TableReport
from segment_lineage.retention.schedule import Schedule
from tests.conftest import fast_retry
from tests.helpers.owners import OwnsAll
from tests.helpers.paths import REPO
from tests.helpers.run import wait_for

pytestmark = [pytest.mark.zk, pytest.mark.slow]
SESSION_S = 4
ROOT = REPO


@dataclass
class Proc:
    popen: subprocess.Popen[bytes]
    log_path: Path
    port: int

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def deleted(self) -> int:
        return sum(int(n) for n in re.findall(r"pass done: .*?deleted (\d+) file", self.log()))

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            text = r.read().decode()
        match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        assert match, f"{name} not in metrics"
        return float(match.group(1))


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    started: list[Proc] = []

    def start(
        hosts: str,
        name: str,
        *extra: str,
        failpoint: str | None = None,
        schedule: tuple[str, ...] = ("--interval", "1s"),
        clock_ahead_s: float = 0.0,
    ) -> Proc:
        env = {**os.environ, "LINEAGE_ZK_SESSION_TIMEOUT": str(SESSION_S), "PYTHONPATH": str(ROOT)}
        env.pop("LINEAGE_FAILPOINT", None)
        if failpoint:
            env["LINEAGE_FAILPOINT"] = failpoint
        port = free_port()
        log_path = tmp_path / f"{name}.log"
        args = [sys.executable, "-m", "segment_lineage", "--zk", hosts, "retention", "daemon"]
        args += [*schedule, "--min-grace", "0s", "--metrics-port", str(port), *extra]
        if clock_ahead_s:  # the daemon's wall clock runs that far ahead (its own process only)
            args = ["faketime", "-f", f"+{clock_ahead_s:.3f}s", *args]
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        with log_path.open("wb") as log:
            # Its own process group: faketime runs the daemon as its child,
            # and the teardown must stop both.
            popen = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        proc = Proc(popen, log_path, port)
        started.append(proc)
        wait_for(f"{name} to start", lambda: "retention daemon started" in proc.log(), 30)
        return proc

    yield start
    for proc in started:
        with contextlib.suppress(ProcessLookupError):  # the daemon, and faketime's child if any
            os.killpg(proc.popen.pid, signal.SIGKILL)
        proc.popen.wait()


def part(label: str) -> pa.Table:
    return pa.table({"label": [label] * 3, "i": [0, 1, 2]})


@dataclass
class Replaced:
    manager: LineageManager
    root: Path
    old: list[Path]  # the replaced snapshot's files
    new: list[Path]  # the visible snapshot's files

    def remaining(self) -> list[Path]:
        return [p for p in self.old if p.exists()]


def replaced_table(store: ZkStore, root: Path, parts: int = 6, name: str = "events") -> Replaced:
    m = LineageManager(store, retry=fast_retry(), claims=RootClaimFiles())
    m.create_table(
        TableConfig.build(
            name, str(root), replaced_segments_retention="0s", lineage_entry_cleanup_retention="0s"
        )
    )
    push_arrow(m, name, [part(f"v1-{i}") for i in range(parts)])
    old = [root / s.location for s in m.visible_segments(name)]
    assert all(p.exists() for p in old)
    push_arrow(m, name, [part("v2")])
    new = [root / s.location for s in m.visible_segments(name)]
    # Not the old files again: a daemon already running (with no grace) may reclaim them at once.
    assert all(p.exists() for p in new)
    return Replaced(m, root, old, new)


def members(store: ZkStore, table: str = "events") -> list[str]:
    """The candidates in ``table``'s retention election."""
    path = f"{store.root}/leaders/retention.{table}"
    return sorted(store.client.get_children(path)) if store.client.exists(path) else []


def test_two_daemons_one_deletes_metrics_health_and_clean_stop(
    zk_hosts: str, zk_store: ZkStore, tmp_path: Path, daemons: Callable[..., Proc]
) -> None:
    table = replaced_table(zk_store, tmp_path / "events")
    a = daemons(zk_hosts, "a")
    b = daemons(zk_hosts, "b")
    wait_for("the replaced snapshot to go", lambda: not table.remaining())
    wait_for("both daemons to pass", lambda: all("pass " in p.log() for p in (a, b)))
    assert all(p.exists() for p in table.new)
    assert sorted([a.deleted(), b.deleted()]) == [0, 6]  # one daemon deleted, once
    deleter = a if a.deleted() else b
    assert deleter.metric("lineage_retention_files_deleted_total") == 6.0
    # The deleter may hand the table to the other once it stands (on a busy
    # machine the first started may pass before the second stands): ask each
    # daemon's health who owns it now (its metrics move only at its passes).
    runner = CliRunner()
    from segment_lineage.cli import app

    def health(p: Proc) -> str:
        said = runner.invoke(app, ["retention", "health", "--url", f"http://127.0.0.1:{p.port}"])
        return said.stdout if said.exit_code == 0 else f"exit {said.exit_code}: {said.output}"

    def owners() -> list[Proc]:
        return [p for p in (a, b) if health(p).startswith("healthy: owns 1 of 1 table(s)")]

    seen: list[list[Proc]] = []

    def one_owner() -> bool:
        seen.append(owners())
        return len(seen[-1]) == 1

    wait_for("one daemon to own the table", one_owner)
    leader = seen[-1][0]
    standby = b if leader is a else a
    wait_for("the standby to skip a pass", lambda: "pass skipped: standby" in standby.log())
    last_success = "lineage_retention_last_success_timestamp_seconds"
    wait_for("the owner's pass", lambda: leader.metric(last_success) > 0)
    assert leader.metric("lineage_retention_pending_deletions") == 0.0
    assert health(standby).startswith("healthy: standby"), health(standby)
    assert table.manager.table("events").pending == {}

    leader.popen.send_signal(signal.SIGTERM)
    assert leader.popen.wait(timeout=30) == 0
    assert "retention daemon stopped" in leader.log()
    assert "session expired" not in leader.log()  # a clean stop ends its session, said by nobody
    wait_for("the standby to take over", lambda: standby.metric("lineage_retention_leader") == 1.0, 20)
    standby.popen.send_signal(signal.SIGINT)
    assert standby.popen.wait(timeout=30) == 0
    assert members(zk_store) == []  # both left the election
    gone = runner.invoke(app, ["retention", "health", "--url", f"http://127.0.0.1:{leader.port}"])
    assert gone.exit_code == 1 and "no daemon answered" in gone.stderr


def test_killing_the_leader_mid_pass_lets_the_other_finish(
    zk_hosts: str, zk_store: ZkStore, tmp_path: Path, daemons: Callable[..., Proc]
) -> None:
    table = replaced_table(zk_store, tmp_path / "events")
    a = daemons(zk_hosts, "a", failpoint="retention.mid-delete:sleep=60")
    wait_for("the leader's first delete", lambda: len(table.remaining()) == 5)
    b = daemons(zk_hosts, "b")
    wait_for("b to stand by", lambda: "pass skipped: standby" in b.log())
    a.popen.kill()
    a.popen.wait()
    wait_for("b to finish the pass", lambda: not table.remaining(), SESSION_S * 5)
    wait_for("b's pass line", lambda: b.deleted() == 5)
    assert all(p.exists() for p in table.new)
    state = table.manager.table("events")
    assert state.pending == {} and len(state.segments) == 1


class ExpiresMidPass:
    """A candidacy whose ZooKeeper session expires just before the first
    file delete of its first pass, as when the client was cut off."""

    def __init__(self, ownership: Ownership, hosts: str, at_call: int = 3) -> None:
        self.inner = ownership
        self.hosts = hosts
        self.at_call = at_call
        self.calls = 0
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def holds(self, table: str, term: str) -> bool:
        with self.lock:  # the expiry happens at one moment: every later check sees it
            return self._holds(table, term)

    def _holds(self, table: str, term: str) -> bool:
        self.calls += 1
        if self.calls == self.at_call:  # 3: after the check before the table and the pass's first fence
            client = self.inner.store.client
            old = client.client_id
            twin = KazooClient(hosts=self.hosts, client_id=old)
            twin.start()
            twin.stop()  # closing the twin's connection ends the shared session
            twin.close()
            wait_for("the session to be replaced", lambda: client.client_id != old and client.connected)
        return self.inner.holds(table, term)


def test_session_expiry_mid_pass_deletes_nothing_and_the_next_term_finishes(
    zk_hosts: str, zk_store: ZkStore, tmp_path: Path
) -> None:
    table = replaced_table(zk_store, tmp_path / "events")
    daemon_store = ZkStore(connect(ZkSettings(hosts=zk_hosts)), session_timeout_s=SESSION_S)
    try:
        candidate = ExpiresMidPass(Ownership(daemon_store, "test:1"), zk_hosts)
        manager = LineageManager(daemon_store, retry=fast_retry())
        daemon = Daemon(manager, candidate, Schedule(interval_ms=1000), PassOptions(min_grace_ms=0))
        daemon.tick()
        assert daemon.status.failures == 1 and "session was lost" in (daemon.status.last_error or "")
        assert len(table.remaining()) == 6  # intent recorded, nothing deleted
        assert len(table.manager.table("events").pending) == 6
        daemon.tick()  # a new session, a new term: the pass is finished
        assert not table.remaining() and table.manager.table("events").pending == {}
        assert daemon.status.last_pass_failed is False
    finally:
        daemon_store.close()


def test_a_pass_stopped_after_some_deletes_counts_them(
    zk_hosts: str, zk_store: ZkStore, tmp_path: Path
) -> None:
    """The session expires after two of six deletes: the pass stops, and the
    two files it did delete are counted (a stopped pass reported 0)."""
    table = replaced_table(zk_store, tmp_path / "events")
    daemon_store = ZkStore(connect(ZkSettings(hosts=zk_hosts)), session_timeout_s=SESSION_S)
    try:
        candidate = ExpiresMidPass(Ownership(daemon_store, "test:1"), zk_hosts, at_call=5)
        manager = LineageManager(daemon_store, retry=fast_retry())
        daemon = Daemon(manager, candidate, Schedule(interval_ms=1000), PassOptions(min_grace_ms=0))
        daemon.tick()
        assert daemon.status.failures == 1 and "session was lost" in (daemon.status.last_error or "")
        assert len(table.remaining()) == 4
        assert daemon.metrics.files._value.get() == 2
        assert daemon.metrics.bytes._value.get() > 0
    finally:
        daemon_store.close()


@pytest.mark.parametrize(
    "outage_s",
    [pytest.param(0, marks=pytest.mark.e2e), 2 * SESSION_S],  # make test keeps the outage past the session
    ids=["within", "past-the-session-timeout"],
)
def test_the_daemon_survives_a_zookeeper_restart(
    tmp_path: Path, daemons: Callable[..., Proc], outage_s: int
) -> None:
    server = ZkServer(tmp_path / "zk", free_port())
    server.start()
    try:
        store = ZkStore(connect(ZkSettings(hosts=server.hosts)))
        table = replaced_table(store, tmp_path / "events", parts=2)
        d = daemons(server.hosts, "d")
        wait_for("the first snapshot to go", lambda: not table.remaining())
        store.close()
        server.stop()
        wait_for("a pass without ZooKeeper", lambda: "ZooKeeper is unreachable" in d.log())
        time.sleep(outage_s)
        server.start()
        store = ZkStore(connect(ZkSettings(hosts=server.hosts)))
        m = LineageManager(store, retry=fast_retry())
        second = [table.root / s.location for s in m.visible_segments("events")]
        push_arrow(m, "events", [part("v3")])
        wait_for("the second snapshot to go", lambda: not any(p.exists() for p in second))
        assert d.popen.poll() is None
        # One line per change of the connection's state, not kazoo's at every retry.
        log = d.log()
        assert "Connection dropped" not in log and "Connection time-out" not in log, log
        assert log.count("ZooKeeper connection lost") == 1 and "ZooKeeper connection back" in log, log
        store.close()
    finally:
        server.stop()


def test_a_daemon_stopped_past_its_session_timeout_deletes_nothing_stale(
    zk_hosts: str, zk_store: ZkStore, tmp_path: Path, daemons: Callable[..., Proc]
) -> None:
    table = replaced_table(zk_store, tmp_path / "events")
    a = daemons(zk_hosts, "a", failpoint="retention.after-mark:sleep=3")
    wait_for("the intent to be recorded", lambda: len(table.manager.table("events").pending) == 6)
    os.kill(a.popen.pid, signal.SIGSTOP)
    try:
        wait_for("the stopped daemon's session to expire", lambda: members(zk_store) == [], SESSION_S * 4)
    finally:
        os.kill(a.popen.pid, signal.SIGCONT)
    # The resumed pass finds its session gone: the fence (or the store,
    # whichever asks ZooKeeper first) stops it before any delete.
    wait_for("the resumed pass to end", lambda: re.search(r"pass stopped|pass done: .* 1 error", a.log()))
    assert len(table.remaining()) == 6  # the plan of the dead term deleted nothing
    assert "ZooKeeper session expired" in a.log()  # said once, in the daemon's words
    wait_for("a fresh term to finish", lambda: not table.remaining())
    assert a.popen.poll() is None


def test_daemon_options_are_checked(lineage_home: Path) -> None:
    from segment_lineage.cli import app

    runner = CliRunner()
    for args, message in (
        ([], "exactly one of --cron and --interval"),
        (["--cron", "*/5 * * *", "--interval", "1m"], "exactly one of --cron and --interval"),
        (["--cron", "*/5 * * *"], "invalid cron expression"),
        (["--interval", "0s"], "at least 1s"),
        (["--interval", "often"], "invalid period"),
        (["--interval", "1m", "--metrics-port", "70000"], "invalid metrics port"),
    ):
        result = runner.invoke(app, ["retention", "daemon", *args])
        assert result.exit_code in (1, 2) and message in result.stderr, (args, result.output)


def test_the_daemon_reads_time_only_through_the_clocks_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its passes are timed on ``clock`` (handed to the pass unless the
    options name one) and its last success is dated by ``wall``."""
    import segment_lineage.retention.daemon as daemon_module
    from segment_lineage.lineage.store.memory import MemoryStore

    manager = LineageManager(MemoryStore(), retry=fast_retry(), claims=RootClaimFiles())
    manager.create_table(TableConfig.build("t", str(tmp_path / "t")))
    ticks = [0.0]

    def clock() -> float:
        ticks[0] += 1.0
        return ticks[0]

    given: list[PassOptions] = []
    real_pass = daemon_module.run_pass

    def run_pass(
        manager: LineageManager, tables: Sequence[str] | None, options: PassOptions
    ) -> list[TableReport]:
        given.append(options)
        return real_pass(manager, tables, options)

    monkeypatch.setattr(daemon_module, "run_pass", run_pass)
    daemon = Daemon(
        manager, OwnsAll(), Schedule(interval_ms=1000), PassOptions(), clock=clock, wall=lambda: 1234.5
    )
    daemon.tick()
    assert daemon.status.last_success_ms == 1_234_500 and not daemon.status.last_pass_failed
    assert (
        daemon.metrics.registry.get_sample_value("lineage_retention_last_success_timestamp_seconds") == 1234.5
    )
    assert given[0].clock is clock and ticks[0] >= 2  # the pass began and ended on it
    own = PassOptions(clock=lambda: 0.0)
    Daemon(manager, OwnsAll(), Schedule(interval_ms=1000), own, clock=clock).tick()
    assert given[1].clock is own.clock


def test_a_daemon_given_no_clocks_takes_its_managers_env(tmp_path: Path) -> None:
    """Time is handed in, never patched: a daemon given no clocks reads its
    manager's env (the simulation's virtual one), at each call."""
    from segment_lineage.lineage.core.env import Env
    from segment_lineage.lineage.store.memory import MemoryStore

    now = [7.0, 4321.0]
    env = Env(monotonic=lambda: now[0], wall=lambda: now[1])
    manager = LineageManager(MemoryStore(env=env), retry=fast_retry(), claims=RootClaimFiles(), env=env)
    manager.create_table(TableConfig.build("t", str(tmp_path / "t")))
    daemon = Daemon(manager, OwnsAll(), Schedule(interval_ms=1000), PassOptions())
    assert daemon.clock() == 7.0 and daemon.wall() == 4321.0
    now[1] = 4322.0
    daemon.tick()
    assert daemon.status.last_success_ms == 4_322_000


def test_the_leader_publishes_what_the_commits_did_not_and_reports_the_lag(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    """A mirrored table pushed to by a manager without the publish hook (as
    after a publish that failed): its mirror lags, and the lag gauges say so;
    the leader's tick publishes, and they fall to zero."""
    import datetime as dt

    from segment_lineage.mirror.publisher import sync
    from segment_lineage.mirror.views import status

    root = str(tmp_path / "t")
    zk_manager.create_table(TableConfig.build("t", root, "APPEND", time_column="ts", mirror="delta"))
    rows = pa.table({"ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC)]), "v": [1]})
    push_arrow(zk_manager, "t", [rows], mode="append")
    sync(zk_manager, "t")
    push_arrow(zk_manager, "t", [rows], mode="append")
    push_arrow(zk_manager, "t", [rows], mode="append")
    assert len(status(zk_manager, "t").behind) == 2
    daemon = Daemon(zk_manager, OwnsAll(), Schedule(interval_ms=1000), PassOptions())
    sample = daemon.metrics.registry.get_sample_value
    daemon.after_pass()
    assert status(zk_manager, "t").behind == ()
    assert sample("lineage_mirror_lag_versions", {"table": "t"}) == 0
    assert sample("lineage_mirror_lag_seconds", {"table": "t"}) == 0
    push_arrow(zk_manager, "t", [rows], mode="append")
    from deltalake import write_deltalake

    write_deltalake(root, rows, mode="append")  # another writer's commit
    daemon.tick()
    assert sample("lineage_mirror_publish_failures_total") == 1
    assert (sample("lineage_mirror_lag_versions", {"table": "t"}) or 0) >= 1
    assert daemon.status.passes == 1


def test_a_cron_daemon_runs_its_passes_when_the_cron_fires(
    zk_hosts: str, zk_store: ZkStore, tmp_path: Path, daemons: Callable[..., Proc]
) -> None:
    """`retention daemon --cron "* * * * *"`, started as a user starts it:
    no pass before the minute turns, then the cron fires and a pass reclaims
    the replaced files; /healthz and `retention health` count the pass.

    Where libfaketime is installed, the daemon's clock is set ahead so that
    the minute turns about 15 seconds after it starts (retention's ages come
    from ZooKeeper's clock, which stays true); elsewhere the test waits for
    the real minute."""
    table = replaced_table(zk_store, tmp_path / "events")
    ahead = (45 - time.time() % 60) % 60 if shutil.which("faketime") else 0.0
    proc = daemons(zk_hosts, "cron", schedule=("--cron", "* * * * *"), clock_ahead_s=ahead)
    assert "apscheduler" not in proc.log() and "Adding job" not in proc.log(), proc.log()
    wait_for("the cron to fire a pass", lambda: "pass done" in proc.log(), 130)
    wait_for("the replaced snapshot to go", lambda: not table.remaining(), 10)
    assert all(p.exists() for p in table.new)
    assert proc.deleted() == 6
    from segment_lineage.cli import app

    healthy = CliRunner().invoke(
        app, ["--json", "retention", "health", "--url", f"http://127.0.0.1:{proc.port}"]
    )
    assert healthy.exit_code == 0, healthy.output
    report = json.loads(healthy.stdout)
    assert report["passes"] >= 1 and report["overdue"] is False and report["last_pass_ms"], report
    assert proc.metric("lineage_retention_pass_overdue") == 0.0


class Wall:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("schedule", "late_s"),
    [(Schedule(interval_ms=60_000), 120), (Schedule(cron="0 3 * * *"), 47 * 3600)],
)
def test_a_leader_with_no_pass_within_two_periods_is_unhealthy(
    tmp_path: Path, schedule: Schedule, late_s: float
) -> None:
    """A leader whose schedule never runs its passes (or whose pass hangs)
    is unhealthy once two periods went by with no pass completed: /healthz
    says overdue and the pass-overdue gauge is 1; a completed pass mends it."""
    from segment_lineage.lineage.store.memory import MemoryStore

    manager = LineageManager(MemoryStore(), retry=fast_retry(), claims=RootClaimFiles())
    manager.create_table(TableConfig.build("t", str(tmp_path / "t")))
    start = 1_795_665_600.0  # 2026-11-26T04:00:00Z: the cron fires at 03:00 the next two days
    wall = Wall(start)
    daemon = Daemon(manager, OwnsAll(), schedule, PassOptions(), wall=wall)
    daemon.heartbeat()  # leads from now
    wall.now = start + late_s - 60
    daemon.heartbeat()
    healthy, report = daemon.health()
    assert healthy and report["overdue"] is False
    wall.now = start + late_s + 60
    daemon.heartbeat()
    healthy, report = daemon.health()
    assert not healthy and report["overdue"] is True, report
    assert daemon.metrics.registry.get_sample_value("lineage_retention_pass_overdue") == 1.0
    daemon.tick()  # a pass completes
    healthy, report = daemon.health()
    assert healthy and report["overdue"] is False, report
    assert daemon.metrics.registry.get_sample_value("lineage_retention_pass_overdue") == 0.0


def test_cron_reads_days_as_cron_does_and_refuses_what_would_never_run() -> None:
    """Day of the week 0 and 7 are Sunday (APScheduler's from_crontab reads
    0 as Monday); a cron that never fires, or that restricts both the day of
    the month and the day of the week (cron runs on either), is refused."""
    from datetime import UTC, datetime

    from segment_lineage.lineage.core.errors import InvalidInputError
    from segment_lineage.retention.schedule import crontab

    thursday = datetime(2026, 11, 26, 12, tzinfo=UTC)
    for expression, day in (
        ("0 0 * * 0", "Sun 29"),
        ("0 0 * * 7", "Sun 29"),
        ("0 0 * * sun", "Sun 29"),
        ("0 0 * * 1", "Mon 30"),
        ("0 0 * * 1-5", "Fri 27"),
        ("0 0 * * 6", "Sat 28"),
        ("0 0 * * */3", "Sun 29"),  # sun, wed, sat: Saturday comes first
    ):
        fire = crontab(expression).get_next_fire_time(None, thursday)
        assert fire is not None
        assert fire.strftime("%a %d") == (day if "*/3" not in expression else "Sat 28"), expression
    for expression, message in (
        ("0 0 31 2 *", "never fires"),
        ("0 0 1 * 1", "not both"),
        ("0 0 * * 8", "0-7"),
        ("* * *", "5 fields"),
    ):
        with pytest.raises(InvalidInputError, match=message):
            Schedule.parse(expression, None)


def test_a_schedule_flag_wins_over_the_config_file(tmp_path: Path) -> None:
    """The config file names an interval; `--cron` on the command line wins
    (flags first), instead of 'give exactly one of --cron and --interval'."""
    from segment_lineage.cli import app

    config = tmp_path / "lineage.toml"
    config.write_text('[retention]\ninterval = "1m"\n')
    result = CliRunner().invoke(
        app, ["--config", str(config), "retention", "daemon", "--cron", "0 0 31 2 *"]
    )  # a cron that never fires: refused before anything starts, by its own fault
    assert result.exit_code == 2 and "never fires" in result.stderr, result.output


def health(proc: Proc) -> dict[str, object]:
    from segment_lineage.cli import app

    result = CliRunner().invoke(
        app, ["--json", "retention", "health", "--url", f"http://127.0.0.1:{proc.port}"]
    )
    report: dict[str, object] = json.loads(result.stdout)
    return report


def test_daemons_given_different_tables_each_clean_theirs(
    zk_hosts: str, zk_store: ZkStore, tmp_path: Path, daemons: Callable[..., Proc]
) -> None:
    """The outside trial's stopper: with one leader for every daemon, the
    standby's tables were never cleaned while it reported healthy."""
    events = replaced_table(zk_store, tmp_path / "events", parts=2, name="events")
    clicks = replaced_table(zk_store, tmp_path / "clicks", parts=2, name="clicks")
    a = daemons(zk_hosts, "a", "--table", "events")
    b = daemons(zk_hosts, "b", "--table", "clicks", "--table", "clickz")  # one not there (yet)
    wait_for("both tables to be cleaned", lambda: not events.remaining() and not clicks.remaining())
    assert "no table 'clickz' yet: cleaned once created" in b.log() and "no table" not in a.log()
    assert all(p.exists() for p in events.new + clicks.new)
    assert a.metric('lineage_retention_table_owned{table="events"}') == 1.0
    assert b.metric('lineage_retention_table_owned{table="clicks"}') == 1.0
    assert a.metric("lineage_retention_tables_owned") == b.metric("lineage_retention_tables_owned") == 1.0
    wait_for("a healthy report from each", lambda: health(a)["healthy"] and health(b)["healthy"])
    assert health(a)["owned"] == ["events"] and health(b)["owned"] == ["clicks"]


def test_daemons_over_the_same_tables_spread_them_and_take_over_a_dead_ones(
    zk_hosts: str, zk_store: ZkStore, tmp_path: Path, daemons: Callable[..., Proc]
) -> None:
    """Two daemons over every table spread the tables between them; a daemon
    killed with SIGKILL leaves its tables to the other once its session
    expires (its heartbeat checks every third of a session timeout); a table
    created later is owned and cleaned too."""
    names = [f"t{i}" for i in range(8)]
    for name in names:
        replaced_table(zk_store, tmp_path / name, parts=1, name=name)
    a = daemons(zk_hosts, "a")
    b = daemons(zk_hosts, "b")

    def owned(proc: Proc) -> float:
        return proc.metric("lineage_retention_tables_owned")

    wait_for(
        "both daemons to own tables", lambda: owned(a) >= 1 and owned(b) >= 1 and owned(a) + owned(b) == 8
    )

    def owners_seen() -> dict[str, str | None]:
        found = health(a)["owners"]
        assert isinstance(found, dict)
        return found

    # a's view of the others' tables is as fresh as its last check (each heartbeat)
    wait_for("a to see every table owned", lambda: None not in owners_seen().values())
    assert set(owners_seen()) == set(names)
    victim, survivor = (a, b) if owned(a) <= owned(b) else (b, a)
    victim.popen.kill()
    victim.popen.wait()
    killed = time.monotonic()
    wait_for("the survivor to own every table", lambda: owned(survivor) == 8, SESSION_S * 4)
    took = time.monotonic() - killed
    assert took < SESSION_S + SESSION_S / 3 + 3, took  # the expiry, one heartbeat, a little slack
    late = replaced_table(zk_store, tmp_path / "late", parts=2, name="late")
    wait_for("the table created later to be cleaned", lambda: not late.remaining())
    assert survivor.metric('lineage_retention_table_owned{table="late"}') == 1.0


def test_a_bad_table_name_is_refused_at_start_and_a_health_url_is_checked(lineage_home: Path) -> None:
    from segment_lineage.cli import app

    runner = CliRunner()
    bad = runner.invoke(
        app, ["retention", "daemon", "--interval", "1m", "--table", "t1", "--table", "bad name"]
    )
    assert bad.exit_code == 2 and "invalid table name 'bad name'" in bad.stderr, bad.output
    for url in (
        "http://127.0.0.1:abc",
        "http://[::1",
        "http://127.0.0.1:9302/x\ny",
        "127.0.0.1:9108",
        "http://127.0.0.1:99999",
        "http://127.0.0.1:0",
        "http://user:secret@127.0.0.1:9108",
        "http://user:secret@127.0.0.1:65536",
        "http://user:secret@[::1",
        "http://127.0.0.1:9108/?x=1",
        "http:///healthz",
    ):
        result = runner.invoke(app, ["retention", "health", "--url", url])
        assert result.exit_code == 2 and "invalid daemon URL" in result.stderr, (url, result.output)
        assert "Traceback" not in result.output and "secret" not in result.output


@pytest.mark.parametrize(
    "body",
    [
        b"[1, 2]",
        b"null",
        b'"text"',
        b'{"owned": 5}',
        b"not json",
        b'{"healthy": false}',  # JSON, but no daemon's report: not a healthy daemon
        b'{"connected": true, "passes": 1, "failures": 0, "unowned": [1, 2]}',
        b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    ],
    ids=["list", "null", "text", "count", "not-json", "other-json", "numbers-as-tables", "deep"],
)
def test_an_answer_that_is_no_health_report_is_said_so(lineage_home: Path, body: bytes) -> None:
    import http.server

    from segment_lineage.cli import app

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            return None

    server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        result = CliRunner().invoke(app, ["retention", "health", "--url", url])
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 1 and "did not answer with a health report" in result.stderr, result.output
    assert "Traceback" not in result.output


def test_a_standby_whose_last_pass_was_fenced_is_healthy(tmp_path: Path) -> None:
    """A daemon that lost its tables after a failed pass stands by: the old
    failure is no longer its health (the outside trial saw it 503 forever)."""
    from segment_lineage.lineage.store.memory import MemoryStore

    manager = LineageManager(MemoryStore(), retry=fast_retry(), claims=RootClaimFiles())
    manager.create_table(TableConfig.build("t", str(tmp_path / "t")))

    class LosesItsTables(OwnsAll):
        owning = True

        def check(self, tables: Sequence[str], *, keep: Collection[str] = ()) -> dict[str, str]:
            self._tables = list(tables)
            return {t: "term-1" for t in tables} if self.owning else {}

    owners = LosesItsTables()
    daemon = Daemon(manager, owners, Schedule(interval_ms=1000), PassOptions())
    daemon._record_failure("pass stopped on 1 table(s): the session was lost")
    daemon.heartbeat()
    assert not daemon.health()[0]  # it owns the table: a failed last pass is its health
    owners.owning = False
    daemon.heartbeat()
    healthy, report = daemon.health()
    assert healthy and report["owned"] == [] and report["last_error"], report


def test_a_table_handed_over_during_a_pass_is_no_failure(tmp_path: Path) -> None:
    """A daemon joins while another passes: the tables it takes before their
    turn are skipped by the first, and the pass is no failure."""
    from segment_lineage.lineage.store.memory import MemoryStore

    manager = LineageManager(MemoryStore(), retry=fast_retry(), claims=RootClaimFiles())
    for name in ("a", "b"):
        manager.create_table(TableConfig.build(name, str(tmp_path / name)))

    class HandsOverB(OwnsAll):
        def holds(self, table: str, term: str) -> bool:
            return table != "b"

    daemon = Daemon(manager, HandsOverB(), Schedule(interval_ms=1000), PassOptions())
    daemon.tick()
    assert daemon.status.failures == 0 and not daemon.status.last_pass_failed
    assert daemon.metrics.registry.get_sample_value("lineage_retention_table_passes_total") == 1.0


def test_a_daemon_finishes_a_purge_and_says_so(
    zk_hosts: str, zk_store: ZkStore, tmp_path: Path, daemons: Callable[..., Proc]
) -> None:
    """`table drop --purge`, then the daemon: it reclaims every file, drops
    the table, says so in its log, and then says it has no table to keep."""
    table = replaced_table(zk_store, tmp_path / "gone", parts=2, name="gone")
    table.manager.purge_table("gone")
    proc = daemons(zk_hosts, "a", "--table", "gone")
    wait_for(
        "the purge to finish", lambda: "gone: purged: every file reclaimed, the table dropped" in proc.log()
    )
    assert "gone" not in table.manager.list_tables()
    assert not any(p.exists() for p in table.old + table.new)
    wait_for("the next pass to say there is nothing to keep", lambda: "no table to keep" in proc.log())
