"""The ingest commands of the ``lineage`` CLI: push and read."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated

import typer

from segment_lineage.cli.context import Reason, current, manager
from segment_lineage.cli.progress import progress
from segment_lineage.cli.push_options import (
    AuditMaxChange,
    AuditMinRows,
    AuditNotNull,
    AuditSql,
    Conf,
    DryRun,
    Engine,
    EvolveSchema,
    Format,
    Hold,
    Input,
    Interval,
    JobId,
    Master,
    Mode,
    ReplaceSchema,
    Segments,
    Stage,
    TargetMb,
    TruncateTimestamps,
    Writer,
)
from segment_lineage.cli.push_output import emit_push
from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.lineage.core.redact import mask_assignment
from segment_lineage.lineage.core.views import human_size, render_table

if TYPE_CHECKING:
    from segment_lineage.ingest.audit import Audit
    from segment_lineage.ingest.push import PushMode, PushResult
    from segment_lineage.lineage.core.schema import SchemaPolicy
    from segment_lineage.lineage.manager import LineageManager


def parse_conf(items: list[str]) -> dict[str, str]:
    """``--conf`` items as Spark settings. An error quotes the item with any
    secret masked: the value of a key that looks secret, a URL's credentials."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().startswith("spark."):
            raise InvalidInputError(f"invalid --conf {mask_assignment(item)!r}: use spark.some.key=value")
        out[key.strip()] = value.strip()
    return out


def register(app: typer.Typer) -> None:
    app.command("push")(push)
    app.command("read")(read)


def push(
    table: str,
    input_path: Input,
    fmt: Format = "parquet",
    mode: Mode = None,
    interval: Interval = None,
    master: Master = None,
    segments_n: Segments = None,
    target_mb: TargetMb = None,
    reason: Reason = None,
    conf: Conf = None,
    writer: Writer = "auto",
    job_id: JobId = None,
    engine: Engine = "auto",
    evolve_schema: EvolveSchema = False,
    dry_run: DryRun = False,
    replace_schema: ReplaceSchema = False,
    truncate_timestamps: TruncateTimestamps = False,
    audit_sql: AuditSql = None,
    audit_min_rows: AuditMinRows = None,
    audit_max_change: AuditMaxChange = None,
    audit_not_null: AuditNotNull = None,
    stage: Stage = False,
    hold: Hold = None,
) -> None:
    """Consistent push: the new data appears all at once, or not at all.
    Written by Spark, or for a small local input by Arrow in this process
    (no JVM to start); the output says which. The input's columns must be
    the table's (recorded at its first push; 'lineage table show' prints
    them), unless --evolve-schema or --replace-schema says otherwise.
    The --audit-* checks run on the written rows before they show; the
    history record keeps what they passed."""
    from segment_lineage.ingest.audit import Audit
    from segment_lineage.ingest.jobs import completed_job
    from segment_lineage.ingest.push import PushMode, parse_interval
    from segment_lineage.ingest.push_plan import check_mode
    from segment_lineage.ingest.stage import stage_hold

    asked = PushMode.parse(mode) if mode is not None else None
    span = parse_interval(interval) if interval is not None else None
    spark_conf = parse_conf(conf or [])
    check_named(input_path, master)
    _check_flags(engine, writer, segments_n, target_mb, fmt, master, spark_conf)
    audit = Audit(audit_min_rows, audit_max_change, tuple(audit_not_null or ()), audit_sql) or None
    stage_hold(stage, hold, job_id)  # refused before anything is read

    with manager() as m, progress(f"pushing {table}") as say:
        state = m.table(table)
        chosen = PushMode.of(asked, state.config)
        if job_id is not None:  # a job done is reported as it was done, whatever this run's flags
            earlier = completed_job(m, table, job_id, chosen)
            if earlier is not None:  # nothing to read or write
                emit_push(earlier, None)
                return
        policy = _schema_policy(evolve_schema, replace_schema, chosen)
        check_mode(state, chosen, span)  # fail fast, before any data is read
        used, why = _engine_checked(m, table, input_path, fmt, engine, master, spark_conf, policy, chosen)
        say(f"engine: {used} ({why})")
        if used == "arrow":
            from segment_lineage.ingest.arrow_push import push_arrow, read_input_arrow, split_parts

            parts = split_parts(read_input_arrow(input_path, fmt), segments_n, target_mb)
            result = push_arrow(
                m, table, parts, mode=chosen, interval=span, reason=reason, progress=say, job_id=job_id,
                schema_policy=policy, dry_run=dry_run, truncate_timestamps=truncate_timestamps,
                audit=audit, stage=stage, hold=hold,
            )  # fmt: skip
        else:
            result = _push_with_spark(
                m, table, input_path, fmt, chosen, span, master, spark_conf, segments_n, target_mb, reason,
                writer, job_id, policy, dry_run, say, (audit, stage, hold),
            )  # fmt: skip
    emit_push(result, used)


