"""The retention commands of the ``lineage`` CLI."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import sys
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from segment_lineage.cli.context import connection, current, manager_on
from segment_lineage.cli.progress import progress
from segment_lineage.cli.retention_health import health
from segment_lineage.lineage.config import BY_KEY
from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.core.periods import format_period, parse_period
from segment_lineage.lineage.core.views import human_size
from segment_lineage.retention.planner import DEFAULT_MIN_GRACE_MS, DEFAULT_ORPHAN_GRACE_MS

if TYPE_CHECKING:  # the executor needs pyarrow, which other commands do not load
    from segment_lineage.lineage.manager import LineageManager
    from segment_lineage.retention.executor import PassOptions
    from segment_lineage.retention.report import TableReport
    from segment_lineage.retention.schedule import Schedule

retention_app = typer.Typer(help="Reclaim replaced and abandoned segments.", no_args_is_help=True)

MIN_GRACE_HELP = "Queued files wait at least this long."
ORPHAN_GRACE_HELP = "Unreferenced files under a root are orphans once this old."
ORPHANS_HELP = "Scan each table's root for files nothing references."
MIN_GRACE = format_period(DEFAULT_MIN_GRACE_MS)
ORPHAN_GRACE = format_period(DEFAULT_ORPHAN_GRACE_MS)
# Shared by 'run' and 'daemon'; each also reads its variable (a config file may set it).
MinGrace = Annotated[
    str, typer.Option("--min-grace", envvar=BY_KEY["retention.min_grace"].env, help=MIN_GRACE_HELP)
]
Orphans = Annotated[
    bool, typer.Option("--orphans/--no-orphans", envvar=BY_KEY["retention.orphans"].env, help=ORPHANS_HELP)
]
OrphanGrace = Annotated[
    str, typer.Option("--orphan-grace", envvar=BY_KEY["retention.orphan_grace"].env, help=ORPHAN_GRACE_HELP)
]


def register(app: typer.Typer) -> None:
    app.add_typer(retention_app, name="retention")


def _say(message: str) -> None:
    typer.echo(message, err=True)


def _given(ctx: typer.Context, parameter: str, flag: str, key: str, value: str) -> str:
    """Where an option's value came from, as the user would look for it: the
    flag, the environment variable, or the config file and its key."""
    source = ctx.get_parameter_source(parameter)
    if source is None or source.name != "ENVIRONMENT":
        return f"{flag} {value}"
    setting = BY_KEY[key]
    loaded = current().config
    if setting.env in loaded.from_file:
        section, _, name = key.partition(".")
        return f"{name} = {value!r} (config file {loaded.path}, [{section}])"
    return f"{setting.env}={value} (environment)"


@retention_app.command("run")
def run(
    ctx: typer.Context,
    table: Annotated[str | None, typer.Option("--table", help="Only this table.")] = None,
    yes: Annotated[
        bool,
        typer.Option("--yes", help="Delete. Without --yes (or --force) the pass only prints its dry run."),
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help=f"Delete (as --yes), ignore the minimum grace of queued files, and allow a --min-grace "
            f"or --orphan-grace below {MIN_GRACE}. A large cut still needs --allow-large-cut.",
        ),
    ] = False,
    allow_large_cut: Annotated[
        bool,
        typer.Option(
            "--allow-large-cut",
            help="Let a pass condemn more than half of what readers see (time retention); nothing else. "
            "Only this flag lifts that guard (--force does not).",
        ),
    ] = False,
    min_grace: MinGrace = MIN_GRACE,
    orphans: Orphans = True,
    orphan_grace: OrphanGrace = ORPHAN_GRACE,
    as_json: Annotated[bool, typer.Option("--json", help="Print the reports as JSON.")] = False,
    summary: Annotated[
        bool,
        typer.Option("--summary", help="One line per table and a total: not the files a dry run lists."),
    ] = False,
) -> None:
    """One retention pass: plan, record the intent, delete files, clear.

    Destructive only when asked: without --yes or --force it prints its dry
    run and changes nothing. A --min-grace or --orphan-grace below 10m needs
    --force (a dry run excepted). The daemon needs neither: it runs unattended."""
    if table is not None:
        check_table_name(table)  # "" is a bad name, not every table
    options = _pass_options(
        ctx,
        yes=yes,
        dry_run=dry_run,
        force=force,
        allow_large_cut=allow_large_cut,
        min_grace=min_grace,
        orphans=orphans,
        orphan_grace=orphan_grace,
    )
    reports = _run_pass(table, options, as_json=as_json, summary=summary)
    _print_reports(reports, as_json, dry_run=options.dry_run, summary=summary)
    if options.dry_run and not dry_run:
        said = "dry run: nothing was deleted; run again with --yes to delete"
        # With --json (the command's or the global one), a note is a JSON object on its own line.
        _say(json.dumps({"note": said}) if as_json or current().json else said)
    if any(r.errors for r in reports):
        raise typer.Exit(1)


def _pass_options(
    ctx: typer.Context,
    *,
    yes: bool,
    dry_run: bool,
    force: bool,
    allow_large_cut: bool,
    min_grace: str,
    orphans: bool,
    orphan_grace: str,
) -> PassOptions:
    """The pass the flags ask for: a dry run unless --yes or --force (and no
    --dry-run); one that deletes without --force keeps the graces' floors."""
    # Imported here: the executor needs pyarrow, which other commands do not load.
    from segment_lineage.retention.executor import PassOptions

    grace_ms = parse_period(min_grace)
    orphan_grace_ms = parse_period(orphan_grace)
    confirmed = (yes or force) and not dry_run
    if confirmed and not force:
        _check_floors(ctx, min_grace, grace_ms, orphan_grace, orphan_grace_ms if orphans else None)
    return PassOptions(
        dry_run=not confirmed,
        force=force,
        allow_large_cut=allow_large_cut,
        min_grace_ms=grace_ms,
        orphans=orphans,
        orphan_grace_ms=orphan_grace_ms,
    )


