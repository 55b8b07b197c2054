"""Push sets in the simulation: a writer of sets (pushes of two or three
tables as one, a job's reruns, set rollbacks), an operator rolling back
older sets (whole, or one table alone), and readers of cuts. The rules
they are judged by are :mod:`simulation.set_checks`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from segment_lineage.ingest.arrow_push import prepare_arrow
from segment_lineage.ingest.push_set import publish_set, push_set, staged_set
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.core.model import EntryState, Operation
from simulation.set_checks import check_cut, check_set_rollback, set_version

HOUR_MS = 3_600_000
END = Operation.END_REPLACE
STAGE_HOLD = "30s"  # a staged set left alone is cleaned up within the run

if TYPE_CHECKING:
    from collections.abc import Sequence
    from random import Random

    from segment_lineage.ingest.push_plan import Prepared
    from segment_lineage.lineage.manager import LineageManager
    from simulation.checker import Checker
    from simulation.scheduler import Actor
    from simulation.world import SetPart, World


class Ctx(Protocol):
    """What these actors use of their process (:class:`simulation.actors.Ctx`)."""

    world: World
    checker: Checker
    actor: Actor
    rng: Random
    manager: LineageManager

    def note(self, text: str) -> None: ...

    def failed(self, what: str, exc: LineageError) -> None: ...


def setter(ctx: Ctx, ops: int) -> None:
    """Two or three tables pushed as one set, a fifth of the time a set
    rolled back, a third of the time a cut read; a job's set run twice now and then."""
    staged: list[str] = []  # sets it staged, not yet published or reverted
    for n in range(ops):
        if staged:
            _settle(ctx, staged.pop(0), publish=n % 2 == 0)
            continue
        known = sorted(t for t in ctx.manager.list_tables() if t in ctx.world.tables)
        if len(known) < 2:
            ctx.world.sleep(ctx.rng.uniform(0.1, 0.5))
            continue
        group = ctx.rng.sample(known, k=min(len(known), ctx.rng.choice([2, 2, 3])))
        roll = ctx.rng.random()
        if roll < 0.2 and ctx.world.sets:
            _roll_back(ctx)
        elif roll < 0.5:
            read_cut(ctx, group)
        else:
            _push(ctx, group, f"s{ctx.actor.aid}-{n}", staged)
        ctx.world.sleep(ctx.rng.uniform(0, 0.5))


def _parts(ctx: Ctx, group: list[str], label: str) -> tuple[list[SetPart], list[Prepared]] | None:
    """A set's parts over ``group`` and their files written (None: refused)."""
    world, manager = ctx.world, ctx.manager
    parts: list[SetPart] = []
    try:
        for table in group:
            state = manager.table(table)
            rows, mode, interval = world.parts(
                world.tables[table], state.config.table_type, ctx.rng, f"{label}-{table}"
            )
            parts.append((table, rows, mode, interval))
        return parts, _prepare(ctx, parts)
    except LineageError as exc:
        ctx.failed(f"set of {', '.join(group)}", exc)
        return None


def _push(ctx: Ctx, group: list[str], label: str, staged: list[str]) -> None:
    world = ctx.world
    made = _parts(ctx, group, label)
    if made is None:
        return
    parts, prepared = made
    job = f"{label}-job" if ctx.rng.random() < 0.4 else None
    stage = job is None and world.wap and ctx.rng.random() < 0.4  # odd seeds: staged sets too
    if job is not None:
        world.set_jobs[job] = (ctx.actor.aid, tuple(parts))
    try:
        for _ in range(2 if job is not None and ctx.rng.random() < 0.3 else 1):
            set_id = _push_once(ctx, prepared, job, stage)
            if set_id is not None and stage:
                staged.append(set_id)
    finally:
        if job is not None and world.set_jobs.get(job, (None,))[0] == ctx.actor.aid:
            del world.set_jobs[job]