def check_named(input_path: str | None, master: str | None) -> None:
    """An empty --input or --master (an unset variable in a script, say) is
    refused before anything starts: not read as a path, nor as no master."""
    if input_path is not None and not input_path.strip():
        raise InvalidInputError("--input is empty: name the files or directory to push")
    if master is not None and not master.strip():
        raise InvalidInputError(
            "--master is empty: name a Spark master (local[2], spark://host:7077, ...) or leave it out"
        )


def _check_flags(
    engine: str,
    writer: str,
    segments_n: int | None,
    target_mb: float | None,
    fmt: str,
    master: str | None,
    spark_conf: dict[str, str],
) -> None:
    """The push's flags, each known and within range, before anything is read."""
    from segment_lineage.ingest.push_plan import INPUT_FORMATS, WRITERS

    checks = (
        (engine not in ENGINES, f"unknown engine {engine!r}: use {', '.join(ENGINES)}"),
        (writer not in WRITERS, f"unknown writer {writer!r}: use {', '.join(WRITERS)}"),
        (segments_n is not None and segments_n < 1, f"--segments must be at least 1, got {segments_n}"),
        (target_mb is not None and not target_mb > 0, f"--target-mb must be positive, got {target_mb}"),
        (fmt not in INPUT_FORMATS, f"unknown input format {fmt!r}: use {', '.join(INPUT_FORMATS)}"),
        (
            engine == "arrow" and (master is not None or bool(spark_conf) or writer != "auto"),
            "--master, --conf and --writer are Spark's: they do not go with --engine arrow",
        ),
    )
    for bad, message in checks:
        if bad:
            raise InvalidInputError(message)


def _engine_checked(
    m: LineageManager,
    table: str,
    input_path: str,
    fmt: str,
    engine: str,
    master: str | None,
    spark_conf: dict[str, str],
    policy: SchemaPolicy,
    mode: PushMode,
) -> tuple[str, str]:
    """The engine the push uses, and why; its input checked first: a local
    one must be there, and a Parquet one for Spark must fit the table's
    columns (said before a JVM starts)."""
    _check_local_input(input_path)
    check_not_in_a_root(m, input_path)
    used, why = engine_for(engine, input_path, master, spark_conf)
    if used == "spark" and fmt == "parquet":
        _check_parquet_schema(m, table, input_path, policy, mode)  # before a JVM starts
    return used, why


ENGINES = ("auto", "arrow", "spark")


def engine_for(engine: str, input_path: str, master: str | None, conf: dict[str, str]) -> tuple[str, str]:
    """The engine a push uses, and why, under this command's settings."""
    configured = current().settings
    spark_master = configured.spark_master if configured.spark_master_configured else None
    return choose_engine(engine, input_path, master, conf, spark_master)


def choose_engine(
    engine: str, input_path: str, master: str | None, conf: dict[str, str], configured: str | None = None
) -> tuple[str, str]:
    """The engine a push uses, and why. ``configured``: a Spark master the
    settings name (SPARK_MASTER, or the config file's spark.master): a
    deployment that configured a cluster pushes with it."""
    from segment_lineage.ingest.arrow_push import ARROW_MAX_BYTES, input_bytes

    if engine != "auto":
        return engine, "asked for"
    if master is not None or conf:
        return "spark", "--master or --conf given"
    if configured is not None:
        return "spark", f"Spark master {configured} configured (SPARK_MASTER or spark.master)"
    size = input_bytes(input_path, stop_past=ARROW_MAX_BYTES)
    if size is None:
        return "spark", "the input is not one local path"
    if size > ARROW_MAX_BYTES:
        return "spark", f"input over {ARROW_MAX_BYTES // 2**20} MB"
    return "arrow", f"local input of {human_size(size)}; --engine spark to use Spark"


