"""The simulated world: a temporary directory holding the tables' roots and
each actor's working directory, the virtual clock, the store (in memory, or
real ZooKeeper with one session per actor), and what the run remembers for
the checker (acknowledged commits, what each table's data means)."""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from random import Random
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from segment_lineage.ingest.audit import Audit
from segment_lineage.lineage.core.env import Env
from segment_lineage.lineage.core.model import MirrorFormat, TableConfig, TableState, TableType
from segment_lineage.lineage.core.retry import RetryPolicy
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.store.contract import Store
from segment_lineage.lineage.store.election import Ownership
from simulation.clock import DAY_MS, VirtualClock
from simulation.proxy import Sessions, StoreProxy
from simulation.scheduler import Actor, Scheduler

# In odd seeds (so the even ones run as they did before audits existed, and
# their seeds still find what they found), every third push of an actor is
# audited (no draw decides which); the checker holds each audited end to it.
AUDIT = Audit(min_rows=2, max_change_pct=60.0, not_null=("token",))

if TYPE_CHECKING:
    from segment_lineage.retention.daemon import Daemon

# One table of a push set's job: its name, parts, mode and interval (what a rerun pushes again).
SetPart = tuple[str, list[pa.Table], str, tuple[int, int] | None]

TIME_RETENTION_MS = 2 * DAY_MS
RETRY_DEADLINE_S = 30.0  # every simulated call's budget (virtual seconds)
# A crowd writer's (:func:`simulation.actors.crowd`): its queue moves, however
# slowly, and it waits; out of attempts before this, it raced and lost.
CROWD_DEADLINE_S = 3600.0
CROWD = "crowd"  # the kind of those writers, their table's name and its flag
# A mirror's retention longer than the run: every file any of its Delta
# versions references is one engines may still read (the checker's rule).
MIRROR_WINDOW_MS = 3650 * DAY_MS


@dataclass
class TableInfo:
    """What the simulation knows about a table it created."""

    name: str
    root: str  # as configured
    path: str  # the root resolved as its creator saw it: the checker's view
    data: str  # "plain" (no time column), "ms" (timestamps), "seconds" (integer epoch seconds)
    flags: set[str] = field(default_factory=set)  # relative, dot, nested, parent, equal, symlink


@dataclass(frozen=True)
class Ack:
    table: str
    commit_id: str
    version: int
    actor: str


