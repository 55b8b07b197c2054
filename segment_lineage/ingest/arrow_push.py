"""Consistent push of Arrow tables from a Python process, without Spark.

For small data, scripts and tests: each table in ``parts`` becomes one segment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from segment_lineage.ingest.errors import PushRefusedError
from segment_lineage.ingest.push import (
    PushMode,
    PushResult,
    PushTarget,
    Written,
    check_rows_within,
    consistent_push,
)
from segment_lineage.ingest.segments import integer_bounds, time_as_ms, write_segment
from segment_lineage.ingest.time_units import resolve_time_unit
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.model import Segment, TimeUnit
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


def push_arrow(
    manager: LineageManager,
    table: str,
    parts: Sequence[pa.Table],
    *,
    mode: PushMode | str = PushMode.REFRESH,
    interval: tuple[int, int] | None = None,
    reason: str | None = None,
    owner_wait_s: float = 15.0,
    progress: Callable[[str], None] | None = None,
    job_id: str | None = None,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
    wall: Callable[[], float] | None = None,
) -> PushResult:
    """Push ``parts`` (one segment each) into ``table``; ``job_id`` makes a
    retried job return its completed push's result instead of pushing again;
    ``clock``, ``sleep`` and ``wall`` are the push's clocks (all three: see
    :func:`segment_lineage.ingest.push.consistent_push`)."""
    if not parts:
        raise PushRefusedError("nothing to push: no tables given")
    state = manager.table(table)
    time_column = state.config.time_column
    time_unit = state.config.time_unit
    if time_column is not None:
        present = [p.column(time_column) for p in parts if p.num_rows and time_column in p.column_names]
        bounds = integer_bounds(present)
        if bounds is not None:
            time_unit = resolve_time_unit(time_column, *bounds, time_unit, progress)
    if PushMode.parse(mode) is PushMode.REPLACE_RANGE and interval is not None and time_column:
        check_rows_in_interval(parts, time_column, interval, time_unit)

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
        return Written(tuple(out))

    return consistent_push(
        manager,
        table,
        write,
        partitions=len(parts),
        mode=mode,
        interval=interval,
        reason=reason,
        owner_wait_s=owner_wait_s,
        progress=progress,
        job_id=job_id,
        clock=clock,
        sleep=sleep,
        wall=wall,
    )
