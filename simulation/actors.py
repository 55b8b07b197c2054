"""The actors: each runs the project's real code, a few operations in a row.

An actor's errors that the code raises on purpose (refused, conflict, outcome
unknown, snapshot too old, ...) are part of the game and only noted; anything
else escaping an actor is reported by the run as a violation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import posixpath
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from random import Random
from typing import Any

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.errors import StorageError
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.ingest.stage import publish
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.acl import PUSHER, READER, RETENTION
from segment_lineage.lineage.core.errors import AuthError, LineageError, RefusedError, TableExistsError
from segment_lineage.lineage.core.model import Change, Operation, Segment, TableState
from segment_lineage.lineage.core.settings import SettingsChange
from segment_lineage.lineage.core.visibility import visible_segments
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.lineage.store.election import Ownership
from segment_lineage.retention.daemon import HEARTBEAT_S, Daemon
from segment_lineage.retention.errors import FencedError
from segment_lineage.retention.executor import PassOptions, run_pass, run_table
from segment_lineage.retention.schedule import Schedule
from simulation.checker import FOREIGN_MARK, Checker
from simulation.proxy import StoreProxy
from simulation.scheduler import Actor
from simulation.set_checks import check_set_rollback
from simulation.sets import cutter, rerun_set, setter, undoer, unpusher, unstager
from simulation.world import AUDIT, CROWD, World

Body = Callable[[Actor], None]
FS_KINDS = frozenset(
    {"push", "crowd", "retention", "daemon", "readd", "upload", "create", "symlink", "janitor", "saboteur"}
    | {"mirror", "remirror", "zkhome", "foreign", "intruder", "set", "unset", "unpush", "swapper"}
)
HOUR_MS = 3_600_000
STAGE_HOLD = "30s"  # a staged push left alone is cleaned up within the run
# Under an ACL policy (a run with an intruder), the identities the kinds run
# as; the other kinds are an admin's work.
POLICY_ROLES = {
    "push": PUSHER, "crowd": PUSHER, "rerun": PUSHER, "intruder": PUSHER,
    "set": PUSHER, "unset": PUSHER, "unpush": PUSHER,
    "retention": RETENTION, "read": READER, "cut": READER,
}  # fmt: skip


# Failures that are bugs of ours wherever they come from, even wrapped in a
# refusal (a failed push tells its cause as "PushError: ... RecursionError").
BUGS = (RecursionError, TypeError, AttributeError, NameError, KeyError, IndexError, AssertionError)


class Ctx:
    """One actor's process: its store (and session), manager and randomness."""

    def __init__(self, world: World, checker: Checker, actor: Actor, rng: Random) -> None:
        self.world = world
        self.checker = checker
        self.actor = actor
        self.rng = rng
        self.store: StoreProxy
        self.manager: LineageManager
        self._connect()
        self.pushes = 0
        self.staged: list[tuple[str, str]] = []  # (table, entry) of its staged pushes not yet settled

    def note(self, text: str) -> None:
        self.actor.notes.append(text)

    def _connect(self) -> None:
        """A client of its own: a store (and session) and a manager on it."""
        self.store = self.world.new_store(self.actor)
        if self.world.policy:  # an ACL policy in force: the kinds that have a role run under it
            self.store.role = POLICY_ROLES.get(self.actor.kind)
        self.manager = self.world.manager(self.store, self.actor.name, self.rng)

    def reconnect(self) -> None:
        """The process goes on with a new client (a new session, nothing
        cached), as a long-lived process that reconnected does: its next
        commits start from versions it never wrote. On ZooKeeper only: the
        memory store keeps nothing per client, and its seeds' runs stay as they were."""
        self._connect()
        self.note("reconnected")

    def failed(self, what: str, exc: LineageError) -> None:
        self.note(f"{what}: {type(exc).__name__}")
        self.checker.check_error(self.actor.name, exc)
        cause = exc.__cause__
        while cause is not None:  # a bug of ours, told as a refusal (a push says what it failed on)
            if isinstance(cause, BUGS):
                said = f"{type(cause).__name__}: {str(cause)[:200]}"
                self.checker.flag(
                    "actor-raised", f"{self.actor.name}: {what}: {type(exc).__name__} from {said}"
                )
                break
            cause = cause.__cause__

    def table(self, known_only: bool = True) -> str | None:
        names = self.manager.list_tables()
        if known_only:  # the crowd's table is the crowd's alone (see :func:`crowd`)
            names = [n for n in names if n in self.world.tables and CROWD not in self.world.tables[n].flags]
        return self.rng.choice(names) if names else None

    def push(self, table: str) -> None:
        info = self.world.tables[table]
        self.pushes += 1
        # Half the pushes are a batch job's, with a job id; such a job is run
        # again (its answer lost, its scheduler restarted) a third of the
        # time: the checker flags a job whose data landed twice.
        job = f"a{self.actor.aid}-job{self.pushes}" if self.rng.random() < 0.5 else None
        runs = 2 if job is not None and self.rng.random() < 0.33 else 1
        try:
            state = self.manager.table(table)
            parts, mode, interval = self.world.parts(
                info, state.config.table_type, self.rng, f"a{self.actor.aid}-{self.pushes}"
            )
        except LineageError as exc:
            self.failed(f"push {table}", exc)
            return
        self.world.publishing[self.actor.aid] = table  # its publish after the commit, if it has one
        audited = self.world.wap and (self.actor.aid + self.pushes) % 3 == 0
        # In odd seeds, a pusher's every fourth push (no job's) is staged;
        # its next turn publishes or reverts it, unless its hold ends first.
        staged = self.world.wap and self.actor.kind == "push" and job is None
        staged = staged and (self.actor.aid + self.pushes) % 4 == 2
        arguments: dict[str, Any] = {"parts": parts, "mode": mode, "interval": interval}
        arguments["audit"] = AUDIT if audited else None
        arguments["stage"] = staged
        if job is not None:
            self.world.jobs[job] = (self.actor.aid, table, arguments)
        try:
            for run in range(runs):
                self._push_job(table, job, arguments, f" (job run {run + 1})" if job else "")
        finally:
            if job is not None and self.world.jobs.get(job, (None,))[0] == self.actor.aid:
                del self.world.jobs[job]

    def _push_job(self, table: str, job: str | None, arguments: dict[str, Any], what: str) -> None:
        try:
            result = push_arrow(
                self.manager,
                table,
                arguments["parts"],
                mode=arguments["mode"],
                interval=arguments["interval"],
                owner_wait_s=self.rng.choice([0.0, 1.0, 3.0]),
                job_id=job,
                audit=arguments["audit"],
                stage=arguments.get("stage", False),
                hold=STAGE_HOLD if arguments.get("stage") else None,
            )
            again = " (job already done)" if result.repeated else ""
            if result.staged:
                self.staged.append((table, result.entry_id))
            verb = "staged" if result.staged else "pushed"
            self.note(f"{verb} {table} {result.entry_id[:8]} ({arguments['mode']}){again}{what}")
        except LineageError as exc:
            self.failed(f"push {table}{what}", exc)

    def settle_staged(self) -> bool:
        """Publish (every other time) or revert its oldest staged push. True when it had one."""
        if not self.staged:
            return False
        table, entry = self.staged.pop(0)
        try:
            if self.pushes % 2 == 0:
                if self.store.zookeeper:
                    # Published by a client that did not stage it, which then pushes on (a
                    # long-lived auditor's): an outside trial's RecursionError needed that.
                    self.reconnect()
                publish(self.manager, table, entry)
                self.note(f"published {table} {entry[:8]}")
                if self.store.zookeeper and table in self.world.tables:
                    for _ in range(2):  # the publishing client's own pushes after it
                        self.push(table)
            else:
                self.manager.revert_replace(table, entry)
                self.note(f"reverted staged {table} {entry[:8]}")
        except LineageError as exc:
            self.failed(f"settle staged {table} {entry[:8]}", exc)
        return True

    def rerun_stalled_job(self) -> bool:
        """A job's scheduler that judged a stalled attempt dead (its process
        stopped, its session gone) runs the job again from this process;
        the stalled attempt may resume later. True when it did."""
        world = self.world
        stopped = {a.aid for a in world.actors if a.paused_until > world.step} - {self.actor.aid}
        stalled = sorted(job for job, (aid, _t, _a) in world.jobs.items() if aid in stopped)
        stalled += sorted(job for job, (aid, _p) in world.set_jobs.items() if aid in stopped)
        if not stalled:
            return False
        job = self.rng.choice(stalled)
        if job in world.set_jobs:
            rerun_set(self, job)
            return True
        _aid, table, arguments = world.jobs[job]
        self._push_job(table, job, arguments, " (job rerun elsewhere)")
        return True

    def retention(self, *, force: bool | None = None, orphan_grace_ms: int | None = None) -> None:
        deleted: list[str] = []  # what this pass deleted, as it went

        def on_deleted(location: str) -> None:
            deleted.append(location)
            self.world.deleted_log.append((self.actor.name, "", location))

        forced = self.rng.random() < 0.3 if force is None else force
        options = PassOptions(
            force=forced,
            allow_large_cut=forced,  # an operator's forced pass, with the large-cut guard lifted by name
            min_grace_ms=self.rng.choice([0, 500, 5_000]),
            orphans=True,
            orphan_grace_ms=orphan_grace_ms or self.rng.choice([5 * 60_000, HOUR_MS]),
            fence=self.world.fence(self.store),
            on_deleted=on_deleted,
        )
        try:
            self._retention(options, deleted)
        except FencedError as exc:  # stopped: what it reports must still be what it deleted
            self.checker.check_pass_counted(self.actor.name, exc.done, deleted)
            self.failed("retention", exc)
        except LineageError as exc:
            self.failed("retention", exc)

    def _retention(self, options: PassOptions, deleted: list[str]) -> None:
        """One pass, on one table (often where passes race) or on all."""
        if self.rng.random() < 0.6:
            table = self.table()
            aim = self.rng.random()  # where passes race: an upload not yet added, files queued
            uploads = sorted(set(self.world.uploading.values()))
            queued = sorted(n for n in self.world.tables if self.checker.pending_in(n))
            if aim < 0.6 and uploads:
                table = self.rng.choice(uploads)
            elif aim < 0.6 and queued:
                table = self.rng.choice(queued)
            if table is not None:
                report = run_table(self.manager, table, options)
                self.note(f"retention {table}: {report.files_deleted} deleted")
                self.checker.check_pass_counted(self.actor.name, [report], deleted)
        else:
            reports = run_pass(self.manager, None, options)
            self.note(f"retention pass: {sum(r.files_deleted for r in reports)} deleted")
            self.checker.check_pass_counted(self.actor.name, reports, deleted)


