"""Rollback: the visible set made equal to an earlier or later retained
version's, by setting entry states.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from segment_lineage.lineage.core.bucket_maps import editable
from segment_lineage.lineage.core.errors import (
    RefusedError,
)
from segment_lineage.lineage.core.model import (
    Audit,
    Change,
    Detail,
    EntryState,
    LineageEntry,
    Operation,
    TableConfig,
    TableState,
)
from segment_lineage.lineage.core.schema import MAX_NOTE, Schema, compare
from segment_lineage.lineage.core.schema_versions import reads, span_at, with_schema
from segment_lineage.lineage.core.transitions.common import (
    _iso,
    _shown,
    how_to_end,
)
from segment_lineage.lineage.core.visibility import visibility_delta


def _completed_at(entry: LineageEntry, target: TableState) -> bool:
    """Whether ``entry`` had completed at ``target``: COMPLETED there, or gone
    from there (retention removed it, nothing being left to reclaim) while
    the segments it created are registered there as its own."""
    then = target.entries.get(entry.entry_id)
    if then is not None:
        return then.state is EntryState.COMPLETED
    return any(
        (seg := target.segments.get(name)) is not None and seg.entry_id == entry.entry_id
        for name in entry.segments_to
    )


def _removed_owners(
    state: TableState, entries: Mapping[str, LineageEntry], extra: set[str]
) -> dict[str, list[str]]:
    """The entries retention removed that segments of ``extra`` still name, and those segments."""
    removed: dict[str, list[str]] = {}
    for name in sorted(extra):
        owner = state.segments[name].entry_id
        if owner is not None and owner not in entries:
            removed.setdefault(owner, []).append(name)
    return removed


def _restore_removed(
    state: TableState,
    target: TableState,
    entries: dict[str, LineageEntry],
    extra: set[str],
    now_ms: int,
    audit: Audit,
) -> list[str]:
    """Bring back, as REVERTED, the entries retention removed whose segments
    ``target`` does not show: an APPEND push's entry goes once it completed
    (its ``from`` is empty), yet its segments still name it. Returns their ids."""
    removed = _removed_owners(state, entries, extra)
    for entry_id, names in removed.items():
        then = target.entries.get(entry_id)
        if then is not None:  # running or reverted at the target: its own record
            to = tuple(n for n in then.segments_to if n in state.segments) or tuple(names)
            entries[entry_id] = dataclasses.replace(
                then, segments_to=to, state=EntryState.REVERTED, timestamp_ms=now_ms
            )
        else:  # created after the target: rebuilt from the segments that name it
            created = min(state.segments[n].created_ms for n in names)
            entries[entry_id] = LineageEntry(
                entry_id, (), tuple(names), EntryState.REVERTED, now_ms, created, audit
            )
    return list(removed)


def _set_states(
    state: TableState, target: TableState, entries: dict[str, LineageEntry], now_ms: int
) -> list[str]:
    """Each finished entry COMPLETED where it was at the target, else
    REVERTED (into ``entries``); the ids of those changed."""
    changed: list[str] = []
    for entry_id, entry in state.entries.items():
        if entry.state is EntryState.IN_PROGRESS:
            continue
        want = EntryState.COMPLETED if _completed_at(entry, target) else EntryState.REVERTED
        if entry.state is not want:
            entries[entry_id] = dataclasses.replace(entry, state=want, timestamp_ms=now_ms)
            changed.append(entry_id)
    return changed


def _check_reached(state: TableState, target: TableState, extra: set[str], hidden: set[str]) -> None:
    """Refused unless the entries' states alone give the target's visible
    set: a segment it shows was reclaimed, or segments changed by hand."""
    table = state.config.name
    reclaimed = sorted(n for n in hidden if n not in state.segments)
    if reclaimed:
        raise RefusedError(
            f"cannot roll back to version {target.version}: segment(s) {_shown(reclaimed)} it shows are "
            "no longer registered (deleted, or let go by retention or a REFRESH table's cleanup beyond "
            "max snapshots; a file may still wait in the deletion queue)",
            table=table,
            remedy="pick a later version ('lineage history' lists them)",
        )
    if extra or hidden:
        parts = [f"{_shown(sorted(extra))} would stay visible"] if extra else []
        parts += [f"{_shown(sorted(hidden))} would stay hidden"] if hidden else []
        raise RefusedError(
            f"cannot roll back to version {target.version}: segments changed outside pushes since then "
            f"({'; '.join(parts)})",
            table=table,
            remedy="add or delete those segments by hand, or pick another version",
        )


def _check_no_push_moves(
    state: TableState, target: TableState, entries: dict[str, LineageEntry], changed: list[str]
) -> None:
    """Refused when a running push touches a segment the rollback moves."""
    moving = {n for e in changed for n in (*entries[e].segments_from, *entries[e].segments_to)}
    for entry in state.entries.values():
        if entry.state is EntryState.IN_PROGRESS and moving.intersection(
            (*entry.segments_from, *entry.segments_to)
        ):
            if entry.held_until_ms is not None:  # staged, or opened by hand: no push will finish it
                what = "a staged push" if entry.staged is not None else "an entry opened by hand"
                raise RefusedError(
                    f"cannot roll back to version {target.version}: {what}, {entry.entry_id}, held until "
                    f"{_iso(entry.held_until_ms)}, runs on segments the rollback would change",
                    table=state.config.name,
                    entry_id=entry.entry_id,
                    remedy=f"{how_to_end(state.config.name, entry)} or drop it "
                    f"('lineage revert {state.config.name} {entry.entry_id}'), then roll back",
                )
            raise RefusedError(
                f"cannot roll back to version {target.version}: push {entry.entry_id} is IN_PROGRESS on "
                "segments the rollback would change",
                table=state.config.name,
                entry_id=entry.entry_id,
                remedy="wait for the push to finish, or revert it ('lineage revert --force') if it is dead",
            )


def rollback(state: TableState, target: TableState, now_ms: int, audit: Audit | None = None) -> Change:
    """Make the visible set equal to ``target``'s (an earlier or a later
    retained version) in one commit, by setting entry states.

    Entries COMPLETED at the target and REVERTED now are restored; entries
    COMPLETED now but not at the target (created after it, reverted or still
    running there) are reverted. Entries that retention removed since (a
    finished push with nothing left to reclaim, as every APPEND push) are
    judged by their segments, which still name them: one the target does not
    show comes back as a REVERTED entry (``audit`` says who, for one created
    after the target). Nothing is deleted, so a rollback is undone by rolling
    forward to a version after it. Refused, changing nothing, when a segment
    the target shows was reclaimed, when segments changed outside pushes since
    the target, or when a running push touches what would change.
    """
    config, note = _schema_for(state, target)
    entries = editable(state.entries)
    changed = _set_states(state, target, entries, now_ms)
    after = state.replace(entries=entries)
    # Only what differs is looked at (visibility_delta): the cost follows the
    # entries and segments that changed, not the size of the table.
    extra, hidden = visibility_delta(target, after)
    if extra:
        restored = _restore_removed(state, target, entries, extra, now_ms, audit or Audit("rollback"))
        if restored:
            changed += restored
            after = state.replace(entries=entries)
            extra, hidden = visibility_delta(target, after)
    _check_reached(state, target, extra, hidden)
    _check_no_push_moves(state, target, entries, changed)
    if not changed:
        return Change(state=state, operation=Operation.ROLLBACK, changed=False)
    appearing = [state.segments[n] for n in visibility_delta(state, after)[0]]  # what comes back
    return Change(
        state=after if config is state.config else after.replace(config=config),
        operation=Operation.ROLLBACK,
        segments=len(appearing),
        rows=sum(seg.rows for seg in appearing),
        size_bytes=sum(seg.size_bytes for seg in appearing),
        detail=Detail(target=target.version, schema=note),
    )


def _schema_for(state: TableState, target: TableState) -> tuple[TableConfig, str | None]:
    """The config a rollback to ``target`` leaves, and what the history
    records of its schema (None: unchanged). The current schema stays when
    it reads the target's files (it only added columns, or widened them);
    else the target's comes back, and the replacement that brought it is
    again the push never to revert. Refused when the target's schema is no
    longer recorded and a replacement came since."""
    config = state.config
    span = span_at(config, target.version)
    if span is None:
        _check_not_replaced_since(config, target.version)
        return config, None
    if reads(config.schema, span.schema):
        return config, None
    version = state.version + 1
    restored = dataclasses.replace(
        with_schema(config, span.schema, version), schema_replaced_at=version, schema_replaced_by=span.by
    )
    return restored, _restored_note(config.schema, span.schema, target.version)


def _check_not_replaced_since(config: TableConfig, version: int) -> None:
    """A rollback to a version whose schema is not recorded is refused when a replacement came since."""
    replaced_at = config.schema_replaced_at
    if replaced_at is not None and version < replaced_at:
        raise RefusedError(
            f"cannot roll back to version {version}: the schema was replaced at version "
            f"{replaced_at}, and the columns version {version} had are no longer recorded",
            table=config.name,
            remedy=f"pick version {replaced_at} or later, or push the old data again with --replace-schema",
        )


def _restored_note(now: Schema | None, then: Schema | None, version: int) -> str:
    """What the history records of a schema a rollback brings back: each column back, gone or retyped."""
    diff = compare(now or (), then or ())
    parts = [f"{f.name} ({f.type}) back" for f in diff.added]
    parts += [f"{f.name} ({f.type}) gone" for f in diff.missing]
    parts += [f"{name} {current} -> {restored}" for name, current, restored in diff.changed]
    shown = ", ".join(parts[:8]) + (f" and {len(parts) - 8} more" if len(parts) > 8 else "")
    return f"schema of version {version} restored: {shown}"[:MAX_NOTE]
