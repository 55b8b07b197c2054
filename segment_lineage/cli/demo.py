"""``lineage demo``: the end-to-end demo on the embedded defaults."""

from __future__ import annotations

import typer

from segment_lineage.cli.context import current


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def demo() -> None:
    """Run the end-to-end demo on the embedded defaults."""
    from segment_lineage.demo import run_demo

    run_demo(echo=typer.echo, settings=current().settings)
