"""What every ``lineage`` command shares: the app, its global options, the store and printing.

The global options and the :class:`~segment_lineage.lineage.config.Settings`
built from them (with the environment and the config file) are made once per
run, by the app's callback, into a frozen :class:`Invocation`; a command reads
it with :func:`current`. It lives for that run only.

Exit codes: 0 success, 1 an operation was refused (the message says why and
what to do), 2 usage errors and bad input. Tracebacks only with --verbose.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from segment_lineage.lineage.config import Loaded, Settings, load_settings
from segment_lineage.lineage.core.errors import InvalidInputError, LineageError
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.deep import RootClaimFiles, SegmentFileSizes

if TYPE_CHECKING:
    from segment_lineage.lineage.zk.store import ZkStore


class LineageGroup(TyperGroup):
    """Turns the package's errors into one line on stderr and an exit code."""

    def invoke(self, ctx: Any) -> Any:
        run = _RUN.set(None)  # the callback sets this run's; none outlives its run
        try:
            return super().invoke(ctx)
        except LineageError as exc:
            if ctx.params.get("verbose"):
                traceback.print_exc()
            typer.echo(f"error: {exc.message}", err=True)
            if exc.remedy:
                typer.echo(f"hint: {exc.remedy}", err=True)
            raise typer.Exit(2 if isinstance(exc, InvalidInputError) else 1) from None
        finally:
            _RUN.reset(run)


app = typer.Typer(
    cls=LineageGroup,
    name="lineage",
    help="Atomic segment replacement, rollback and safe cleanup, with lineage in ZooKeeper.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)


@dataclass(frozen=True)
class Invocation:
    """One run of the command: its global options and its settings (--verbose
    is read where errors are printed, which may be before this exists)."""

    settings: Settings
    zk: str | None = None  # the --zk flag as given (config show names it the source)
    json: bool = False
    config: Loaded = field(default_factory=lambda: Loaded(None, frozenset()))

    @property
    def claims(self) -> RootClaimFiles:
        """Deep storage for root claims: table create claims its root; table claim claims an old one."""
        return RootClaimFiles(self.settings)

    @property
    def files(self) -> SegmentFileSizes:
        """Deep storage again: segment add checks each file before registering it."""
        return SegmentFileSizes(self.settings)


_RUN: ContextVar[Invocation | None] = ContextVar("lineage_invocation", default=None)


def current() -> Invocation:
    """This run's invocation; outside a run (a command function called as a
    library), the defaults with settings from the environment."""
    found = _RUN.get()
    return Invocation(Settings.from_env()) if found is None else found


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
    # --verbose is read by LineageGroup from the parsed options: it must work when this fails.
    loaded, settings = load_settings(config, zk=zk)
    _RUN.set(Invocation(settings=settings, zk=zk, json=as_json, config=loaded))


@contextmanager
def connection() -> Iterator[ZkStore]:
    """The store this run's settings name (starting the embedded server when they name none)."""
    # Imported here: kazoo, which commands that need no store do not load.
    from segment_lineage.lineage.zk.connect import open_store

    store = open_store(settings=current().settings)
    try:
        yield store
    finally:
        store.close()


def manager_on(store: ZkStore) -> LineageManager:
    """A manager on ``store`` that claims roots on deep storage."""
    return LineageManager(store, claims=current().claims)


@contextmanager
def manager() -> Iterator[LineageManager]:
    with connection() as store:
        yield manager_on(store)


def emit(data: Any, text: str) -> None:
    if current().json:
        typer.echo(json.dumps(data, indent=2, sort_keys=False))
    else:
        typer.echo(text)


def split_names(raw: str | None) -> list[str]:
    if raw is None or raw.strip() == "":
        return []
    return [part.strip() for part in raw.split(",")]