def _run_pass(table: str | None, options: PassOptions, *, as_json: bool, summary: bool) -> list[TableReport]:
    """The pass over ``table`` (None: every table), fenced by this process's
    ZooKeeper session. Stopped by the fence, it prints what it did, then raises."""
    from segment_lineage.lineage.core.acl import RETENTION
    from segment_lineage.lineage.store.election import SessionCheck
    from segment_lineage.retention.deletes import session_fence
    from segment_lineage.retention.errors import FencedError
    from segment_lineage.retention.executor import run_pass

    doing = "retention dry run" if options.dry_run else "retention pass"
    with connection() as store, progress(doing) as say:  # ZooKeeper: its session fences the deletes
        m = manager_on(store)
        store.require_role(RETENTION, doing="a retention pass")
        if table is not None:
            m.table(table)  # not found is said as such, before any pass
        fence = session_fence(
            SessionCheck(store, env=m.env),
            "the ZooKeeper session was suspended or lost during the pass: deleting nothing more",
        )
        fenced = dataclasses.replace(options, fence=fence, progress=say)  # a later pass redoes what it leaves
        try:
            return run_pass(m, None if table is None else [table], fenced)
        except FencedError as exc:  # stopped: what it did before the stop is told, then why
            _print_reports(exc.done, as_json, dry_run=options.dry_run, summary=summary)
            raise


def _check_floors(
    ctx: typer.Context, min_grace: str, grace_ms: int, orphan_grace: str, orphan_grace_ms: int | None
) -> None:
    """A pass that deletes without --force keeps the floor of both graces
    (``orphan_grace_ms`` None: no orphan scan)."""
    if grace_ms < DEFAULT_MIN_GRACE_MS:
        raise InvalidInputError(
            f"{_given(ctx, 'min_grace', '--min-grace', 'retention.min_grace', min_grace)} is below the floor "
            f"of {MIN_GRACE}: files could go while a reader or a push still needs them; nothing was done",
            remedy="add --force if that is what you want, or look first with --dry-run",
        )
    if orphan_grace_ms is not None and orphan_grace_ms < DEFAULT_MIN_GRACE_MS:
        given = _given(ctx, "orphan_grace", "--orphan-grace", "retention.orphan_grace", orphan_grace)
        raise InvalidInputError(
            f"{given} is below the floor of {MIN_GRACE}: a file uploaded and not yet added "
            "('lineage segment add') could go; nothing was done",
            remedy="add --force if that is what you want, or look first with --dry-run",
        )


