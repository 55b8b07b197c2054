"""``lineage config``: the effective settings and where each came from."""

from __future__ import annotations

import typer

from segment_lineage.cli.context import current, emit
from segment_lineage.lineage.config import effective
from segment_lineage.lineage.core.views import render_table

config_app = typer.Typer(
    help="The effective configuration: file, environment and flags.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")


@config_app.command("show")
def config_show() -> None:
    """Print every setting's effective value and its source (flag, env, file, default); secrets masked."""
    run = current()
    loaded = run.config
    rows = [
        {
            "key": e.setting.key,
            "value": e.shown(),
            "source": e.source,
            "env": e.setting.env,
        }
        for e in effective(loaded, {"--zk": run.zk})
    ]
    file_line = f"config file: {loaded.path}" if loaded.path else "config file: none"
    text = (
        file_line
        + "\n\n"
        + render_table(
            [{**r, "value": _shown(r["value"])} for r in rows],
            ["key", "value", "source", "env"],
        )
    )
    emit({"file": str(loaded.path) if loaded.path else None, "settings": rows}, text)


def _shown(value: str | None) -> str:
    """A value as the table prints it: ``-`` for none, and a variable set
    but empty (refused when used) as ``(empty)``, not as a blank."""
    if value is None:
        return "-"
    return value if value.strip() else "(empty)"
