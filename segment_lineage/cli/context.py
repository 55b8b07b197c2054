"""What every ``lineage`` command shares: the app, its global options, the store and printing.

Exit codes: 0 success, 1 an operation was refused (the message says why and
what to do), 2 usage errors and bad input. Tracebacks only with --verbose.
"""

from __future__ import annotations

import json
import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from segment_lineage.lineage.config import Loaded
from segment_lineage.lineage.config import load as load_config
from segment_lineage.lineage.core.errors import InvalidInputError, LineageError
from segment_lineage.lineage.core.roots import ClaimFiles
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.files import SegmentFiles


class LineageGroup(TyperGroup):
    """Turns the package's errors into one line on stderr and an exit code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except LineageError as exc:
            if OPTIONS.verbose:
                traceback.print_exc()
            typer.echo(f"error: {exc.message}", err=True)
            if exc.remedy:
                typer.echo(f"hint: {exc.remedy}", err=True)
            raise typer.Exit(2 if isinstance(exc, InvalidInputError) else 1) from None


app = typer.Typer(
    cls=LineageGroup,
    name="lineage",
    help="Atomic segment replacement, rollback and safe cleanup, with lineage in ZooKeeper.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)


@dataclass
class Options:
    zk: str | None = None
    json: bool = False
    verbose: bool = False
    config: Loaded | None = None
    claims: ClaimFiles | None = None  # deep storage, set where the CLI is composed
    files: SegmentFiles | None = None  # deep storage again: segment add checks files with it


OPTIONS = Options()


@app.callback()
def main_options(
    zk: Annotated[
        str | None,
        typer.Option("--zk", help="ZooKeeper hosts[/chroot]; default $LINEAGE_ZK, else the embedded server."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show tracebacks on errors.")] = False,
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            metavar="PATH",
            help="TOML settings; default $LINEAGE_CONFIG, else ~/.config/segment-lineage/config.toml "
            "if it exists. Flags and the environment win over it.",
        ),
    ] = None,
) -> None:
    OPTIONS.zk = zk
    OPTIONS.json = as_json
    OPTIONS.verbose = verbose
    OPTIONS.config = load_config(config, os.environ)


@contextmanager
def manager() -> Iterator[LineageManager]:
    from segment_lineage.lineage.zk.connect import open_store

    store = open_store(OPTIONS.zk)
    try:
        yield LineageManager(store, claims=OPTIONS.claims)
    finally:
        store.close()


def emit(data: Any, text: str) -> None:
    if OPTIONS.json:
        typer.echo(json.dumps(data, indent=2, sort_keys=False))
    else:
        typer.echo(text)


def split_names(raw: str | None) -> list[str]:
    if raw is None or raw.strip() == "":
        return []
    return [part.strip() for part in raw.split(",")]
