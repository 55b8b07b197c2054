"""Who commits first, on top of the commit loop (:mod:`.commit`): the
table's commit queue (a writer that lost a race commits in turn), and its
floor (a writer that kept losing holds the others a while).

Liveness only: every commit still compares-and-sets the head. The store
keeps both (:class:`segment_lineage.lineage.store.contract.Floor`, the queue's tickets).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.store.contract import Floor, Snapshot, Store

FLOOR_AFTER = 3  # races lost in a row before a writer takes the table's floor
FLOOR_MS = 30_000  # how long a floor holds the other writers at most (ZooKeeper's clock)
FLOOR_POLL_S = 0.5  # a waiting writer looks again at least this often
# All the floors one commit waits on, together, hold it at most this long
# (its own clock, from the first wait): a writer that keeps re-taking the
# floor under new holder ids (a broken or hostile client) delays the others
# this much, never longer; a real holder has the table this long to itself.
FLOOR_BUDGET_S = 3.0
QUEUE_WAIT_S = 1.0  # a queued writer looks again at least this often (its turn is watched)
QUEUE_POLL_S = 0.05  # ... and at most this much later where the store cannot watch
QUEUE_REJOINS = 3  # tickets taken away (or never listed) before this commit stops queueing
QUEUE_PATIENCE_S = 5.0  # a queue's front that stays this long (a stopped process) is not waited on


@dataclass
class _Seen:
    """What one manager's commits saw of a table's queue: when each ticket
    was first seen at its front (the oldest ticket not known to stand
    still), and the tickets known to stand still."""

    fronted: dict[str, float] = field(default_factory=dict)
    still: set[str] = field(default_factory=set)


class StuckTickets:
    """Which queue tickets stand still, by table: shared by one manager's
    commits, so a ticket that stands still (its process stopped, or left
    behind while its session lives) costs QUEUE_PATIENCE_S once, not once
    per commit. Forgets a table's tickets once they are gone.

    Only the front of the queue is judged: every ticket behind it waits on
    the one ahead, however long the queue. A front that stays
    QUEUE_PATIENCE_S makes every ticket ahead of the writer that sees it
    count as standing still at once, so any number of them (dead writers,
    planted nodes) cost the patience once. A long queue that moves is never
    judged (before, every ticket counted as standing still 5 s after this
    writer first saw it, so on a loaded machine the writers deep in a queue
    of 64 raced each other, and some gave up). Nor does a queue move while
    the table does not: a front renamed again and again (a node planted
    and replaced by a hostile pusher) stands still once the waiting
    commit has seen the table at one version QUEUE_PATIENCE_S."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, _Seen] = {}

    def ahead(
        self, table: str, queue: tuple[str, ...], place: int, now: float, moved: float | None = None
    ) -> tuple[str, float] | None:
        """The ticket right ahead of ``place`` to wait on (not known to
        stand still), and since when the front stands; None: none (race,
        as without a queue). ``moved``: since when the waiting commit has
        seen the table at its version: a queue whose front keeps changing
        while the table does not move (tickets planted and renamed) stands
        still too."""
        with self._lock:
            seen = self._seen.setdefault(table, _Seen())
            present = set(queue)
            seen.still &= present
            seen.fronted = {t: since for t, since in seen.fronted.items() if t in present}
            waiting_on = [t for t in queue[:place] if t not in seen.still]
            if not waiting_on:
                return None
            since = seen.fronted.setdefault(waiting_on[0], now)  # the front, as this writer sees it
            if now - since > QUEUE_PATIENCE_S or (moved is not None and now - moved > QUEUE_PATIENCE_S):
                seen.still.update(waiting_on)  # the front stood still: all of them, once
                return None
            return waiting_on[-1], since


