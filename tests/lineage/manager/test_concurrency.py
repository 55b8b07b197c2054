"""Many processes writing one table on real ZooKeeper: nothing acknowledged is lost."""

from __future__ import annotations

import multiprocessing as mp
import uuid
from pathlib import Path
from typing import Any

import pytest

from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import ContentionError, TableExistsError
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.core.retry import RetryPolicy
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.store import ZkStore
from segment_lineage.lineage.zk.store.blobs import BlobStore

T = "shared"
OWN = "own"
WRITERS = 16
ROUNDS = 4


def _manager(hosts: str) -> LineageManager:
    retry = RetryPolicy(max_attempts=400, deadline_s=240, base_delay_s=0.002, max_delay_s=0.2)
    return LineageManager(ZkStore(connect(ZkSettings(hosts=hosts))), retry=retry)


def _writer(hosts: str, worker: int, start: Any, out: Any) -> None:
    """Appends (empty-from replaces) and replacements of this worker's own segment."""
    m = _manager(hosts)
    acked: list[tuple[str, int]] = []
    failures: list[str] = []
    start.wait()
    current: str | None = None
    for round_ in range(ROUNDS):
        name = f"w{worker:02d}_r{round_}"
        try:
            eid = str(uuid.uuid4())
            src = [current] if current else []
            audit = m.audit(f"worker {worker}")
            done = m.commit(
                T,
                lambda s, now, src=src, name=name, eid=eid, audit=audit: transitions.start_replace(
                    s, src, [name], entry_id=eid, audit=audit, now_ms=now
                ),
            )
            acked.append((done.commit_id, done.state.version))
            done = m.register_segments(T, [Segment(name, f"{name}.parquet", rows=1)])
            acked.append((done.commit_id, done.state.version))
            done = m.end_replace(T, eid)
            acked.append((done.commit_id, done.state.version))
            current = name
        except ContentionError as exc:
            failures.append(exc.message)
            break
    m.store.close()
    out.put((worker, acked, failures, current))


def _own_writer(hosts: str, worker: int, start: Any, out: Any) -> None:
    """Pushes (start, register, end) of this worker's own new segments, on the
    retry policy every caller gets by default."""
    m = LineageManager(ZkStore(connect(ZkSettings(hosts=hosts))))
    gave_up: list[str] = []
    start.wait()
    for round_ in range(ROUNDS):
        name = f"own{worker:02d}_r{round_}"
        try:
            entry = m.start_replace(OWN, [], [name])
            m.register_segments(OWN, [Segment(name, f"{name}.parquet", rows=1)], entry_id=entry)
            m.end_replace(OWN, entry)
        except ContentionError as exc:
            gave_up.append(exc.message)
    m.store.close()
    out.put((worker, gave_up))


def _creator(hosts: str, start: Any, out: Any) -> None:
    m = _manager(hosts)
    start.wait()
    try:
        m.create_table(TableConfig.build("raced", "/d/raced"))
        out.put("created")
    except TableExistsError as exc:
        out.put(f"exists: {exc.message}")
    finally:
        m.store.close()


def _run_writers(target: Any, hosts: str) -> list[Any]:
    """WRITERS processes running ``target(hosts, worker, start, out)``, let go
    at once; what each put on ``out``, once all exited cleanly."""
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(hosts, w, start, out)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


@pytest.mark.slow
@pytest.mark.e2e
def test_sixteen_processes_lose_no_acknowledged_change(zk_hosts: str) -> None:
    setup = _manager(zk_hosts)
    setup.create_table(TableConfig.build(T, f"/d/{T}", "APPEND"))
    results = _run_writers(_writer, zk_hosts)

    history = setup.history(T)
    versions = [h.version for h in history]
    final = setup.table(T)
    # An unbroken version chain, newest first, down to the table's creation.
    assert versions == list(range(final.version, 0, -1))
    by_commit = {h.commit_id: h.version for h in history}
    acked_total = 0
    for _worker, acked, failures, _current in results:
        assert all("gave up" in f for f in failures)
        for commit_id, version in acked:
            assert by_commit.get(commit_id) == version
            acked_total += 1
    assert acked_total == final.version - 1
    visible = {s.name for s in setup.visible_segments(T)}
    assert visible == {cur for _w, _a, _f, cur in results if cur}
    setup.store.close()


