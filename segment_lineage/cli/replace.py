"""The replacement commands: start-replace, end-replace, revert, rollback and entries."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated

import typer

from segment_lineage.cli.context import Reason, emit, manager, split_names
from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.lineage.core.names import check_set_id
from segment_lineage.lineage.core.periods import parse_time, parse_version
from segment_lineage.lineage.core.views import entry_view, render_table

if TYPE_CHECKING:
    from segment_lineage.lineage.manager import LineageManager
    from segment_lineage.lineage.manager.rollback import RollbackPlan
    from segment_lineage.lineage.manager.set_rollback import SetRollback


def register(app: typer.Typer) -> None:
    app.command("start-replace")(start_replace)
    app.command("end-replace")(end_replace)
    app.command("publish")(publish)
    app.command("revert")(revert)
    app.command("rollback")(rollback)
    app.command("entries")(entries)


def start_replace(
    table: str,
    segments_from: Annotated[str, typer.Option("--from", help="Comma-separated segments to replace.")] = "",
    segments_to: Annotated[str, typer.Option("--to", help="Comma-separated new segments.")] = "",
    force_cleanup: Annotated[
        bool,
        typer.Option(
            "--force-cleanup",
            help="Clean up stale overlapping entries: pushes whose process is gone, and entries "
            "opened by hand whose hold ended. Each one is named.",
        ),
    ] = False,
    hold: Annotated[
        str | None,
        typer.Option(
            "--hold",
            metavar="PERIOD",
            help="Hold the entry this long: no other push's force cleanup and no retention pass takes "
            "it before (default: the table's lineage entry cleanup retention; 0s: no hold).",
        ),
    ] = None,
    reason: Reason = None,
) -> None:
    """Open a replacement; the new segments stay hidden until end-replace."""
    with manager() as m:
        done = m.open_replace(
            table,
            split_names(segments_from),
            split_names(segments_to),
            force_cleanup=force_cleanup,
            reason=reason,
            hold=hold,
        )
    entry_id = done.change.entry_id or ""
    cleaned = list(done.change.cleaned)
    held = done.state.entries[entry_id].held_until_ms if entry_id in done.state.entries else None
    lines = [str(entry_id)]
    lines += [f"cleaned up stale entry {e} (reverted; its uploads not reused are queued)" for e in cleaned]
    emit({"entry": entry_id, "cleaned": cleaned, "held_until_ms": held}, "\n".join(lines))


def end_replace(
    table: str,
    entry: str,
    subset: Annotated[
        str | None, typer.Option("--to-subset", help="Complete with only these of segmentsTo.")
    ] = None,
    reason: Reason = None,
) -> None:
    """Complete a replacement: the new segments appear and the old ones hide, at once."""
    with manager() as m:
        entry = m.resolve_entry(table, entry)
        done = m.end_replace(table, entry, None if subset is None else split_names(subset), reason=reason)
    word = "completed" if done.applied else "was already completed"
    emit(
        {"entry": entry, "applied": done.applied, "version": done.state.version},
        f"entry {entry} {word}",
    )


def publish(
    table: Annotated[str | None, typer.Argument(help="The table (none with --set).")] = None,
    entry: Annotated[str | None, typer.Argument(help="The staged push's entry (none with --set).")] = None,
    set_id: Annotated[
        str | None,
        typer.Option(
            "--set",
            help="Publish every table a staged push set staged, in one commit (its id, or its first digits).",
        ),
    ] = None,
    reason: Reason = None,
) -> None:
    """Show a staged push's rows ('lineage push --stage'): its audit runs
    again, then one commit shows them and hides what it replaces. A failing
    check leaves it staged. A staged push set ('push-set --stage') is
    published whole, with --set."""
    from segment_lineage.cli.progress import progress
    from segment_lineage.cli.push_output import emit_push
    from segment_lineage.ingest.stage import publish as publish_staged

    if set_id is not None:
        if table is not None or entry is not None:
            raise InvalidInputError("--set goes alone: the set names its tables and entries")
        from segment_lineage.cli.push_set import emit_set
        from segment_lineage.ingest.push_set import publish_set

        set_id = check_set_id(set_id.strip())  # as pasted; checked before the progress line names it

        with manager() as m, progress(f"publishing set {set_id}") as say:
            emit_set(publish_set(m, set_id, reason=reason, progress=say))
        return
    if table is None or entry is None:
        raise InvalidInputError("name the table and the staged push's entry (or a staged set with --set)")
    with manager() as m, progress(f"publishing {entry} of {table}") as say:
        done = publish_staged(m, table, entry, reason=reason, progress=say)
    emit_push(done, None)


def revert(
    table: str,
    entry: str,
    force: Annotated[bool, typer.Option("--force", help="Revert an IN_PROGRESS entry.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would change; change nothing.")
    ] = False,
    split_sets: Annotated[
        bool,
        typer.Option(
            "--split-sets",
            help="Revert a push set's push in this table alone (the set stays shown in its other "
            "tables): refused without it.",
        ),
    ] = False,
    reason: Reason = None,
) -> None:
    """Revert a replacement (Pinot's rules): the replaced segments show again.
    A staged push is dropped (no --force needed): its files go to retention.
    A push set shows in every table or in none, so reverting one table's
    push of a set is refused (undo the set with 'rollback --set', or say
    --split-sets)."""
    with manager() as m:
        entry = m.resolve_entry(table, entry)
        if dry_run:
            plan = m.revert_plan(table, entry, force=force, split_sets=split_sets)
            emit(
                {"entry": entry, "dry_run": True, **dataclasses.asdict(plan)},
                f"dry run: reverting entry {entry} would show {len(plan.appear)} segment(s) "
                f"({plan.rows_appearing} rows) and hide {len(plan.disappear)} "
                f"({plan.rows_disappearing} rows)",
            )
            return
        done = m.revert_replace(table, entry, force=force, reason=reason, split_sets=split_sets)
    emit({"entry": entry, "version": done.state.version}, f"entry {entry} reverted")


def rollback(
    table: Annotated[str | None, typer.Argument(help="The table (none with --set).")] = None,
    to_version: Annotated[
        str | None, typer.Option("--to-version", help="Roll back (or forward) to it.", metavar="N")
    ] = None,
    to_time: Annotated[
        str | None,
        typer.Option(
            "--to-time",
            help="To the version current then: ISO-8601 (UTC unless zoned), or ms:EPOCH_MS.",
        ),
    ] = None,
    entry: Annotated[
        str | None, typer.Option("--entry", help="Undo this push (and every push completed after it).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would change; change nothing.")
    ] = False,
    set_id: Annotated[
        str | None,
        typer.Option(
            "--set",
            help="Undo this push set (its id, or its first digits): every table of it, in one commit "
            "(no TABLE); refused when that would undo a later set in some of its tables only.",
        ),
    ] = None,
    split_sets: Annotated[
        bool,
        typer.Option(
            "--split-sets",
            help="Roll the table back even when that undoes a push set here and not in its other "
            "tables (or brings one back here alone): refused without it.",
        ),
    ] = False,
    reason: Reason = None,
) -> None:
    """Make the table look as it did at another version, in one commit.

    With no target, undo the newest completed push. Nothing is deleted: roll
    forward to a later version to undo a rollback. A push set shows in every
    table or in none, so a rollback that would split one is refused (say
    --split-sets to split it)."""
    if set_id is not None:
        if any(given is not None for given in (table, to_version, to_time, entry)):
            raise InvalidInputError("--set goes alone: it names every table and version itself")
        _rollback_set(set_id, dry_run, reason, split_sets)
        return
    if table is None:
        raise InvalidInputError("name the table to roll back (or a push set with --set)")
    version = None if to_version is None else parse_version(to_version)
    with manager() as m:
        target = _rollback_target(m, table, version, to_time, entry)
        plan = m.rollback(table, target, dry_run=dry_run, reason=reason, split_sets=split_sets)
    emit(dataclasses.asdict(plan), _rollback_text(plan, dry_run))


def _rollback_target(
    m: LineageManager, table: str, version: int | None, to_time: str | None, entry: str | None
) -> int:
    """The version to roll ``table`` back to: the one given, the one current
    at ``to_time``, the one before ``entry``'s push, or (none given) the one
    before the newest completed push."""
    if entry is not None and (version is not None or to_time is not None):
        raise InvalidInputError("give at most one of a version, a time and an entry")
    m.check_not_purging(table, "a rollback")
    if entry is not None:
        entry = m.resolve_entry(table, entry, in_history=True)
    return m.resolve_version(
        table, version=version, at_ms=None if to_time is None else parse_time(to_time), entry_id=entry
    )


def _rollback_text(plan: RollbackPlan, dry_run: bool) -> str:
    table, target = plan.table, plan.target_version
    if plan.committed_version is not None:
        head = f"rolled {table} back to version {target}: now version {plan.committed_version}"
    elif dry_run:
        head = f"dry run: rolling {table} back to version {target} would"
    else:
        head = f"{table} already shows what version {target} showed: nothing to do"
    lines = [
        head,
        f"  restore {len(plan.restored)} entr(ies), revert {len(plan.reverted)}",
        f"  segments: +{len(plan.appear)} -{len(plan.disappear)}; "
        f"rows: +{plan.rows_appearing} -{plan.rows_disappearing}"
        + (f" ({plan.rows_before} -> {plan.rows_after})" if plan.rows_before is not None else ""),
    ]
    if plan.schema is not None:
        lines.append(f"  {plan.schema}")
    if plan.split_sets:
        lines.append(
            f"  splits push set(s) {', '.join(plan.split_sets)}: {table} now disagrees with their others"
        )
    return "\n".join(lines)


def _rollback_set(set_id: str, dry_run: bool, reason: str | None, split_sets: bool) -> None:
    if split_sets:
        raise InvalidInputError("--split-sets is for one table's rollback: a set rollback never splits a set")
    set_id = set_id.strip()  # as pasted, spaces around it and all (rollback_set checks the rest)
    with manager() as m:
        done = m.rollback_set(set_id, dry_run=dry_run, reason=reason)
    set_id = done.set_id  # the whole id, when given a prefix
    if len(done.already) == len(done.targets):
        head = f"every table of set {set_id} already shows its version before the set: nothing to do"
    elif done.committed is None:
        head = f"dry run: rolling back set {set_id} would take, in one commit:"
    else:
        head = f"rolled back set {set_id} in one commit (set {done.rollback_set}):"
    lines = [head]
    for table, target in done.targets.items():
        if table in done.already:
            now = ": already there"
        elif done.committed is None:
            now = ""
        else:
            now = f": now version {done.committed[table]}"
        lines.append(f"  {table} back to version {target}{now}{_undone_after(done, table)}")
    emit(dataclasses.asdict(done), "\n".join(lines))


def _undone_after(done: SetRollback, table: str) -> str:
    """What a set rollback takes away that came after the set, said out loud."""
    later = None if table in done.already else done.undone_after(table)
    if later is None:
        return ""
    first, last = later
    versions = f"version {first}" if first == last else f"versions {first}-{last}"
    return f" (also undoing {versions}, made after the set)"


def entries(table: str) -> None:
    """List a table's lineage entries, oldest first."""
    with manager() as m:
        rows = [entry_view(e) for e in m.entries(table)]
    emit(
        rows,
        render_table(
            [{**r, "state": "STAGED" if r["staged"] else r["state"]} for r in rows],
            ["id", "state", "from", "to", "timestamp", "actor", "reason"],
        )
        if rows
        else "(no lineage entries)",
    )
