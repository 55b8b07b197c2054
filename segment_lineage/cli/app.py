"""The ``lineage`` command line. Logic lives elsewhere; this module parses and prints.

Exit codes: 0 success, 1 an operation was refused (the message says why and
what to do), 2 usage errors and bad input. Tracebacks only with --verbose.
"""

from __future__ import annotations

import dataclasses
import json
import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from segment_lineage.lineage.codec.export import to_pinot_znrecord
from segment_lineage.lineage.config import Loaded, effective
from segment_lineage.lineage.config import load as load_config
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import InvalidInputError, LineageError, RefusedError
from segment_lineage.lineage.core.graph import history_svg
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.core.periods import parse_time
from segment_lineage.lineage.core.views import (
    entry_view,
    history_view,
    iso,
    render_pairs,
    render_table,
    segment_view,
    table_view,
)
from segment_lineage.lineage.core.visibility import visible_names, visible_segments
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claims import ClaimFiles
from segment_lineage.lineage.storage.files import NO_CHECK_HINT, SegmentFiles, checked_segments


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
zk_app = typer.Typer(help="Run the embedded ZooKeeper server on loopback.", no_args_is_help=True)
table_app = typer.Typer(help="Create, list, show and drop tables.", no_args_is_help=True)
segment_app = typer.Typer(help="Register, list and delete segments.", no_args_is_help=True)
app.add_typer(zk_app, name="zk")
app.add_typer(table_app, name="table")
acl_app = typer.Typer(
    help="Least-privilege ZooKeeper ACLs for pushers, retention and readers.", no_args_is_help=True
)
app.add_typer(segment_app, name="segment")
app.add_typer(acl_app, name="acl")
config_app = typer.Typer(
    help="The effective configuration: file, environment and flags.", no_args_is_help=True
)
app.add_typer(config_app, name="config")


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


# ---- zk ---------------------------------------------------------------------


@zk_app.command("start")
def zk_start(
    heap: Annotated[
        str | None,
        typer.Option(
            "--heap",
            envvar="LINEAGE_ZK_HEAP",
            help="The server's Java heap, e.g. 512m or 2g (default: an eighth of the machine's "
            "memory, 256m to 2g). A running server keeps its heap: stop it first to change it.",
        ),
    ] = None,
) -> None:
    """Start the embedded ZooKeeper server (idempotent)."""
    from segment_lineage.lineage.zk.server import embedded_server, parse_heap

    server = embedded_server(parse_heap(heap) if heap else None)
    was_running = server.pid() is not None
    server.start()
    state = "already running" if was_running else "started"
    heap_mb = server.running_heap_mb()
    emit(
        {
            "state": state,
            "hosts": server.hosts,
            "pid": server.pid(),
            "heap_mb": heap_mb,
            "directory": str(server.directory),
        },
        f"ZooKeeper {state} at {server.hosts} (pid {server.pid()}, heap {heap_mb or '?'} MB, "
        f"data in {server.directory})",
    )


@zk_app.command("stop")
def zk_stop() -> None:
    """Stop the embedded ZooKeeper server."""
    from segment_lineage.lineage.zk.server import embedded_server

    server = embedded_server()
    stopped = server.stop()
    emit({"stopped": stopped}, "ZooKeeper stopped" if stopped else "ZooKeeper was not running")


@zk_app.command("status")
def zk_status() -> None:
    """Say whether the embedded ZooKeeper server is running."""
    from segment_lineage.lineage.zk.server import embedded_server

    server = embedded_server()
    serving = server.is_serving()
    heap_mb = server.running_heap_mb()
    data = {
        "running": serving,
        "hosts": server.hosts,
        "pid": server.pid(),
        "heap_mb": heap_mb,
        "directory": str(server.directory),
    }
    emit(
        data,
        f"ZooKeeper {'running' if serving else 'not running'} at {server.hosts}"
        + (f" (pid {server.pid()}, heap {heap_mb} MB)" if server.pid() and heap_mb else "")
        + (f" (pid {server.pid()})" if server.pid() and not heap_mb else ""),
    )
    if not serving:
        raise typer.Exit(1)


# ---- tables -------------------------------------------------------------------


