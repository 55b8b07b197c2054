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
import logging
import os
import signal
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer._click.exceptions import (  # typer's own click (not the click package)
    NoArgsIsHelpError,
    UsageError,
)
from typer.core import TyperGroup

from segment_lineage.cli.command_line import hoist_global_options, name_metavars
from segment_lineage.lineage.config import Loaded, Settings, load_settings
from segment_lineage.lineage.core.errors import InvalidInputError, LineageError, NotFoundError
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
from segment_lineage.lineage.storage.deep import SegmentFileSizes

if TYPE_CHECKING:
    from segment_lineage.lineage.zk.store import ZkStore


# Every command that changes a table takes one: it is kept in the table's history.
Reason = Annotated[
    str | None,
    typer.Option(
        "--reason",
        metavar="TEXT",
        help="Why: kept with this version in the table's history (lineage history), with who and when.",
    ),
]


# Exit codes, one per kind of failure, the same for every command (README).
EXIT_REFUSED = 1  # refused or failed: the message says why and what to do
EXIT_BAD_INPUT = 2  # bad input or usage
EXIT_NOT_FOUND = 3  # a table, entry, segment or version that does not exist (or is no longer kept)


def exit_code(exc: LineageError) -> int:
    if isinstance(exc, InvalidInputError):
        return EXIT_BAD_INPUT
    if isinstance(exc, NotFoundError):
        return EXIT_NOT_FOUND
    return EXIT_REFUSED


# The top-level commands as a newcomer meets them: try it, make a table, push
# and read, undo, look back, clean up; then Pinot's operations one by one, and
# the plumbing.
COMMAND_ORDER = (
    "demo",
    "table",
    "push",
    "read",
    "publish",
    "push-set",
    "cut",
    "rollback",
    "history",
    "segments",
    "entries",
    "retention",
    "mirror",
    "segment",
    "start-replace",
    "end-replace",
    "revert",
    "export",
    "zk",
    "acl",
    "config",
)


def not_py4j(record: logging.LogRecord) -> bool:
    """A log filter: none of py4j's own records (its tracebacks when Ctrl-C
    cuts a call to Spark's JVM short)."""
    return f"{os.sep}py4j{os.sep}" not in record.pathname


def _json_error(error: str, hint: str | None, code: int, kind: str) -> None:
    """An error as scripts read it (``--json``): one JSON object on stderr."""
    typer.echo(json.dumps({"error": error, "hint": hint, "code": code, "kind": kind}), err=True)


def _usage_report(exc: UsageError) -> None:
    """A usage error as one JSON object on stderr (``--json``): a command
    group given no command says which it takes (click's error there is
    the group's whole help text)."""
    command = exc.ctx.command_path if exc.ctx is not None else "lineage"
    message = exc.format_message()
    if isinstance(exc, NoArgsIsHelpError) and isinstance(exc.ctx.command, TyperGroup):
        names = exc.ctx.command.list_commands(exc.ctx)
        message = f"missing command: '{command}' takes one of: {', '.join(names)}"
    _json_error(message, f"'{command} --help' lists its options", exc.exit_code, "UsageError")


class LineageGroup(TyperGroup):
    """Turns the package's errors into one line on stderr and an exit code,
    and takes the global options after the command as well as before it."""

    def make_context(self, info_name: Any, args: list[str], parent: Any = None, **extra: Any) -> Any:
        name_metavars(self)
        wants_json = "--json" in args
        try:
            return super().make_context(info_name, args, parent, **extra)
        except UsageError as exc:  # a global option mistyped: with --json, one JSON object too
            if not wants_json:
                raise
            _usage_report(exc)
            raise typer.Exit(exc.exit_code) from None

    def list_commands(self, ctx: Any) -> list[str]:
        """The commands in the order a newcomer meets them (``--help``)."""
        names = list(super().list_commands(ctx))
        ranked = {name: i for i, name in enumerate(COMMAND_ORDER)}
        return sorted(names, key=lambda name: (ranked.get(name, len(ranked)), names.index(name)))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(self, ctx, list(args)))

    def invoke(self, ctx: Any) -> Any:
        with _fresh_run(), _quiet_logs(verbose=bool(ctx.params.get("verbose"))):
            try:
                return super().invoke(ctx)
            except UsageError as exc:
                if not ctx.params.get("as_json"):
                    raise  # click prints the usage and the error
                _usage_report(exc)  # scripts read one JSON object, a mistyped option included
                raise typer.Exit(exc.exit_code) from None
            except LineageError as exc:
                raise typer.Exit(_told_error(exc, ctx.params)) from None
            except KeyboardInterrupt as exc:
                raise typer.Exit(_told_interrupt(exc, ctx.params)) from None