def rerun_set(ctx: Ctx, job: str) -> None:
    """A set's job run again from this process: its attempt looked dead
    (stopped past its session) and may resume after this run landed."""
    _aid, parts = ctx.world.set_jobs[job]
    try:
        prepared = _prepare(ctx, parts)
    except LineageError as exc:
        ctx.failed(f"set of {', '.join(p[0] for p in parts)} (job rerun elsewhere)", exc)
        return
    _push_once(ctx, prepared, job, False, " (job rerun elsewhere)")


def _prepare(ctx: Ctx, parts: Sequence[SetPart]) -> list[Prepared]:
    return [
        prepare_arrow(ctx.manager, table, rows, mode=mode, interval=interval)
        for table, rows, mode, interval in parts
    ]


def _push_once(
    ctx: Ctx, prepared: list[Prepared], job: str | None, stage: bool, what: str = ""
) -> str | None:
    """One run of a set push; its set id when it landed (or was staged)."""
    world, manager = ctx.world, ctx.manager
    group = ", ".join(p.table for p in prepared)
    set_id = manager.env.text_id()
    world.sets[set_id] = tuple(p.table for p in prepared)  # before its commit: judged from then on
    try:
        done = push_set(
            manager, prepared, job_id=job, set_id=set_id, owner_wait_s=ctx.rng.choice([0.0, 1.0]),
            stage=stage, hold=STAGE_HOLD if stage else None,
        )  # fmt: skip
    except LineageError as exc:
        ctx.failed(f"set {set_id[:8]} of {group}{what}", exc)
        return None
    again = " (job already done)" if done.repeated else ""
    if not done.repeated:
        world.landed_sets.append(set_id)
    ctx.note(f"{'staged' if stage else 'pushed'} set {set_id[:8]} of {group}{again}{what}")
    return set_id


def _settle(ctx: Ctx, set_id: str, *, publish: bool) -> None:
    """Publish a staged set whole, or revert its staged pushes one by one."""
    try:
        if publish:
            publish_set(ctx.manager, set_id)
            ctx.note(f"published set {set_id[:8]}")
            return
        for table, entry in staged_set(ctx.manager, set_id).items():
            ctx.manager.revert_replace(table, entry)
        ctx.note(f"reverted staged set {set_id[:8]}")
    except LineageError as exc:
        ctx.failed(f"settle staged set {set_id[:8]}", exc)


def undoer(ctx: Ctx, ops: int) -> None:
    """An operator rolling back an older set soon after a later set changed
    one of its tables and another table too: what a set rollback must never
    split. It pushes such sets itself, on three APPEND tables of its own
    whose replaced files are kept an hour (so that rollbacks are possible)."""
    mine = _own_tables(ctx)
    for n in range(ops):
        ctx.world.sleep(ctx.rng.uniform(0.0, 1.0))
        older = [s for s in _overlapped(ctx.world) if set(ctx.world.sets[s]) <= set(mine)]
        if older:  # the set rolled back whole, or one of its tables alone
            (_roll_back if ctx.rng.random() < 0.5 else roll_back_table)(ctx, ctx.rng.choice(older))
            continue
        _push_own(ctx, mine, f"u{ctx.actor.aid}-{n}", n)


def unpusher(ctx: Ctx, ops: int) -> None:
    """An operator reverting one table's push of a set (Pinot's revert of
    one entry), as if it were that table's alone: refused unless told to
    split sets. It pushes sets over three APPEND tables of its own, as the
    undoer does, and every other turn reverts a push of one of them."""
    mine = _own_tables(ctx)
    for n in range(ops):
        ctx.world.sleep(ctx.rng.uniform(0.0, 1.0))
        landed = [s for s in ctx.world.landed_sets if set(ctx.world.sets[s]) <= set(mine)]
        if landed and n % 2 == 1:
            revert_set_push(ctx, ctx.rng.choice(landed))
            continue
        _push_own(ctx, mine, f"r{ctx.actor.aid}-{n}", n)


