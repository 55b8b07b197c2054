"""The commit queue's promise, judged on the crowd's table (:func:`simulation.actors.crowd`):
a writer that holds a ticket commits ahead of an older ticket only once the
queue stood still, that is once some ticket stood at the queue's front
QUEUE_PATIENCE_S or longer while this writer was in the queue. A queue that
moves is waited on, however long.

Watched after every step where tickets name their commit (the memory
store's, ``t-<commit id>-<number>``); a step lands at most one commit on the
table (each store call is a switch point), and the ticket of a commit just
landed is still in the queue when the step ends (it leaves in a later call).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.manager.floor import QUEUE_PATIENCE_S
from simulation.world import CROWD

if TYPE_CHECKING:
    from collections.abc import Callable

    from simulation.world import World

    Flag = Callable[[str, str, int], None]  # the checker's flag: a violation's kind, detail and hole


def _commit_of(ticket: str) -> str | None:
    kind, _, rest = ticket.partition("-")
    commit, _, _number = rest.rpartition("-")
    return commit if kind == "t" and commit else None


@dataclass
class QueueWatch:
    """The crowd table's queue after each step, judged as the writers judge
    it, from the earliest moment any of them could: a front (the oldest
    ticket not yet standing still) that stays QUEUE_PATIENCE_S, or a table
    that stays at one version QUEUE_PATIENCE_S while tickets are queued,
    makes every ticket then queued stand still. A commit landed by a ticket's writer
    with a ticket ahead that does not stand still jumped a queue that
    moves. (A crowd's steps are short, :data:`simulation.run.CROWD_STEP_MS`:
    a commit takes a fraction of the patience, so a front stands still only
    when its writer is held, by a floor say.)"""

    front: str | None = None  # the queue's front at the last step (the oldest ticket not standing still)
    front_since: float = 0.0  # since when (the run's monotonic clock)
    stood: set[str] = field(default_factory=set)  # tickets that stand still
    version: int | None = None  # the table's version at the last step
    moved_since: float = 0.0  # since when the table is at that version

    def observe(self, world: World, flag: Flag) -> None:
        if CROWD not in world.tables or CROWD in world.dropped:
            return
        try:
            queue = world.store.read_now(CROWD)[0].queue
            head = world.store.history(CROWD, limit=1)
        except LineageError:
            return  # dropped meanwhile, or not yet made
        now = world.clock.monotonic()
        present = set(queue)
        self.stood &= present
        front = next((t for t in queue if t not in self.stood), None)
        if front != self.front:
            self.front, self.front_since = front, now
        if front is not None and now - min(self.front_since, self.moved_since) >= QUEUE_PATIENCE_S:
            self.stood |= present  # the front (or the table) stood still: every ticket then queued
        landed = head[0] if head else None
        if landed is None or landed.version == self.version:
            return
        self.version, self.moved_since = landed.version, now
        place = next((i for i, t in enumerate(queue) if _commit_of(t) == landed.commit_id), 0)
        moving = [t for t in queue[:place] if t not in self.stood]
        if moving:
            flag(
                "queue-jumped",
                f"commit {landed.commit_id[:8]} (v{landed.version}) landed with {len(moving)} older "
                f"ticket(s) ahead of its own in {CROWD}'s commit queue that did not stand still "
                f"(its front for {now - self.front_since:.1f}s)",
                15,
            )
