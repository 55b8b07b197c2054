"""Bounded retries with jitter. Sleep, clock and randomness are injectable."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetryPolicy:
    """How long a commit keeps trying against concurrent writers.

    Every call gets a fresh budget: ``max_attempts`` and ``deadline_s``,
    whichever runs out first. Delays grow exponentially with full jitter.
    """

    max_attempts: int = 60
    deadline_s: float = 60.0
    base_delay_s: float = 0.005
    max_delay_s: float = 0.5
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def delay(self, attempt: int) -> float:
        cap = min(self.max_delay_s, self.base_delay_s * (2 ** min(attempt, 20)))
        return self.rng.uniform(0, cap)


@dataclass
class Attempts:
    """The running budget of one call."""

    policy: RetryPolicy
    count: int = 0
    started: float = field(default=0.0)
    begun: bool = False

    def __post_init__(self) -> None:
        self.started = self.policy.clock()

    @property
    def elapsed(self) -> float:
        return self.policy.clock() - self.started

    def next(self) -> bool:
        """Count an attempt; False when the budget is spent."""
        if self.count >= self.policy.max_attempts or (self.begun and self.elapsed > self.policy.deadline_s):
            return False
        self.begun = True  # the first attempt always runs; the deadline bounds the rest, waits included
        self.count += 1
        return True

    def refund(self) -> None:
        """Give back the attempt just counted (a wait that was not a try):
        the deadline still bounds the call."""
        self.count = max(0, self.count - 1)

    def backoff(self) -> None:
        self.policy.sleep(self.policy.delay(self.count))