def pusher(ctx: Ctx, ops: int) -> None:
    for _ in range(ops):
        if ctx.settle_staged():
            continue
        if ctx.rng.random() < 0.3 and ctx.rerun_stalled_job():
            continue
        table = ctx.table()
        if table is not None:
            ctx.push(table)
        ctx.world.sleep(ctx.rng.uniform(0, 0.5))


def crowd(ctx: Ctx, ops: int) -> None:
    """One of many writers pushing small changes to one table at once (a
    fleet of jobs), none of them stopped or cut off: their commit queue
    grows long, and each commit in it waits on many others. A queue that
    moves is waited on: no writer jumps it (``queue-jumped``), and none
    gives up before its deadline (``queue-collapse``). No other actor picks
    the table; retention daemons and the janitor commit to it too, and one
    of them stalled at the queue's front makes it stand still (the checker
    judges that as the writers do, :mod:`simulation.queue_checks`)."""
    for _ in range(ops):
        ctx.push(CROWD)
        ctx.world.sleep(ctx.rng.uniform(0, 0.05))


def reader(ctx: Ctx, ops: int) -> None:
    checker = ctx.checker
    for _ in range(ops):
        table = ctx.table()
        if table is None:
            return
        as_of: int | None = None
        try:
            if ctx.rng.random() < 0.5:
                versions = ctx.store.versions(table)
                # Mostly the newest: the head, and the versions a push or a
                # pass just replaced (their files may be queued right now).
                recent = versions[-4:] if ctx.rng.random() < 0.7 else versions
                as_of = ctx.rng.choice(recent) if recent else None
                if as_of is not None and ctx.rng.random() < 0.5:
                    shown = ctx.manager.table_as_of(table, as_of)  # a look at its metadata first
                    checker.check_metadata(ctx.actor.name, table, as_of, shown)
            reader = SnapshotReader(ctx.manager, table, as_of=as_of)
        except StorageError as exc:
            checker.check_read(ctx.actor.name, table, as_of, None, None, exc)
            continue
        except LineageError as exc:
            checker.check_read(ctx.actor.name, table, as_of, None, None, exc)
            continue
        accepted = (table, reader.lease.lease_id)
        ctx.world.accepted[accepted] = reader.lease.state
        checker.accept(table, reader.lease.lease_id, reader.lease.state)
        try:
            for _ in range(ctx.rng.choice([0, 1, 2, 4, 8, 16])):  # hold the pin a while
                ctx.world.sleep(ctx.rng.uniform(0, 0.3))
            try:
                data = reader.to_arrow()
            except Exception as exc:  # noqa: BLE001 - judged by the checker: only a clear error is allowed
                checker.check_read(ctx.actor.name, table, as_of, reader.version, None, exc)
            else:
                checker.check_read(ctx.actor.name, table, as_of, reader.version, data, None)
                ctx.note(f"read {table} v{reader.version}: {data.num_rows} rows")
        finally:
            ctx.world.accepted.pop(accepted, None)
            try:
                reader.close()
            except LineageError as exc:
                ctx.failed("close", exc)