@table_app.command("create")
def table_create(
    name: Annotated[str, typer.Argument(help="Table name.")],
    root: Annotated[
        str, typer.Option("--root", help="Deep-store root: a path, s3://, gs:// or hdfs:// URI.")
    ],
    table_type: Annotated[str, typer.Option("--type", help="REFRESH or APPEND.")] = "REFRESH",
    time_column: Annotated[
        str | None, typer.Option("--time-column", help="Time column (APPEND tables).")
    ] = None,
    time_unit: Annotated[
        str | None,
        typer.Option(
            "--time-unit",
            help="Unit of an integer time column: s, ms, us or ns (inferred per push when not given).",
        ),
    ] = None,
    replaced_retention: Annotated[
        str | None,
        typer.Option(
            "--replaced-retention", help="Keep replaced segments this long (1d REFRESH, 4h APPEND)."
        ),
    ] = None,
    entry_retention: Annotated[
        str | None,
        typer.Option("--entry-retention", help="Reap stale or reverted entries after this (1d)."),
    ] = None,
    max_snapshots: Annotated[
        int, typer.Option("--max-snapshots", help="Snapshots kept by REFRESH tables.")
    ] = 2,
    time_retention: Annotated[
        str | None,
        typer.Option("--time-retention", help="APPEND tables: drop segments whose data is older than this."),
    ] = None,
    exclusive_delete: Annotated[
        bool,
        typer.Option(
            "--exclusive-delete/--no-exclusive-delete",
            help="Refuse deleting lineage-locked segments.",
        ),
    ] = True,
) -> None:
    """Create a table."""
    config = TableConfig.build(
        name,
        root,
        table_type,
        time_column=time_column,
        time_unit=time_unit,
        replaced_segments_retention=replaced_retention,
        lineage_entry_cleanup_retention=entry_retention,
        max_snapshots=max_snapshots,
        exclusive_delete=exclusive_delete,
        time_retention=time_retention,
    )
    with manager() as m:
        state = m.create_table(config)
    view = table_view(state)
    emit(view, f"created table {name}\n" + render_pairs(view))


@table_app.command("list")
def table_list() -> None:
    """List tables. A table whose metadata cannot be decoded is named on
    stderr with its error (and left out of the list); the others are listed."""
    with manager() as m:
        listing = m.table_listing()
    names = list(listing.readable)
    for table, problem in listing.unreadable.items():
        typer.echo(f"warning: table {table!r} is unreadable: {problem}", err=True)
    emit(names, "\n".join(names) if names else "(no tables)")


@table_app.command("claim")
def table_claim(
    names: Annotated[list[str] | None, typer.Argument(help="Tables whose roots to claim.")] = None,
    all_tables: Annotated[bool, typer.Option("--all", help="Every table of this store.")] = False,
) -> None:
    """Write the claim marker under each table's root, naming this store and the
    table. Retention deletes nothing under an unclaimed root: run this once for
    tables created before roots were claimed. Refused for a root claimed by
    another store or another table."""
    if bool(names) == all_tables:
        raise InvalidInputError("name the tables to claim, or give --all")
    with manager() as m:
        tables = m.list_tables() if all_tables else list(names or [])
        claimed = {table: m.claim_root(table) for table in tables}
    emit(
        claimed,
        "\n".join(f"claimed {root} for table {table}" for table, root in claimed.items()) or "(no tables)",
    )


@table_app.command("show")
def table_show(name: str) -> None:
    """Show a table's settings and counts (and the commit holding its floor, if any)."""
    with manager() as m:
        snap = m.store.read(check_table_name(name))
        view = table_view(snap.state)
        floor = snap.floor
        if floor is not None and floor.holder is not None and floor.until_ms > m.store.now_ms():
            view["floor"] = f"held by commit {floor.holder} until {iso(floor.until_ms)}"
    emit(view, render_pairs(view))


@table_app.command("drop")
def table_drop(
    name: str,
    force: Annotated[
        bool, typer.Option("--force", help="Drop even with segments (their files stay).")
    ] = False,
    reason: Annotated[str | None, typer.Option("--reason")] = None,
) -> None:
    """Drop a table's metadata (refused while it has segments, unless --force)."""
    with manager() as m:
        m.drop_table(name, force=force, reason=reason)
    emit({"dropped": name}, f"dropped table {name}")


# ---- segments -------------------------------------------------------------------


def _segments_from_file(path: Path) -> list[Segment]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: bad JSON, or bytes that are not UTF-8
        raise InvalidInputError(f"cannot read segment batch {path}: {exc}") from None
    except RecursionError:
        raise InvalidInputError(f"cannot read segment batch {path}: nested too deeply") from None
    if not isinstance(doc, list) or not all(isinstance(d, dict) for d in doc):
        raise InvalidInputError(f"{path}: expected a JSON list of segment objects")
    out = []
    for d in doc:
        if "name" not in d:
            raise InvalidInputError(f"{path}: every segment needs a 'name'")
        known = {"name", "location", "rows", "bytes", "checksum", "min_time", "max_time"}
        unknown = set(d) - known
        if unknown:
            raise InvalidInputError(f"{path}: unknown field(s) {', '.join(sorted(unknown))}")
        out.append(
            Segment(
                name=d["name"],
                location=d.get("location") or f"{d['name']}.parquet",
                rows=d.get("rows", 0),
                size_bytes=d.get("bytes", 0),
                checksum=d.get("checksum", ""),
                min_time=d.get("min_time"),
                max_time=d.get("max_time"),
            )
        )
    return out


