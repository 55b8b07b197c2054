"""One seeded run: set up the world, let the actors loose under the
scheduler with faults, check after every step, then converge with faults off.
And the shrinker: replay a failing seed with less, keeping the violation."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from random import Random

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.lineage.core import failpoints
from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.core.model import Operation
from segment_lineage.lineage.core.visibility import visible_segments
from segment_lineage.lineage.manager import commit_step
from segment_lineage.lineage.store.memory import MemoryStore
from simulation.actors import FS_KINDS, body, plan_actors
from simulation.checker import Checker, Violation
from simulation.clock import DAY_MS, EPOCH_MS, VirtualClock
from simulation.proxy import StoreProxy
from simulation.scheduler import Actor, Hung, Scheduler
from simulation.world import CROWD, World

# A step takes 1 to this many ms of virtual time; in a run with a crowd of
# writers, 1 to CROWD_STEP_MS: with some 50 actors, each waiting its turn of
# the baton, a commit would take seconds (a machine far too slow for its
# load, where every front of a queue looks stopped), and a front that stays
# QUEUE_PATIENCE_S must mean a writer held.
STEP_MS = 20
CROWD_STEP_MS = 5
DRAIN_STEPS = 20_000  # after the faults: steps for every actor to finish (each phase)
# A crowd's run: 16 to 28 writers on one table finish one commit at a time
# (seed 69 took 20,929 steps after its faults).
CROWD_DRAIN_STEPS = 60_000
HISTORY_EVERY = 50  # steps between checks of the history chain
SERIAL_DELETES = "simulation.serial-deletes:raise"  # armed, never reached: retention deletes one by one
# Long pauses aimed at the switch points where a race hurts most: (label, or
# a label's beginning with "*"; the actor kind it applies to, "" for any;
# chance at each visit, once per visit). A pass stopped after its mark,
# between two deletes or before its clear while a second pass, a re-add or a
# reader acts; a reader between its look at the head and its lease; an upload not
# yet registered while passes list the root; a ZooKeeper version read
# between two of its requests while others commit; a pass between its plan
# and its mark while a lagging mirror publishes a version the plan condemns;
# a publish about to commit while an operator drops the table or disables
# its mirror.
AIMED_PAUSES: tuple[tuple[str, str, float], ...] = (
    ("retention.after-mark", "", 0.35),
    ("retention.mid-delete", "", 0.2),
    ("retention.before-clear", "", 0.35),  # files deleted, still queued: readers of them must be refused
    ("store.read.done", "retention", 0.04),  # after its look at the pins, a pass reads the head
    ("store.pin.lease", "", 0.35),
    ("upload.written", "", 0.6),
    ("readd.uploaded", "", 0.2),
    ("*store.read_version/zk.", "", 0.5),  # not before its first request: between two
    ("store.write", "retention", 0.1),  # a pass planned, its mark not sent: a mirror publishes meanwhile
    ("mirror.before-commit", "", 0.6),  # a publish about to commit while its table is dropped or disabled
)
AIMED_STEPS = (40, 260)  # an aimed pause lasts this many steps
# Longer at a publish about to commit: an operator's drop, a create at the
# same root and a push take many requests while it waits.
AIMED_STEPS_AT = {"mirror.before-commit": (600, 2000)}
# Aimed pauses that go on after the faults, while the actors finish: most
# publishes come late in a run (a push takes many steps), and one about to
# commit while its table is dropped is the race the mirror's hold closes.
LATE_AIMED = {"mirror.before-commit": 0.6}
# Stalls that go on after the faults too: a push set's one commit comes late
# in a run (every table is started and written first), and a set writer
# stopped past its session there, while its job is rerun elsewhere or
# retention cleans its entries up, is the race its claims' fence closes.
LATE_STALLS = {("set.after-write", "set"): 0.5, ("set.before-commit", "set"): 0.5}
# Stalls aimed where a late landing would hurt: a process stopped (SIGSTOP, a
# long GC pause, a frozen VM) past its ZooKeeper session, so its claims go
# while it waits, and it resumes later. (label, actor kind, chance at each
# visit.) A push that wrote its files, or is about to send its last commit,
# while its job is rerun elsewhere or retention cleans its entry up; a
# retention pass between two deletes, whose fence stops it when it resumes.
AIMED_STALLS: tuple[tuple[str, str, float], ...] = (
    ("push.after-write", "push", 0.25),
    ("end.before-commit", "push", 0.15),
    ("store.write", "push", 0.05),
    ("retention.mid-delete", "retention", 0.05),  # a pass stopped between two deletes: it counts what it did
    ("set.after-write", "set", 0.6),  # a push set, every table written, its one commit not yet sent
    ("set.before-commit", "set", 0.6),
)
STALL_STEPS = (150, 900)  # a stall lasts this many steps (well past any session)
# Calls whose answer may be lost (applied, or not): commits, and joining an
# election (memory store; on ZooKeeper only commits).
ANSWERED_CALLS = ("store.write", "store.write_together", "store.join_election")


def aimed(label: str, kind: str) -> float:
    for name, kinds, chance in AIMED_PAUSES:
        if kinds and kind != kinds:
            continue
        if label == name or (
            name.startswith("*") and label.startswith(name[1:]) and not label.endswith("#1")
        ):
            return chance
    return 0.0


def stalled(label: str, kind: str) -> float:
    for name, kinds, chance in AIMED_STALLS:
        if label == name and kind == kinds:
            return chance
    return 0.0


@dataclass(frozen=True)
class RunConfig:
    seed: int
    steps: int = 400
    faults: bool = True
    actors: tuple[int, ...] | None = None  # the cast's members kept (None: all)
    drop_faults: frozenset[int] = frozenset()  # fault numbers not injected
    zookeeper: str | None = None  # hosts of a real ZooKeeper (memory store when None)
    extra: tuple[tuple[str, int], ...] = ()  # actors added to the cast (kind, operations): tests
    stop_at_first: bool = True

    def command(self) -> str:
        parts = [f"python -m simulation --seeds 1 --first {self.seed} --steps {self.steps}"]
        if self.actors is not None:
            parts.append("--actors " + ",".join(map(str, self.actors)))
        if self.drop_faults:
            parts.append("--drop-faults " + ",".join(map(str, sorted(self.drop_faults))))
        if not self.faults:
            parts.append("--no-faults")
        return " ".join(parts)


@dataclass
class RunResult:
    config: RunConfig
    steps: int = 0
    trace: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    faults: int = 0
    digest: str = ""
    seconds: float = 0.0
    cast: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def failpoint_names() -> list[str]:
    names = [*failpoints.PUSH_POINTS, *failpoints.STORE_POINTS, *failpoints.RETENTION_POINTS]
    names += [*failpoints.MIRROR_POINTS, *failpoints.SET_POINTS]
    for op in Operation:
        names += [f"{commit_step(op)}.before-commit", f"{commit_step(op)}.after-commit"]
    return names


@contextlib.contextmanager
def hooked(scheduler: Scheduler) -> Iterator[None]:
    """Every failpoint is a switch point; retention deletes serially (the
    executor takes its serial path while a failpoint is armed)."""
    names = failpoint_names()
    old_env = os.environ.get(failpoints.ENV)
    old_cwd = os.getcwd()
    for name in names:
        failpoints.set_hook(name, _switch_at(scheduler, name))
    os.environ[failpoints.ENV] = SERIAL_DELETES
    try:
        yield
    finally:
        for name in names:
            failpoints.set_hook(name, None)
        if old_env is None:
            os.environ.pop(failpoints.ENV, None)
        else:
            os.environ[failpoints.ENV] = old_env
        os.chdir(old_cwd)


class _DaemonLog(logging.Handler):
    """The daemons' log during a run: kept off the terminal; a failure the
    daemon logs as unexpected (a traceback) becomes a violation."""

    def __init__(self, world: World) -> None:
        super().__init__(logging.INFO)
        self.world = world

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            actor = self.world.scheduler.current()
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                exc = record.exc_info[1]
                text += f": {type(exc).__name__}: {exc}"
            self.world.daemon_errors.append(f"{actor.name if actor else '?'}: {text}")


@contextlib.contextmanager
def daemon_log(world: World) -> Iterator[None]:
    logger = logging.getLogger("lineage.retention")
    handler = _DaemonLog(world)
    old = logger.propagate, logger.level
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate, logger.level = old


def _switch_at(scheduler: Scheduler, name: str) -> Callable[[], None]:
    return lambda: scheduler.switch(name)


def run_seed(config: RunConfig) -> RunResult:
    result = RunResult(config)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"sim-{config.seed}-") as tmp:
        clock = VirtualClock(EPOCH_MS - 2 * DAY_MS)
        scheduler = Scheduler()
        world = World(Path(tmp), config.seed, scheduler, clock)
        with contextlib.ExitStack() as stack:
            if config.zookeeper is not None:
                from simulation.zookeeper import attach

                stack.enter_context(attach(world, config.zookeeper))
            else:
                _attach_memory(world)
            stack.enter_context(hooked(scheduler))
            stack.enter_context(daemon_log(world))
            _Run(world, config, result).go()
    result.seconds = time.perf_counter() - began
    return result


def _attach_memory(world: World) -> None:
    store = MemoryStore(clock=world.clock.zk_ms, env=world.env)
    world.store = store

    def new_store(actor: Actor) -> StoreProxy:
        return StoreProxy(store, world.scheduler.switch, world.sessions, world.ack(actor.name))

    world.new_store = new_store


class _Run:
    def __init__(self, world: World, config: RunConfig, result: RunResult) -> None:
        self.world = world
        self.config = config
        self.result = result
        self.rng = Random(f"schedule/{config.seed}")
        self.faults_rng = Random(f"faults/{config.seed}")
        self.actors: list[Actor] = world.actors
        self.proxies: dict[int, StoreProxy] = {}
        self.fault_number = 0
        self.aimed_now: set[int] = set()  # actors whose aimed pause has not yet run on
        self.cast = plan_actors(config.seed) + list(config.extra)

    # ---- the run ----------------------------------------------------------------------

    def go(self) -> None:
        world = self.world
        self._setup()
        self.checker = checker = Checker(world)
        world.on_dropped = checker.forget
        checker.after_step("setup", touched_files=True)
        original = world.new_store

        def new_store(me: Actor) -> StoreProxy:
            proxy = self.proxies[me.aid] = original(me)
            proxy.on_late = lambda detail: checker.flag("late-commit", f"{me.name}: {detail}", 12)
            return proxy

        world.new_store = new_store
        cast = self.cast
        self.result.cast = [f"a{i}:{kind}x{ops}" for i, (kind, ops) in enumerate(cast)]
        kept = range(len(cast)) if self.config.actors is None else self.config.actors
        world.policy = any(cast[i][0] == "intruder" for i in kept)
        for index in kept:
            kind, ops = cast[index]
            self._spawn(index, kind, ops)
        try:
            self._loop(self.config.steps, faults=self.config.faults)
            drain = CROWD_DRAIN_STEPS if world.crowd else DRAIN_STEPS
            self._loop(drain, faults=False, late_pauses=True)  # the rest, quietly
            if self._clean():
                undone = [a.name for a in self.actors if not a.done]
                if undone:
                    checker.flag("no-progress", f"actors still running after the run: {undone}")
            if self._clean():
                self._quiesce()
        except Hung as hung:
            checker.flag("hang", str(hung))
        finally:
            self.world.scheduler.finish(self.actors)
        for actor, exc in self.world.scheduler.failures:
            # Where the package let it through: its last frames (the proxy's, which raised a fault, say less).
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if "segment_lineage" in f.filename]
            where = [
                f"{f.filename.rsplit('segment_lineage/', 1)[-1]}:{f.lineno} {f.name}" for f in frames[-4:]
            ]
            checker.flag(
                "actor-raised",
                f"{actor.name}: {type(exc).__name__}: {exc} | {' / '.join(where) or 'outside the package'}",
            )
        self.result.steps = self.world.step
        self.result.violations = list(checker.violations)
        self.result.notes = [f"{a.name}: {'; '.join(a.notes)} -> {a.outcome}" for a in self.actors]
        self.result.digest = self._digest()

    def _clean(self) -> bool:
        return not (self.config.stop_at_first and self.checker.violations)

    def _setup(self) -> None:
        """Three tables with some history, two days old: a REFRESH table, an
        APPEND table keyed by timestamps, and one keyed by integer seconds."""
        world = self.world
        rng = Random(f"setup/{self.config.seed}")
        manager = world.manager(world.store, "setup@sim", rng)
        for name, data in (("refresh", "plain"), ("events", "ms"), ("secs", "seconds")):
            root = str(world.lake / name)
            world.intend_table(name, root, str(world.base), data, set())
            manager.create_table(world.config(name, root, data, rng))
            info = world.tables[name]
            for k in range(rng.randint(1, 2)):
                parts, mode, interval = world.parts(
                    info, manager.table(name).config.table_type, rng, f"s-{name}-{k}"
                )
                try:
                    push_arrow(manager, name, parts, mode=mode, interval=interval)
                except LineageError as exc:
                    self.result.trace.append(f"setup push {name}: {type(exc).__name__}")
        if any(kind == CROWD for kind, _ops in self.cast):
            world.crowd = True
            self._crowd_table()
        world.clock.fs_lag_ms = 0
        world.clock.advance(2 * DAY_MS)

    def _crowd_table(self) -> None:
        """The crowd's own table (an APPEND table no other actor picks), made
        with randomness of its own: the rest of the setup is as without it."""
        world = self.world
        rng = Random(f"crowd/{self.config.seed}")
        root = str(world.lake / CROWD)
        world.intend_table(CROWD, root, str(world.base), "ms", {CROWD})
        world.manager(world.store, "setup@sim", rng).create_table(world.config(CROWD, root, "ms", rng))

    def _spawn(self, aid: int, kind: str, ops: int) -> Actor:
        world = self.world
        actor = Actor(aid, kind, body(world, self.checker, kind, ops, self.config.seed), world.cwd_for(aid))
        self.actors.append(actor)
        world.scheduler.spawn(actor)
        return actor

    def _loop(self, budget: int, *, faults: bool, late_pauses: bool = False) -> None:
        world, checker = self.world, self.checker
        spent = 0
        while spent < budget and self._clean():
            live = [a for a in self.actors if not a.done]
            if not live:
                return
            awake = [a for a in live if a.wakes_ms <= world.clock.elapsed_ms]
            if not awake:  # all asleep (a run with a crowd): time passes to the first one's waking
                world.clock.advance(min(a.wakes_ms for a in live) - world.clock.elapsed_ms)
                awake = live
            eligible = [a for a in awake if a.paused_until <= world.step] or awake
            actor = self.rng.choice(eligible)
            draws = (self.faults_rng.random(), self.faults_rng.random(), self.faults_rng.random())
            if faults and self._fault(actor, draws):
                continue
            if late_pauses and self._late_pause(actor, draws):
                continue
            before = actor.label
            os.chdir(actor.cwd)
            world.scheduler.step(actor)
            self.aimed_now.discard(actor.aid)
            world.step += 1
            spent += 1
            world.clock.advance(1 + int(draws[2] * (CROWD_STEP_MS if world.crowd else STEP_MS)))
            checker.after_step(actor.name, touched_files=actor.kind in FS_KINDS)
            if self.config.zookeeper is None:  # on ZooKeeper a lapsed leader learns it a trust window late
                checker.check_election()
            if world.step % HISTORY_EVERY == 0:
                checker.check_history()
            self.result.trace.append(f"{world.step} {actor.name} {before} -> {actor.label}")

    def _fault(self, actor: Actor, draws: tuple[float, float, float]) -> bool:
        """Maybe inject a fault before ``actor`` runs; True when it does not run now."""
        r, r2, _ = draws
        if actor.kind == CROWD:  # never stopped nor cut off: its queue always moves
            return False
        clock = self.world.clock
        proxy = self.proxies.get(actor.aid)
        kind: str | None = None
        if r < 0.004 and proxy is not None:
            kind = "crash"
        elif r < 0.008 and proxy is not None:
            kind = "expire"
        elif r < 0.011 and proxy is not None:
            kind = "stall"  # at any switch point of any actor
        elif proxy is not None and actor.aid not in self.aimed_now and r < stalled(actor.label, actor.kind):
            kind = "stall"
            self.aimed_now.add(actor.aid)
        elif r < 0.02:
            kind = "pause"
        elif actor.aid not in self.aimed_now and r < aimed(actor.label, actor.kind):
            kind = "aimed-pause"
            self.aimed_now.add(actor.aid)  # once per visit: it then runs on from there
        elif r < 0.025 and self.config.zookeeper is None:
            kind = "clock-jump"
        elif r < 0.028 or (r < 0.5 and actor.label == "upload.begin"):
            kind = "fs-behind"  # aimed too: the host an operator uploads from
        elif r < 0.12 and actor.label in ANSWERED_CALLS and proxy is not None:
            kind = "lose-answer"
        elif r < 0.04 and actor.aid in self.world.daemons and not self.world.daemons[actor.aid].stopping:
            kind = "sigterm"
        elif r < 0.06 and proxy is not None and self.config.zookeeper is not None and "/zk." in actor.label:
            kind = "lose-request"  # any single request of a store call, on real ZooKeeper
        if kind is None:
            return False
        self.fault_number += 1
        if self.fault_number in self.config.drop_faults:
            return False
        self.result.faults += 1
        detail = ""
        if kind == "crash" and proxy is not None:
            actor.doomed = True
            proxy.crash()
        elif kind == "expire" and proxy is not None:
            proxy.end_session()
        elif kind == "stall" and proxy is not None:
            self._stall(actor, proxy, r2)
            detail = f" until step {actor.paused_until}, its session ended"
        elif kind == "pause":
            actor.paused_until = self.world.step + 5 + int(r2 * 60)
            detail = f" until step {actor.paused_until}"
        elif kind == "aimed-pause":
            low, high = AIMED_STEPS_AT.get(actor.label, AIMED_STEPS)
            actor.paused_until = self.world.step + low + int(r2 * (high - low))
            detail = f" until step {actor.paused_until}"
        elif kind == "clock-jump":
            jump = 1_000 + int(r2 * 60_000)
            clock.zk_skew_ms += jump
            detail = f" ZooKeeper +{jump} ms"
        elif kind == "fs-behind":
            lag = int(r2 * 3 * 3_600_000)
            clock.fs_lag_ms = lag
            detail = f" file clock {lag} ms behind"
        elif kind == "sigterm":
            self.world.daemons[actor.aid].stop()  # as the signal handler does; the actor runs on
        elif kind == "lose-request" and proxy is not None:
            proxy.lose_next_request = True
        elif kind == "lose-answer" and proxy is not None:
            proxy.lose_next_write = r2 < 0.5
            detail = " (applied)" if r2 < 0.5 else " (not applied)"
        self.result.trace.append(f"fault #{self.fault_number} {kind} {actor.name} at {actor.label}{detail}")
        return kind in ("pause", "aimed-pause", "crash", "stall")

    def _stall(self, actor: Actor, proxy: StoreProxy, draw: float) -> None:
        """``actor`` stopped for STALL_STEPS (``draw`` picks how long), its
        session timing out while it is stopped."""
        low, high = STALL_STEPS
        actor.paused_until = self.world.step + low + int(draw * (high - low))
        proxy.end_session()

    def _late_pause(self, actor: Actor, draws: tuple[float, float, float]) -> bool:
        """Maybe an aimed pause or stall after the faults (LATE_AIMED,
        LATE_STALLS); True when it pauses."""
        if actor.aid in self.aimed_now or actor.kind == CROWD:
            return False
        proxy = self.proxies.get(actor.aid)
        if proxy is not None and draws[0] < LATE_STALLS.get((actor.label, actor.kind), 0.0):
            self.aimed_now.add(actor.aid)
            self._stall(actor, proxy, draws[1])
            self.result.trace.append(
                f"late stall {actor.name} at {actor.label} until step {actor.paused_until}, its session ended"
            )
            return True
        if draws[0] >= LATE_AIMED.get(actor.label, 0.0):
            return False
        self.aimed_now.add(actor.aid)
        low, high = AIMED_STEPS_AT.get(actor.label, AIMED_STEPS)
        actor.paused_until = self.world.step + low + int(draws[1] * (high - low))
        self.result.trace.append(f"late pause {actor.name} at {actor.label} until step {actor.paused_until}")
        return True

    def _quiesce(self) -> None:
        """Faults off, time moves on three days (the clocks agree again), and
        a janitor runs passes and pushes; then the history and convergence."""
        clock = self.world.clock
        clock.advance(clock.zk_skew_ms + 3 * DAY_MS)
        clock.zk_skew_ms = 0
        clock.fs_lag_ms = 0
        self._spawn(len(self.actors) + 100, "janitor", 1)
        self._loop(DRAIN_STEPS, faults=False)
        if self._clean():
            self.checker.check_history()
        if self._clean():
            self.checker.check_converged()

    def _digest(self) -> str:
        """The run's outcome: every table's version and visible set, the violations."""
        lines = []
        store = self.world.store
        for table in store.list_tables():
            try:
                state = store.read(table).state
            except LineageError as exc:
                lines.append(f"{table}: {exc.message}")
                continue
            names = sorted(s.name for s in visible_segments(state))
            lines.append(f"{table} v{state.version} {names} pending={sorted(state.pending)}")
        lines += [v.line() for v in self.checker.violations]
        return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def shrink(failing: RunResult, budget_s: float = 60.0) -> RunResult:
    """Replay the seed with less (fewer steps, fewer actors, fewer faults)
    while the same kind of violation still shows; returns the smallest."""
    best = failing
    kind = failing.violations[0].kind
    deadline = time.monotonic() + budget_s

    def still_fails(config: RunConfig) -> RunResult | None:
        if time.monotonic() > deadline:
            return None
        attempt = run_seed(config)
        return attempt if any(v.kind == kind for v in attempt.violations) else None

    steps = min(best.config.steps, max(best.violations[0].step, 1))
    smaller = still_fails(replace(best.config, steps=steps))
    if smaller is not None:
        best = smaller
    members = list(best.config.actors if best.config.actors is not None else range(len(best.cast)))
    for member in list(members):
        trial = tuple(m for m in members if m != member)
        if not trial:
            continue
        found = still_fails(replace(best.config, actors=trial))
        if found is not None:
            best, members = found, list(trial)
    for number in range(1, best.faults + len(best.config.drop_faults) + 1):
        if number in best.config.drop_faults:
            continue
        found = still_fails(replace(best.config, drop_faults=best.config.drop_faults | {number}))
        if found is not None:
            best = found
    return best