class World:
    def __init__(self, base: Path, seed: int, scheduler: Scheduler, clock: VirtualClock) -> None:
        self.base = base
        self.seed = seed
        self.wap = seed % 2 == 1  # audited and staged pushes (write-audit-publish) in odd seeds
        self.scheduler = scheduler
        self.clock = clock
        ids = Random(f"uuid/{seed}")
        # The code's clocks and ids, handed in: virtual time (the wall clock is
        # ZooKeeper's virtual one) and ids that are a function of the seed.
        self.env = Env(
            wall=lambda: clock.zk_ms() / 1000.0,
            monotonic=clock.monotonic,
            sleep=self.sleep,
            new_id=lambda: uuid.UUID(int=ids.getrandbits(128), version=4),
        )
        self.lake = base / "lake"
        self.lake.mkdir(parents=True, exist_ok=True)
        self.home = base / "cwd"
        self.sessions = Sessions()
        self.tables: dict[str, TableInfo] = {}
        self.acks: list[Ack] = []
        self.deleted_log: list[tuple[str, str, str]] = []  # (actor, table, location) via on_deleted
        self.readded: set[str] = set()  # absolute paths a re-add registered again
        self.uploading: dict[int, str] = {}  # actor -> the table it uploads a file to (passes aim there)
        # Leases a reader was accepted on (its open returned): only those are
        # promises. A lease under verification may still be refused.
        self.accepted: dict[tuple[str, str], TableState] = {}
        self.store: Store  # the omniscient view: the checker's and the setup's
        self.new_store: Callable[[Actor], StoreProxy]
        self.fence: Callable[[StoreProxy], Callable[[], None]] = StoreProxy.fence
        self.on_dropped: Callable[[str], None] = lambda _table: None  # the checker forgets its files
        self.daemons: dict[int, Daemon] = {}  # actor -> its retention daemon
        self.candidates: dict[int, tuple[Ownership, StoreProxy]] = {}  # actor -> its daemon's candidacy
        self.daemon_errors: list[str] = []  # what a daemon logged as an unexpected failure
        self.step = 0
        self.crowd = False  # a crowd of writers in the cast: waits let the others run (:meth:`sleep`)
        self.mirror_warnings: list[tuple[str, str]] = []  # (actor, warning) of publishes after commits
        self.dropped: set[str] = set()  # tables an actor dropped (a new one may hold the root since)
        self.purging: set[str] = set()  # tables an actor dropped with --purge (said before the purge)
        self.actors: list[Actor] = []  # the run's, as spawned
        self.publishing: dict[int, str] = {}  # actor -> the table it publishes to (or may, after a commit)
        # Batch jobs under way: job id -> (the actor running it, table, its push's arguments). A
        # scheduler that judged a stalled attempt dead runs the job again from another process.
        self.jobs: dict[str, tuple[int, str, dict[str, Any]]] = {}
        # Push sets' jobs under way, alike: job id -> (the actor, each table's (name, parts, mode, interval)).
        self.set_jobs: dict[str, tuple[int, tuple[SetPart, ...]]] = {}
        # ZooKeeper data directories an operator put under a table's root (marked, as
        # every server the project starts marks its own): nobody else deletes in them.
        self.state_dirs: set[str] = set()
        self.moved: dict[str, str] = {}  # a folder moved aside by an operator -> where it was
        self.policy = False  # an ACL policy in force (a cast with an intruder): actors run under roles
        self.sets: dict[str, tuple[str, ...]] = {}  # a push set's (or set rollback's) id -> its tables
        self.landed_sets: list[str] = []  # push sets that landed (or were staged), in order
        self.passed_ms: dict[str, list[int]] = {}  # table -> ZooKeeper's time as each janitor pass began
        self.set_history: dict[str, tuple[int, set[str]]] = {}  # table -> (version, the sets its history has)

    # ---- actors -----------------------------------------------------------------------

    def cwd_for(self, aid: int) -> str:
        path = self.home / f"a{aid}"
        path.mkdir(parents=True, exist_ok=True)
        return str(path)

    def sleep(self, seconds: float) -> None:
        """A wait in virtual time: time passes and the baton moves on. In a
        run with a crowd of writers, a wait lets the others run meanwhile
        instead, and the clock moves only when every actor waits: with many
        writers polling a queue, each poll moving the one clock would make
        the queue's front look slower the longer the queue."""
        me = self.scheduler.current()
        if me is not None and self.crowd:
            me.wakes_ms = self.clock.elapsed_ms + int(seconds * 1000)
        else:
            self.clock.advance(int(seconds * 1000))
        self.scheduler.switch("sleep")

    def manager(self, store: Any, actor: str, rng: Random) -> LineageManager:
        retry = RetryPolicy(
            max_attempts=30,
            deadline_s=CROWD_DEADLINE_S if actor.endswith(f":{CROWD}") else RETRY_DEADLINE_S,
            sleep=self.sleep,
            clock=self.clock.monotonic,
            rng=Random(rng.random()),
        )
        made = LineageManager(store, retry=retry, actor=actor, env=self.env, **self._deep_storage())
        # Half the processes publish after each of their commits, as the CLI's
        # do; the others (a library user's) leave it to a sync, so logs lag.
        hook = self._mirror_hook(actor) if rng.random() < 0.5 else None
        if hook is not None:
            made.after_commit = hook
        return made

    def _mirror_hook(self, actor: str) -> Any:
        """The CLI's publish-after-commit hook."""
        from segment_lineage.mirror.hook import publish_after

        return publish_after(lambda text: self.mirror_warnings.append((actor, text)))

    @staticmethod
    def _deep_storage() -> dict[str, Any]:
        """Root claims through deep storage, as the CLI composes a manager."""
        from segment_lineage.lineage.storage.claim_marker import RootClaimFiles

        return {"claims": RootClaimFiles()}

    def ack(self, actor: str) -> Callable[[str, str, int], None]:
        def note(table: str, commit_id: str, version: int) -> None:
            self.acks.append(Ack(table, commit_id, version, actor))

        return note

    # ---- tables -------------------------------------------------------------------------

    def dropped_table(self, name: str) -> None:
        """An actor dropped ``name``: its files are no table's any more (a
        table created at its root next may take them as orphans)."""
        self.dropped.add(name)
        self.on_dropped(name)

    def intend_table(self, name: str, root: str, cwd: str, data: str, flags: set[str]) -> None:
        """Known before the create is sent, so a creator that dies after it
        leaves a table the checker can still place."""
        path = root if os.path.isabs(root) else os.path.normpath(os.path.join(cwd, root))
        self.tables.setdefault(name, TableInfo(name, root, path, data, flags))

    def config(self, name: str, root: str, data: str, rng: Random) -> TableConfig:
        small = [0, 0, 200, 2_000, 60_000]
        if data == "plain":
            return TableConfig(
                name=name,
                root=root,
                table_type=TableType.REFRESH,
                replaced_segments_retention_ms=rng.choice(small),
                lineage_entry_cleanup_retention_ms=rng.choice(small),
                max_snapshots=rng.randint(1, 3),
            )
        config = TableConfig(
            name=name,
            root=root,
            table_type=TableType.APPEND,
            time_column="ts",
            replaced_segments_retention_ms=rng.choice(small),
            lineage_entry_cleanup_retention_ms=rng.choice(small),
            time_retention_ms=TIME_RETENTION_MS,
        )
        if rng.random() < 0.5:  # half the APPEND tables are mirrored
            return replace(config, mirror=MirrorFormat.DELTA, mirror_retention_ms=MIRROR_WINDOW_MS)
        return config

    def abs_path(self, table: str, location: str) -> str | None:
        info = self.tables.get(table)
        if info is None:
            return None
        return posixpath.join(info.path, location)

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.base)

    # ---- data -----------------------------------------------------------------------------

    def parts(
        self, info: TableInfo, table_type: TableType, rng: Random, token: str
    ) -> tuple[list[pa.Table], str, tuple[int, int] | None]:
        """1 to 3 parts of 1 to 4 rows, every row carrying its part's token;
        with the push mode and interval. Time-keyed data lies inside one day
        (a replace-range interval), zero to three days back."""
        count = rng.randint(1, 3)
        sizes = [rng.randint(1, 4) for _ in range(count)]
        if info.data == "plain":
            mode = "refresh" if table_type is TableType.REFRESH else "append"
            return [pa.table({"token": [f"{token}.{i}"] * n}) for i, n in enumerate(sizes)], mode, None
        day = (self.clock.zk_ms() // DAY_MS - rng.randint(0, 3)) * DAY_MS
        parts = []
        for i, n in enumerate(sizes):
            stamps = [day + rng.randint(0, DAY_MS - 1) for _ in range(n)]
            column = (
                pa.array(stamps, pa.timestamp("ms"))
                if info.data == "ms"
                else pa.array([s // 1000 for s in stamps], pa.int64())
            )
            parts.append(pa.table({"token": [f"{token}.{i}"] * n, "ts": column}))
        if info.data == "ms" and rng.random() < 0.4:
            return parts, "replace-range", (day, day + DAY_MS)
        return parts, "append", None

    def true_max_ms(self, table: str, column: pa.ChunkedArray) -> int | None:
        """What the data means, whatever the code takes it to mean."""
        info = self.tables.get(table)
        if info is None or info.data == "plain" or len(column) == 0:
            return None
        if pa.types.is_timestamp(column.type):  # written in microseconds, whatever the input's unit
            column = column.cast(pa.timestamp("ms", tz=column.type.tz))
        values = column.cast(pa.int64()).to_pylist()
        top = max(v for v in values if v is not None)
        return int(top) * (1000 if info.data == "seconds" else 1)