def _with_checked_files(
    m: LineageManager, table: str, segments: list[Segment], entry: str | None
) -> list[Segment]:
    """The batch with each file looked at (see segment_lineage.lineage.storage.files). What the
    commit would refuse (names, locations, conflicts) is refused first,
    before any file system call."""
    state = m.table(table)
    transitions.register_segments(state, segments, 0, entry)  # pure: only its refusals matter here
    if OPTIONS.files is None:
        raise RefusedError("this command has no access to deep storage to check files", remedy=NO_CHECK_HINT)
    root = state.config.root
    return checked_segments(table, root, segments, OPTIONS.files.sizes(root, [s.location for s in segments]))


@segment_app.command("add")
def segment_add(
    table: str,
    names: Annotated[list[str] | None, typer.Argument(help="Segment names (location NAME.parquet).")] = None,
    batch: Annotated[Path | None, typer.Option("--file", help="JSON list of segments with metadata.")] = None,
    rows: Annotated[int, typer.Option("--rows", help="Rows in each named segment.")] = 0,
    size: Annotated[int, typer.Option("--bytes", help="Bytes of each named segment.")] = 0,
    entry: Annotated[str | None, typer.Option("--entry", help="Bind to this IN_PROGRESS entry.")] = None,
    reason: Annotated[str | None, typer.Option("--reason")] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="Check that each file exists under the table's root and has the size given (a size "
            "not given is taken from the file). --no-check registers without looking: for object "
            "stores where a look per file costs too much.",
        ),
    ] = True,
) -> None:
    """Register a batch of segments in one commit. Refused, with nothing
    registered, when a file is missing or of another size (unless --no-check)."""
    segments = [Segment(n, f"{n}.parquet", rows=rows, size_bytes=size) for n in names or []]
    if batch is not None:
        segments += _segments_from_file(batch)
    if not segments:
        raise InvalidInputError("name at least one segment, or pass --file")
    with manager() as m:
        if check:
            segments = _with_checked_files(m, table, segments, entry)
        done = m.register_segments(table, segments, entry_id=entry, reason=reason)
    emit(
        {"registered": [s.name for s in segments], "version": done.state.version},
        f"registered {len(segments)} segment(s) in {table} (version {done.state.version})",
    )


@segment_app.command("list")
def segment_list(table: str) -> None:
    """List every registered segment, visible or hidden."""
    with manager() as m:
        state = m.table(table)
    visible = visible_names(state)
    rows = [segment_view(s, s.name in visible) for s in sorted(state.segments.values(), key=lambda s: s.name)]
    emit(rows, render_table(rows, ["name", "visible", "rows", "bytes", "location", "entry"]))


@segment_app.command("delete")
def segment_delete(
    table: str,
    names: Annotated[list[str], typer.Argument(help="Segment names.")],
    reason: Annotated[str | None, typer.Option("--reason")] = None,
) -> None:
    """Unregister segments; retention deletes their files."""
    with manager() as m:
        done = m.delete_segments(table, names, reason=reason)
    emit(
        {"deleted": names, "version": done.state.version},
        f"deleted {len(names)} segment(s) from {table}; files queued for retention",
    )


AS_OF_HELP = "A table version (a number), or a time (ISO-8601, or ms:EPOCH_MS): what readers saw then."


@app.command("segments")
def segments(
    table: str,
    as_of: Annotated[str | None, typer.Option("--as-of", help=AS_OF_HELP)] = None,
) -> None:
    """List the visible segments: what a reader sees now (or saw then)."""
    with manager() as m:
        if as_of is None:
            state = m.table(table)
        else:  # a past version is listed only while its files can still be read
            lease = m.pin_readable(table, m.resolve_as_of(table, as_of))
            m.store.release(lease)
            state = lease.state
    visible = visible_segments(state)
    rows = [segment_view(s) for s in visible]
    emit(
        rows,
        render_table(rows, ["name", "rows", "bytes", "location", "entry"])
        + f"\n{len(rows)} visible segment(s), {sum(s.rows for s in visible)} rows, version {state.version}",
    )