@pytest.mark.slow
@pytest.mark.e2e
def test_sixteen_writers_whose_changes_do_not_overlap_never_give_up(zk_hosts: str) -> None:
    """On the default retry policy, 16 processes pushing their own segments
    to one table all land: losing races to writers of other segments is
    never a ContentionError (the floor takes over from the races)."""
    setup = _manager(zk_hosts)
    setup.create_table(TableConfig.build(OWN, f"/d/{OWN}", "APPEND"))
    results = _run_writers(_own_writer, zk_hosts)
    gave_up = [f"writer {w}: {message}" for w, messages in results for message in messages]
    assert not gave_up, gave_up
    visible = {s.name for s in setup.visible_segments(OWN)}
    assert visible == {f"own{w:02d}_r{r}" for w in range(WRITERS) for r in range(ROUNDS)}
    setup.store.close()


def test_two_processes_race_the_first_write(zk_hosts: str) -> None:
    ctx = mp.get_context("spawn")
    for _ in range(3):
        start = ctx.Event()
        out = ctx.Queue()
        procs = [ctx.Process(target=_creator, args=(zk_hosts, start, out)) for _ in range(2)]
        for p in procs:
            p.start()
        start.set()
        outcomes = sorted(out.get(timeout=120) for _ in procs)
        for p in procs:
            p.join(timeout=60)
        assert outcomes[0] == "created"
        assert outcomes[1] == "exists: table 'raced' already exists"
        m = _manager(zk_hosts)
        assert [h.version for h in m.history("raced")] == [1]
        m.drop_table("raced")
        m.store.close()


def _big_change_among_small_ones(
    zk_store: ZkStore, zk_hosts: str, tmp_path: Path
) -> tuple[list[str], list[str]]:
    """A 2,000-segment register while, between its blobs and its swap, a
    small writer commits one segment (up to 40 times). The small writers'
    segments that landed, and the messages of those that gave up."""
    big = LineageManager(zk_store, retry=RetryPolicy(max_attempts=20, deadline_s=30))
    big.create_table(TableConfig.build("t", str(tmp_path / "t")))
    small_store = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    small = LineageManager(small_store, retry=RetryPolicy(deadline_s=0.5))
    names = [f"b{i:05d}" for i in range(2_000)]
    entry = big.start_replace("t", [], names)
    landed: list[str] = []
    refused: list[str] = []
    real = BlobStore.write

    def small_commits_first(self: BlobStore, table: str, blobs: dict[str, bytes]) -> None:
        real(self, table, blobs)
        # Between the big one's blobs and its swap:
        if self is zk_store.blobs and len(landed) + len(refused) < 40:
            name = f"s{len(landed) + len(refused)}"
            try:
                small.register_segments("t", [Segment(name, f"{name}.parquet", rows=1, size_bytes=1)])
                landed.append(name)
            except ContentionError as exc:
                refused.append(exc.message)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BlobStore, "write", small_commits_first)
        try:
            big.register_segments(
                "t", [Segment(n, f"p/{n}.parquet", rows=1, size_bytes=1) for n in names], entry_id=entry
            )
        finally:
            small_store.close()
    state = big.table("t")
    assert all(n in state.segments for n in names)
    assert all(n in state.segments for n in landed)
    return landed, refused