def rollbacker(ctx: Ctx, ops: int) -> None:
    for _ in range(ops):
        table = ctx.table()
        if table is None:
            return
        try:
            if ctx.rng.random() < 0.5:
                target = ctx.manager.resolve_version(table)
            else:
                versions = ctx.store.versions(table)
                if not versions:
                    continue
                target = ctx.rng.choice(versions)
            # Told to split push sets at times (else refused when it would split one);
            # no random draw for it, so that every seed keeps its course.
            split = target % 7 == 0
            plan = ctx.manager.rollback(table, target, split_sets=split)
            ctx.note(f"rolled {table} back to v{target}: committed v{plan.committed_version}")
            if plan.committed_version is not None:
                ctx.checker.check_rollback(ctx.actor.name, table, target, plan.committed_version)
                if not split:
                    check_set_rollback(
                        ctx.world, ctx.checker.flag, ctx.actor.name, f"rollback of {table}", {table: target},
                        {table: plan.committed_version},
                    )  # fmt: skip
        except LineageError as exc:
            ctx.failed(f"rollback {table}", exc)
        ctx.world.sleep(ctx.rng.uniform(0, 1))


def reverter(ctx: Ctx, ops: int) -> None:
    for _ in range(ops):
        table = ctx.table()
        if table is None:
            return
        try:
            entries = list(ctx.manager.table(table).entries.values())
            if not entries:
                continue
            entry = ctx.rng.choice(entries)
            ctx.manager.revert_replace(table, entry.entry_id, force=ctx.rng.random() < 0.5)
            ctx.note(f"reverted {entry.entry_id[:8]} of {table}")
        except LineageError as exc:
            ctx.failed(f"revert {table}", exc)
        ctx.world.sleep(ctx.rng.uniform(0, 1))


def _visible_file(ctx: Ctx, table: str) -> tuple[Segment, DeepStore, bytes] | None:
    """A visible segment of ``table`` chosen at random, its deep store and
    its file's bytes (None when nothing is visible)."""
    state = ctx.manager.table(table)
    shown = visible_segments(state)
    if not shown:
        return None
    seg = ctx.rng.choice(shown)
    deep = DeepStore.for_root(state.config.root)
    return seg, deep, Path(deep.path(seg.location)).read_bytes()


def readder(ctx: Ctx, ops: int) -> None:
    """``lineage segment delete`` then ``lineage segment add NAME`` at the
    same location: an operator takes a segment out and puts it back, uploading
    the file again if retention took it meanwhile."""
    for _ in range(ops):
        table = ctx.table()
        if table is None:
            return
        try:
            picked = _visible_file(ctx, table)
            if picked is None:
                continue
            seg, deep, data = picked
            path = Path(deep.path(seg.location))
            ctx.manager.delete_segments(table, [seg.name])
            ctx.note(f"deleted {seg.name} of {table}")
        except (LineageError, OSError) as exc:
            ctx.note(f"delete: {type(exc).__name__}")
            continue
        ctx.world.sleep(ctx.rng.uniform(0, 2))
        for _attempt in range(12):
            try:
                if seg.location in ctx.manager.table(table).pending:
                    ctx.world.sleep(ctx.rng.uniform(0.2, 1.5))
                    continue
                if not path.exists():
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
                    ctx.world.scheduler.switch("readd.uploaded")
                found = ctx.world.abs_path(table, seg.location)
                if found is not None:
                    ctx.world.readded.add(found)
                again = Segment(
                    seg.name, seg.location, seg.rows, seg.size_bytes, seg.checksum, seg.min_time, seg.max_time
                )
                ctx.manager.register_segments(table, [again])
                ctx.note(f"re-added {seg.name} of {table}")
                break
            except LineageError as exc:
                ctx.failed(f"re-add {seg.name}", exc)
                ctx.world.sleep(ctx.rng.uniform(0.2, 1.5))


def _write_copy(deep: DeepStore, location: str, data: bytes) -> None:
    """A copy of a segment's file, written at ``location`` under the root by hand."""
    target = Path(deep.path(location))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def uploader(ctx: Ctx, ops: int) -> None:
    """An operator copies a visible segment's file to a new place under the
    root and registers it there (``lineage segment add``) a little later: a
    pass meanwhile sees an unreferenced file."""
    for k in range(ops):
        table = ctx.table()
        if table is None:
            return
        try:
            picked = _visible_file(ctx, table)
            if picked is None:
                continue
            seg, deep, data = picked
            name = f"up{ctx.actor.aid}x{k}"
            location = f"uploads/{name}.parquet"
            ctx.world.uploading[ctx.actor.aid] = table
            ctx.world.scheduler.switch("upload.begin")
            _write_copy(deep, location, data)
        except (LineageError, OSError) as exc:
            ctx.note(f"upload: {type(exc).__name__}")
            ctx.world.uploading.pop(ctx.actor.aid, None)
            continue
        ctx.world.scheduler.switch("upload.written")
        ctx.world.sleep(ctx.rng.uniform(0, 2))
        copy = Segment(name, location, seg.rows, seg.size_bytes, seg.checksum, seg.min_time, seg.max_time)
        for _attempt in range(8):
            try:
                ctx.manager.register_segments(table, [copy])
                ctx.note(f"uploaded {name} to {table}")
                break
            except LineageError as exc:
                ctx.failed(f"add {name}", exc)
                ctx.world.sleep(ctx.rng.uniform(0.2, 1.5))
        ctx.world.uploading.pop(ctx.actor.aid, None)


