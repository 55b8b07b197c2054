"""``lineage mirror``: publish a table's versions as Delta Lake versions, for other engines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from segment_lineage.cli.context import Reason, aside, emit, manager
from segment_lineage.lineage.core.errors import InvalidInputError, LineageError
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.core.views import iso, render_pairs, render_table

if TYPE_CHECKING:
    from segment_lineage.mirror.log_files import Commit
    from segment_lineage.mirror.publishing import SyncReport
    from segment_lineage.mirror.views import Status

mirror_app = typer.Typer(
    help="Publish each version as a Delta Lake version under the table's root (docs/engines.md).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(mirror_app, name="mirror")


@mirror_app.command("enable")
def enable(
    table: Annotated[str, typer.Argument(help="Table name.")],
    retention: Annotated[
        str | None,
        typer.Option("--retention", help="How far back engines may time-travel in the mirror (default 7d)."),
    ] = None,
    reason: Reason = None,
) -> None:
    """Start publishing the table: its current version becomes the mirror's
    first, and every later version is published as it commits."""
    from segment_lineage.mirror.admin import enable as enable_mirror

    check_table_name(table)
    with manager() as m:
        m.after_commit = None  # published below, where a failure is an error
        enabled = enable_mirror(m, table, retention, reason)
    done, report = enabled.done, enabled.report
    changed = done.change.detail.settings if done.applied and done.change.detail is not None else None
    said = f"mirror of {table} enabled (delta)" + (f": {changed}" if changed else "")
    emit({**_report(report), "changed": changed}, f"{said}\n{report.line()}")


@mirror_app.command("disable")
def disable(
    table: Annotated[str, typer.Argument(help="Table name.")],
    reason: Reason = None,
) -> None:
    """Stop publishing the table and remove its Delta log (engines then find no
    table there, rather than a stale one). The segments' files stay."""
    from segment_lineage.mirror.admin import disable as disable_mirror

    check_table_name(table)
    with manager() as m:
        m.after_commit = None
        done = disable_mirror(m, table, reason)
    word = "removed its Delta log" if done.removed else "no Delta log of it was there"
    emit(
        {"table": table, "log_removed": done.removed, "problem": done.problem},
        f"mirror of {table} disabled; {word}",
    )
    if done.problem:
        aside("warning", done.problem)


@mirror_app.command("sync")
def sync_command(
    tables: Annotated[list[str] | None, typer.Argument(help="Tables to publish.")] = None,
    all_tables: Annotated[bool, typer.Option("--all", help="Every mirrored table.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say which versions would be published; publish nothing.")
    ] = False,
) -> None:
    """Publish every version not yet published, oldest first (a push does it
    right after its commit; this catches up after a failure), then remove log
    files no version within the mirror's retention needs."""
    from segment_lineage.mirror.errors import MirrorError
    from segment_lineage.mirror.publisher import mirrored_tables, sync_many

    if bool(tables) == all_tables:
        raise InvalidInputError("name the tables to publish, or give --all")
    with manager() as m:
        m.after_commit = None
        names = mirrored_tables(m) if all_tables else [check_table_name(t) for t in tables or []]
        results = sync_many(m, names, listed=all_tables, dry_run=dry_run, clean=True)
    failed = [(name, result) for name, result in results if isinstance(result, LineageError)]
    if not all_tables and len(names) == 1 and failed:
        raise failed[0][1]  # one table: its own error, and what to do about it
    _emit_synced(results)
    if failed:
        raise MirrorError(f"publishing failed for {len(failed)} table(s): {', '.join(n for n, _ in failed)}")


def _emit_synced(results: list[tuple[str, SyncReport | LineageError]]) -> None:
    """Each table's sync, as --json reports it, or in lines: its failure, or
    the log files it removed and what it published."""
    reports: list[dict[str, Any]] = []
    lines: list[str] = []
    for name, result in results:
        if isinstance(result, LineageError):
            reports.append({"table": name, "error": result.message})
            lines.append(f"{name}: failed: {result.message}")
            continue
        if result.cleaned:
            lines.append(f"{name}: removed {result.cleaned} log file(s) older than the mirror's retention")
        reports.append(_report(result))
        lines.append(result.line())
    emit(reports, "\n".join(lines) or "(no mirrored tables)")