class _QueueUse:
    """One commit's place in the table's commit queue.

    No race lost yet: commit at once (a writer racing alone loses nothing
    to the queue). After a lost race, take a ticket and commit only when the
    tickets ahead (read with the head, in the same attempt) are gone,
    waiting on the one right ahead, so losers take turns instead of racing
    each other. A lost race at the front (to a newcomer) is tried again at
    once; the floor catches a writer that keeps losing there. A ticket
    taken away (its session lapsed) is taken again; a store that keeps no
    queue for the table means committing without. A front that stays
    QUEUE_PATIENCE_S (its process stopped, its session not yet expired) is
    not waited on any more, nor is any ticket then ahead of this writer:
    it races again, as without a queue (:class:`StuckTickets`)."""

    def __init__(
        self,
        store: Store,
        table: str,
        commit_id: str,
        sleep: Callable[[float], None],
        clock: Callable[[], float],
        stuck: StuckTickets | None = None,
    ) -> None:
        self.store = store
        self.stuck = stuck or StuckTickets()
        self.table = table
        self.commit_id = commit_id
        self.sleep = sleep
        self.clock = clock
        self.ticket: str | None = None
        self.off = False
        self.polls = 0
        self.rejoins = 0
        self.ahead: tuple[str, float] | None = None  # the ticket waited on, and since when
        self.moved: tuple[int, float] | None = None  # the table's version as this commit waits, since when

    def wait(self, snap: Snapshot, lost: int, budget_s: float) -> bool:
        """False when this attempt may commit now; else it waited (or took
        a ticket) and the caller reads again."""
        if self.off:
            return False
        if self.ticket is not None and self.ticket not in snap.queue:
            self._taken_away()
            if self.off:
                return False
        if self.ticket is None:
            return bool(lost) and self._join()  # no race lost yet: no ticket
        return self._await_ahead(snap, snap.queue.index(self.ticket), budget_s)

    def _taken_away(self) -> None:
        """Our ticket is gone (its session lapsed): join again at the tail,
        a few times at most, then commit without the queue."""
        self.ticket = None
        self.rejoins += 1
        self.off = self.rejoins > QUEUE_REJOINS

    def _join(self) -> bool:
        """Take a ticket: True, read again (our place, with the head); False
        when the store keeps no queue for the table (commit without one)."""
        try:
            self.ticket = self.store.queues.join(self.table, self.commit_id)
        except LineageError:
            self.ticket = None
        if self.ticket is None:
            self.off = True
            return False
        return True

    def _await_ahead(self, snap: Snapshot, place: int, budget_s: float) -> bool:
        """Wait on the ticket right ahead of our ``place`` (True); False when
        none is left to wait on: commit now."""
        if place == 0:
            return False
        now = self.clock()
        if self.moved is None or self.moved[0] != snap.state.version:
            self.moved = (snap.state.version, now)
        ahead = self.stuck.ahead(self.table, snap.queue, place, now, self.moved[1])
        if ahead is None:
            return False  # only tickets that stood still are ahead: race, as without a queue
        self.ahead = ahead
        try:
            gone = self.store.queues.await_turn(self.table, ahead[0], max(0.0, min(QUEUE_WAIT_S, budget_s)))
        except LineageError:
            gone = False
        if not gone:
            self.polls += 1
            self.sleep(min(QUEUE_POLL_S, 0.001 * 2.0 ** min(self.polls, 10)))
        return True

    @property
    def queued(self) -> bool:
        return self.ticket is not None

    @property
    def waiting(self) -> str:
        """What this writer last waited for in the queue ('' if nothing)."""
        if self.ahead is None:
            return ""
        return f"ticket {self.ahead[0]} stood ahead of it in the table's commit queue"

    def leave(self) -> None:
        if self.ticket is not None:
            with contextlib.suppress(LineageError):
                self.store.queues.leave(self.table, self.ticket)
            self.ticket = None


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
    going on without it. All the floors of one commit together hold it at
    most FLOOR_BUDGET_S: floors re-taken one after the other (a hog) never
    hold a writer past that, whatever their holders."""

    def __init__(self, store: Store, table: str, commit_id: str, clock: Callable[[], float]) -> None:
        self.store = store
        self.table = table
        self.commit_id = commit_id
        self.clock = clock
        self.losses = 0
        self.lost_races = 0  # in this whole call (``losses`` restarts when the floor is taken)
        self.tried = False  # a take was sent (it may have landed even when its answer was lost)
        self.waits = 0
        self.first_seen: tuple[tuple[str | None, int], float] | None = None
        self.first_wait: float | None = None  # when this commit first waited on any floor
        self.waited_s = 0.0  # the pauses it took for floors, added up
        self.waited_on: Floor | None = None  # the last floor this writer waited on

    def wait_or_take(self, snap: Snapshot, now_ms: int) -> float | None:
        """None when this attempt may commit; else how long to wait before
        the next one (another writer holds the floor, or this one just took it)."""
        seen = snap.floor
        if (
            seen is not None
            and seen.held_against(self.commit_id, now_ms, FLOOR_MS)
            and not self._lapsed(seen)
            and not self._spent()
        ):
            return self._wait_on(seen, now_ms)
        ours = seen is not None and seen.holder == self.commit_id and now_ms < seen.until_ms
        if self.losses < FLOOR_AFTER or ours:  # a floor of ours that lapsed is taken again
            return None
        return self._take(seen, now_ms)

    def _wait_on(self, seen: Floor, now_ms: int) -> float:
        """The pause before looking again at another writer's floor: growing,
        never past the floor's end."""
        self.waits += 1
        self.waited_on = seen
        step: float = min(FLOOR_POLL_S, 0.01 * 2.0 ** min(self.waits, 10))
        pause = min(step, max(0.0, (seen.until_ms - now_ms) / 1000))
        self.waited_s += pause
        return pause

    def _take(self, seen: Floor | None, now_ms: int) -> float | None:
        """Take the floor (over ``seen``, the one read): 0.0, read again (under
        the floor if this writer holds it now); None when refused or not answered."""
        self.losses = 0
        self.tried = True
        try:
            self.store.floors.take(self.table, seen, self.commit_id, now_ms + FLOOR_MS)
        except LineageError:
            return None  # refused (no right to create it) or no answer: go on without it
        return 0.0

    def _spent(self) -> bool:
        """This commit has waited on floors for its whole budget (its first
        wait starts the budget)."""
        if self.first_wait is None:
            self.first_wait = self.clock()
        return self.ignored

    @property
    def ignored(self) -> bool:
        """Floors no longer hold this commit (its budget is spent): nor does a
        floor taken between its read and its write fail it."""
        return self.first_wait is not None and self.clock() - self.first_wait > FLOOR_BUDGET_S

    def _lapsed(self, seen: Floor) -> bool:
        key = (seen.holder, seen.version)
        if self.first_seen is None or self.first_seen[0] != key:
            self.first_seen = (key, self.clock())
            return False
        return self.clock() - self.first_seen[1] > FLOOR_MS / 1000

    def lost(self) -> None:
        self.losses += 1
        self.lost_races += 1

    def leave(self) -> None:
        if self.tried:
            with contextlib.suppress(LineageError):  # it lapses on its own
                self.store.floors.leave(self.table, self.commit_id)
