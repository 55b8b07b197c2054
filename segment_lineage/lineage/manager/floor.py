"""The table's floor: a writer that kept losing the race holds the others a while.

Liveness only, on top of the commit loop (:mod:`.commit`): every commit still
compares-and-sets the head. The floor itself is stored by the store
(:class:`segment_lineage.lineage.store.contract.Floor`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.store.contract import Floor, Snapshot, Store

FLOOR_AFTER = 3  # races lost in a row before a writer takes the table's floor
FLOOR_MS = 30_000  # how long a floor holds the other writers at most (ZooKeeper's clock)
FLOOR_POLL_S = 0.5  # a waiting writer looks again at least this often


class _FloorUse:
    """One commit's use of the table's floor (see :class:`segment_lineage.lineage.store.contract.Floor`).

    A writer that lost the race FLOOR_AFTER times in a row (a big change
    among small ones) takes the floor; the others, reading it in the same
    attempt as the head, wait until it is left or lapses instead of
    committing, and a commit of theirs already under way fails its check of
    the floor and waits too. Liveness only: every commit still
    compares-and-sets the head. A floor is never waited on for longer than
    FLOOR_MS from when this writer first saw it (on its own monotonic clock),
    whatever its deadline says; a take that fails or is refused only means
    going on without it."""

    def __init__(self, store: Store, table: str, commit_id: str, clock: Callable[[], float]) -> None:
        self.store = store
        self.table = table
        self.commit_id = commit_id
        self.clock = clock
        self.losses = 0
        self.tried = False  # a take was sent (it may have landed even when its answer was lost)
        self.waits = 0
        self.first_seen: tuple[tuple[str | None, int], float] | None = None
        self.waited_on: Floor | None = None  # the last floor this writer waited on

    def wait_or_take(self, snap: Snapshot, now_ms: int) -> float | None:
        """None when this attempt may commit; else how long to wait before
        the next one (another writer holds the floor, or this one just took it)."""
        seen = snap.floor
        if (
            seen is not None
            and seen.held_against(self.commit_id, now_ms, FLOOR_MS)
            and not self._lapsed(seen)
        ):
            self.waits += 1
            self.waited_on = seen
            step: float = min(FLOOR_POLL_S, 0.01 * 2.0 ** min(self.waits, 10))
            return min(step, max(0.0, (seen.until_ms - now_ms) / 1000))
        ours = seen is not None and seen.holder == self.commit_id and now_ms < seen.until_ms
        if self.losses < FLOOR_AFTER or ours:  # a floor of ours that lapsed is taken again
            return None
        self.losses = 0
        self.tried = True
        try:
            self.store.take_floor(self.table, seen, self.commit_id, now_ms + FLOOR_MS)
        except LineageError:
            return None  # refused (no right to create it) or no answer: go on without it
        return 0.0  # read again: under the floor if this writer holds it now

    def _lapsed(self, seen: Floor) -> bool:
        key = (seen.holder, seen.version)
        if self.first_seen is None or self.first_seen[0] != key:
            self.first_seen = (key, self.clock())
            return False
        return self.clock() - self.first_seen[1] > FLOOR_MS / 1000

    def lost(self) -> None:
        self.losses += 1

    def leave(self) -> None:
        if self.tried:
            with contextlib.suppress(LineageError):  # it lapses on its own
                self.store.leave_floor(self.table, self.commit_id)
