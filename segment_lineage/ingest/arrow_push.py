"""Consistent push of Arrow tables from a Python process, without Spark.

For small data, scripts and tests: each table in ``parts`` becomes one segment.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.dataset as ds

from segment_lineage.ingest.audit import Audit
from segment_lineage.ingest.errors import PushInputError, PushRefusedError, check_csv_header, unreadable_input
from segment_lineage.ingest.micros import in_micros
from segment_lineage.ingest.push import (
    PushMode,
    PushResult,
    PushTarget,
    Written,
    check_rows_within,
    consistent_push,
    plan_push,
)
from segment_lineage.ingest.push_plan import INPUT_FORMATS, Prepared
from segment_lineage.ingest.schemas import conform, plan_schema, schema_of
from segment_lineage.ingest.segments import (
    check_one_chunk,
    check_time_type,
    check_times_present,
    integer_bounds,
    split_by_chunk,
    time_as_ms,
    write_segment,
)
from segment_lineage.ingest.time_units import resolve_time_unit
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.model import Segment, TimeGranularity, TimeUnit
from segment_lineage.lineage.core.schema import Schema, SchemaPolicy, compare
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.deep import DeepStore


def check_rows_in_interval(
    parts: Sequence[pa.Table], time_column: str, interval: tuple[int, int], time_unit: TimeUnit | None = None
) -> None:
    """Refuse rows outside ``interval``; ``time_unit`` is an integer column's unit."""
    for part in parts:
        if part.num_rows == 0:
            continue
        if time_column not in part.column_names:
            raise PushRefusedError(f"the input has no time column {time_column!r}")
        bounds = pc.min_max(time_as_ms(part.column(time_column), time_unit))
        check_rows_within(time_column, bounds["min"].as_py(), bounds["max"].as_py(), interval)


def _checked_parts(parts: Sequence[pa.Table], truncate: bool) -> tuple[list[pa.Table], Schema]:
    """The parts in microseconds (nanoseconds refused unless ``truncate``),
    once they were found to have rows and the same columns; their schema."""
    if not parts:
        raise PushRefusedError("nothing to push: no tables given")
    if not any(p.num_rows for p in parts):
        raise PushRefusedError("the input has no rows; nothing was pushed")
    micros = in_micros(parts, truncate)  # before the columns are recorded: microseconds
    given = schema_of(micros[0].schema)
    for part in micros[1:]:
        if schema_of(part.schema) != given:
            raise PushRefusedError("the parts of a push must have the same columns and types")
    return list(micros), given


def _time_unit(
    parts: Sequence[pa.Table],
    time_column: str | None,
    unit: TimeUnit | None,
    progress: Callable[[str], None] | None,
) -> TimeUnit | None:
    """The time column checked (there, a time, no null) and the unit its
    integers are read in: the table's, or inferred from the values."""
    if time_column is None:
        return unit
    present = [p for p in parts if p.num_rows]
    if any(time_column not in p.column_names for p in present):
        raise PushRefusedError(f"the input has no time column {time_column!r}; nothing was pushed")
    for part in present:
        check_time_type(part.schema.field(time_column).type)
    check_times_present(time_column, sum(p.column(time_column).null_count for p in present))
    bounds = integer_bounds([p.column(time_column) for p in present])
    return unit if bounds is None else resolve_time_unit(time_column, *bounds, unit, progress)


def _writer(
    parts: Sequence[pa.Table], time_unit: TimeUnit | None, granularity: TimeGranularity | None
) -> Callable[[PushTarget], Written]:
    """The push's write: one segment per part with rows, in this process."""

    def write(target: PushTarget) -> Written:
        store = DeepStore.for_root(target.root)
        out: list[Segment] = []
        for index, part in enumerate(parts):
            if part.num_rows == 0:
                continue
            name = target.names[index]
            location = f"{target.push_dir}/{name}.a0.parquet"
            written = write_segment(store, part, location, target.time_column, time_unit)
            out.append(
                Segment(
                    name=name,
                    location=written.location,
                    rows=written.rows,
                    size_bytes=written.size_bytes,
                    checksum=written.checksum,
                    min_time=written.min_time,
                    max_time=written.max_time,
                )
            )
            if index == 0:
                failpoint("push.mid-write")
        if granularity is not None:
            check_one_chunk(out, granularity)
        return Written(tuple(out))

    return write


