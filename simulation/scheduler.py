"""One baton, many threads: every actor is a thread, and only the one holding
the baton runs. An actor gives the baton back at each switch point (a store
call, a failpoint, a sleep) and waits there until the scheduler, driven by the
run's seeded random generator, hands it back. Between two switch points an
actor runs alone, so a run is a function of its seed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field


class Crashed(BaseException):
    """The actor's process died at a switch point: it unwinds and nothing it
    does afterwards reaches the store."""


class Hung(RuntimeError):
    """An actor kept the baton past the real-time limit (a deadlock in the code
    under test, or a wait outside any switch point)."""


@dataclass
class Actor:
    aid: int
    kind: str
    body: Callable[[Actor], None]
    cwd: str
    label: str = "start"  # the switch point it waits at
    done: bool = False
    outcome: str = ""
    doomed: bool = False  # crash at the next switch point
    paused_until: int = 0  # step number
    # Virtual time (the clock's elapsed ms) before which it does not run: an
    # actor whose sleeps let the others' steps pass instead of moving the
    # clock itself (a crowd writer's, :meth:`simulation.world.World.sleep`).
    wakes_ms: int = 0
    notes: list[str] = field(default_factory=list)
    thread: threading.Thread | None = None

    @property
    def name(self) -> str:
        return f"a{self.aid}:{self.kind}"


class Scheduler:
    def __init__(self, step_timeout_s: float = 120.0) -> None:
        self._cond = threading.Condition()
        self._running: Actor | None = None
        self._local = threading.local()
        self.step_timeout_s = step_timeout_s
        self.failures: list[tuple[Actor, BaseException]] = []

    def current(self) -> Actor | None:
        actor: Actor | None = getattr(self._local, "actor", None)
        return actor

    def switch(self, label: str) -> None:
        """Called on an actor's thread: give the baton back, wait for it."""
        actor = self.current()
        if actor is None:
            return  # the scheduler's own thread (setup, the checker)
        if actor.doomed:
            raise Crashed(actor.name)
        with self._cond:
            actor.label = label
            self._running = None
            self._cond.notify_all()
            while self._running is not actor:
                self._cond.wait()
        if actor.doomed:
            raise Crashed(actor.name)

    def spawn(self, actor: Actor) -> None:
        def run() -> None:
            self._local.actor = actor
            with self._cond:
                while self._running is not actor:
                    self._cond.wait()
            try:
                if actor.doomed:
                    raise Crashed(actor.name)
                actor.body(actor)
                actor.outcome = actor.outcome or "done"
            except Crashed:
                actor.outcome = "crashed"
            except BaseException as exc:  # noqa: BLE001 - reported by the run as a violation
                actor.outcome = f"raised {type(exc).__name__}"
                self.failures.append((actor, exc))
            finally:
                with self._cond:
                    actor.done = True
                    actor.label = "done"
                    self._running = None
                    self._cond.notify_all()

        actor.thread = threading.Thread(target=run, name=f"sim-{actor.name}", daemon=True)
        actor.thread.start()

    def step(self, actor: Actor) -> None:
        """Hand the baton to ``actor`` and wait until it reaches its next
        switch point (or ends)."""
        with self._cond:
            self._running = actor
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: self._running is not actor, timeout=self.step_timeout_s):
                raise Hung(f"{actor.name} kept the baton for {self.step_timeout_s:.0f}s at {actor.label}")

    def finish(self, actors: list[Actor]) -> None:
        """Unwind actors that never ran to their end (the run stopped early):
        each dies at its switch point."""
        for actor in actors:
            if actor.done or actor.thread is None:
                continue
            actor.doomed = True
            try:
                self.step(actor)
            except Hung:
                continue