# ---- lineage ------------------------------------------------------------------------


@app.command("start-replace")
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
    reason: Annotated[str | None, typer.Option("--reason")] = None,
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


@app.command("end-replace")
def end_replace(
    table: str,
    entry: str,
    subset: Annotated[
        str | None, typer.Option("--to-subset", help="Complete with only these of segmentsTo.")
    ] = None,
    reason: Annotated[str | None, typer.Option("--reason")] = None,
) -> None:
    """Complete a replacement: the new segments appear and the old ones hide, at once."""
    with manager() as m:
        done = m.end_replace(table, entry, None if subset is None else split_names(subset), reason=reason)
    word = "completed" if done.applied else "was already completed"
    emit(
        {"entry": entry, "applied": done.applied, "version": done.state.version},
        f"entry {entry} {word}",
    )


@app.command("revert")
def revert(
    table: str,
    entry: str,
    force: Annotated[bool, typer.Option("--force", help="Revert an IN_PROGRESS entry.")] = False,
    reason: Annotated[str | None, typer.Option("--reason")] = None,
) -> None:
    """Revert a replacement (Pinot's rules): the replaced segments show again."""
    with manager() as m:
        done = m.revert_replace(table, entry, force=force, reason=reason)
    emit({"entry": entry, "version": done.state.version}, f"entry {entry} reverted")


@app.command("rollback")
def rollback(
    table: str,
    to_version: Annotated[
        int | None, typer.Option("--to-version", help="Roll back (or forward) to it.")
    ] = None,
    to_time: Annotated[
        str | None, typer.Option("--to-time", help="To the version current then (ISO-8601 or epoch ms).")
    ] = None,
    entry: Annotated[
        str | None, typer.Option("--entry", help="Undo this push (and every push completed after it).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would change; change nothing.")
    ] = False,
    reason: Annotated[str | None, typer.Option("--reason")] = None,
) -> None:
    """Make the table look as it did at another version, in one commit.

    With no target, undo the newest completed push. Nothing is deleted: roll
    forward to a later version to undo a rollback."""
    with manager() as m:
        target = m.resolve_version(
            table, version=to_version, at_ms=None if to_time is None else parse_time(to_time), entry_id=entry
        )
        plan = m.rollback(table, target, dry_run=dry_run, reason=reason)
    data = dataclasses.asdict(plan)
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
    emit(data, "\n".join(lines))


@app.command("entries")
def entries(table: str) -> None:
    """List a table's lineage entries, oldest first."""
    with manager() as m:
        rows = [entry_view(e) for e in m.entries(table)]
    emit(
        rows,
        render_table(rows, ["id", "state", "from", "to", "timestamp", "actor", "reason"])
        if rows
        else "(no lineage entries)",
    )


@app.command("history")
def history(
    table: str,
    limit: Annotated[int | None, typer.Option("--limit", help="Newest N versions.")] = None,
    graph: Annotated[
        Path | None, typer.Option("--graph", help="Also draw the versions and pushes as SVG into this file.")
    ] = None,
) -> None:
    """The table's versions, newest first: operation, counts, who and why."""
    if graph is not None and graph.suffix.lower() != ".svg":
        raise InvalidInputError(f"invalid graph file {str(graph)!r}: the picture is SVG, name it *.svg")
    with manager() as m:
        records = m.history(table, limit)
        if graph is not None:
            picture = history_svg(records, m.table(table), m.store.versions(table))
        rows = [history_view(h) for h in records]
    if graph is not None:
        try:
            graph.write_text(picture)
        except OSError as exc:
            raise InvalidInputError(f"cannot write {str(graph)!r}: {exc.strerror}") from None
        typer.echo(f"wrote {graph}", err=True)
    emit(
        rows,
        render_table(
            rows, ["version", "at", "operation", "entry", "segments", "rows", "actor", "reason", "cleaned"]
        ),
    )


@app.command("export")
def export(
    table: str,
    fmt: Annotated[str, typer.Option("--format", help="Export format: pinot.")] = "pinot",
) -> None:
    """Export the lineage as Pinot's ZNRecord JSON."""
    if fmt != "pinot":
        raise InvalidInputError(f"unknown export format {fmt!r}: use pinot")
    with manager() as m:
        record = to_pinot_znrecord(m.table(table))
    typer.echo(json.dumps(record, indent=2))


# ---- acl --------------------------------------------------------------------


