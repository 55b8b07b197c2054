"""deltalake's reads, in a process of their own.

deltalake 1.6.6 reading data (``to_pyarrow_table``, ``to_pyarrow_dataset``)
leaves threads behind that make about one interpreter exit in four abort
(``terminate called without an active exception``, exit 134), whatever the
table. The tests read through it in one worker process, so a test session's
own exit status stays its verdict. The project itself only reads and writes
the log through deltalake, which does not abort."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pyarrow as pa

_POOL: list[ProcessPoolExecutor] = []  # the one worker, made on first use


def _read(root: str, version: int | None) -> pa.Table:
    from deltalake import DeltaTable

    return DeltaTable(root, version=version).to_pyarrow_table()


def read_delta(root: str, version: int | None = None) -> pa.Table:
    """``DeltaTable(root, version=version).to_pyarrow_table()``, in the worker."""
    if not _POOL:
        _POOL.append(ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")))
    result: Any = _POOL[0].submit(_read, root, version).result(timeout=120)
    return result


def _pruned(root: str, column: str, low: Any, high: Any) -> tuple[int, int, int]:
    import pyarrow.dataset as pds
    from deltalake import DeltaTable

    data = DeltaTable(root).to_pyarrow_dataset()
    kind = data.schema.field(column).type
    where = (pds.field(column) >= pa.scalar(low, kind)) & (pds.field(column) < pa.scalar(high, kind))
    kept = list(data.get_fragments(filter=where))
    return len(list(data.get_fragments())), len(kept), data.to_table(filter=where).num_rows


def pruned_delta(root: str, column: str, low: Any, high: Any) -> tuple[int, int, int]:
    """deltalake's dataset of the current version, filtered to ``low <=
    column < high``: (files, files kept by their statistics, rows read), in the worker."""
    if not _POOL:
        _POOL.append(ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")))
    result: Any = _POOL[0].submit(_pruned, root, column, low, high).result(timeout=120)
    return result


def _counts(root: str, filters: list[tuple[str, str, Any]]) -> list[tuple[int, int]]:
    import pyarrow.dataset as pds
    from deltalake import DeltaTable

    data = DeltaTable(root).to_pyarrow_dataset()
    whole = data.to_table()
    found = []
    for column, op, value in filters:
        kind = data.schema.field(column).type
        field, scalar = pds.field(column), pa.scalar(value, kind)
        where = {"==": field == scalar, ">": field > scalar, "<": field < scalar, "null": field.is_null()}[op]
        truth = whole.filter(where).num_rows  # the same filter over every row, files unskipped
        found.append((data.to_table(filter=where).num_rows, truth))
    return found


def delta_counts(root: str, filters: list[tuple[str, str, Any]]) -> list[tuple[int, int]]:
    """For each (column, op, value) filter: the rows deltalake's dataset of
    the current version returns, and the rows the same filter keeps of a
    full read (equal unless statistics skipped a file wrongly), in the worker."""
    if not _POOL:
        _POOL.append(ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")))
    result: Any = _POOL[0].submit(_counts, root, filters).result(timeout=120)
    return result
