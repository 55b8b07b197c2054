"""What the code asks of the world: the wall clock, the monotonic clock,
sleeping, and new ids.

One :class:`Env` is held by the manager (``LineageManager(env=...)``) and
handed from there to the push, retention, the daemon, elections and the
store; the default is the system's. The simulation builds one from its
virtual clock and a seeded random, so it runs the shipped code with no
module patched and every id a function of its seed.

Only ids and times that decide something come from here: commit, entry,
table and blob ids, election tags, the clocks that time waits, retries and
passes. A local temporary file's name (renamed into place before anyone
lists it) and the ZooKeeper client's own timers do not.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Env:
    """Seconds since the epoch (``wall``), monotonic seconds, a sleep, and a new random UUID."""

    wall: Callable[[], float] = field(default=time.time)
    monotonic: Callable[[], float] = field(default=time.monotonic)
    sleep: Callable[[float], None] = field(default=time.sleep)
    new_id: Callable[[], uuid.UUID] = field(default=uuid.uuid4)

    def hex_id(self) -> str:
        """A new id as 32 hex digits (commit, table and blob ids)."""
        return self.new_id().hex

    def text_id(self) -> str:
        """A new id in the canonical dashed form (entry ids)."""
        return str(self.new_id())

    def wall_ms(self) -> int:
        return int(self.wall() * 1000)


SYSTEM = Env()