def test_a_big_change_lands_beside_writers_that_always_commit_first(
    zk_store: ZkStore, zk_hosts: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A change that keeps losing the race (in the commit queue's front: the
    small writers are newcomers, who race) takes the table's floor: the
    small writers wait for it (a commit of theirs already under way fails
    its check of the floor), so it lands. Without the floor it gives up
    every time."""
    landed, refused = _big_change_among_small_ones(zk_store, zk_hosts, tmp_path)
    assert len(landed) == 3  # it lost three races first
    assert refused and "held the table's floor until" in refused[0]
    assert zk_store.read("t").floor is not None and zk_store.read("t").floor.holder is None  # left


class VirtualTime:
    """A retry policy's clock and sleep, and a memory store's clock, in one."""

    def __init__(self) -> None:
        self.s = 0.0
        self.sleeps = 0

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.s += seconds

    def ms(self) -> int:
        return 1_700_000_000_000 + int(self.s * 1000)


def test_a_floor_is_waited_on_no_longer_than_its_limit_and_polled_gently() -> None:
    """A floor whose holder is gone holds a writer for FLOOR_BUDGET_S at most
    (all the floors one commit meets, together), looked at every half second
    or so, and the give-up message names it; a floor stamped further ahead
    than any take asks for (a clock that ran fast, a bad writer) is ignored."""
    from segment_lineage.lineage.manager import FLOOR_MS
    from segment_lineage.lineage.manager.floor import FLOOR_BUDGET_S
    from segment_lineage.lineage.store.memory import MemoryStore

    time = VirtualTime()
    store = MemoryStore(clock=time.ms)
    policy = RetryPolicy(deadline_s=120, sleep=time.sleep, clock=lambda: time.s)
    m = LineageManager(store, retry=policy)
    m.create_table(TableConfig.build("t", "/data/t"))
    assert store.floors.take("t", store.read("t").floor, "far-ahead", time.ms() + 86_400_000)
    m.register_segments("t", [Segment("z", "z.parquet", rows=1, size_bytes=1)])
    assert time.sleeps == 0  # not waited on at all
    began = time.s
    assert store.floors.take("t", store.read("t").floor, "ghost-commit", time.ms() + FLOOR_MS)
    m.register_segments("t", [Segment("a", "a.parquet", rows=1, size_bytes=1)])
    assert FLOOR_BUDGET_S - 1 <= time.s - began <= FLOOR_BUDGET_S + 2
    assert time.sleeps <= 80  # not a busy loop
    short = LineageManager(
        store, retry=RetryPolicy(deadline_s=FLOOR_BUDGET_S / 2, sleep=time.sleep, clock=lambda: time.s)
    )
    assert store.floors.take("t", store.read("t").floor, "ghost-commit-2", time.ms() + FLOOR_MS)
    with pytest.raises(ContentionError, match="commit ghost-co held the table's floor until 20"):
        short.register_segments("t", [Segment("b", "b.parquet", rows=1, size_bytes=1)])


def test_a_refused_take_of_the_floor_only_means_going_on_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from segment_lineage.lineage.core.errors import AuthError
    from segment_lineage.lineage.store.contract import VersionConflict
    from segment_lineage.lineage.store.memory import MemoryStore
    from segment_lineage.lineage.store.memory_recipes import MemoryFloors

    time = VirtualTime()
    store = MemoryStore(clock=time.ms)
    m = LineageManager(store, retry=RetryPolicy(sleep=time.sleep, clock=lambda: time.s))
    m.create_table(TableConfig.build("t", "/data/t"))
    real = MemoryStore.write
    lost = [0]

    def loses_four_races(self: MemoryStore, *args: Any, **kwargs: Any) -> Any:
        if lost[0] < 4:
            lost[0] += 1
            raise VersionConflict("another writer was first")
        return real(self, *args, **kwargs)

    def refused(*_args: Any) -> bool:
        raise AuthError("ZooKeeper refused taking the floor: not authorised")

    monkeypatch.setattr(MemoryStore, "write", loses_four_races)
    monkeypatch.setattr(MemoryFloors, "take", refused)
    m.register_segments("t", [Segment("a", "a.parquet", rows=1, size_bytes=1)])
    assert "a" in m.table("t").segments and lost[0] == 4


def test_a_writer_whose_floor_lapsed_while_it_kept_losing_takes_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from segment_lineage.lineage.manager import FLOOR_MS
    from segment_lineage.lineage.store.contract import VersionConflict
    from segment_lineage.lineage.store.memory import MemoryStore
    from segment_lineage.lineage.store.memory_recipes import MemoryFloors

    time = VirtualTime()
    store = MemoryStore(clock=time.ms)
    m = LineageManager(
        store, retry=RetryPolicy(deadline_s=600, max_attempts=10_000, sleep=time.sleep, clock=lambda: time.s)
    )
    m.create_table(TableConfig.build("t", "/data/t"))
    real_write, real_take = MemoryStore.write, MemoryFloors.take
    takes: list[int] = []  # in the store's milliseconds, the clock the floor is judged by

    def slow_and_losing(self: MemoryStore, *args: Any, **kwargs: Any) -> Any:
        time.s += 1.0  # an attempt takes a second
        if time.s < 2 * FLOOR_MS / 1000:
            raise VersionConflict("another writer was first")
        return real_write(self, *args, **kwargs)

    def counted(self: MemoryFloors, *args: Any) -> bool:
        takes.append(time.ms())
        return real_take(self, *args)

    monkeypatch.setattr(MemoryStore, "write", slow_and_losing)
    monkeypatch.setattr(MemoryFloors, "take", counted)
    m.register_segments("t", [Segment("a", "a.parquet", rows=1, size_bytes=1)])
    assert len(takes) >= 2 and takes[1] - takes[0] >= FLOOR_MS  # taken again once lapsed


def test_a_writer_queues_after_a_lost_race_and_commits_in_turn() -> None:
    """The commit queue's decisions, one attempt at a time: commit at once
    before a race is lost (others queued or not); after a lost race, take a
    ticket; commit at the front; wait on the ticket right ahead; take a new
    ticket when one's own was taken away; stop waiting on a ticket that
    stands still; commit without a queue where the store keeps none."""

    from segment_lineage.lineage.manager.floor import QUEUE_PATIENCE_S, _QueueUse
    from segment_lineage.lineage.store.memory import MemoryStore

    time = VirtualTime()
    store = MemoryStore(clock=time.ms)
    LineageManager(store).create_table(TableConfig.build("q", "/data/q"))
    waited: list[str] = []
    real_await = store.queues.await_turn

    def awaiting(table: str, ahead: str, timeout_s: float) -> bool:
        waited.append(ahead)
        return real_await(table, ahead, timeout_s)

    store.queues.await_turn = awaiting  # type: ignore[method-assign]

    def snap() -> Any:
        return store.read_now("q")[0]

    use = _QueueUse(store, "q", "mine", time.sleep, lambda: time.s)
    assert use.wait(snap(), lost=0, budget_s=60) is False  # nobody queued, no race lost: commit
    assert use.wait(snap(), lost=1, budget_s=60) is True and use.ticket is not None  # lost: queue
    assert use.wait(snap(), lost=1, budget_s=60) is False  # at the front: commit
    use.leave()

    ahead = store.queues.join("q", "other")
    assert ahead is not None
    late = _QueueUse(store, "q", "late", time.sleep, lambda: time.s)
    assert late.wait(snap(), lost=0, budget_s=60) is False and late.ticket is None  # a newcomer races
    assert late.wait(snap(), lost=1, budget_s=60) is True and late.ticket is not None  # lost: queue
    assert late.wait(snap(), lost=1, budget_s=60) is True and waited == [ahead]  # behind: wait on it
    store.queues.leave("q", late.ticket)  # taken away (its session lapsed, say)
    assert late.wait(snap(), lost=1, budget_s=60) is True and late.ticket is not None  # a new one
    assert late.wait(snap(), lost=1, budget_s=60) is True and waited == [ahead, ahead]  # still behind it
    time.s += QUEUE_PATIENCE_S + 1  # the ticket ahead stands still
    assert late.wait(snap(), lost=1, budget_s=60) is False  # waited on it long enough: race
    assert "stood ahead of it in the table's commit queue" in late.waiting
    late.leave()
    again = _QueueUse(
        store, "q", "again", time.sleep, lambda: time.s, late.stuck
    )  # the manager's next commit
    assert again.wait(snap(), lost=1, budget_s=60) is True and again.ticket is not None
    assert again.wait(snap(), lost=1, budget_s=60) is False  # known to stand still: not waited on again
    again.leave()
    store.queues.leave("q", ahead)

    store.queues.join = lambda table, commit_id: None  # type: ignore[method-assign]
    off = _QueueUse(store, "q", "off", time.sleep, lambda: time.s)
    assert off.wait(snap(), lost=3, budget_s=60) is False and off.off  # no queue kept: commit


def test_a_front_renamed_again_and_again_while_the_table_does_not_move_stands_still() -> None:
    """A pusher that keeps one planted ticket at the queue's front, renamed
    every 4 s: each name is a new front, so the front alone never stood 5 s,
    and queued writers waited until their deadline (outside trial: 8 of 20
    pushes gave up after 60 s). The table did not move meanwhile: after 5 s
    at one version, the tickets ahead stand still, and the writer races.
    A table that moves (the front's commit landing) restarts that clock."""
    from segment_lineage.lineage.manager.floor import QUEUE_PATIENCE_S, StuckTickets

    stuck = StuckTickets()
    now, version_since = 0.0, 0.0
    for renamed in range(3):
        queue = (f"t-planted-{renamed}", "mine")
        ahead = stuck.ahead("q", queue, 1, now, version_since)
        if now - version_since <= QUEUE_PATIENCE_S:
            assert ahead == (queue[0], now)
        else:
            assert ahead is None  # the table stood still: race
        now += 4.0
    assert now - 4.0 > QUEUE_PATIENCE_S and ahead is None
    queue = ("t-planted-9", "live", "mine")
    assert stuck.ahead("q", queue, 2, now, now) == ("live", now)  # the table moved just now: wait


def test_a_long_queue_that_moves_is_waited_on_and_a_front_that_stands_still_once() -> None:
    """Forty writers queued, the front leaving every half second: the last
    waits its 20 s on the ticket right ahead, never taking the queue for
    stopped (once, every ticket ahead counted as standing still 5 s after
    it was first seen, and deep waiters raced: on a loaded machine, 64
    writers' commits took seconds each). A front that stays 5 s makes every
    ticket ahead count as standing still at once, and for the manager's
    later commits too, until they are gone."""
    from segment_lineage.lineage.manager.floor import QUEUE_PATIENCE_S, StuckTickets

    stuck = StuckTickets()
    queue = tuple(f"t-{i:02d}" for i in range(40))
    now = 0.0
    while len(queue) > 1:
        ahead = stuck.ahead("q", queue, len(queue) - 1, now)
        assert ahead is not None and ahead[0] == queue[-2], (now, ahead)
        now += 0.5
        queue = queue[1:]
    assert now == 19.5

    queue = ("dead-1", "dead-2", "live", "mine")
    assert stuck.ahead("q", queue, 3, now) == ("live", now)
    now += QUEUE_PATIENCE_S + 0.1  # the front (a stopped process) stays
    assert stuck.ahead("q", queue, 3, now) is None  # race
    later = ("dead-1", "dead-2", "mine-2")  # the manager's next commit: none is waited on again
    assert stuck.ahead("q", later, 2, now + 1) is None
    fresh = ("dead-1", "other", "mine-3")  # a ticket that joined since is waited on
    assert stuck.ahead("q", fresh, 2, now + 2) == ("other", now + 2)


def test_a_writer_that_gave_up_in_the_queue_says_it_waited_not_how_often_it_lost() -> None:
    """A writer that lost one race, queued behind a ticket and ran out of
    time waiting on it tells what kept it (the ticket, for how long, how
    many tries), not "changed under us 1 times" (outside trial F4)."""
    from segment_lineage.lineage.store.memory import MemoryStore

    time = VirtualTime()
    store = MemoryStore(clock=time.ms)
    LineageManager(store).create_table(TableConfig.build("q", "/data/q"))
    other = LineageManager(store)
    planted = store.queues.join("q", "planted")
    assert planted is not None
    real_write = store.write
    raced: list[int] = []

    def beaten(*args: Any, **kwargs: Any) -> Any:
        if not raced:  # another writer commits first, once
            raced.append(1)
            other.register_segments("q", [Segment("o", "o.parquet", rows=1, size_bytes=1)])
        return real_write(*args, **kwargs)

    store.write = beaten  # type: ignore[method-assign]
    m = LineageManager(store, retry=RetryPolicy(deadline_s=3, sleep=time.sleep, clock=lambda: time.s))
    with pytest.raises(ContentionError) as caught:
        m.register_segments("q", [Segment("a", "a.parquet", rows=1, size_bytes=1)])
    message = caught.value.message
    assert "table 'q' was kept busy by other writers for 3." in message, message
    assert f"ticket {planted} stood ahead of it in the table's commit queue; tried 1 time)" in message
    assert "changed under us" not in message and "1 times" not in message
    state = store.read("q").state.loaded()
    assert "o" in state.segments and "a" not in state.segments  # nothing of ours changed
