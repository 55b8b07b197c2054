"""Virtual time: ZooKeeper's clock, the file system's clock and the
monotonic clock the code waits on, all driven by the simulation.

The code under test reads time in two ways, both handed in: the store's
``now_ms`` (the memory store is given :meth:`VirtualClock.zk_ms`), and the
manager's env (:class:`segment_lineage.lineage.core.env.Env`), which the
world builds from this clock and a seeded random and from which the push,
retention, the daemon and elections take their clocks and ids. No module is
patched: the simulation runs the code as shipped.
"""

from __future__ import annotations

from collections.abc import Callable

DAY_MS = 86_400_000
# Virtual runs start here (2025-06-15T00:00:00Z), whatever the host's clock says.
EPOCH_MS = 1_749_945_600_000


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
