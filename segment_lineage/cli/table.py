"""``lineage table``: create, list, show, claim and drop tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from segment_lineage.cli.context import Reason, aside, emit, manager
from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.lineage.core.model import TableConfig, TableState
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.core.settings import SettingsChange
from segment_lineage.lineage.core.views import human_size, iso, render_pairs, table_view

if TYPE_CHECKING:
    from segment_lineage.lineage.core.schema import Schema
    from segment_lineage.lineage.manager import LineageManager
    from segment_lineage.mirror.admin import Removal

table_app = typer.Typer(help="Create, list, show and drop tables.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(table_app, name="table")


# table create's options, declared once.
Name = Annotated[str, typer.Argument(help="Table name.")]
Root = Annotated[str, typer.Option("--root", help="Deep-store root: a path, s3://, gs:// or hdfs:// URI.")]
TableKind = Annotated[str, typer.Option("--type", help="REFRESH or APPEND.")]
TimeColumn = Annotated[str | None, typer.Option("--time-column", help="Time column (APPEND tables).")]
TimeUnitOption = Annotated[
    str | None,
    typer.Option(
        "--time-unit",
        help="Unit of an integer time column: s, ms, us or ns (inferred per push when not given).",
    ),
]
ReplacedRetention = Annotated[
    str | None,
    typer.Option("--replaced-retention", help="Keep replaced segments this long (1d REFRESH, 4h APPEND)."),
]
EntryRetention = Annotated[
    str | None,
    typer.Option("--entry-retention", help="Reap stale or reverted entries after this (1d)."),
]
MaxSnapshots = Annotated[int, typer.Option("--max-snapshots", help="Snapshots kept by REFRESH tables.")]
TimeRetention = Annotated[
    str | None,
    typer.Option("--time-retention", help="APPEND tables: drop segments whose data is older than this."),
]
ExclusiveDelete = Annotated[
    bool,
    typer.Option(
        "--exclusive-delete/--no-exclusive-delete",
        help="Refuse deleting lineage-locked segments.",
    ),
]
VersionsKept = Annotated[
    int | None,
    typer.Option("--versions-kept", help="Past versions kept readable (time travel, rollback); default 64."),
]
ExistingFiles = Annotated[
    bool,
    typer.Option(
        "--existing-files",
        help="Create it over a root that already holds files: retention then deletes, a day after "
        "first seeing them, those no segment references.",
    ),
]
TimeGranularityOption = Annotated[
    str | None,
    typer.Option(
        "--time-granularity",
        help="hour, day or month: pushes split their output so no segment straddles one (UTC).",
    ),
]
Mirror = Annotated[
    str | None,
    typer.Option(
        "--mirror",
        help="delta: publish every version as a Delta Lake version under the root, for other engines "
        "(docs/engines.md).",
    ),
]
MirrorRetention = Annotated[
    str | None,
    typer.Option(
        "--mirror-retention", help="How far back engines may time-travel in the mirror (default 7d)."
    ),
]


@table_app.command("create")
def table_create(
    name: Name,
    root: Root,
    table_type: TableKind = "REFRESH",
    time_column: TimeColumn = None,
    time_unit: TimeUnitOption = None,
    replaced_retention: ReplacedRetention = None,
    entry_retention: EntryRetention = None,
    max_snapshots: MaxSnapshots = 2,
    time_retention: TimeRetention = None,
    exclusive_delete: ExclusiveDelete = True,
    versions_kept: VersionsKept = None,
    existing_files: ExistingFiles = False,
    time_granularity: TimeGranularityOption = None,
    mirror: Mirror = None,
    mirror_retention: MirrorRetention = None,
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
        versions_kept=versions_kept,
        time_granularity=time_granularity,
        mirror=mirror,
        mirror_retention=mirror_retention,
    )
    with manager() as m:
        if config.mirror is not None:
            from segment_lineage.mirror.publisher import check_root

            check_root(config.root, fresh=True)
        state = m.create_table(config, existing_files=existing_files)
    view = table_view(state)
    emit(view, f"created table {name}\n" + render_pairs(view))
    _grace_note(state.config)


@table_app.command("alter")
def table_alter(
    name: Annotated[str, typer.Argument(help="Table name.")],
    replaced_retention: Annotated[
        str | None, typer.Option("--replaced-retention", help="Keep replaced segments this long.")
    ] = None,
    entry_retention: Annotated[
        str | None, typer.Option("--entry-retention", help="Reap stale or reverted entries after this.")
    ] = None,
    max_snapshots: Annotated[
        int | None, typer.Option("--max-snapshots", help="Snapshots kept by REFRESH tables.")
    ] = None,
    time_retention: Annotated[
        str | None,
        typer.Option("--time-retention", help="APPEND tables: drop data older than this; 'none': never."),
    ] = None,
    versions_kept: Annotated[
        str | None,
        typer.Option("--versions-kept", help="Past versions kept readable; 'none': the default (64)."),
    ] = None,
    time_granularity: Annotated[
        str | None,
        typer.Option("--time-granularity", help="hour, day or month; 'none': pushes do not split by time."),
    ] = None,
    time_unit: Annotated[
        str | None,
        typer.Option(
            "--time-unit", help="Unit of an integer time column (s, ms, us, ns): while none is set."
        ),
    ] = None,
    exclusive_delete: Annotated[
        bool | None,
        typer.Option(
            "--exclusive-delete/--no-exclusive-delete", help="Refuse deleting lineage-locked segments."
        ),
    ] = None,
    mirror_retention: Annotated[
        str | None,
        typer.Option(
            "--mirror-retention", help="How far back engines may time-travel in the mirror; 'none': 7d."
        ),
    ] = None,
    reason: Reason = None,
) -> None:
    """Change a table's settings (one commit, recorded in history with the old
    and new values). Its name, root, type and time column stay."""
    kept: int | str | None = versions_kept
    if versions_kept is not None and versions_kept.strip().isdigit():
        kept = int(versions_kept)
    change = SettingsChange(
        replaced_segments_retention=replaced_retention,
        lineage_entry_cleanup_retention=entry_retention,
        max_snapshots=max_snapshots,
        exclusive_delete=exclusive_delete,
        time_retention=time_retention,
        versions_kept=kept,
        time_granularity=time_granularity,
        time_unit=time_unit,
        mirror_retention=mirror_retention,
    )
    with manager() as m:
        done = m.alter_table(name, change, reason)
        view = table_view(done.state)
    changed = done.change.detail.settings if done.change.detail is not None else None
    view["changed"] = changed
    emit(view, f"altered table {name}: {changed}" if changed else f"table {name} already has these settings")
    if changed:
        _grace_note(done.state.config)


def _grace_note(config: TableConfig) -> None:
    """Say on stderr when a retention is shorter than the minimum grace of a
    retention pass: files then may go later than the setting alone suggests."""
    from segment_lineage.lineage.core.periods import format_period
    from segment_lineage.retention.planner import DEFAULT_MIN_GRACE_MS

    for what, ms in (
        ("replaced segments", config.replaced_segments_retention_ms),
        ("a reverted push's files", config.lineage_entry_cleanup_retention_ms),
    ):
        if ms < DEFAULT_MIN_GRACE_MS:
            aside(
                "note",
                f"{what} become deletable {format_period(ms)} after they go, but a retention pass "
                f"keeps any file written or queued less than its minimum grace "
                f"({format_period(DEFAULT_MIN_GRACE_MS)}; lower only with --force) ago",
            )


@table_app.command("list")
def table_list() -> None:
    """List tables. A table whose metadata cannot be decoded is named on
    stderr with its error (and left out of the list); the others are listed."""
    with manager() as m:
        listing = m.table_listing()
    names = list(listing.readable)
    for table, problem in listing.unreadable.items():
        aside("warning", f"table {table!r} is unreadable: {problem}")
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
        snap = m.snapshot(check_table_name(name))
        view = table_view(snap.state)
        floor = snap.floor
        if floor is not None and floor.holder is not None and floor.until_ms > m.now_ms():
            view["floor"] = f"held by commit {floor.holder} until {iso(floor.until_ms)}"
    schema = snap.state.config.schema
    shown = view
    if schema is not None:
        view, shown = _with_columns(view, schema)
    emit(view, render_pairs(shown))


def _with_columns(view: dict[str, Any], schema: Schema) -> tuple[dict[str, Any], dict[str, Any]]:
    """``view`` with the table's columns: for --json, each with the Arrow type
    its files hold; for the text, each with its type (and the Arrow type
    when that is named otherwise)."""
    from segment_lineage.lineage.storage.arrow_types import to_arrow

    files = [str(to_arrow(f.type)) for f in schema]  # the types its files hold, as Arrow names them
    view = {**view, "arrow_schema": [f"{f.name}: {t}" for f, t in zip(schema, files, strict=True)]}
    lines = [
        f"{f.name}: {f.type}" + ("" if t == str(f.type) else f"  ({t})")
        for f, t in zip(schema, files, strict=True)
    ]
    shown = {**view, "schema": lines}
    del shown["arrow_schema"]
    return view, shown


@table_app.command("drop")
def table_drop(
    name: str,
    force: Annotated[
        bool, typer.Option("--force", help="Drop even with segments (their files stay).")
    ] = False,
    purge: Annotated[
        bool,
        typer.Option(
            "--purge",
            help="Reclaim its files too: all are queued for retention, which deletes them with its "
            "usual care (readers' pins, the minimum grace) and then drops the table.",
        ),
    ] = False,
    reason: Reason = None,
) -> None:
    """Drop a table's metadata (refused while it has segments, unless --force or --purge)."""
    from segment_lineage.mirror.admin import drop_table

    if purge and force:
        raise InvalidInputError(
            "give --purge or --force, not both: --force leaves the table's files behind, "
            "--purge reclaims them"
        )
    if purge:
        _purge(check_table_name(name), reason)
        return
    with manager() as m:
        dropped = drop_table(m, check_table_name(name), force=force, reason=reason)
    _said_dropped(name, dropped)