def _print_reports(reports: list[TableReport], as_json: bool, *, dry_run: bool, summary: bool) -> None:
    """The reports as JSON, or a line per table (a dry run's with what it
    would delete and keep, unless ``summary``), its warnings and errors, and
    with ``summary`` the total."""
    if as_json or current().json:
        typer.echo(json.dumps([r.as_dict() for r in reports], indent=2))
        for report in reports:  # as every error under --json is: one JSON object on stderr each
            for error in report.errors:
                typer.echo(json.dumps({"error": error, "table": report.table, "code": 1}), err=True)
        return
    for report in reports:
        _print_report(report, listed=dry_run and not summary)
    if summary:
        typer.echo(_total(reports, dry_run))


def _print_report(report: TableReport, *, listed: bool) -> None:
    """One table's line (``listed``: with each file it would delete and each
    thing it keeps), then its warnings and errors on stderr."""
    typer.echo(report.line())
    if listed:
        for item in report.planned:
            typer.echo(f"  delete  {item.reason.value:<17} {item.location}")
        for kept in report.kept_items:
            typer.echo(f"  keep    {kept.what}: {kept.why}")
    for why in report.leases_ignored:
        typer.echo(f"  warning: ignored {why}", err=True)
    for error in report.errors:
        typer.echo(f"  error: {error}", err=True)


def _total(reports: list[TableReport], dry_run: bool) -> str:
    """The pass over every table, in one line."""
    sums: Counter[str] = Counter()
    for r in reports:
        sums.update(
            files=len(r.planned) if dry_run else r.files_deleted,
            bytes=r.bytes_deleted,
            condemned=r.condemned,
            orphans=r.orphans,
            stray_bytes=r.stray_bytes,
            kept=r.kept,
            pending=r.pending_left,
            failed=1 if r.errors else 0,
        )
    verb = "would delete" if dry_run else "deleted"
    return (
        f"total: {len(reports)} table(s), {verb} {sums['files']} file(s) ({human_size(sums['bytes'])}), "
        f"{sums['condemned']} segment(s) condemned, "
        f"{sums['orphans']} orphan(s) seen "
        f"({human_size(sums['stray_bytes'])} unreferenced), "
        f"{sums['kept']} kept, "
        f"{sums['pending']} pending, "
        f"{sums['failed']} table(s) with errors"
    )


# The daemon's own options, declared once.
Cron = Annotated[
    str | None,
    typer.Option(
        "--cron",
        envvar=BY_KEY["retention.cron"].env,
        help='Run passes on a crontab schedule (UTC), e.g. "*/10 * * * *".',
    ),
]
Every = Annotated[
    str | None,
    typer.Option(
        "--interval",
        envvar=BY_KEY["retention.interval"].env,
        help="Run a pass this often, e.g. 10m (the first at once).",
    ),
]
Tables = Annotated[
    list[str] | None, typer.Option("--table", metavar="TABLE", help="Only these tables (repeatable).")
]
MetricsPort = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        envvar=BY_KEY["retention.metrics_port"].env,
        help="Serve /metrics and /healthz on this port.",
    ),
]
MetricsHost = Annotated[
    str,
    typer.Option(
        "--metrics-host",
        envvar=BY_KEY["retention.metrics_host"].env,
        help="Address to serve metrics on (0.0.0.0 in a container).",
    ),
]


