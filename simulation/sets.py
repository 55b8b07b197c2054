"""Push sets in the simulation: a writer of sets (pushes of two or three
tables as one, a job's reruns, set rollbacks) and readers of cuts, with the
cross-table invariant they are judged by:

- after every step, a set (or set rollback) is in the history of all its
  tables or of none (:func:`check_sets`): its one commit is never half applied;
- a set rollback leaves every push set that was whole (applied in every
  one of its tables or in none) whole (:func:`check_set_rollback`);
- a cut (:class:`~segment_lineage.ingest.readers.Cut`, the real reader) holds,
  for every set, versions that include it in all its tables or in none
  (:func:`check_cut`): no reader sees set N in one table and N-1 in another.

Tables an actor dropped are left out: a table made again under the same name
has another history.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from segment_lineage.ingest.arrow_push import prepare_arrow
from segment_lineage.ingest.push_set import publish_set, push_set, staged_set
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Operation

HOUR_MS = 3_600_000
STAGE_HOLD = "30s"  # a staged set left alone is cleaned up within the run

if TYPE_CHECKING:
    from collections.abc import Sequence

    from segment_lineage.ingest.push_plan import Prepared
    from simulation.actors import Ctx
    from simulation.world import SetPart, World


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


def _push(ctx: Ctx, group: list[str], label: str, staged: list[str]) -> None:
    world, manager = ctx.world, ctx.manager
    parts: list[SetPart] = []
    try:
        for table in group:
            state = manager.table(table)
            rows, mode, interval = world.parts(
                world.tables[table], state.config.table_type, ctx.rng, f"{label}-{table}"
            )
            parts.append((table, rows, mode, interval))
        prepared = _prepare(ctx, parts)
    except LineageError as exc:
        ctx.failed(f"set of {', '.join(group)}", exc)
        return
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
        live = [t for t in mine if t not in ctx.world.dropped]
        if len(live) == 3:  # X over the first two, Y over the last two, in turn
            _push(ctx, live[:2] if n % 3 == 0 else live[1:], f"u{ctx.actor.aid}-{n}", [])


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
    if done.rollback_set is None:  # every table already showed its target: nothing written
        ctx.note(f"set {set_id[:8]} already rolled back")
        return
    world.sets[done.rollback_set] = tuple(sorted(done.committed))
    ctx.note(f"rolled back set {set_id[:8]}: {done.committed}")
    for table, version in done.committed.items():
        world.checker.check_rollback(ctx.actor.name, table, done.targets[table], version)
    check_set_rollback(world, ctx.actor.name, f"rollback of set {set_id[:8]}", done.targets, done.committed)


def roll_back_table(ctx: Ctx, set_id: str) -> None:
    """One table of a set rolled back alone to its version before the set:
    refused when that splits a set, unless told to (a fifth of the time).
    Landed untold, it split no set that was whole."""
    world = ctx.world
    tables = [t for t in world.sets[set_id] if t not in world.dropped]
    if not tables:
        return
    table, split = ctx.rng.choice(tables), ctx.rng.random() < 0.2
    try:
        version = _set_version(list(ctx.manager.history(table)), set_id)
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
    world.checker.check_rollback(ctx.actor.name, table, version - 1, done)
    if not split:
        check_set_rollback(world, ctx.actor.name, f"rollback of {table}", {table: version - 1}, {table: done})


def check_set_rollback(
    world: World, actor: str, what: str, targets: dict[str, int], committed: dict[str, int]
) -> None:
    """A rollback (of a set, or of one table not told to split sets) never
    splits a push set that was whole: applied in
    every one of its tables, or in none, just before it. A push set is
    applied in a table when its version there is one its head still
    applies: from the head down, a rollback goes to its target, any other
    version to the one before. A table of the set that already showed its
    target (nothing committed there) is judged as its target. Judged once
    the rollback returned; a table rolled back since by someone else is not
    judged."""
    if not world.sets:
        return  # no set pushed yet: none to split
    live = set(world.store.list_tables())
    histories = {t: list(world.store.history(t)) for t in live if t not in world.dropped}
    mine = {t: r for t in committed for r in histories.get(t, []) if r.version == committed[t]}
    if len(mine) < len(committed):
        return  # a rolled back table went
    since = min(r.at_ms for r in mine.values())
    moved = {t for t, h in histories.items() if any(r.operation is Operation.ROLLBACK and r.at_ms >= since
             and r.version not in {committed.get(t)} for r in h)}  # fmt: skip
    for pushed, tables in sorted(world.sets.items()):
        where = {t: _set_version(histories.get(t, []), pushed) for t in tables}
        if any(v is None for v in where.values()) or moved & set(tables):
            continue
        before = {t: _shows(histories[t], v, committed[t] - 1 if t in committed else None)
                  for t, v in where.items()}  # fmt: skip
        after = {t: _shows(histories[t], v, _shown_as(t, targets, committed)) for t, v in where.items()}
        if len(set(before.values())) == 1 and len(set(after.values())) > 1:
            shown, hidden = (
                sorted(t for t, a in after.items() if a),
                sorted(t for t, a in after.items() if not a),
            )
            world.checker.flag(
                "set-split",
                f"{actor}'s {what} left set {pushed[:8]} applied in {shown} but not in {hidden}",
            )


def _shown_as(table: str, targets: dict[str, int], committed: dict[str, int]) -> int | None:
    """The version whose chain ``table`` shows after a set rollback (None: its head)."""
    return targets[table] if table in targets and table not in committed else None


def _set_version(history: list[HistoryRecord], set_id: str) -> int | None:
    """The newest version of a table where the push set's push ended (None:
    none; a staged set's records show nothing)."""
    return max(
        (r.version for r in history if r.set_id == set_id and r.operation is Operation.END_REPLACE),
        default=None,
    )