@acl_app.command("digest")
def acl_digest(
    user: Annotated[str, typer.Argument(help="The identity's user name.")],
) -> None:
    """Print USER's digest id for 'acl apply'. The password is read from standard input (or asked for)."""
    import sys

    from segment_lineage.lineage.core.acl import check_digest_id, digest_id

    if ":" in user or not user.strip():
        raise InvalidInputError(f"invalid user name {user!r}: give a name without ':'")
    if sys.stdin.isatty():
        password = typer.prompt(f"password of {user}", hide_input=True, confirmation_prompt=True)
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise InvalidInputError("empty password: give the identity's password on standard input")
    typer.echo(check_digest_id(digest_id(user, password)))


IdsOption = Annotated[
    list[str] | None,
    typer.Option(metavar="DIGEST_ID", help="A digest id (user:base64, from 'acl digest'); repeatable."),
]


@acl_app.command("apply")
def acl_apply(
    pusher: IdsOption = None,
    retention: IdsOption = None,
    reader: IdsOption = None,
    admin: Annotated[
        list[str] | None,
        typer.Option(metavar="DIGEST_ID", help="Another admin digest id, beside the caller; repeatable."),
    ] = None,
) -> None:
    """Put a role policy in force: ACLs on every node, and on every node created from now on.

    Run as an admin identity (LINEAGE_ZK_AUTH=user:password); that identity becomes an admin.
    Stores opened before keep their ACLs until they reopen: run it again then.
    """
    from segment_lineage.lineage.core.acl import AclPolicy, check_digest_id
    from segment_lineage.lineage.zk.acl import apply_policy
    from segment_lineage.lineage.zk.connect import open_store

    pushers, retentions, readers = pusher or [], retention or [], reader or []
    for ident in (*pushers, *retentions, *readers, *(admin or [])):
        check_digest_id(ident)  # before connecting
    store = open_store(OPTIONS.zk)
    try:
        if store.identity is None:
            raise InvalidInputError(
                "'lineage acl apply' needs LINEAGE_ZK_AUTH=user:password: the admin identity"
            )
        policy = AclPolicy.build([store.identity, *(admin or [])], pushers, retentions, readers)
        report = apply_policy(store, policy)
    finally:
        store.close()
    emit(
        {"nodes": report.nodes, "created": list(report.created), "left_alone": list(report.strangers)},
        f"ACL policy in force: {report.nodes} node(s) set, {len(report.created)} folder(s) created"
        + (f", {len(report.strangers)} unknown node(s) left alone" if report.strangers else ""),
    )


@acl_app.command("show")
def acl_show() -> None:
    """Show the ACL policy in force and this identity's role."""
    from segment_lineage.lineage.core.acl import ADMIN_ROLE, RIGHTS, ROLES, Place, rights_text
    from segment_lineage.lineage.zk.connect import open_store

    store = open_store(OPTIONS.zk)
    try:
        policy = store.policy()
        role = store.role()
        identity = store.identity
    finally:
        store.close()
    user = identity.partition(":")[0] if identity else None
    if policy is None:
        mode = "one digest identity owns every node" if identity else "nodes are open to every client"
        emit({"policy": None, "identity": user}, f"no ACL policy: {mode}")
        return
    roles = {r: list(policy.ids(r)) for r in (ADMIN_ROLE, *ROLES)}
    rights = {place.value: {r: rights_text(RIGHTS[place][r]) for r in ROLES} for place in Place}
    lines = [f"this identity: {user or 'anonymous'} ({role or 'no role'})", ""]
    lines += [f"{r}: {', '.join(ids) or '-'}" for r, ids in roles.items()]
    rows = [{"place": p, **v} for p, v in rights.items()]
    lines += ["", render_table(rows, ["place", *ROLES])]
    emit({"policy": roles, "identity": user, "role": role, "rights": rights}, "\n".join(lines))


# ---- config -----------------------------------------------------------------


@config_app.command("show")
def config_show() -> None:
    """Print every setting's effective value and its source (flag, env, file, default); secrets masked."""
    loaded = OPTIONS.config or Loaded(None, frozenset())
    rows = [
        {
            "key": e.setting.key,
            "value": e.shown(),
            "source": e.source,
            "env": e.setting.env,
        }
        for e in effective(loaded, os.environ, {"--zk": OPTIONS.zk})
    ]
    file_line = f"config file: {loaded.path}" if loaded.path else "config file: none"
    text = (
        file_line
        + "\n\n"
        + render_table(
            [{**r, "value": "-" if r["value"] is None else r["value"]} for r in rows],
            ["key", "value", "source", "env"],
        )
    )
    emit({"file": str(loaded.path) if loaded.path else None, "settings": rows}, text)