def push_arrow(
    manager: LineageManager,
    table: str,
    parts: Sequence[pa.Table],
    *,
    mode: PushMode | str | None = None,
    interval: tuple[int, int] | None = None,
    reason: str | None = None,
    owner_wait_s: float = 15.0,
    progress: Callable[[str], None] | None = None,
    job_id: str | None = None,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
    wall: Callable[[], float] | None = None,
    schema_policy: SchemaPolicy | str = SchemaPolicy.ENFORCE,
    dry_run: bool = False,
    truncate_timestamps: bool = False,
    audit: Audit | None = None,
    stage: bool = False,
    hold: str | None = None,
) -> PushResult:
    """Push ``parts`` (one segment each, all with the same columns) into
    ``table``; ``job_id`` makes a retried job return its completed push's
    result instead of pushing again; ``clock``, ``sleep`` and ``wall`` are
    the push's clocks (all three: see :func:`segment_lineage.ingest.push.consistent_push`).
    The columns must fit the table's recorded schema under ``schema_policy``
    (``evolve`` adds new columns, ``replace`` with a refresh replaces it).
    ``dry_run``: every check, then what the push would do; nothing written.
    Nanosecond timestamps that are not whole microseconds are refused (segments
    store microseconds) unless ``truncate_timestamps``. ``audit``: checks the
    written rows must pass before they show (:mod:`segment_lineage.ingest.audit`); ``stage`` (held for
    ``hold``) leaves them staged for a publish (:mod:`segment_lineage.ingest.stage`)."""
    prepared = prepare_arrow(
        manager, table, parts, mode=mode, interval=interval, progress=progress, schema_policy=schema_policy,
        truncate_timestamps=truncate_timestamps, audit=audit, job_id=job_id,
    )  # fmt: skip
    if dry_run:
        return plan_push(
            manager,
            table,
            partitions=prepared.filled or 0,
            rows=prepared.rows or 0,
            mode=prepared.mode,
            interval=interval,
            schema=prepared.schema,
            schema_policy=prepared.schema_policy,
            audit=audit,
            reason=reason,
        )
    return consistent_push(
        manager,
        table,
        prepared.write,
        partitions=prepared.partitions,
        mode=prepared.mode,
        interval=interval,
        reason=reason,
        owner_wait_s=owner_wait_s,
        progress=progress,
        job_id=job_id,
        clock=clock,
        sleep=sleep,
        wall=wall,
        schema=prepared.schema,
        schema_policy=prepared.schema_policy,
        time_unit=prepared.time_unit,
        audit=audit,
        stage=stage,
        hold=hold,
    )


def prepare_arrow(
    manager: LineageManager,
    table: str,
    parts: Sequence[pa.Table],
    *,
    mode: PushMode | str | None = None,
    interval: tuple[int, int] | None = None,
    progress: Callable[[str], None] | None = None,
    schema_policy: SchemaPolicy | str = SchemaPolicy.ENFORCE,
    truncate_timestamps: bool = False,
    audit: Audit | None = None,
    job_id: str | None = None,
) -> Prepared:
    """:func:`push_arrow`'s checks and shaping (its columns against the
    table's, its times, its chunks), without pushing: a push set's table."""
    parts, given = _checked_parts(parts, truncate_timestamps)
    state = manager.table(table)
    mode = PushMode.of(mode, state.config)
    time_column = state.config.time_column
    time_unit = _time_unit(parts, time_column, state.config.time_unit, progress)
    if mode is PushMode.REPLACE_RANGE and interval is not None and time_column:
        check_rows_in_interval(parts, time_column, interval, time_unit)
    granularity = state.config.time_granularity
    if granularity is not None and time_column is not None:
        parts = split_by_chunk(parts, time_column, time_unit, granularity)
    policy = SchemaPolicy.parse(schema_policy)
    written_columns = plan_schema(state.config, given, policy, full_refresh=mode is PushMode.REFRESH)
    parts = [conform(part, written_columns) for part in parts]
    return Prepared(
        table=table, write=_writer(parts, time_unit, granularity), partitions=len(parts),
        rows=sum(p.num_rows for p in parts), mode=mode, interval=interval, schema=written_columns,
        schema_policy=policy, time_unit=time_unit, audit=audit, job_id=job_id,
        filled=sum(1 for p in parts if p.num_rows),
    )  # fmt: skip


# ---- small inputs, read in this process (the CLI's Arrow engine) ------------------

ARROW_MAX_BYTES = 64 * 1024 * 1024  # inputs up to this size are pushed without Spark by default


def local_path(path: str) -> str | None:
    """The file-system path of a local input (a path, or a file: URI); None
    for a URI with another scheme."""
    from urllib.parse import unquote, urlsplit

    parsed = urlsplit(path)
    if parsed.scheme not in ("", "file"):
        return None
    return unquote(parsed.path) if parsed.scheme else path


def input_bytes(path: str, stop_past: int | None = None) -> int | None:
    """The size of a local input: a file, or the files under a directory
    that a reader reads (names starting with '.' or '_' are skipped, links
    followed, each directory once); counting stops once past ``stop_past``.
    None when it is not one local path (a URI with another scheme, a glob
    that names no file)."""
    import os

    local = local_path(path)
    if local is None or not os.path.exists(local):
        return None  # a glob, say: Spark expands it
    if os.path.isfile(local):
        return os.path.getsize(local)
    return _folder_bytes(local, stop_past)


