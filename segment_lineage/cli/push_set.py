"""Several tables as one: ``lineage push-set SPEC.toml`` and ``lineage cut``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from segment_lineage.cli.context import Reason, current, emit, manager
from segment_lineage.cli.ingest import (
    ENGINES,
    _check_local_input,
    _schema_policy,
    check_named,
    check_not_in_a_root,
    engine_for,
)
from segment_lineage.cli.progress import progress
from segment_lineage.cli.push_options import DryRun, Hold, JobId, Master, Stage
from segment_lineage.cli.push_output import push_view
from segment_lineage.lineage.core.errors import InvalidInputError

if TYPE_CHECKING:
    from segment_lineage.ingest.push_plan import Prepared
    from segment_lineage.ingest.push_set import SetResult
    from segment_lineage.ingest.push_set_spec import SpecBlock
    from segment_lineage.lineage.manager import LineageManager


def register(app: typer.Typer) -> None:
    app.command("push-set")(push_set)
    app.command("cut")(cut)


def push_set(
    spec: Annotated[str, typer.Argument(help="The set's TOML file: one [[push]] block per table.")],
    reason: Reason = None,
    job_id: JobId = None,
    dry_run: DryRun = False,
    engine: Annotated[
        str, typer.Option("--engine", help="auto, arrow or spark, for every table (auto: as push chooses).")
    ] = "auto",
    master: Master = None,
    stage: Stage = False,
    hold: Hold = None,
) -> None:
    """Push several tables as one: every table's new rows show in one commit,
    or none do (a failure in any table reverts them all). Each [[push]]
    block names a table and an input (relative to the spec's folder), and
    may give mode, format, interval, evolve_schema, job_id and audit_* keys
    (docs/cli.md). The history of every table records the set's id;
    'lineage rollback --set ID' undoes it, 'lineage cut' reads tables together.
    --stage stages every table in one commit instead; 'lineage publish --set
    ID' shows them all in one commit."""
    from segment_lineage.ingest.push_set import push_set as run_set
    from segment_lineage.ingest.push_set_spec import read_spec
    from segment_lineage.ingest.stage import stage_hold

    if engine not in ENGINES:
        raise InvalidInputError(f"unknown engine {engine!r}: use {', '.join(ENGINES)}")
    check_named(None, master)
    stage_hold(stage, hold, job_id)  # refused before anything is read
    blocks = read_spec(spec)
    with (
        manager() as m,
        progress("pushing the set") as say,
        _engines(m, blocks, engine, master, say) as prepared,
    ):
        result = run_set(
            m, prepared, reason=reason, job_id=job_id, dry_run=dry_run, progress=say, stage=stage, hold=hold
        )
    emit_set(result)


@contextlib.contextmanager
def _engines(
    m: LineageManager, blocks: list[SpecBlock], engine: str, master: str | None, say: Callable[[str], None]
) -> Iterator[list[Prepared]]:
    """Every block read and checked: Arrow in this process for small local
    inputs, one Spark session for the rest (kept until the set is pushed)."""
    configured = current().settings
    chosen = {b.table: engine_for(engine, b.input, master, {})[0] for b in blocks}
    for b in blocks:
        _check_local_input(b.input)
        check_not_in_a_root(m, b.input)
    options = [_block_options(m, b, say) for b in blocks]  # every block's checked before any input is read
    spark = None
    if "spark" in chosen.values():
        from segment_lineage.ingest.spark_job import spark_session

        spark = spark_session(master, conf={}, settings=configured, quiet_logs=not current().verbose)
    try:
        yield [
            _prepare_block(m, b, chosen[b.table], spark, same, say)
            for b, same in zip(blocks, options, strict=True)
        ]
    finally:
        if spark is not None:
            spark.stop()


def _block_options(m: LineageManager, b: SpecBlock, say: Callable[[str], None]) -> dict[str, Any]:
    """How one block is pushed: its mode (the table's type unless it names
    one), interval, audit, job id and schema policy."""
    from segment_lineage.ingest.push import PushMode

    mode = PushMode.of(None if b.mode is None else PushMode.parse(b.mode), m.table(b.table).config)
    span, audit = _span_and_audit(b)
    return {"mode": mode, "interval": span, "progress": say, "audit": audit, "job_id": b.job_id,
            "schema_policy": _schema_policy(b.evolve_schema, False, mode)}  # fmt: skip


def _prepare_block(
    m: LineageManager,
    b: SpecBlock,
    engine: str,
    spark: Any,
    same: dict[str, Any],
    say: Callable[[str], None],
) -> Prepared:
    """One block's input read and written by its engine (``spark``: the set's
    session, None when no block uses Spark), ready for the set's commit."""
    say(f"{b.table}: engine {engine}")
    if engine == "arrow":
        from segment_lineage.ingest.arrow_push import prepare_arrow, read_input_arrow, split_parts

        parts = split_parts(read_input_arrow(b.input, b.format), None, None)
        return prepare_arrow(m, b.table, parts, **same)
    from segment_lineage.ingest.spark_job import prepare_dataframe, read_input

    assert spark is not None
    return prepare_dataframe(m, b.table, read_input(spark, b.input, b.format), **same)


def _span_and_audit(b: SpecBlock) -> tuple[tuple[int, int] | None, Any]:
    from segment_lineage.ingest.audit import Audit
    from segment_lineage.ingest.push import parse_interval

    span = None if b.interval is None else parse_interval(b.interval)
    audit = Audit(b.audit_min_rows, b.audit_max_change, b.audit_not_null, b.audit_sql)
    return span, audit or None


def emit_set(result: SetResult) -> None:
    """Print what a push set did: a head line, each table's push, and what to do next."""
    staged = any(p.staged_until_ms is not None for p in result.pushes)
    lines = [_set_head(result, staged), *(f"  {p.table}: {p.summary()}" for p in result.pushes)]
    then = _set_next_step(result, staged)
    if then is not None:
        lines.append(then)
    tables = [{"table": p.table, **push_view(p, None)} for p in result.pushes]
    body = {"set": result.set_id, "repeated": result.repeated, "dry_run": result.dry_run,
            "seconds": round(result.seconds, 3), "tables": tables}  # fmt: skip
    emit(body, "\n".join(lines))


def _set_head(result: SetResult, staged: bool) -> str:
    """The set in one line: a job done before, staged, published, a dry run, or pushed."""
    count = len(result.pushes)
    if result.repeated:
        done = "" if result.set_id is None else f" as set {result.set_id}"
        return f"the set's job already completed in every table{done}: nothing pushed again"
    if staged:
        return f"staged set {result.set_id} across {count} table(s): readers see none of it yet"
    if any(p.published for p in result.pushes):
        return f"published set {result.set_id} across {count} table(s) in one commit"
    if result.dry_run:
        return f"dry run of a push set of {count} table(s): nothing written"
    return f"pushed set {result.set_id} across {count} table(s) in one commit"


def _set_next_step(result: SetResult, staged: bool) -> str | None:
    """What to do next: publish it, push it again (undone since), undo it, or nothing."""
    # The id stands alone, never glued to punctuation: scripts cut it out of these lines.
    if staged:
        return f"publish it with: lineage publish --set {result.set_id}"
    if result.repeated and all(p.undone for p in result.pushes):  # nothing of it is shown: no undo to offer
        return "it was rolled back (or reverted) since: push the set with another --job-id to push it again"
    if not result.dry_run and result.set_id is not None:
        return f"undo it with: lineage rollback --set {result.set_id}"
    return None


def cut(
    tables: Annotated[list[str], typer.Argument(help="The tables to read together.")],
) -> None:
    """Versions of TABLES that were current together (a consistent cut: a
    push set is in all of them or in none), and each one's newest set."""
    from segment_lineage.ingest.readers import SnapshotReader

    with manager() as m, SnapshotReader.together(m, tables) as together:
        versions = together.versions
        sets = together.sets()
        rows = {t: sum(s.rows for s in together[t].segments) for t in tables}
    data = [{"table": t, "version": versions[t], "set": sets[t], "rows": rows[t]} for t in tables]
    width = max(len(t) for t in tables)
    text = "\n".join(
        f"{t:<{width}}  version {versions[t]}  {rows[t]} rows  set {sets[t] or '-'}" for t in tables
    )
    emit(data, text)
