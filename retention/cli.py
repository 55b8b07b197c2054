"""The retention commands of the ``lineage`` CLI."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from lineage.cli import OPTIONS, manager
from lineage.periods import parse_period
from retention.errors import FencedError
from retention.executor import run_pass

retention_app = typer.Typer(help="Reclaim replaced and abandoned segments.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(retention_app, name="retention")


@retention_app.command("run")
def run(
    table: Annotated[str | None, typer.Option("--table", help="Only this table.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Ignore the minimum grace of queued files.")] = False,
    min_grace: Annotated[
        str, typer.Option("--min-grace", help="Queued files wait at least this long.")
    ] = "10m",
) -> None:
    """One retention pass: plan, record the intent, delete files, clear."""
    grace = parse_period(min_grace)
    with manager() as m:
        alive = getattr(m.store, "session_alive", None)

        def fence() -> None:
            if alive is not None and not alive():
                raise FencedError("the ZooKeeper session is suspended or lost: deleting nothing more")

        reports = run_pass(
            m, [table] if table else None, dry_run=dry_run, force=force, min_grace_ms=grace, fence=fence
        )
    if OPTIONS.json:
        typer.echo(json.dumps([r.__dict__ for r in reports], indent=2))
    else:
        for report in reports:
            typer.echo(report.line())
            if dry_run:
                for item in report.planned:
                    typer.echo(f"  {item['reason']:<18} {item['location']}")
            for error in report.errors:
                typer.echo(f"  error: {error}", err=True)
    if any(r.errors for r in reports):
        raise typer.Exit(1)