def keeper(ctx: Ctx, ops: int) -> None:
    for _ in range(ops):
        ctx.retention()
        ctx.world.sleep(ctx.rng.uniform(0, 1))


def daemon(ctx: Ctx, ops: int) -> None:
    """``lineage retention daemon``: one of several daemons sharing the
    tables (each table owned by one of them at a time; given all tables or
    a few of its own); ``ops`` scheduled passes, heartbeats between them.
    The run may stop it (SIGTERM) at any switch point; it then resigns."""
    world = ctx.world
    ownership = Ownership(ctx.store, ctx.actor.name, env=world.env)
    deleted: list[str] = []

    def on_deleted(location: str) -> None:
        deleted.append(location)
        world.deleted_log.append((ctx.actor.name, "", location))

    options = PassOptions(  # what the daemon's command line can set
        min_grace_ms=ctx.rng.choice([0, 500, 5_000]),
        orphans=True,
        orphan_grace_ms=ctx.rng.choice([5 * 60_000, HOUR_MS]),
        on_deleted=on_deleted,
    )
    known = sorted(world.tables)
    given = (
        None if not known or ctx.rng.random() < 0.5 else ctx.rng.sample(known, ctx.rng.randint(1, len(known)))
    )
    service = Daemon(ctx.manager, ownership, Schedule(interval_ms=2_000), options, given)
    world.daemons[ctx.actor.aid] = service
    world.candidates[ctx.actor.aid] = (ownership, ctx.store)
    try:
        for _ in range(ops):
            if service.stopping:
                break
            before = len(deleted)
            service.tick()
            ctx.checker.check_owned(ctx.actor.aid)
            failed = service.status.last_pass_failed and service.status.last_error
            ctx.note(
                f"tick: owns {', '.join(service.status.owned) or 'nothing'}, {len(deleted) - before} deleted"
                + (f", {failed}" if failed else "")
            )
            for _ in range(ctx.rng.randint(0, 2)):
                world.sleep(HEARTBEAT_S)
                service.heartbeat()
                ctx.checker.check_owned(ctx.actor.aid)
    finally:
        if not ctx.actor.doomed:  # a process that died leaves with its session
            ownership.resign()


def publisher(ctx: Ctx, ops: int) -> None:
    """``lineage mirror sync``: publishes what the commits' own publishes
    missed (a publish that failed, or lost a race), while pushes, passes and
    rollbacks go on."""
    from segment_lineage.mirror.publisher import sync

    for _ in range(ops):
        table = ctx.table()
        if table is None:
            return
        try:
            if ctx.manager.table(table).config.mirror is not None:
                ctx.world.publishing[ctx.actor.aid] = table
                ctx.note(f"mirror sync: {sync(ctx.manager, table).line()}")
        except LineageError as exc:
            ctx.failed(f"mirror sync {table}", exc)
        ctx.world.sleep(ctx.rng.uniform(0, 1))


def remirror(ctx: Ctx, ops: int) -> None:
    """An operator turns a mirrored table's mirror off and on again, or drops
    it and creates a new mirrored table at its root, while publishes are
    under way (a publish must never land in the new table's log, nor leave a
    log behind a disabled mirror)."""
    from segment_lineage.mirror import admin
    from segment_lineage.mirror.publisher import sync

    world = ctx.world
    for k in range(ops):
        table = _publishing_now(ctx)
        if table is None:
            return
        info = world.tables[table]
        try:
            config = ctx.manager.table(table).config
            if config.mirror is None:
                continue
            if ctx.rng.random() < 0.4:
                admin.disable(ctx.manager, table, "simulated")
                ctx.note(f"mirror of {table} disabled")
                world.sleep(ctx.rng.uniform(0, 0.5))
                admin.enable(ctx.manager, table, None, "simulated")
                ctx.note(f"mirror of {table} enabled again")
                continue
            admin.drop_table(ctx.manager, table, force=True, reason="simulated")
        except LineageError as exc:
            ctx.failed(f"remirror {table}", exc)
            continue
        world.dropped_table(table)
        ctx.note(f"dropped {table}")
        if ctx.rng.random() < 0.5:  # the new table comes later: after a publish under way went on
            for _ in range(40):
                if table not in _paused_publishes(world):
                    break
                world.sleep(ctx.rng.uniform(0.05, 0.3))
        name = f"r{ctx.actor.aid}x{k}"
        world.intend_table(name, info.path, ctx.actor.cwd, info.data, info.flags & {"symlink"})
        made = replace(
            world.config(name, info.path, info.data, ctx.rng),
            mirror=config.mirror,
            mirror_retention_ms=config.mirror_retention_ms,
        )
        try:
            ctx.manager.create_table(made, existing_files=True)
            ctx.note(f"created {name} at the root of {table}")
        except LineageError as exc:
            ctx.failed(f"create {name} at the root of {table}", exc)
            continue
        for _ in range(ctx.rng.randint(0, 2)):  # none: the table has no log yet
            ctx.push(name)
        try:  # as the command line's push would
            ctx.note(f"mirror sync: {sync(ctx.manager, name).line()}")
        except LineageError as exc:
            ctx.failed(f"mirror sync {name}", exc)


