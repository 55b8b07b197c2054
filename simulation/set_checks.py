"""The cross-table rules push sets are judged by (:mod:`simulation.sets`
drives them):

- after every step, a set (or set rollback) is in the history of all its
  tables or of none (:func:`check_sets`): its one commit is never half applied;
- a rollback (of a set, or of one table not told to split sets) leaves
  every push set that was whole (applied in every one of its tables or in
  none) whole (:func:`check_set_rollback`);
- a cut holds, for every set, versions that include it in all its tables
  or in none (:func:`check_cut`): no reader sees set N in one table and N-1
  in another.

Tables an actor dropped are left out: a table made again under the same name
has another history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Operation

if TYPE_CHECKING:
    from collections.abc import Callable

    from simulation.world import World

    Flag = Callable[[str, str], None]  # the checker's flag: a violation's kind and detail


def check_set_rollback(
    world: World, flag: Flag, actor: str, what: str, targets: dict[str, int], committed: dict[str, int]
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
        where = {t: set_version(histories.get(t, []), pushed) for t in tables}
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
            flag(
                "set-split",
                f"{actor}'s {what} left set {pushed[:8]} applied in {shown} but not in {hidden}",
            )


def _shown_as(table: str, targets: dict[str, int], committed: dict[str, int]) -> int | None:
    """The version whose chain ``table`` shows after a set rollback (None: its head)."""
    return targets[table] if table in targets and table not in committed else None


def set_version(history: list[HistoryRecord], set_id: str) -> int | None:
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


def _history(world: World, table: str) -> dict[str, int]:
    """Set id -> the version of ``table`` that carries it (the newest)."""
    found: dict[str, int] = {}
    for record in world.store.history(table):
        if record.set_id is not None:
            found.setdefault(record.set_id, record.version)
    return found


def check_cut(world: World, flag: Flag, actor: str, versions: dict[str, int]) -> None:
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
            flag("cut-torn", f"{actor}'s cut {versions} shows set {set_id[:8]} in {shown}, not {hidden}")


def check_sets(world: World, flag: Flag) -> None:
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
            flag(
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
