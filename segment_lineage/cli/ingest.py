"""The ingest commands of the ``lineage`` CLI: push and read."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from segment_lineage.cli.context import current, emit, manager
from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.lineage.core.redact import mask_assignment
from segment_lineage.lineage.core.views import render_table

if TYPE_CHECKING:
    from segment_lineage.ingest.push import PushResult


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
    input_path: Annotated[str, typer.Option("--input", help="Input files or directory.")],
    fmt: Annotated[str, typer.Option("--format", help="parquet, csv or json.")] = "parquet",
    mode: Annotated[str, typer.Option("--mode", help="refresh, append or replace-range.")] = "refresh",
    interval: Annotated[
        str | None, typer.Option("--interval", help="START/END for replace-range (ISO or epoch ms).")
    ] = None,
    master: Annotated[
        str | None, typer.Option("--master", help="Spark master URL; default local[2].")
    ] = None,
    segments_n: Annotated[int | None, typer.Option("--segments", help="Number of segments to write.")] = None,
    target_mb: Annotated[
        float | None, typer.Option("--target-mb", help="Aim for segments of this size.")
    ] = None,
    reason: Annotated[str | None, typer.Option("--reason")] = None,
    conf: Annotated[
        list[str] | None, typer.Option("--conf", help="Spark setting key=value (repeatable).")
    ] = None,
    writer: Annotated[
        str, typer.Option("--writer", help="auto, native (Spark's writer; local/HDFS) or arrow (any root).")
    ] = "auto",
    job_id: Annotated[
        str | None,
        typer.Option(
            "--job-id",
            help="The batch job's id: if a push of this job already completed on the table, print its "
            "result and push nothing again (a retried job never applies its data twice).",
        ),
    ] = None,
) -> None:
    """Consistent push with Spark: the new data appears all at once, or not at all."""
    from segment_lineage.ingest.push import PushMode, completed_job, parse_interval
    from segment_lineage.ingest.push_plan import check_mode
    from segment_lineage.ingest.spark_job import push_dataframe, read_input, spark_session

    chosen = PushMode.parse(mode)
    span = parse_interval(interval) if interval is not None else None
    spark_conf = parse_conf(conf or [])
    _check_local_input(input_path)
    with manager() as m:
        check_mode(m.table(table), chosen, span)  # fail fast, before Spark starts
        if job_id is not None:
            earlier = completed_job(m, table, job_id, chosen)
            if earlier is not None:  # before Spark starts: nothing to read or write
                _emit_push(earlier)
                return
        spark = spark_session(master, conf=spark_conf, settings=current().settings)
        try:
            df = read_input(spark, input_path, fmt)
            result = push_dataframe(
                m,
                table,
                df,
                mode=chosen,
                interval=span,
                segments=segments_n,
                target_mb=target_mb,
                reason=reason,
                progress=lambda msg: typer.echo(msg, err=True),
                writer=writer,
                job_id=job_id,
            )
        finally:
            spark.stop()
    _emit_push(result)


def _check_local_input(input_path: str) -> None:
    """A local input that is not there is refused before Spark starts (a
    URI with a scheme is Spark's to read)."""
    from pathlib import Path
    from urllib.parse import urlsplit

    parsed = urlsplit(input_path)
    if any(c in input_path for c in "*?[{"):
        return  # a glob: Spark expands it
    if parsed.scheme in ("", "file") and not Path(parsed.path if parsed.scheme else input_path).exists():
        raise InvalidInputError(f"input {input_path!r} does not exist; nothing was pushed")


def _emit_push(result: PushResult) -> None:
    """Print a push's result (a repeated job's says so)."""
    emit(
        {
            "entry": result.entry_id,
            "segments": result.segments,
            "rows": result.rows,
            "bytes": result.size_bytes,
            "replaced": result.replaced,
            "cleaned": list(result.cleaned),
            "job_id": result.job_id,
            "repeated": result.repeated,
            "seconds": round(result.seconds, 3),
        },
        result.summary(),
    )


def read(
    table: str,
    limit: Annotated[int, typer.Option("--limit", help="Rows to print.")] = 20,
    as_of: Annotated[
        str | None,
        typer.Option("--as-of", help="A table version, or a time (ISO-8601, or ms:EPOCH_MS)."),
    ] = None,
) -> None:
    """Print rows of the table's current snapshot (or a past one), pinned while reading."""
    from segment_lineage.ingest.readers import SnapshotReader

    if limit < 0:
        raise InvalidInputError(f"invalid limit {limit}: must be 0 or more")
    with manager() as m, SnapshotReader(m, table, as_of) as reader:
        data = reader.to_arrow(limit)
        total = sum(s.rows for s in reader.segments)
        version = reader.version
    rows = data.to_pylist()
    if current().json:
        typer.echo(json.dumps({"version": version, "rows": rows}, default=str, indent=2))
        return
    columns = data.column_names
    typer.echo(render_table(rows, columns) if columns else "(no rows)")
    typer.echo(f"{len(rows)} of {total} rows, version {version}")
