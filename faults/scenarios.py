"""The scenarios of the fault matrix that need the harness: a 3-node
ensemble, proxies, signals and clocks. Each returns an :class:`Outcome`.

The matrix's other scenarios (bad names, corrupted records, traversal, Spark
retries, credentials, ...) are pytest tests; :mod:`faults.__main__` runs
those by node id and reports them beside these.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from faults import checker
from faults.checker import Checks
from faults.cluster import Cluster
from faults.worker import PARTS, ROWS, ROWS_PER_PUSH, Events
from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.lineage.core import failpoints
from segment_lineage.lineage.core.model import Operation, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.store import ZkStore

ROOT = Path(__file__).resolve().parent.parent
SESSION_S = 2.0  # the workers' session timeout: short, so expiries happen within a scenario
WORKER_TIMEOUT_S = 180.0


@dataclass
class Outcome:
    scenario: int
    title: str
    runs: int
    injected: str
    checked: list[str]
    violations: list[str] = field(default_factory=list)
    skipped: str | None = None
    seconds: float = 0.0
    kind: str = "harness"  # or "tests": pytest tests run by node id

    @property
    def result(self) -> str:
        if self.skipped:
            return "skipped"
        return "held" if not self.violations else "BROKEN"


@dataclass
class Context:
    cluster: Cluster
    work: Path
    quick: bool

    def manager(self, hosts: str | None = None, session_s: float = 4.0) -> LineageManager:
        settings = ZkSettings(hosts=hosts or self.cluster.direct_hosts, session_timeout_s=session_s)
        return LineageManager(
            ZkStore(connect(settings), session_timeout_s=session_s), claims=RootClaimFiles()
        )


class Stage:
    """One fresh table (REFRESH unless said) for one run: its workers, events and checks.
    Replaced segments are reclaimable at once (zero retention), the harshest
    setting for the promise that referenced files stay."""

    def __init__(
        self,
        ctx: Context,
        name: str,
        *,
        table_type: str = "REFRESH",
        zero_retention: bool = True,
        max_snapshots: int = 2,
        mirror: str | None = None,
    ) -> None:
        self.ctx = ctx
        self.table = f"{name}_{uuid.uuid4().hex[:6]}"
        self.root = ctx.work / self.table
        self.events_dir = ctx.work / f"{self.table}-events"
        self.events_dir.mkdir(parents=True)
        self.labels: set[str] = set()
        self.m = ctx.manager()
        zero = "0s" if zero_retention else None
        self.m.create_table(
            TableConfig.build(
                self.table,
                str(self.root),
                table_type,
                replaced_segments_retention=zero,
                lineage_entry_cleanup_retention=zero,
                max_snapshots=max_snapshots,
                mirror=mirror,
            )
        )
        self._procs: list[subprocess.Popen[bytes]] = []
        self._readers: list[subprocess.Popen[bytes]] = []
        self._events_of: dict[int, Path] = {}  # each worker's events file, by pid

    def close(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.m.store.close()

    # ---- workers ------------------------------------------------------------

    def spawn(
        self,
        role: str,
        *args: str,
        hosts: str | None = None,
        failpoint: str | None = None,
        clock: str | None = None,
        log: str | None = None,
        table: str | None = None,
        session_s: str | None = None,
    ) -> subprocess.Popen[bytes]:
        events = self.events_dir / f"{log or role}-{len(self._procs)}.jsonl"
        env = {k: v for k, v in os.environ.items() if k != failpoints.ENV}
        env["LINEAGE_ZK_SESSION_TIMEOUT"] = session_s or str(SESSION_S)
        if failpoint:
            env[failpoints.ENV] = failpoint
        command = [sys.executable, "-m", "faults.worker", role, hosts or self.ctx.cluster.direct_hosts]
        command += [table or self.table, str(events), *args]
        if clock:
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
            command = ["faketime", "-f", clock, *command]
        # The worker's log beside its events: a pipe nobody reads would block a chatty worker.
        with events.with_suffix(".log").open("ab") as log_file:
            proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log_file)
        self._procs.append(proc)
        self._events_of[proc.pid] = events
        return proc

    def push(self, label: str, **kw: str | None) -> int:
        """One push process, waited for; its exit code."""
        self.labels.add(label)
        return wait(self.spawn("push", label, **kw))

    def reader(self, hold_s: float = 0.0) -> subprocess.Popen[bytes]:
        proc = self.spawn("read", "600", str(hold_s))
        self._readers.append(proc)
        events = self._events_of[proc.pid]
        wait_for(
            "the reader's first read",
            lambda: (events.exists() and '"kind": "read"' in events.read_text()) or proc.poll() is not None,
        )
        return proc

    def publish(self, table: str | None = None, **kw: str | None) -> subprocess.Popen[bytes]:
        """A ``mirror sync`` process (of ``table``, default the stage's)."""
        return self.spawn("publish", table=table, **kw)

    def retain(self, passes: int = 1, **kw: str | None) -> int:
        return wait(self.spawn("retain", str(passes), **kw))

    def stop_readers(self) -> None:
        for path in self.events_dir.glob("read-*.jsonl"):
            Path(f"{path}.stop").touch()
        for proc in self._readers:
            wait(proc)

    def events(self) -> list[dict[str, object]]:
        return checker.load_events(sorted(self.events_dir.glob("*.jsonl")))

    def acks(self, events: list[dict[str, object]] | None = None) -> list[str]:
        """The entries of acknowledged pushes, from ``events`` (read anew when not given)."""
        return [str(e["entry"]) for e in (self.events() if events is None else events) if e["kind"] == "ack"]

    # ---- checks ---------------------------------------------------------------

    def finish(self, checks: Checks, *, converge: bool = True) -> None:
        """Stop readers, then check every promise on what was seen and what is left."""
        self.stop_readers()
        if converge:
            code = self.push(f"final{uuid.uuid4().hex[:4]}")
            if code != 0:
                checks.add("a clean push after the faults", [f"exit {code}: {_last_line(self)}"])
            code = self.retain(log="final-retain")
            if code != 0:
                said = _last_line(self, "final-retain")
                checks.add("a retention pass after the faults", [f"exit {code}: {said}"])
        events = self.events()
        checks.add("reads happened", checker.reads_happened(events))
        checks.add(
            "one complete snapshot per read",
            checker.one_complete_snapshot(events, self.labels, ROWS_PER_PUSH),
        )
        checks.add("no pinned file went missing", checker.no_missing_file(events))
        checks.add("no file deleted twice", checker.deleted_once(events))
        checks.add(
            "no referenced file deleted", checker.nothing_referenced_deleted(self.m, self.table, events)
        )
        checks.add(
            "no acknowledged change lost", checker.acknowledged_kept(self.m, self.table, self.acks(events))
        )
        if converge:
            checks.add("converged without a person", checker.converged(self.m, self.table))


def wait(proc: subprocess.Popen[bytes], timeout: float = WORKER_TIMEOUT_S) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return -9


def wait_for(what: str, condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _marks(stage: Stage) -> int:
    return sum(1 for r in stage.m.history(stage.table) if r.operation is Operation.RETENTION_MARK)


def _files(stage: Stage) -> int:
    return sum(1 for _ in stage.root.rglob("*.parquet"))


def _count(stage: Stage, kind: str, log: str | None = None) -> int:
    paths = (
        sorted(stage.events_dir.glob(f"{log}-*.jsonl")) if log else sorted(stage.events_dir.glob("*.jsonl"))
    )
    return sum(1 for e in checker.load_events(paths) if e["kind"] == kind)


# ---- the scenarios -------------------------------------------------------------

PUSH_STEPS = (
    *failpoints.PUSH_POINTS,
    *(f"{step}.{when}-commit" for step in ("start", "end") for when in ("before", "after")),
    *failpoints.STORE_POINTS,
)
QUICK_PUSH_STEPS = (
    "push.after-start",
    "push.mid-write",
    "push.after-write",
    "end.before-commit",
    "push.after-end",
)


def _writers(ctx: Context) -> int:
    return 4 if ctx.quick else 12


def _push_steps(ctx: Context) -> tuple[str, ...]:
    return QUICK_PUSH_STEPS if ctx.quick else PUSH_STEPS


def concurrent_writers(stage: Stage, checks: Checks) -> None:
    """1. N pushing processes on one new APPEND table, the first write included."""
    procs = [stage.spawn("push", f"w{i}", "APPEND") for i in range(_writers(stage.ctx))]
    codes = [wait(p) for p in procs]
    events = stage.events()
    acks = stage.acks(events)
    silent = sum(1 for c in codes if c != 0) - sum(1 for e in events if e["kind"] == "error")
    checks.add(
        "every writer acknowledged or got a clear error",
        [f"writer exited {c} without saying why" for c in codes if c != 0][: max(0, silent)],
    )
    checks.add("no acknowledged change lost", checker.acknowledged_kept(stage.m, stage.table, acks))
    rows = sum(s.rows for s in stage.m.visible_segments(stage.table))
    if rows != len(acks) * ROWS_PER_PUSH:
        checks.add("all acknowledged rows visible", [f"{rows} rows for {len(acks)} pushes"])


def push_crashes(stage: Stage, checks: Checks) -> None:
    """3. SIGKILL of the pusher at every step, a reader running throughout."""
    stage.push("base")
    stage.reader()
    for step in _push_steps(stage.ctx):
        code = stage.push(f"k{step.replace('.', '').replace('-', '')}"[:40], failpoint=step)
        if code != -signal.SIGKILL:
            checks.add("the push died at the failpoint", [f"{step}: exit {code}"])
        if stage.push(f"again{uuid.uuid4().hex[:4]}") != 0:
            checks.add("a rerun after the crash succeeds", [f"after {step}"])


def unknown_outcome(stage: Stage, checks: Checks) -> None:
    """4. The answer to the commit that ends a push is lost (the connection is
    muted as the head swap is sent, then cut): the retry finds its own write."""
    hosts, group = stage.ctx.cluster.route()
    m = stage.ctx.manager(hosts)
    fired = threading.Event()
    ending = threading.Event()

    def cut() -> None:
        Cluster.set_mode(group, "cut")
        Cluster.set_mode(group, "pass")

    def on_swap() -> None:
        if ending.is_set() and not fired.is_set():
            fired.set()
            Cluster.set_mode(group, "mute")
            threading.Timer(1.0, cut).start()

    failpoints.set_hook("end.before-commit", ending.set)
    failpoints.set_hook("store.before-head-swap", on_swap)
    try:
        stage.push("base")
        stage.reader()
        label = f"u{uuid.uuid4().hex[:6]}"
        stage.labels.add(label)
        parts = [pa.table({"label": [label] * ROWS, "i": list(range(ROWS))}) for _ in range(PARTS)]
        retention = stage.spawn("retain", "20", "0.2")
        try:
            result = push_arrow(m, stage.table, parts)
        except Exception as exc:  # noqa: BLE001 - any failure here is the finding
            checks.add("the push returned after the lost answer", [f"{type(exc).__name__}: {exc}"])
        else:
            events = Events(str(stage.events_dir / "inproc-0.jsonl"))
            events.say("ack", label=label, entry=result.entry_id)
            events.close()
        if not fired.is_set():
            checks.add("the answer was really lost", ["the mute never fired"])
        wait(retention)
    finally:
        failpoints.set_hook("end.before-commit", None)
        failpoints.set_hook("store.before-head-swap", None)
        m.store.close()


def _replaced_files(stage: Stage, pushes: int) -> None:
    stage.push("base")
    for i in range(pushes):
        stage.push(f"p{i}")


def expiry_mid_retention(stage: Stage, checks: Checks) -> None:
    """5. The session of a retention pass expires after its first delete; a
    second pass finishes the work."""
    _replaced_files(stage, 3)
    stage.reader()
    hosts, group = stage.ctx.cluster.route()
    files = _files(stage)
    first = stage.spawn("retain", "1", hosts=hosts, failpoint="retention.mid-delete:sleep=6", log="first")
    # The file, not the event: the event comes after the failpoint's sleep.
    wait_for("the first delete", lambda: _files(stage) < files)
    Cluster.set_mode(group, "stall")
    time.sleep(SESSION_S * 3.5)
    Cluster.set_mode(group, "pass")
    wait(first)
    deleted = _count(stage, "deleted", "first")
    if deleted != 1:
        checks.add("no delete after the session was lost", [f"the expired pass deleted {deleted} files"])


def ensemble_restart(stage: Stage, checks: Checks) -> None:
    """6. The whole ensemble restarted, back within and past the session timeout."""
    stage.push("base")
    stage.reader()
    for down in (SESSION_S / 2, SESSION_S * 3):
        stage.ctx.cluster.restart_all(down)
        if stage.push(f"after{int(down * 10)}") != 0:
            checks.add("pushes work after the restart", [f"down {down}s: push failed"])


def quorum_loss(stage: Stage, checks: Checks) -> None:
    """7. One of three servers down (work goes on), then two (calls fail cleanly)."""
    cluster = stage.ctx.cluster
    stage.push("base")
    stage.reader()
    with cluster.down(0):
        if stage.push("one_down") != 0:
            checks.add("work goes on with one server down", ["push failed"])
    before = stage.m.table(stage.table).version
    with cluster.down(0, 1):
        began = time.monotonic()
        code = stage.push("two_down")
        took = time.monotonic() - began
        if code == 0:
            checks.add("without a quorum, calls fail", ["a push succeeded"])
        if took > 90:
            checks.add("failing is bounded in time", [f"took {took:.0f}s"])
    stage.labels.discard("two_down")
    after = stage.m.table(stage.table)
    if after.version != before:
        checks.add("nothing half-done without a quorum", [f"version {before} -> {after.version}"])


def paused_retention(stage: Stage, checks: Checks) -> None:
    """8. A retention pass SIGSTOPped after recording its intent, past its
    session timeout: resumed, it deletes nothing (the next pass does)."""
    _replaced_files(stage, 2)
    stage.reader()
    marked = _marks(stage)
    paused = stage.spawn("retain", "1", failpoint="retention.after-mark:sleep=2", log="paused")
    wait_for("the intent", lambda: _marks(stage) > marked)
    paused.send_signal(signal.SIGSTOP)
    time.sleep(SESSION_S * 3)
    paused.send_signal(signal.SIGCONT)
    wait(paused)
    deleted = _count(stage, "deleted", "paused")
    if deleted:
        checks.add("the stale pass deleted nothing", [f"{deleted} deletes"])


def pinned_reader(stage: Stage, checks: Checks) -> None:
    """11. Readers hold their snapshot 2s before opening files while pushes
    replace it and retention runs with zero grace."""
    stage.push("base")
    stage.reader(hold_s=2.0)
    stage.reader(hold_s=0.5)
    retention = stage.spawn("retain", "30", "0.2")
    for i in range(4):
        stage.push(f"r{i}")
    wait(retention)


def skewed_clocks(stage: Stage, checks: Checks) -> None:
    """12. Pushers and the retention pass with clocks an hour off, with the
    default retention: nothing deleted early, no entry reaped early."""
    failed = []
    for label, clock in BASE_AHEAD_BEHIND:
        code = stage.push(label, clock=clock)
        if code:
            failed.append(f"{label}: exit {code}: {_last_line(stage)}")
    if failed:  # reported as what it is, not as an entry reaped early
        checks.add("every skewed push lands", failed)
    stage.reader()
    for clock in ("+1h", "-1h", "+25h"):
        wait(stage.spawn("retain", "1", "0", "defaults", clock=clock, log="skewed"))
    state = stage.m.table(stage.table)
    deleted = _count(stage, "deleted", "skewed")
    if deleted:
        checks.add("nothing deleted early", [f"{deleted} files deleted"])
    # The first push replaced nothing: its entry may go at once. The
    # others replaced segments still within their day of retention.
    replacing = stage.acks()[1:]
    gone = [e for e in replacing if e not in state.entries]
    if gone:
        checks.add("no entry reaped early", [f"entries {gone} reaped of {replacing}"])


BASE_AHEAD_BEHIND = (("base", "+1h"), ("ahead", "+1h"), ("behind", "-1h"))


def _last_line(stage: Stage, log: str = "push") -> str:
    """The last line the newest worker of ``log`` (its role, or the name it
    logged under) logged: its error, when it failed."""
    logs = sorted(stage.events_dir.glob(f"{log}-*.log"), key=lambda p: p.stat().st_mtime)
    lines = logs[-1].read_text(errors="replace").strip().splitlines() if logs else []
    return lines[-1][:300] if lines else "(nothing logged)"


def crash_mid_delete(stage: Stage, checks: Checks) -> None:
    """20. A retention pass SIGKILLed halfway through its deletes; the next
    pass converges."""
    _replaced_files(stage, 3)
    stage.reader()
    code = stage.retain(failpoint="retention.mid-delete")
    if code != -signal.SIGKILL:
        checks.add("the pass died halfway", [f"exit {code}"])


def _mirror_matches(stage: Stage, table: str) -> list[str]:
    """The mirror's log shows exactly the table's current files, and each of
    its commits publishes a commit of this table's own history."""
    from segment_lineage.mirror.delta import DeltaLog
    from segment_lineage.mirror.views import mirror_commits

    state = stage.m.table(table)
    shown = DeltaLog.open(state.config.root).shown.files
    want = {s.location for s in stage.m.visible_segments(table)}
    bad = [f"{table}: the log shows {len(shown)} file(s), the table {len(want)}"] if shown != want else []
    strangers = [c.delta_version for c in mirror_commits(stage.m, table) if c.lineage_version is None]
    if strangers:
        bad.append(f"{table}: Delta versions {strangers} are not this table's commits")
    return bad


def mirror_publishers(stage: Stage, checks: Checks) -> None:
    """31. Mirror publishers SIGKILLed before and after their Delta commit;
    then, twice, a publisher stopped (SIGSTOP) before its commit while its
    table is dropped and a new mirrored table made at its root: once within
    its session (the drop waits for it), once past it (it commits nothing)."""
    stage.push("base")
    stage.reader()
    for step in ("mirror.before-commit", "mirror.after-commit"):
        stage.push(f"m{step[7:13]}")
        code = wait(stage.publish(failpoint=step))
        if code != -signal.SIGKILL:
            checks.add("the publisher died at the failpoint", [f"{step}: exit {code}"])
        if wait(stage.publish()) != 0:  # it waits for the dead one's hold to lapse
            checks.add("a sync after the crash publishes", [f"after {step}"])
        checks.add("the mirror shows the table's version", _mirror_matches(stage, stage.table))
    for lapses in (False, True):
        _drop_beside_a_stopped_publish(stage, checks, lapses)


def _drop_beside_a_stopped_publish(stage: Stage, checks: Checks, lapses: bool) -> None:
    """A table of its own at a root of its own: a publish of it stopped
    before its commit, the table dropped (in a thread: it may wait for the
    publish) and a new mirrored table made at the root and published."""
    from segment_lineage.mirror import admin
    from segment_lineage.mirror.publisher import sync

    word = "late" if lapses else "live"
    old, new = f"{stage.table}_{word}", f"{stage.table}_{word}2"
    root = str(stage.ctx.work / f"{stage.table}-{word}")
    stage.m.create_table(TableConfig.build(old, root, "REFRESH", mirror="delta"))
    parts = [pa.table({"label": ["x"] * ROWS, "i": list(range(ROWS))}) for _ in range(PARTS)]
    for _ in range(3):
        push_arrow(stage.m, old, parts)
        sync(stage.m, old)
    push_arrow(stage.m, old, parts)  # not yet published
    # Within its session (20 s) its hold stands; past it (2 s), the hold lapses.
    session = "2" if lapses else "20"
    stale = stage.publish(old, failpoint="mirror.before-commit:sleep=1", log=word, session_s=session)
    wait_for("the stale publisher's commit", lambda: _count(stage, "before-commit", word) > 0)
    stale.send_signal(signal.SIGSTOP)
    made: list[str] = []

    def new_table() -> None:
        config = TableConfig.build(new, root, "REFRESH", mirror="delta")
        stage.m.create_table(config, existing_files=True)
        push_arrow(stage.m, new, parts)
        sync(stage.m, new)
        made.append(new)

    dropped: list[BaseException | None] = []

    def drop() -> None:
        try:
            admin.drop_table(stage.m, old, force=True)
            dropped.append(None)
        except BaseException as exc:  # noqa: BLE001 - reported below
            dropped.append(exc)

    try:
        dropping = threading.Thread(target=drop, daemon=True)
        dropping.start()
        dropping.join(SESSION_S * 3)  # past a lapsing session; within a live one
        if dropped and dropped[0] is None:
            new_table()  # the stale publish is still stopped
        if not lapses and dropped:
            checks.add("a drop waits for a publish under way", ["it went ahead"])
        if lapses and not dropped:
            checks.add("a drop goes on once a stopped publisher's session lapsed", ["it waited on"])
    finally:
        stale.send_signal(signal.SIGCONT)
    code = wait(stale)
    dropping.join(60)
    if not dropped or dropped[0] is not None:
        checks.add("the drop succeeded", [f"{dropped}"])
        return
    if not made:
        new_table()
    if lapses and code == 0:
        checks.add("a publisher whose session lapsed commits nothing", ["it exited 0"])
    if not lapses and code != 0:
        checks.add("a publish the drop waited for finishes", [f"exit {code}"])
    checks.add("the new table's mirror is its own", _mirror_matches(stage, new))
    admin.drop_table(stage.m, new, force=True)


@dataclass(frozen=True)
class Scenario:
    """A scenario: ``once`` runs on a fresh table (made with ``table``), then
    the stage checks every promise (``finish``, with a converging push and
    retention pass when ``converge``)."""

    number: int
    title: str
    once: Callable[[Stage, Checks], None]
    injected: Callable[[Context], str]
    table: Mapping[str, Any] = field(default_factory=dict)
    finish: bool = True
    converge: bool = True
    needs: str | None = None  # a program that must be installed


def _said(text: str) -> Callable[[Context], str]:
    return lambda _ctx: text


SCENARIOS: Sequence[Scenario] = (
    Scenario(
        1,
        "concurrent writers, first write included",
        concurrent_writers,
        lambda ctx: f"{_writers(ctx)} processes pushing at once to one new APPEND table",
        table={"table_type": "APPEND"},
        finish=False,
    ),
    Scenario(
        3,
        "SIGKILL of the pusher at every step",
        push_crashes,
        lambda ctx: f"SIGKILL at {len(_push_steps(ctx))} steps: {', '.join(_push_steps(ctx))}",
    ),
    Scenario(
        4,
        "connection cut after a write was sent",
        unknown_outcome,
        _said("the reply to the END commit muted, then the connection cut (ConnectionLoss)"),
    ),
    Scenario(
        5,
        "session expiry in the middle of a retention run",
        expiry_mid_retention,
        _said("the pass's traffic stalled past its session timeout right after its first delete"),
    ),
    Scenario(
        6,
        "whole ensemble restarted",
        ensemble_restart,
        _said(f"all 3 servers killed, down {SESSION_S / 2:.0f}s and {SESSION_S * 3:.0f}s"),
    ),
    Scenario(
        7,
        "one, then two of three servers down",
        quorum_loss,
        _said("server 1 stopped; then servers 1 and 2 stopped"),
    ),
    Scenario(
        8,
        "retention paused past its session timeout",
        paused_retention,
        _said(f"SIGSTOP for {SESSION_S * 3:.0f}s (session {SESSION_S:.0f}s) after the intent was recorded"),
    ),
    Scenario(
        11,
        "readers pinned while retention runs at zero grace",
        pinned_reader,
        _said("4 replacing pushes and 30 zero-grace retention passes under readers pinned 0.5-2s"),
    ),
    Scenario(
        12,
        "clocks an hour off",
        skewed_clocks,
        _said("libfaketime: pushers at +1h and -1h, retention at +1h, -1h and +25h"),
        # The defaults (a day of retention), and no snapshot cleanup on push.
        table={"zero_retention": False, "max_snapshots": 10},
        converge=False,
        needs="faketime",
    ),
    Scenario(
        31,
        "mirror publishers killed; one stopped beside a drop, within and past its session",
        mirror_publishers,
        _said(
            "SIGKILL of a mirror publisher before and after its Delta commit; a publisher "
            f"SIGSTOPped before its commit for {SESSION_S * 3:.0f}s (within its session of 20s, and "
            f"past one of {SESSION_S:.0f}s) while its table was dropped and a new mirrored table made "
            "at its root"
        ),
        table={"mirror": "delta"},
    ),
    Scenario(
        20,
        "retention killed halfway through its deletes",
        crash_mid_delete,
        _said("SIGKILL after the first file of a pass was deleted"),
    ),
)


def run(scenario: Scenario, ctx: Context, runs: int) -> Outcome:
    if scenario.needs and shutil.which(scenario.needs) is None:
        return Outcome(
            scenario.number, scenario.title, 0, "", [], skipped=f"{scenario.needs} is not installed"
        )
    began = time.monotonic()
    checks = Checks()
    try:
        for _ in range(runs):
            stage = Stage(ctx, scenario.once.__name__, **scenario.table)
            try:
                scenario.once(stage, checks)
                if scenario.finish:
                    stage.finish(checks, converge=scenario.converge)
            finally:
                stage.close()
    except Exception as exc:  # noqa: BLE001 - a harness failure is reported, not hidden
        checks.add("harness", [f"{type(exc).__name__}: {exc}"])
    return Outcome(
        scenario.number,
        scenario.title,
        runs,
        scenario.injected(ctx),
        sorted(checks.results),
        checks.violations(),
        seconds=time.monotonic() - began,
    )