def foreigner(ctx: Ctx, ops: int) -> None:
    """Another engine writes to a mirrored table's Delta log (a job pointed
    at the mirror's path appends rows, some with a column of its own), often
    while a publish is about to commit. A publish must never write over the
    foreign commit nor fold its rows into a version; retention must keep the
    files it references; a later ``mirror repair`` publishes the table's
    version over it, numbers going on."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    from segment_lineage.mirror.errors import MirrorRefusedError, NoMirrorError
    from segment_lineage.mirror.publisher import sync

    world = ctx.world

    def logged(name: str) -> bool:
        return os.path.exists(os.path.join(world.tables[name].path, "_delta_log", f"{0:020d}.json"))

    for k in range(ops):
        table = _publishing_now(ctx)
        if table is None:
            return
        if not logged(table):  # another table whose mirror has a log, if one has
            known = sorted(t for t in ctx.manager.list_tables() if t in world.tables and logged(t))
            if not known:
                continue
            table = ctx.rng.choice(known)
        root = world.tables[table].path
        try:
            fields = DeltaTable(root).schema().to_arrow()
        except Exception:  # noqa: BLE001  a log being written or removed: nothing to write to
            continue
        extra = ctx.rng.random() < 0.3
        rows = pa.table({"foreign": pa.array([f"a{ctx.actor.aid}x{k}"])}) if extra else None
        try:
            if rows is None:  # a row of the log's own columns, all null
                rows = pa.Table.from_pylist([{}], schema=pa.schema(fields))
            write_deltalake(
                root,
                rows,
                mode="append",
                schema_mode="merge" if extra else None,
                commit_properties=CommitProperties(custom_metadata={FOREIGN_MARK: ctx.actor.name}),
            )
            ctx.note(f"foreign append to {table}'s log{' with a column of its own' if extra else ''}")
        except Exception as exc:  # noqa: BLE001  deltalake's own refusals (a column not nullable, a race)
            ctx.note(f"foreign append to {table} refused: {type(exc).__name__}")
            continue
        world.sleep(ctx.rng.uniform(0, 4))  # publishes meet it meanwhile
        if ctx.rng.random() < 0.7:  # the operator repairs it (else publishes stay stopped)
            try:
                ctx.note(f"mirror repair: {sync(ctx.manager, table, repair=True).line()}")
            except NoMirrorError as exc:  # the table dropped, or its mirror turned off meanwhile
                ctx.failed(f"mirror repair {table}", exc)
            except MirrorRefusedError as exc:  # the one way back from another writer's commit
                ctx.checker.flag("mirror-unrepairable", f"repair of {table}'s log refused: {exc}")
            except LineageError as exc:
                ctx.failed(f"mirror repair {table}", exc)


INTRUSIONS = ("alter", "delete", "disguised", "emptied", "mirror-off", "push", "rollback")
# Operations a hand-made change that unregisters every segment names itself.
EMPTYING = ("REVERT_REPLACE", "REGISTER", "RETENTION_MARK", "ROLLBACK")


def _disguised(state: TableState, _now: int) -> Change:
    """A settings change (one more version kept) calling itself a rollback."""
    kept = (state.config.versions_kept or 100) + 1
    change = transitions.alter_table(state, SettingsChange(versions_kept=kept))
    return replace(change, operation=Operation.ROLLBACK)


def _emptied(label: str, hid: list[bool]) -> Callable[[TableState, int], Change]:
    """A change that unregisters every segment, named ``label``; ``hid``
    learns whether readers saw any of them."""

    def update(state: TableState, _now: int) -> Change:
        hid.append(bool(visible_segments(state)))
        return Change(state=replace(state, segments={}), operation=Operation(label))

    return update


def _was_visible(ctx: Ctx, table: str, version: int, name: str) -> bool:
    """Whether readers saw segment ``name`` at ``version``: the one a delete
    was applied to (it may have gone from view since the deleter looked,
    replaced meanwhile: deleting it then is any pusher's). Read through the
    world's own store, so no switch point; a version no longer kept is not judged."""
    try:
        state = ctx.world.store.read_version(table, version)
    except LineageError:
        return False
    return any(s.name == name for s in visible_segments(state))


def _intrude(ctx: Ctx, table: str, what: str) -> bool:
    """Try ``what`` on ``table``; True when it was an admin's work and landed."""
    manager = ctx.manager
    if what == "alter":
        manager.alter_table(table, SettingsChange(replaced_segments_retention="0s"))
    elif what == "delete":
        shown = visible_segments(manager.table(table))
        if not shown:
            return False
        done = manager.delete_segments(table, [shown[0].name])
        return done.applied and _was_visible(ctx, table, done.state.version - 1, shown[0].name)
    elif what == "disguised":
        manager.commit(table, _disguised, "sneaky")
    elif what == "emptied":
        hid: list[bool] = []
        manager.commit(table, _emptied(ctx.rng.choice(EMPTYING), hid), "sneaky")
        return bool(hid) and hid[-1]  # nothing visible: nothing hidden
    else:
        from segment_lineage.mirror import admin

        if manager.table(table).config.mirror is None:
            return False
        admin.disable(manager, table, "sneaky")
    return True


def intruder(ctx: Ctx, ops: int) -> None:
    """A process under the pusher's identity, with an ACL policy in force
    (its proxy refuses what ZooKeeper's ACLs would): it pushes and rolls
    back, which its role may, and tries what only an admin (or retention)
    may: shorten a retention window, delete a visible segment, turn a mirror
    off, and hand-made commits that move a setting or unregister what
    readers see under an innocent operation's name. Each of those must be
    refused (role-exceeded); its own work must not be (role-refused, which
    the checker flags for any refusal an actor meets)."""
    ctx.store.role = PUSHER
    for _ in range(ops):
        table = ctx.table()
        if table is None:
            return
        what = ctx.rng.choice(INTRUSIONS)
        try:
            if what == "push":
                ctx.push(table)
            elif what == "rollback":
                version = ctx.manager.table(table).version
                if version > 1:
                    plan = ctx.manager.rollback(table, version - 1)
                    ctx.note(f"rolled {table} back to v{version - 1} (v{plan.committed_version})")
            elif _intrude(ctx, table, what):
                ctx.checker.flag("role-exceeded", f"{ctx.actor.name}, a pusher, could {what} {table}")
        except AuthError:
            ctx.note(f"{what} {table} refused to a pusher")
        except LineageError as exc:
            ctx.failed(f"{what} {table}", exc)
        ctx.world.sleep(ctx.rng.uniform(0, 1))


def rerunner(ctx: Ctx, ops: int) -> None:
    """A batch scheduler: it runs a job again when its attempt looks dead
    (stopped past its session), as an operator's retry or a scheduler's
    failover would; the stalled attempt may resume after the rerun landed."""
    for _ in range(ops):
        for _wait in range(200):
            if ctx.rerun_stalled_job():
                break
            ctx.world.sleep(ctx.rng.uniform(0.05, 0.3))


def hog(ctx: Ctx, ops: int) -> None:
    """A client with the pusher's rights that keeps re-taking a table's floor
    under new holder ids (a broken or hostile one): other writers may be
    slowed by the floor budget, never stopped (a push that gives up waiting
    on a floor is flagged)."""
    from segment_lineage.lineage.manager.floor import FLOOR_MS

    for k in range(ops):
        table = ctx.table()
        if table is None:
            return
        for n in range(ctx.rng.randint(10, 40)):
            try:
                seen, holder = ctx.store.read(table).floor, f"hog{ctx.actor.aid}x{k}x{n}"
                ctx.store.floors.take(table, seen, holder, ctx.store.now_ms() + FLOOR_MS)
            except LineageError as exc:
                ctx.failed(f"hog {table}", exc)
                break
            ctx.world.sleep(ctx.rng.uniform(0.2, 2.0))
        ctx.note(f"hogged the floor of {table}")


def zkhome(ctx: Ctx, ops: int) -> None:
    """An operator starts a ZooKeeper server with its home inside a table's
    root (its data long written), then, a while later, moves it away. Its
    data directory is marked as every server the project starts marks it;
    retention runs with another state directory than that server's. No
    pass may delete a file of it (deleted-state-dir)."""
    from segment_lineage.lineage.core.roots import STATE_MARKER

    world = ctx.world
    for k in range(ops):
        table = ctx.table()
        if table is None:
            return
        home = os.path.join(world.tables[table].path, f"zk-home-a{ctx.actor.aid}x{k}")
        data = os.path.join(home, "version-2")
        os.makedirs(data, exist_ok=True)
        old = (world.clock.fs_ms() - 3 * 86_400_000) / 1000  # written days ago: an old orphan to a scan
        for name, folder in (
            (STATE_MARKER, home),
            ("zookeeper.pid", home),
            ("log.1", data),
            ("snapshot.0", data),
        ):
            path = os.path.join(folder, name)
            with open(path, "w") as out:
                out.write("live ZooKeeper data\n")
            os.utime(path, (old, old))
        world.state_dirs.add(home)
        ctx.note(f"ZooKeeper home under {table}'s root")
        for _ in range(ctx.rng.randint(20, 80)):  # passes run meanwhile
            world.sleep(ctx.rng.uniform(0.5, 3.0))
        world.state_dirs.discard(home)
        shutil.rmtree(home, ignore_errors=True)
        ctx.note(f"ZooKeeper home moved away from {table}'s root")


def swapper(ctx: Ctx, ops: int) -> None:
    """An operator moves a folder of files retention has queued aside and
    puts a link in its place, to a folder of their own outside every root
    holding files of the same names, then a while later puts it back. No
    pass may delete a file through the link: it was checked before the
    swap, and a delete by path would follow it (deleted-unqueued: the
    operator's files are no table's)."""
    world = ctx.world
    for k in range(ops):
        found = _queued_folder(ctx)
        if found is None:
            return
        table, folder = found
        aside = f"{folder}.aside-a{ctx.actor.aid}x{k}"
        theirs = os.path.join(world.base, f"operator-a{ctx.actor.aid}x{k}")
        try:
            os.makedirs(theirs)
            for name in os.listdir(folder):
                with open(os.path.join(theirs, name), "w") as out:
                    out.write("an operator's file\n")
            os.rename(folder, aside)
            world.moved[aside] = folder
            os.symlink(theirs, folder)
        except OSError as exc:
            ctx.note(f"swap: {type(exc).__name__}")
            continue
        ctx.note(f"{world.rel(folder)} of {table} is a link to {world.rel(theirs)} now")
        for _ in range(ctx.rng.randint(5, 30)):  # passes run meanwhile
            world.sleep(ctx.rng.uniform(0.5, 3.0))
        with contextlib.suppress(OSError):
            os.unlink(folder)
            os.rename(aside, folder)
        world.moved.pop(aside, None)
        shutil.rmtree(theirs, ignore_errors=True)
        ctx.note(f"{world.rel(folder)} of {table} put back")


def _queued_folder(ctx: Ctx, looks: int = 400) -> tuple[str, str] | None:
    """A table and a folder of files it has queued for deletion, some of
    them gone already and some still there (a pass in the middle of its
    deletes there, which checked the folder before), looked for a while."""
    world = ctx.world
    for _ in range(looks):
        table = ctx.table()
        if table is None:
            return None
        try:
            queued = sorted(loc for loc in ctx.manager.table(table).pending if "/" in loc)
        except LineageError:
            queued = []
        root = world.tables[table].path
        there: dict[str, set[bool]] = {}
        for loc in queued:
            there.setdefault(posixpath.dirname(loc), set()).add(os.path.isfile(os.path.join(root, loc)))
        halfway = sorted(folder for folder, found in there.items() if found == {True, False})
        if halfway:
            return table, os.path.join(root, ctx.rng.choice(halfway))
        world.sleep(ctx.rng.uniform(0.01, 0.2))
    return None


def _paused_publishes(world: World) -> list[str]:
    """The tables publishes are stopped at for a while (an aimed pause), about to commit."""
    return sorted(
        world.publishing[a.aid]
        for a in world.actors
        if not a.done
        and a.label == "mirror.before-commit"
        and a.paused_until > world.step
        and a.aid in world.publishing
    )


def _publishing_now(ctx: Ctx, waits: int = 150) -> str | None:
    """A table a publish is about to commit to (an actor stopped there), if
    one comes along while this actor waits a while; else any known table."""
    world = ctx.world
    for _ in range(waits):
        about = _paused_publishes(world)
        live = set(ctx.manager.list_tables())
        about = [t for t in about if t in live and t in world.tables]
        if about:
            return ctx.rng.choice(about)
        world.sleep(ctx.rng.uniform(0.05, 0.3))
    return ctx.table()


def sweeper(ctx: Ctx, ops: int) -> None:
    for _ in range(ops):
        table = ctx.table()
        if table is None:
            return
        try:
            ctx.note(f"swept {table}: {ctx.store.collect_garbage(table)}")
        except LineageError as exc:
            ctx.failed("sweep", exc)
        ctx.world.sleep(ctx.rng.uniform(0, 1))


ROOT_KINDS = ("relative", "dot", "nested", "parent", "equal", "plain")


def creator(ctx: Ctx, ops: int) -> None:
    """Tables with odd roots: relative, ``.``, inside another table's root,
    holding another table's root, or equal to it."""
    world = ctx.world
    for k in range(ops):
        name = f"c{ctx.actor.aid}x{k}"
        kind = ctx.rng.choice(ROOT_KINDS)
        others = sorted(n for n, i in world.tables.items() if os.path.isabs(i.root))
        other = world.tables[ctx.rng.choice(others)] if others else None
        if kind == "relative":
            root = f"lake/{name}"
        elif kind == "dot":
            root = "."
        elif other is not None and kind == "nested":
            root = f"{other.path}/{name}"
        elif other is not None and kind == "parent":
            root = os.path.dirname(other.path)
        elif other is not None and kind == "equal":
            root = other.path
        else:
            kind, root = "plain", str(world.lake / name)
        data = ctx.rng.choice(["plain", "ms"])
        world.intend_table(name, root, ctx.actor.cwd, data, {kind} - {"plain"})
        try:
            ctx.manager.create_table(world.config(name, root, data, ctx.rng))
            ctx.note(f"created {name} at {kind} root")
        except LineageError as exc:
            ctx.failed(f"create {name} ({kind})", exc)
            continue
        for _ in range(ctx.rng.randint(1, 2)):
            ctx.push(name)


def case_twins(ctx: Ctx, ops: int) -> None:
    """An operator copies a visible segment's file under the root and
    registers it in one batch at two paths alike but for case; then at one
    of them, then at the other (an outside trial did: two segments on one
    file, ignoring case, and a long-lived writer's look-ups then let a third
    in). Tests add it (no seed's cast has it). Each twin is refused before
    any file is looked at, so only the one path is written; nothing may show
    two segments at one location ignoring case (location-twins)."""
    for k in range(ops):
        table = ctx.table()
        if table is None:
            return
        try:
            picked = _visible_file(ctx, table)
            if picked is None:
                continue
            seg, deep, data = picked
            name = f"cf{ctx.actor.aid}x{k}"
            lower, upper = f"uploads/{name}.parquet", f"uploads/{name.upper()}.parquet"
            _write_copy(deep, lower, data)
        except (LineageError, OSError) as exc:
            ctx.note(f"case twins: {type(exc).__name__}")
            continue

        def copy(suffix: str, location: str, seg: Segment = seg, name: str = name) -> Segment:
            return dataclasses.replace(seg, name=f"{name}{suffix}", location=location, entry_id=None)

        for batch in (
            [copy("a", lower), copy("b", upper)],  # two alike but for case in one batch
            [copy("c", lower)],
            [copy("d", upper)],  # a case twin of the location just registered
        ):
            try:
                ctx.manager.register_segments(table, batch)
                ctx.note(f"case twins: registered {', '.join(s.location for s in batch)} in {table}")
            except LineageError as exc:
                ctx.failed("case twins", exc)
            ctx.world.sleep(ctx.rng.uniform(0, 1))
        try:
            ctx.manager.delete_segments(table, [f"{name}c"])  # the outside trial's next step
        except LineageError as exc:
            ctx.failed("case twins: delete", exc)


def meddler(ctx: Ctx, ops: int) -> None:
    """A library user who edits what it was handed: a read of a table, and
    the results of its own start and revert (an outside trial cleared a
    start's entries, and the memory store lost a running push's entry).
    Tests add it (no seed's cast has it). Every edit must be refused
    (handed-records-edited); one that was not is undone at once."""
    for k in range(ops):
        table = ctx.table()
        if table is None:
            return
        try:
            _meddle(ctx, f"a read of {table}", ctx.manager.table(table))
            started = ctx.manager.open_replace(table, [], [f"md{ctx.actor.aid}x{k}"], hold="1h")
            _meddle(ctx, f"a start on {table}", started.state)
            entry = started.change.entry_id or ""
            ctx.world.sleep(ctx.rng.uniform(0, 1))
            _meddle(ctx, f"a revert on {table}", ctx.manager.revert_replace(table, entry, force=True).state)
        except LineageError as exc:
            ctx.failed("meddle", exc)


def _meddle(ctx: Ctx, what: str, state: TableState) -> None:
    for kind in ("segments", "entries", "pending"):
        records: Any = getattr(state, kind)
        try:
            records["meddled"] = None
        except (TypeError, AttributeError):
            continue
        records.pop("meddled", None)
        ctx.checker.flag("handed-records-edited", f"actor {ctx.actor.aid}: the {kind} of {what} took an edit")


def twin(ctx: Ctx, ops: int) -> None:
    """Refreshes of one REFRESH table made empty for them: tests add two of
    these (no seed's cast has them), which push to it at once. Their
    ``from`` share nothing, so only the whole-table intent keeps both from
    landing (two-refreshes-shown)."""
    world, name = ctx.world, "twins"
    root = str(world.lake / name)
    world.intend_table(name, root, ctx.actor.cwd, "plain", set())
    try:
        ctx.manager.create_table(world.config(name, root, "plain", ctx.rng))
    except TableExistsError:
        pass  # the other twin made it
    except LineageError as exc:
        ctx.failed(f"create {name}", exc)
        return
    for _ in range(ops):
        ctx.push(name)


def purger(ctx: Ctx, ops: int) -> None:
    """An operator drops a table with ``--purge`` while pushes, readers and
    retention go on: nothing but retention may change it after that, a
    reader's pin keeps its files, and the table goes once they are gone."""
    from segment_lineage.mirror.admin import purge

    for _ in range(ops):
        ctx.world.sleep(ctx.rng.uniform(0.5, 3.0))  # something to purge first
        table = ctx.table()
        if table is None:
            return
        ctx.world.purging.add(table)  # said first: its log and, at the end, its claim may go any time now
        for _attempt in range(4):  # refused while a push runs: the operator tries again a little later
            try:
                done, _removal = purge(ctx.manager, table, "simulated")
            except RefusedError as exc:
                ctx.failed(f"purge {table}", exc)
                ctx.world.sleep(ctx.rng.uniform(0.5, 2.0))
                continue
            except LineageError as exc:
                ctx.failed(f"purge {table}", exc)
                break
            ctx.note(f"purging {table}: {done.change.segments} segment(s) queued")
            break
        with contextlib.suppress(LineageError):
            if ctx.manager.table(table).config.purging_ms is None:
                ctx.world.purging.discard(table)


def linker(ctx: Ctx, ops: int) -> None:
    """An operator links ``ROOT/current`` to the newest push's directory."""
    for _ in range(ops):
        table = ctx.table()
        if table is None:
            return
        info = ctx.world.tables[table]
        try:
            shown = visible_segments(ctx.manager.table(table))
        except LineageError as exc:
            ctx.failed("link", exc)
            continue
        tops = sorted({s.location.split("/", 1)[0] for s in shown if "/" in s.location})
        link = Path(info.path) / "current"
        if tops and os.path.isabs(info.root) and not link.is_symlink():
            link.symlink_to(tops[-1], target_is_directory=True)
            info.flags.add("symlink")
            ctx.note(f"linked {table}/current -> {tops[-1]}")


def janitor(ctx: Ctx, _ops: int) -> None:
    """After the run, with faults off: passes and a push per table converge."""
    for table in sorted(n for n in ctx.manager.list_tables() if n in ctx.world.tables):
        for step in ("retention", "push", "retention", "wait", "retention", "retention"):
            if step == "push":
                ctx.push(table)
                continue
            if step == "wait":  # orphans first seen now wait out their grace
                ctx.world.sleep(2 * HOUR_MS / 1000)
                continue
            options = PassOptions(
                force=True, allow_large_cut=True, min_grace_ms=0, orphans=True, orphan_grace_ms=HOUR_MS
            )
            # (no store call: no switch point)
            ctx.world.passed_ms.setdefault(table, []).append(ctx.world.clock.zk_ms())
            try:
                run_table(ctx.manager, table, options)
            except LineageError as exc:
                ctx.failed(f"quiescent retention {table}", exc)


def saboteur(ctx: Ctx, ops: int) -> None:
    """Deletes a visible segment's file by hand: the checker must say so
    (used by the tests; never in a run's cast)."""
    for _ in range(ops):
        table = ctx.table()
        if table is None:
            return
        shown = visible_segments(ctx.manager.table(table))
        if shown:
            found = ctx.world.abs_path(table, shown[0].location)
            if found is not None and os.path.exists(found):
                os.remove(found)
                ctx.note(f"removed {shown[0].name} of {table} by hand")
                return


BODIES: dict[str, Callable[[Ctx, int], None]] = {
    "push": pusher,
    "crowd": crowd,
    "read": reader,
    "rollback": rollbacker,
    "revert": reverter,
    "readd": readder,
    "upload": uploader,
    "retention": keeper,
    "daemon": daemon,
    "gc": sweeper,
    "mirror": publisher,
    "remirror": remirror,
    "rerun": rerunner,
    "foreign": foreigner,
    "intruder": intruder,
    "hog": hog,
    "zkhome": zkhome,
    "swapper": swapper,
    "create": creator,
    "symlink": linker,
    "purge": purger,
    "twin": twin,
    "casefile": case_twins,
    "meddle": meddler,
    "janitor": janitor,
    "saboteur": saboteur,
    "set": setter,
    "cut": cutter,
    "unset": undoer,
    "unpush": unpusher,
    "unstage": unstager,
}


def body(world: World, checker: Checker, kind: str, ops: int, seed: int) -> Body:
    def run(actor: Actor) -> None:
        ctx = Ctx(world, checker, actor, Random(f"actor/{seed}/{actor.aid}"))
        try:
            BODIES[kind](ctx, ops)
        except LineageError as exc:  # a refusal or an unavailable store: the actor gives up
            ctx.failed("gave up", exc)

    return run


def plan_actors(seed: int) -> list[tuple[str, int]]:
    """The cast of a run: its kinds and how many operations each performs."""
    rng = Random(f"cast/{seed}")
    kinds = ["push"] * rng.randint(2, 4) + ["read"] * rng.randint(1, 3) + ["retention"] * rng.randint(1, 3)
    optional_kinds = (
        "rollback", "revert", "readd", "gc", "create", "symlink", "retention", "read", "upload", "mirror",
    )  # fmt: skip
    for optional in optional_kinds:
        if rng.random() < 0.5:
            kinds.append(optional)
    if rng.random() < 0.5:
        kinds += ["daemon"] * rng.randint(2, 3)  # candidates of one election
    cast = [(kind, rng.randint(1, 3) + (kind == "retention")) for kind in kinds]
    if rng.random() < 0.5:  # drawn last: the casts of earlier versions are this one's beginnings
        # an operator dropping tables while a `mirror sync` runs
        cast += [("remirror", rng.randint(1, 3)), ("mirror", rng.randint(2, 3))]
    if rng.random() < 0.5:  # a job scheduler that reruns a stalled attempt's job elsewhere
        cast.append(("rerun", rng.randint(1, 2)))
    if rng.random() < 0.3:  # a client re-taking tables' floors under new holder ids
        cast.append(("hog", rng.randint(1, 2)))
    if rng.random() < 0.3:  # a ZooKeeper server's home put under a table's root
        cast.append(("zkhome", 1))
    if rng.random() < 0.3:  # another engine writing to a mirror's Delta log
        cast += [("foreign", rng.randint(1, 2)), ("mirror", 1)]
    if rng.random() < 0.3:  # a pusher's identity trying an admin's changes, under an ACL policy
        cast.append(("intruder", rng.randint(2, 4)))
    if rng.random() < 0.3:  # an operator dropping tables with --purge
        cast.append(("purge", 1))
    if seed % 6 == 4:  # a nightly job pushing tables as one set, and readers of them as one cut;
        # only in these seeds, so that every other seed runs as before (and
        # the seeds that found a bug before still find it)
        cast += [("set", rng.randint(3, 6)), ("cut", rng.randint(4, 10))]
        if seed % 24 in (10, 16):  # an operator rolling back an older set while later ones land
            # (not in seeds 4, 100 and 358, which the tests replayed for other bugs when it came)
            cast.append(("unset", rng.randint(3, 6)))
        if seed % 24 == 22 and seed != 358:  # an operator reverting one table's push of a set
            # (not in seed 358, which the tests replayed for another bug when it came)
            cast.append(("unpush", rng.randint(3, 6)))
    if seed % 50 == 43:  # an operator swapping a folder of queued files for a link mid-pass;
        # only in these seeds (no draw, none a test replays), so every other seed runs as before
        cast.append(("swapper", 3))
    if seed % 12 == 9:  # a fleet of jobs pushing one table at once (a long commit queue)
        cast += [(CROWD, rng.randint(2, 3)) for _ in range(rng.randint(16, 28))]
    return cast