@contextmanager
def _fresh_run() -> Iterator[None]:
    """A run with no invocation but the one its callback sets: none outlives its run."""
    run = _RUN.set(None)
    try:
        yield
    finally:
        _RUN.reset(run)


@contextmanager
def _quiet_logs(*, verbose: bool) -> Iterator[None]:
    """The run's logging, with kazoo and py4j silenced unless --verbose; as it was after."""
    # Kazoo's connection chatter ("Connection dropped" at every retry) only
    # with --verbose: a command that cannot reach ZooKeeper says so once.
    kazoo = logging.getLogger("kazoo")
    level = kazoo.level
    # And py4j's tracebacks when a Spark push is interrupted (Ctrl-C): the push says what it undid.
    py4j = logging.getLogger("py4j")
    py4j_level = py4j.level
    if not verbose:
        kazoo.setLevel(logging.CRITICAL)
        py4j.setLevel(logging.CRITICAL)
        logging.getLogger().addFilter(not_py4j)  # py4j also logs through the root logger
    try:
        yield
    finally:
        kazoo.setLevel(level)
        py4j.setLevel(py4j_level)
        logging.getLogger().removeFilter(not_py4j)


def _told_error(exc: LineageError, params: dict[str, Any]) -> int:
    """A package error told on stderr (one line and its hint, or with --json
    one JSON object; its traceback with --verbose); its exit code."""
    if params.get("verbose"):
        traceback.print_exc()
    code = exit_code(exc)
    if params.get("as_json"):  # scripts read one JSON object
        _json_error(exc.message, exc.remedy, code, type(exc).__name__)
    else:
        typer.echo(f"error: {exc.message}", err=True)
        if exc.remedy:
            typer.echo(f"hint: {exc.remedy}", err=True)
    return code


def _told_interrupt(exc: KeyboardInterrupt, params: dict[str, Any]) -> int:
    """An interrupt told in one line (what a push undid, when it says so); the
    shell's code for the signal (128 + its number)."""
    if params.get("verbose"):
        traceback.print_exc()
    signum = getattr(exc, "signum", int(signal.SIGINT))
    told = hasattr(exc, "cleanup") or hasattr(exc, "cleanups")  # a push (or set) says what it undid
    said = str(exc) if told else "interrupted"
    if params.get("as_json"):
        _json_error(said, None, 128 + signum, type(exc).__name__)
    else:
        typer.echo(f"error: {said}", err=True)
    return 128 + signum


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
    verbose: bool = False  # Spark logs as its default profile has them, too
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


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"lineage {version('segment-lineage')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            typer.echo("lineage (version unknown: the package is not installed)")
        raise typer.Exit(0)


@app.callback()
def main_options(
    zk: Annotated[
        str | None,
        typer.Option(
            "--zk",
            metavar="HOSTS",
            help="ZooKeeper hosts[/chroot]; default $LINEAGE_ZK, else the embedded server.",
        ),
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
    _version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    # --verbose is read by LineageGroup from the parsed options: it must work when this fails.
    if zk is not None and not zk.strip():  # an unset variable in a script, say: not "the default"
        raise InvalidInputError(
            "--zk is empty: give host:port[,host:port...][/chroot], or leave it out for "
            "$LINEAGE_ZK or the embedded server"
        )
    loaded, settings = load_settings(config, zk=zk)
    _RUN.set(Invocation(settings=settings, zk=zk, json=as_json, config=loaded, verbose=verbose))


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
    """A manager on ``store`` that claims roots on deep storage, and publishes
    each commit of a mirrored table to its mirror (best effort: a failure is
    a warning on stderr; the commit stands)."""
    import socket

    from segment_lineage.mirror.hook import publish_after

    # Under an identity, history names it (the ZooKeeper user ACLs checked),
    # not the operating system's login name, which anyone may set.
    ident = store.nodes.identity
    actor = f"{ident.partition(':')[0]}@{socket.gethostname()}" if ident else None
    made = LineageManager(store, claims=current().claims, actor=actor)
    made.after_commit = publish_after(lambda text: aside("warning", text))
    return made


@contextmanager
def manager() -> Iterator[LineageManager]:
    with connection() as store:
        yield manager_on(store)


def aside(kind: str, text: str) -> None:
    """A warning, note or problem beside a command's output, on stderr: with
    --json one JSON object (``{kind: text}``) on its own line, as an error is."""
    if current().json:
        typer.echo(json.dumps({kind: text}), err=True)
    else:
        typer.echo(f"{kind}: {text}", err=True)


def emit(data: Any, text: str) -> None:
    if current().json:
        typer.echo(json.dumps(data, indent=2, sort_keys=False))
    else:
        typer.echo(text)


def split_names(raw: str | None) -> list[str]:
    if raw is None or raw.strip() == "":
        return []
    return [part.strip() for part in raw.split(",")]