@mirror_app.command("repair")
def repair(
    table: Annotated[str, typer.Argument(help="Table name.")],
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Say what the repair would publish over which commit; write nothing."),
    ] = False,
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild",
            help="For a log no engine can read (a commit file missing or damaged): remove it and publish "
            "the current version as a new log, whose Delta versions start again at 0.",
        ),
    ] = False,
) -> None:
    """Publish the table's current version over a log another writer committed
    to (a VACUUM, an OPTIMIZE, a Spark write) or another table left: the
    mirror's version numbers go on, and publishing resumes. With --rebuild,
    a log that cannot be read is made anew from the table."""
    from segment_lineage.mirror.publisher import sync
    from segment_lineage.mirror.views import status

    name = check_table_name(table)
    if rebuild and dry_run:
        raise InvalidInputError("give --rebuild or --dry-run, not both ('mirror status' says if it reads)")
    with manager() as m:
        m.after_commit = None
        if rebuild:
            from segment_lineage.mirror.admin import rebuild as rebuild_log

            report = rebuild_log(m, name)
            emit(_report(report) | {"rebuilt": True}, f"mirror of {name} rebuilt: a new log\n{report.line()}")
            return
        if not dry_run:
            report = sync(m, name, repair=True)
            said = "repaired" if report.repaired else "needed no repair (a plain sync ran)"
            emit(_report(report) | {"repaired": report.repaired}, f"mirror of {name} {said}\n{report.line()}")
            return
        found = status(m, name)
        report = sync(m, name, repair=True, dry_run=True)
    view = _report(report) | {"dry_run": True, "problem": found.problem}
    if found.foreign is not None:
        view["foreign"] = {"delta_version": found.foreign.delta_version, "operation": found.foreign.operation}
    if not report.pending:
        emit(view, f"dry run: the mirror of {name} needs no repair: {report.line()}")
        return
    over = f"Delta version {found.delta_version}"
    foreign = found.foreign
    if foreign is not None:
        over = f"another writer's {foreign.operation or 'commit'} (Delta version {foreign.delta_version})"
    elif found.problem:
        over += f" ({found.problem})"
    emit(view, f"dry run: repairing the mirror of {name} would publish version {report.head} over {over}; "
               "nothing was written")  # fmt: skip


@mirror_app.command("status")
def status_command(table: Annotated[str, typer.Argument(help="Table name.")]) -> None:
    """What the mirror publishes, how far behind the table it is, and whether
    every file its newest version references is there. Exits 1 when it
    reports a problem (another writer's commit, a file missing, a log left;
    not a mirror still waiting for the table's first columns)."""
    from segment_lineage.mirror.views import status

    with manager() as m:
        m.after_commit = None
        found = status(m, check_table_name(table), check_files=True)
    # Another writer's commit matters while the table is mirrored: the mirror then publishes nothing.
    foreign = found.foreign if found.mirror is not None else None
    view = _status_view(found, table, foreign)
    emit(view, render_pairs(view))
    if view["problem"]:
        aside("problem", view["problem"])
    if foreign is not None:
        aside(
            "warning",
            f"another writer committed to the Delta log ({foreign.operation}); the mirror "
            f"publishes nothing more until it is repaired (lineage mirror repair {table})",
        )
    if (view["problem"] and not found.waiting) or foreign is not None:
        raise typer.Exit(1)


def _status_view(found: Status, table: str, foreign: Commit | None) -> dict[str, Any]:
    """The mirror's status as ``mirror status`` prints it: another writer's
    commit named, and a log left behind by a disabled mirror said as a problem."""
    view: dict[str, Any] = {
        "table": found.table,
        "mirror": found.mirror,
        "retention": found.retention,
        "version": found.head,
        "delta_version": found.delta_version,
        "published_version": found.lineage_version,
        "behind_versions": len(found.behind),
        "lag_seconds": round(found.lag_ms / 1000, 3),
        "problem": found.problem,
    }
    if foreign is not None:
        view["foreign_commit"] = f"Delta version {foreign.delta_version}: {foreign.operation}"
    if found.log_left:
        view["problem"] = f"the mirror is disabled but its Delta log remains: lineage mirror disable {table}"
    return view


@mirror_app.command("versions")
def versions(table: Annotated[str, typer.Argument(help="Table name.")]) -> None:
    """The mirror's Delta versions, oldest first, each with the lineage version
    it shows (a Delta time-travel version maps back to the table's history)
    and whether engines can still read it (the newest 50 are looked at):
    not once a file it shows is gone."""
    from segment_lineage.mirror.views import mirror_commits, readable

    name = check_table_name(table)
    with manager() as m:
        m.after_commit = None
        commits = mirror_commits(m, name)
        can_read = readable(m, name, commits)
    rows = [
        {
            "delta_version": c.delta_version,
            "lineage_version": c.lineage_version,
            "at": iso(c.at_ms),
            "operation": c.operation,
            "columns_only": c.columns_only,
            "readable": can_read.get(c.delta_version, "not checked"),
        }
        for c in commits
    ]
    text = render_table(rows, ["delta_version", "lineage_version", "at", "operation", "readable"])
    emit(rows, text if rows else "(no mirror log)")


def _report(report: Any) -> dict[str, Any]:
    return {
        "table": report.table,
        "version": report.head,
        "published": [{"version": lv, "delta_version": dv} for lv, dv in report.published],
        "unchanged": list(report.unchanged),
        "gone": list(report.gone),
        "published_version": report.lineage_version,
        "delta_version": report.delta_version,
        "waiting": report.waiting,
        "to_publish": [v for v, _ in report.pending],
    }