def _push_with_spark(
    m: LineageManager,
    table: str,
    input_path: str,
    fmt: str,
    mode: PushMode,
    interval: tuple[int, int] | None,
    master: str | None,
    conf: dict[str, str],
    segments_n: int | None,
    target_mb: float | None,
    reason: str | None,
    writer: str,
    job_id: str | None,
    policy: SchemaPolicy,
    dry_run: bool,
    say: Callable[[str], None],
    checks: tuple[Audit | None, bool, str | None],
) -> PushResult:
    from segment_lineage.ingest.spark_job import push_dataframe, read_input, spark_session

    run = current()
    spark = spark_session(master, conf=conf, settings=run.settings, quiet_logs=not run.verbose)
    try:
        df = read_input(spark, input_path, fmt)
        return push_dataframe(
            m,
            table,
            df,
            mode=mode,
            interval=interval,
            segments=segments_n,
            target_mb=target_mb,
            reason=reason,
            progress=say,
            writer=writer,
            job_id=job_id,
            schema_policy=policy,
            dry_run=dry_run,
            audit=checks[0],
            stage=checks[1],
            hold=checks[2],
        )
    finally:
        spark.stop()


def _schema_policy(evolve: bool, replace: bool, mode: PushMode) -> SchemaPolicy:
    from segment_lineage.ingest.push import PushMode
    from segment_lineage.lineage.core.schema import SchemaPolicy

    if evolve and replace:
        raise InvalidInputError("give --evolve-schema or --replace-schema, not both")
    if replace and mode is not PushMode.REFRESH:
        raise InvalidInputError(
            f"--replace-schema needs --mode refresh: a {mode.value} push keeps other segments, "
            "whose files have the old columns"
        )
    return SchemaPolicy.EVOLVE if evolve else SchemaPolicy.REPLACE if replace else SchemaPolicy.ENFORCE


