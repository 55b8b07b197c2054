"""The options of ``lineage push``, declared once: their flags and help
(``push-set`` takes some of them too)."""

from __future__ import annotations

from typing import Annotated

import typer

Input = Annotated[str, typer.Option("--input", help="Input files or directory.")]
Format = Annotated[str, typer.Option("--format", help="parquet, csv (with a header row) or json (lines).")]
Mode = Annotated[
    str | None,
    typer.Option(
        "--mode",
        help="refresh, append or replace-range. Default: the table's type (an APPEND table appends, "
        "a REFRESH table refreshes); a refresh of an APPEND table, which hides its earlier rows, "
        "must be asked for.",
    ),
]
Interval = Annotated[
    str | None,
    typer.Option(
        "--interval",
        help="START/END for replace-range: ISO-8601 dates, months or times (UTC unless zoned), "
        "or ms:EPOCH_MS.",
    ),
]
Master = Annotated[str | None, typer.Option("--master", help="Spark master URL; default local[2].")]
Segments = Annotated[int | None, typer.Option("--segments", help="Number of segments to write.")]
TargetMb = Annotated[float | None, typer.Option("--target-mb", help="Aim for segments of this size.")]
Conf = Annotated[list[str] | None, typer.Option("--conf", help="Spark setting key=value (repeatable).")]
Writer = Annotated[
    str, typer.Option("--writer", help="auto, native (Spark's writer; local/HDFS) or arrow (any root).")
]
JobId = Annotated[
    str | None,
    typer.Option(
        "--job-id",
        help="The batch job's id: if a push of this job already completed on the table, print its "
        "result and push nothing again (a retried job never applies its data twice).",
    ),
]
Engine = Annotated[
    str,
    typer.Option(
        "--engine",
        help="auto, arrow (read and write in this process) or spark. auto: arrow for a local input "
        "of up to 64 MB when no Spark master is given or configured (SPARK_MASTER, spark.master) and no "
        "--conf, else spark.",
    ),
]
EvolveSchema = Annotated[
    bool,
    typer.Option(
        "--evolve-schema", help="Add the input's new columns to the table's schema (recorded in history)."
    ),
]
DryRun = Annotated[
    bool,
    typer.Option("--dry-run", help="Check everything and print what the push would do; write nothing."),
]
ReplaceSchema = Annotated[
    bool,
    typer.Option("--replace-schema", help="A refresh only: the input's columns become the table's schema."),
]
Stage = Annotated[
    bool,
    typer.Option(
        "--stage",
        help="Write (and audit) the rows but do not show them: 'lineage publish' shows them, "
        "'lineage revert' drops them, 'lineage read --entry' reads them.",
    ),
]
Hold = Annotated[
    str | None,
    typer.Option(
        "--hold",
        metavar="PERIOD",
        help="With --stage: keep the staged push this long (default: the table's lineage entry cleanup "
        "retention); then it is cleaned up.",
    ),
]
AuditSql = Annotated[
    str | None,
    typer.Option(
        "--audit-sql",
        help="Before the new rows show: a DuckDB query over the views 'staged' (the rows written) and "
        "'current' (the rows replaced) that must return one true value, or the push is reverted.",
    ),
]
AuditMinRows = Annotated[
    int | None, typer.Option("--audit-min-rows", help="Revert the push if it wrote fewer rows than this.")
]
AuditMaxChange = Annotated[
    float | None,
    typer.Option(
        "--audit-max-change",
        help="Revert the push if the table's visible rows would change by more than this percentage.",
    ),
]
AuditNotNull = Annotated[
    list[str] | None,
    typer.Option("--audit-not-null", help="Revert the push if this column holds a null (repeatable)."),
]
TruncateTimestamps = Annotated[
    bool,
    typer.Option(
        "--truncate-timestamps",
        help="Store nanosecond timestamps truncated to microseconds (segments hold microseconds); "
        "without it, a value that would lose its nanoseconds is refused.",
    ),
]