def revert_set_push(ctx: Ctx, set_id: str) -> None:
    """One table's push of a set reverted: refused when that splits the
    set, unless told to (a fifth of the time). Landed untold, it split no
    set that was whole."""
    world, picked = ctx.world, _one_table(ctx, set_id)
    if picked is None:
        return
    table, split = picked
    try:
        ended = (r for r in ctx.manager.history(table) if r.set_id == set_id and r.operation is END)
        end = next(ended, None)
        if end is None or end.entry_id is None:
            return
        done = ctx.manager.revert_replace(table, end.entry_id, split_sets=split)
    except LineageError as exc:
        ctx.failed(f"revert of {table}'s push of set {set_id[:8]}", exc)
        return
    version = done.state.version
    ctx.note(f"reverted {table}'s push of set {set_id[:8]}: v{version}, told to split: {split}")
    if not split:
        what = f"revert of {table}'s push of set {set_id[:8]}"
        check_set_rollback(
            world, ctx.checker.flag, ctx.actor.name, what, {table: version - 1}, {table: version}
        )


def unstager(ctx: Ctx, ops: int) -> None:
    """An operator who stages a set over two tables of its own, lets a set
    be pushed over them since, then rolls back the staged set (an outside
    trial did): refused, never done by going back to before it (rule
    ``set-rollback-staged``). Then it drops the staged set. An extra cast
    member (``--actors``, RunConfig.extra), not in the random casts."""
    mine = _own_tables(ctx)[:2]
    for n in range(ops if len(mine) == 2 else 0):
        made = _parts(ctx, mine, f"g{ctx.actor.aid}-{n}")
        staged = None if made is None else _push_once(ctx, made[1], None, True)
        later = _parts(ctx, mine, f"h{ctx.actor.aid}-{n}")
        if later is not None:
            _push_once(ctx, later[1], None, False)
        if staged is not None:
            _roll_back(ctx, staged)
            _settle(ctx, staged, publish=False)
        ctx.world.sleep(ctx.rng.uniform(0, 0.5))


def _push_own(ctx: Ctx, mine: list[str], label: str, n: int) -> None:
    """A set over an operator's own three tables: X over the first two, Y
    over the last two, in turn (none once one of them is dropped)."""
    live = [t for t in mine if t not in ctx.world.dropped]
    if len(live) == 3:
        _push(ctx, live[:2] if n % 3 == 0 else live[1:], label, [])


def _one_table(ctx: Ctx, set_id: str) -> tuple[str, bool] | None:
    """One of the set's tables still there, and whether the operator is
    told to split sets there (a fifth of the time); None: none is left."""
    tables = [t for t in ctx.world.sets[set_id] if t not in ctx.world.dropped]
    if not tables:
        return None
    return ctx.rng.choice(tables), ctx.rng.random() < 0.2


def _own_tables(ctx: Ctx) -> list[str]:
    made: list[str] = []
    for k in range(3):
        name = f"o{ctx.actor.aid}x{k}"
        root = str(ctx.world.lake / name)
        ctx.world.intend_table(name, root, ctx.actor.cwd, "ms", set())
        config = ctx.world.config(name, root, "ms", ctx.rng)
        try:
            ctx.manager.create_table(replace(config, replaced_segments_retention_ms=HOUR_MS))
        except LineageError as exc:
            ctx.failed(f"create {name}", exc)
            continue
        made.append(name)
    return made


def _overlapped(world: World) -> list[str]:
    """Landed sets a later landed set shares a table with, and goes beyond."""
    landed = world.landed_sets
    return [
        x for i, x in enumerate(landed)
        if any(set(world.sets[x]) & set(world.sets[y]) and set(world.sets[y]) - set(world.sets[x])
               for y in landed[i + 1:])
    ]  # fmt: skip