def _check_parquet_schema(
    m: LineageManager, table: str, input_path: str, policy: SchemaPolicy, mode: PushMode
) -> None:
    """A local Parquet input's columns, from its footers, checked against the
    table's schema before Spark starts (the push checks again)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    from segment_lineage.ingest import micros
    from segment_lineage.ingest.arrow_push import check_same_columns, local_path
    from segment_lineage.ingest.errors import PushRefusedError
    from segment_lineage.ingest.push import PushMode
    from segment_lineage.ingest.schemas import plan_schema, schema_of

    local = local_path(input_path)
    if local is None:
        return
    try:
        dataset = ds.dataset(local, format="parquet", ignore_prefixes=[".", "_"])
        columns = dataset.schema
    except (OSError, ValueError, pa.ArrowException):
        return  # a glob, or unreadable: Spark says what is wrong with it
    check_same_columns(dataset, input_path)
    fine = [f.name for f in columns if micros.nanos(f.type)]
    if fine:
        raise PushRefusedError(
            f"column {fine[0]!r} of input {input_path!r} holds nanosecond times, which Spark "
            "cannot read; nothing was pushed",
            remedy="push it with --engine arrow (values that are not whole microseconds are refused "
            "there unless --truncate-timestamps), or write the input in microseconds",
        )
    state = m.table(table)
    plan_schema(state.config, schema_of(columns), policy, full_refresh=mode is PushMode.REFRESH)


def _check_local_input(input_path: str) -> None:
    """A local input that is not there is refused before any engine starts
    (a glob is Spark's to expand, a URI with another scheme Spark's to read)."""
    from pathlib import Path

    from segment_lineage.ingest.arrow_push import local_path

    local = local_path(input_path)
    try:
        if local is None or Path(local).exists():
            return
    except OSError as exc:  # a name too long for the file system, say
        raise InvalidInputError(f"input {input_path[:200]!r} cannot be used: {exc.strerror}") from None
    if not any(c in input_path for c in "*?[{"):
        raise InvalidInputError(f"input {input_path!r} does not exist; nothing was pushed")


def check_not_in_a_root(m: LineageManager, input_path: str) -> None:
    """An input inside a table's root, or holding one, is refused: a reader
    of that folder reads the table's own segment files, those its pushes
    replaced included (pushing a table's root into it brought its hidden
    rows back), and files there that nothing registers are retention's. A
    local input's links are followed by its readers, so a link under it
    that leads into a root, or to a folder holding one, is refused too."""
    from segment_lineage.ingest.arrow_push import local_path

    local = local_path(input_path)
    roots = []  # (table, root as given, where it lies): those on the input's side only, resolved once
    for table, root in sorted(m.roots().items()):
        root_local = local_path(root)
        if (local is None) == (root_local is None):  # a local input and a root elsewhere never meet
            roots.append(
                (table, root, os.path.realpath(root_local) if root_local is not None else root.rstrip("/"))
            )
    if local is None:
        _refuse_if_rooted(input_path, input_path.rstrip("/"), roots, link=None)
        return
    start = _before_glob(local)
    _refuse_if_rooted(input_path, os.path.realpath(start), roots, link=None)
    for link, target in _links_under(start):
        _refuse_if_rooted(input_path, target, roots, link=link)


def _refuse_if_rooted(
    input_path: str, given: str, roots: list[tuple[str, str, str]], *, link: str | None
) -> None:
    """InvalidInputError when ``given`` (the input, or where a link under it
    leads) lies inside one of ``roots`` (table, root, where it lies) or holds one."""
    for table, root, where in roots:
        inside = given == where or given.startswith(where.rstrip("/") + "/")
        if inside or where.startswith(given.rstrip("/") + "/"):
            if link is None:
                what = f"input {input_path!r} {'lies inside' if inside else 'holds'}"
            else:
                leads = "into" if inside else "to a folder that holds"
                what = f"input {input_path!r} holds a link {link!r} leading {leads}"
            raise InvalidInputError(
                f"{what} the root of table {table!r} ({root}): it would read that table's segment "
                "files, the replaced ones too; nothing was pushed",
                remedy="push from a folder outside every table's root, with no link into one",
            )


def _links_under(folder: str) -> Iterator[tuple[str, str]]:
    """Each symbolic link in local ``folder``'s tree (links not followed),
    with where it really leads; nothing when it is no folder."""
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        yield entry.path, os.path.realpath(entry.path)
                    elif entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
        except (NotADirectoryError, FileNotFoundError, PermissionError):
            continue  # a file, gone, or closed to us: its reader says so, not this check


def _before_glob(path: str) -> str:
    """The folder a glob pattern reads below (the path itself when it has none)."""
    cut = min((i for i, c in enumerate(path) if c in "*?[{"), default=len(path))
    return path if cut == len(path) else os.path.dirname(path[:cut]) or "."


def read(
    table: str,
    limit: Annotated[int, typer.Option("--limit", help="Rows to print.")] = 20,
    as_of: Annotated[
        str | None,
        typer.Option("--as-of", help="A table version, or a time (ISO-8601, or ms:EPOCH_MS)."),
    ] = None,
    entry: Annotated[
        str | None, typer.Option("--entry", help="What the staged push ENTRY would show once published.")
    ] = None,
) -> None:
    """Print rows of the table's current snapshot (or a past one, or a staged
    push's), pinned while reading."""
    from segment_lineage.ingest.readers import SnapshotReader

    if limit < 0:
        raise InvalidInputError(f"invalid limit {limit}: must be 0 or more")
    with manager() as m, SnapshotReader(m, table, as_of, entry) as reader:
        data = reader.to_arrow(limit)
        total = sum(s.rows for s in reader.segments)
        version = reader.version
    rows = data.to_pylist()
    if current().json:
        typer.echo(json.dumps({"version": version, "rows": rows}, default=str, indent=2))
        return
    columns = data.column_names
    typer.echo(render_table(rows, columns, data=True) if columns else "(no rows)")
    typer.echo(f"{len(rows)} of {total} rows, version {version}")
