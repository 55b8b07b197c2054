"""Virtual time: ZooKeeper's clock, the file system's clock and the
monotonic clock the code waits on, all driven by the simulation.

The code under test reads time in three ways: the store's ``now_ms`` (given a
clock here), ``RetryPolicy(sleep=..., clock=...)`` (the manager's only clock),
and the clocks the push, the retention pass and the daemon take as arguments,
whose defaults (``time.monotonic``, ``time.sleep``, ``time.time``) are looked
up in their module's ``time`` when called. The simulation calls those with
the defaults, so it patches the ``time`` name of each module in
:data:`TIMED_MODULES` for the run's duration (:func:`patched_time`), and no
other module, thread or library sees a fake clock.
"""

from __future__ import annotations

import contextlib
import time
import types
import uuid
from collections.abc import Callable, Iterator
from random import Random
from typing import Any

DAY_MS = 86_400_000
# Virtual runs start here (2025-06-15T00:00:00Z), whatever the host's clock says.
EPOCH_MS = 1_749_945_600_000
# Modules of the code under test whose clocks default to their module's ``time``
# (time.monotonic, time.sleep, time.time); tests/test_simulation.py checks that
# every such module of ingest, retention and the manager is named here.
TIMED_MODULES = (
    "segment_lineage.ingest.push",  # the push's duration, owner wait and name stamp
    "segment_lineage.retention.executor",  # progress
    "segment_lineage.retention.daemon",  # pass durations, the last success
    "segment_lineage.retention.schedule",  # whether a cron ever fires, from now
    "segment_lineage.ingest.jobs",  # a repeated job's look-up time
)


class VirtualClock:
    """Milliseconds. ``elapsed`` is the time that really passed in the run;
    ZooKeeper's clock may jump ahead of it, and the file system's clock (the
    host that writes files) may run behind it."""

    def __init__(self, start_ms: int = EPOCH_MS) -> None:
        self.start_ms = start_ms
        self.elapsed_ms = 0
        self.zk_skew_ms = 0  # ZooKeeper ahead of real time
        self.fs_lag_ms = 0  # the file-writing host's clock behind real time
        self.real: Callable[[], int] | None = None  # ZooKeeper runs: the server's own clock

    def advance(self, ms: int) -> None:
        self.elapsed_ms += max(0, ms)

    def zk_ms(self) -> int:
        if self.real is not None:
            return self.real()
        return self.start_ms + self.elapsed_ms + self.zk_skew_ms

    def fs_ms(self) -> int:
        return self.zk_ms() - self.zk_skew_ms - self.fs_lag_ms

    def monotonic(self) -> float:
        return self.elapsed_ms / 1000.0


class TimeShim(types.SimpleNamespace):
    """Stands in for the ``time`` module inside the patched modules."""

    def __init__(self, clock: VirtualClock, sleep: Callable[[float], None]) -> None:
        super().__init__()
        self._clock = clock
        self._sleep = sleep

    def monotonic(self) -> float:
        return self._clock.monotonic()

    def time(self) -> float:
        return self._clock.zk_ms() / 1000.0

    def sleep(self, seconds: float) -> None:
        self._sleep(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@contextlib.contextmanager
def patched(target: object, name: str, value: object) -> Iterator[None]:
    old = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, old)


@contextlib.contextmanager
def patched_time(clock: VirtualClock, sleep: Callable[[float], None], seed: int) -> Iterator[None]:
    """Virtual time and seeded ids for the run's duration: the default
    clocks of push and retention (the push's name stamp included: it reads
    ``time.time``, which the shim answers with ZooKeeper's virtual clock), and
    uuid4 (entry ids, commit ids and blob ids become a function of the seed)."""
    import importlib

    ids = Random(f"uuid/{seed}")
    shim = TimeShim(clock, sleep)

    def uuid4() -> uuid.UUID:
        return uuid.UUID(int=ids.getrandbits(128), version=4)

    with contextlib.ExitStack() as stack:
        for name in TIMED_MODULES:
            module = importlib.import_module(name)
            if getattr(module, "time", None) is time:
                stack.enter_context(patched(module, "time", shim))
        stack.enter_context(patched(uuid, "uuid4", uuid4))
        yield