def _said_dropped(table: str, dropped: Removal, why: str = "") -> None:
    """A drop's output: the table, its Delta log, and a log that stays."""
    word = "; removed the Delta log under its root" if dropped.removed else ""
    view = {"dropped": table, "mirror_log_removed": dropped.removed, "problem": dropped.problem}
    emit(view, f"dropped table {table}{why}{word}")
    if dropped.problem:
        aside("warning", dropped.problem)


def _purge(table: str, reason: str | None) -> None:
    """``table drop --purge``: the first time, queue every file and mark the
    table purging; later, say what is left (and drop it when nothing is)."""
    from segment_lineage.mirror.admin import drop_table

    with manager() as m:
        state = m.table(table)
        strays = _unregistered(state.config.root, state)
        left = bool(state.segments or state.pending or strays)
        if state.config.purging_ms is None and left:
            _start_purge(m, table, reason, strays)
            return
        if left:
            _said_still_purging(table, state, strays)
            return
        dropped = drop_table(m, table, reason=reason or "table drop --purge")
    _said_dropped(table, dropped, ": no file of it was left")


def _start_purge(m: LineageManager, table: str, reason: str | None, strays: int) -> None:
    """Queue every file of ``table`` for retention and mark it purging, then
    say what was queued and from when retention deletes it (or that another
    purge came first)."""
    from segment_lineage.mirror.admin import purge
    from segment_lineage.retention.planner import DEFAULT_MIN_GRACE_MS, DEFAULT_ORPHAN_GRACE_MS

    done, removal = purge(m, table, reason)
    if not done.applied:  # another purge committed first
        emit(
            {"table": table, "purging": True},
            f"table {table} is already being dropped with its files",
        )
        return
    change = done.change
    queued = len(done.state.pending)
    start = iso((done.state.config.purging_ms or 0) + DEFAULT_MIN_GRACE_MS)
    view = {
        "table": table,
        "purging": True,
        "segments_unregistered": change.segments,
        "rows": change.rows,
        "bytes": change.size_bytes,
        "files_queued": queued,
        "files_unregistered": strays,
        "deletable_from": start,
        "mirror_log_removed": removal.removed,
        "problem": removal.problem,
    }
    orphans = (
        f"\n  {strays} file(s) under its root that nothing registered go after the orphan grace "
        f"({DEFAULT_ORPHAN_GRACE_MS // 3_600_000}h by default)"
        if strays
        else ""
    )
    emit(
        view,
        f"table {table} is being dropped with its files: {change.segments} segment(s) "
        f"({change.rows} rows, {human_size(change.size_bytes)}) unregistered, {queued} file(s) "
        f"queued for retention{orphans}\n"
        f"  nothing but retention changes it now, and this cannot be undone\n"
        f"  retention deletes the files from {start} (a reader's pin keeps its own longer), "
        f"then drops the table: the daemon does it, or 'lineage retention run --table {table} --yes'",
    )
    if removal.problem:
        aside("warning", removal.problem)


def _said_still_purging(table: str, state: TableState, strays: int) -> None:
    """A purge under way: the files that still wait for retention."""
    view = {
        "table": table,
        "purging": True,
        "segments": len(state.segments),
        "files_queued": len(state.pending),
        "files_unregistered": strays,
    }
    emit(
        view,
        f"table {table} is still being purged: {len(state.pending) + strays} file(s) wait for "
        f"retention ('lineage retention run --table {table} --yes' reclaims those past their "
        "grace, then drops the table)",
    )


def _unregistered(root: str, state: TableState) -> int:
    """Files under ``root`` retention would reclaim that the table neither
    registers nor queues (a crashed push's, a file put there by hand):
    hidden names, the claim and the mirror's log are not counted."""
    from segment_lineage.lineage.core.names import MIRROR_LOG_DIR
    from segment_lineage.lineage.storage.deep import DeepStore

    known = {seg.location for seg in state.segments.values()} | set(state.pending)
    return sum(
        1
        for info in DeepStore.for_root(root).list()
        if info.location not in known
        and not info.location.startswith(MIRROR_LOG_DIR + "/")
        and not info.location.rsplit("/", 1)[-1].startswith(".")
    )