def _folder_bytes(local: str, stop_past: int | None) -> int:
    """The size of the files a reader reads under the directory ``local``
    (as :func:`input_bytes` says), counted until past ``stop_past``."""
    import os

    total, seen = 0, set()
    for folder, dirs, names in os.walk(local, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in names:
            if not name.startswith((".", "_")):
                total += os.path.getsize(os.path.join(folder, name))
        if stop_past is not None and total > stop_past:
            break
    return total


def read_input_arrow(path: str, fmt: str) -> pa.Table:
    """A local input read with pyarrow, as Spark reads it: Parquet; CSV with a
    header, types inferred, an empty field null (quoted or not, text too);
    JSON lines. Files whose names start with '.' or '_' (markers, checksums)
    are skipped, as Spark skips them."""
    if fmt not in INPUT_FORMATS:
        raise PushInputError(f"unknown input format {fmt!r}: use {', '.join(INPUT_FORMATS)}")
    try:
        dataset = ds.dataset(path, format=_file_format(fmt), ignore_prefixes=[".", "_"])
        if fmt == "parquet":
            check_same_columns(dataset, path)
        elif fmt == "csv":
            check_same_header(dataset, path)
        data = dataset.to_table()
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise unreadable_input(path, fmt, exc) from None
    if fmt == "parquet":
        return data
    if fmt == "csv":
        check_csv_header(path, data.column_names)
    return _zoned_utc(data)


def _file_format(fmt: str) -> str | ds.FileFormat:
    """How pyarrow reads ``fmt``: an empty CSV field is null, text too, as in
    Spark; nothing else is ('NA', 'nan', 'null' stay text)."""
    if fmt == "csv":
        return ds.CsvFileFormat(
            convert_options=pcsv.ConvertOptions(null_values=[""], strings_can_be_null=True)
        )
    return fmt


def _zoned_utc(data: pa.Table) -> pa.Table:
    """Text's times, which have no zone, as UTC instants: Spark (session zone
    UTC) reads them so, and so do we."""
    for index, field in enumerate(data.schema):
        if pa.types.is_timestamp(field.type) and field.type.tz is None:
            column = pc.assume_timezone(data.column(index), "UTC")
            data = data.set_column(index, pa.field(field.name, column.type), column)
    return data


MAX_FOOTERS = 10_000  # input files whose columns are compared


def check_same_header(dataset: ds.Dataset, path: str) -> None:
    """PushRefusedError when the CSV files of one input name different
    columns in their headers: read as one, the first file's columns are
    kept and the others' values read as nulls or dropped (an outside trial
    pushed such a folder, and its second file's rows came out empty)."""
    first: tuple[str, list[str]] | None = None
    for index, fragment in enumerate(dataset.get_fragments()):
        if index >= MAX_FOOTERS:
            return
        names = list(fragment.physical_schema.names)
        if first is None:
            first = (fragment.path, names)
        elif names != first[1]:
            raise PushRefusedError(
                f"the files of input {path!r} have different columns: {fragment.path} has "
                f"{', '.join(names[:8])} against {first[0]}'s {', '.join(first[1][:8])}; push them separately"
            )


def check_same_columns(dataset: ds.Dataset, path: str) -> None:
    """PushRefusedError when the Parquet files of one input hold different
    columns: a reader takes the first file's and drops or converts the rest."""
    first: tuple[str, Schema] | None = None
    for index, fragment in enumerate(dataset.get_fragments()):
        if index >= MAX_FOOTERS:
            return
        columns = schema_of(fragment.physical_schema)
        if first is None:
            first = (fragment.path, columns)
        elif columns != first[1]:
            diff = compare(first[1], columns).describe(4)
            raise PushRefusedError(
                f"the files of input {path!r} have different columns: {fragment.path} against "
                f"{first[0]}: {diff}; push them separately (--evolve-schema adds columns)"
            )


def split_parts(data: pa.Table, segments: int | None, target_mb: float | None) -> list[pa.Table]:
    """``data`` cut into segments: ``segments`` of them, or about ``target_mb``
    each (in memory), else one; never more than there are rows."""
    if segments is not None and segments < 1:
        raise PushRefusedError(f"--segments must be at least 1, got {segments}")
    if target_mb is not None and not target_mb > 0:
        raise PushRefusedError(f"--target-mb must be positive, got {target_mb}")
    count = max(1, min(_wanted(data, segments, target_mb), data.num_rows))
    step = -(-data.num_rows // count)
    return [data.slice(at, step) for at in range(0, max(data.num_rows, 1), step)] if data.num_rows else [data]


def _wanted(data: pa.Table, segments: int | None, target_mb: float | None) -> int:
    """The segments asked for: ``segments``, or as many of about
    ``target_mb`` as ``data`` fills (a byte at least), else one."""
    if segments is not None:
        return segments
    if target_mb is not None:
        return max(1, math.ceil(int(data.nbytes) / max(1.0, target_mb * 1024 * 1024)))
    return 1