@retention_app.command("daemon")
def daemon(
    ctx: typer.Context,
    cron: Cron = None,
    interval: Every = None,
    table: Tables = None,
    min_grace: MinGrace = MIN_GRACE,
    orphans: Orphans = True,
    orphan_grace: OrphanGrace = ORPHAN_GRACE,
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
) -> None:
    """Run retention passes on a schedule until SIGTERM/SIGINT. Several
    daemons may run and share the tables: each table is owned by one daemon
    at a time (elected in ZooKeeper), and a dead daemon's tables move to the
    others once its session expires."""
    from segment_lineage.lineage.core.acl import RETENTION
    from segment_lineage.lineage.store.election import Ownership
    from segment_lineage.retention.daemon import Daemon
    from segment_lineage.retention.executor import PassOptions

    schedule = _schedule(ctx, cron, interval)
    for name in table or ():
        check_table_name(name)  # a bad name refused here, not at every pass
    if metrics_port is not None and not 0 <= metrics_port <= 65535:
        raise InvalidInputError(f"invalid metrics port {metrics_port}: 0 to 65535")
    options = PassOptions(
        min_grace_ms=parse_period(min_grace),
        orphans=orphans,
        orphan_grace_ms=parse_period(orphan_grace),
    )
    _log_to_stderr()
    identity = f"{socket.gethostname()}:{os.getpid()}"
    with connection() as store:  # ZooKeeper: the daemons elect their leader there
        m = manager_on(store)
        listener = _connection_line(store.session.timeout_s)
        store.client.add_listener(listener)
        try:
            store.require_role(RETENTION, doing="the retention daemon")
            _warn_missing(m, table)
            Daemon(m, Ownership(store, identity, env=m.env), schedule, options, table).serve(
                metrics_host, metrics_port
            )
        finally:  # the session ends with the process: no line for that
            store.client.remove_listener(listener)


def _log_to_stderr() -> None:
    """The daemon's log lines, timed, on stderr."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # Not kazoo's lines (a warning at every reconnect attempt): one line per change of state.
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)


def _warn_missing(m: LineageManager, tables: list[str] | None) -> None:
    """The tables named that do not exist yet, logged: a daemon may well start
    before the tables it keeps, so they are said, not refused."""
    missing = sorted(set(tables or ()) - set(m.list_tables()))
    if missing:
        logging.getLogger("lineage.retention").warning(
            "no table %s yet: cleaned once created (a misspelled --table is never cleaned)",
            ", ".join(repr(n) for n in missing),
        )


def _schedule(ctx: typer.Context, cron: str | None, interval: str | None) -> Schedule:
    """The daemon's schedule: a cron or an interval; given both, the one
    given as a flag wins over the file or the environment."""
    from segment_lineage.retention.schedule import Schedule

    if cron is not None and interval is not None:
        given = {name: ctx.get_parameter_source(name) for name in ("cron", "interval")}
        flagged = [n for n, source in given.items() if source is not None and source.name == "COMMANDLINE"]
        if len(flagged) == 1:
            cron, interval = (cron, None) if flagged == ["cron"] else (None, interval)
    return Schedule.parse(cron, interval)


def _connection_line(session_timeout_s: float) -> Callable[[str], None]:
    """A listener logging one line when the ZooKeeper connection changes state."""
    from kazoo.client import KazooState

    log = logging.getLogger("lineage.retention")
    lines = {
        KazooState.SUSPENDED: (
            logging.WARNING,
            f"ZooKeeper connection lost: reconnecting; the session (and the tables owned) lasts "
            f"{session_timeout_s:g}s without it, and no file is deleted meanwhile",
        ),
        KazooState.LOST: (
            logging.WARNING,
            "ZooKeeper session expired: the tables it owned go to the other daemons; "
            "standing for them again once ZooKeeper answers",
        ),
        KazooState.CONNECTED: (logging.INFO, "ZooKeeper connection back"),
    }
    last: list[str] = [KazooState.CONNECTED]

    def listener(state: str) -> None:
        if state != last[0]:
            last[0] = state
            level, line = lines.get(state, (logging.INFO, f"ZooKeeper connection: {state}"))
            log.log(level, "%s", line)

    return listener


retention_app.command("health")(health)