def _roll_back(ctx: Ctx, set_id: str | None = None) -> None:
    world = ctx.world
    set_id = set_id or ctx.rng.choice(sorted(world.sets))
    try:
        done = ctx.manager.rollback_set(set_id)
    except LineageError as exc:
        ctx.failed(f"rollback of set {set_id[:8]}", exc)
        return
    assert done.committed is not None
    for table in done.targets:  # a set rolled back is gone: none of it is left staged to publish
        try:
            state = world.store.read(table).state
        except LineageError:
            continue  # dropped since
        if any(e.staged is not None and e.staged.set_id == done.set_id for e in state.entries.values()
               if e.state is EntryState.IN_PROGRESS):  # fmt: skip
            ctx.checker.flag(
                "set-rollback-staged",
                f"{ctx.actor.name}: rollback of set {done.set_id[:8]} done, yet the set is still staged in "
                f"{table}: nothing of it showed, and whatever changed since was undone",
            )
    if done.rollback_set is None:  # every table already showed its target: nothing written
        ctx.note(f"set {set_id[:8]} already rolled back")
        return
    world.sets[done.rollback_set] = tuple(sorted(done.committed))
    ctx.note(f"rolled back set {set_id[:8]}: {done.committed}")
    for table, version in done.committed.items():
        ctx.checker.check_rollback(ctx.actor.name, table, done.targets[table], version)
    check_set_rollback(
        world, ctx.checker.flag, ctx.actor.name, f"rollback of set {set_id[:8]}", done.targets, done.committed
    )


def roll_back_table(ctx: Ctx, set_id: str) -> None:
    """One table of a set rolled back alone to its version before the set:
    refused when that splits a set, unless told to (a fifth of the time).
    Landed untold, it split no set that was whole."""
    world, picked = ctx.world, _one_table(ctx, set_id)
    if picked is None:
        return
    table, split = picked
    try:
        version = set_version(list(ctx.manager.history(table)), set_id)
        if version is None:
            return
        plan = ctx.manager.rollback(table, version - 1, split_sets=split)
    except LineageError as exc:
        ctx.failed(f"rollback of {table} before set {set_id[:8]}", exc)
        return
    done = plan.committed_version
    ctx.note(f"rolled {table} back before set {set_id[:8]}: v{done}, split {plan.split_sets}")
    if done is None:
        return
    ctx.checker.check_rollback(ctx.actor.name, table, version - 1, done)
    if not split:
        check_set_rollback(
            world,
            ctx.checker.flag,
            ctx.actor.name,
            f"rollback of {table}",
            {table: version - 1},
            {table: done},
        )


def cutter(ctx: Ctx, ops: int) -> None:
    """A reader of several tables at once: a cut of the tables a set wrote
    last (or of any two), over and over while sets land."""
    for _ in range(ops):
        live = set(ctx.manager.list_tables())
        recent = [g for g in ctx.world.sets.values() if len(g) > 1 and set(g) <= live]
        known = sorted(t for t in live if t in ctx.world.tables)
        if recent:
            read_cut(ctx, list(ctx.rng.choice(recent[-3:])))
        elif len(known) > 1:
            read_cut(ctx, ctx.rng.sample(known, 2))
        ctx.world.sleep(ctx.rng.uniform(0, 0.2))


def read_cut(ctx: Ctx, group: list[str]) -> None:
    """A cut of ``group`` through the real reader, judged while it is held."""
    try:
        with SnapshotReader.together(ctx.manager, group) as cut:
            versions = cut.versions
            for _ in range(ctx.rng.choice([0, 1, 3])):  # hold it a while: sets land meanwhile
                ctx.world.sleep(ctx.rng.uniform(0, 0.3))
            check_cut(ctx.world, ctx.checker.flag, ctx.actor.name, versions)
            ctx.note(f"cut {versions}")
    except LineageError as exc:
        ctx.failed(f"cut of {', '.join(group)}", exc)