def _shows(history: list[HistoryRecord], version: int | None, head: int | None) -> bool:
    """Whether ``head`` (None: the newest) still applies the set's end at
    ``version``: on its chain, and its entry not reverted after it there."""
    on = _applied(history, head)
    if version not in on:
        return False
    ended = next(r.entry_id for r in history if r.version == version)
    return not any(
        r.version in on and r.version > version and r.operation is Operation.REVERT_REPLACE
        and r.entry_id == ended
        for r in history
    )  # fmt: skip


def _applied(history: list[HistoryRecord], head: int | None) -> set[int]:
    """The versions ``head`` (None: the newest) still applies."""
    by_version = {r.version: r for r in history}
    version = max(by_version, default=0) if head is None else head
    seen: set[int] = set()
    while version > 0 and version not in seen:
        seen.add(version)
        r = by_version.get(version)
        target = r.detail.target if r is not None and r.detail is not None else None
        jump = r is not None and r.operation is Operation.ROLLBACK and target is not None
        version = min(target, version - 1) if jump and target is not None else version - 1
    return seen


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
            check_cut(ctx.world, ctx.actor.name, versions)
            ctx.note(f"cut {versions}")
    except LineageError as exc:
        ctx.failed(f"cut of {', '.join(group)}", exc)


def _history(world: World, table: str) -> dict[str, int]:
    """Set id -> the version of ``table`` that carries it (the newest)."""
    found: dict[str, int] = {}
    for record in world.store.history(table):
        if record.set_id is not None:
            found.setdefault(record.set_id, record.version)
    return found


def check_cut(world: World, actor: str, versions: dict[str, int]) -> None:
    histories = {t: _history(world, t) for t in versions if t not in world.dropped}
    for set_id, tables in sorted(world.sets.items()):
        mine = [t for t in tables if t in histories]
        if len(mine) < 2 or len(mine) < len(tables):
            continue
        seen = {t: set_id in histories[t] and histories[t][set_id] <= versions[t] for t in mine}
        if len(set(seen.values())) > 1:
            shown, hidden = (
                sorted(t for t, s in seen.items() if s),
                sorted(t for t, s in seen.items() if not s),
            )
            world.checker.flag(
                "cut-torn", f"{actor}'s cut {versions} shows set {set_id[:8]} in {shown}, not {hidden}"
            )


def check_sets(world: World) -> None:
    """Every set is in the history of all its tables or of none, after every step."""
    if not world.sets:
        return
    live = set(world.store.list_tables())
    for set_id, tables in sorted(world.sets.items()):
        if any(t in world.dropped or t not in live for t in tables):
            continue
        try:
            present = {t: set_id in _recent(world, t) for t in tables}
        except LineageError:  # a table being dropped: judged no more
            continue
        if len(set(present.values())) > 1:
            world.checker.flag(
                "set-torn",
                f"set {set_id[:8]} is in {sorted(t for t, p in present.items() if p)} "
                f"but not in {sorted(t for t, p in present.items() if not p)}",
            )


def _recent(world: World, table: str) -> set[str]:
    """The sets in ``table``'s history, read again only when its version moved."""
    version = world.store.read(table).state.version
    cached = world.set_history.get(table)
    if cached is None or cached[0] != version:
        cached = (version, {r.set_id for r in world.store.history(table) if r.set_id is not None})
        world.set_history[table] = cached
    return cached[1]
