"""Segments hold times in microseconds (Spark reads no finer): nanosecond
timestamps and times, at any depth of a column (inside a struct, a list or
a map too), are converted to microseconds before a push writes them, and a
value that is not a whole number of microseconds is refused, naming the
first one, unless the truncation is asked for out loud."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from segment_lineage.ingest.errors import PushRefusedError

TRUNCATE_FLAG = "--truncate-timestamps"


def nanos(kind: pa.DataType) -> bool:
    """Whether ``kind`` holds a nanosecond timestamp or time at any depth."""
    return bool(_micros(kind) != kind)


def _micros(kind: pa.DataType) -> pa.DataType:
    """``kind`` with every nanosecond timestamp and time in microseconds."""
    if pa.types.is_timestamp(kind) and kind.unit == "ns":
        return pa.timestamp("us", tz=kind.tz)
    if pa.types.is_time64(kind) and kind.unit == "ns":
        return pa.time64("us")
    if pa.types.is_struct(kind):
        return pa.struct([field.with_type(_micros(field.type)) for field in kind])
    if pa.types.is_map(kind):
        return pa.map_(_micros(kind.key_type), kind.item_field.with_type(_micros(kind.item_type)))
    if pa.types.is_large_list(kind):
        return pa.large_list(kind.value_field.with_type(_micros(kind.value_type)))
    if pa.types.is_fixed_size_list(kind):
        return pa.list_(kind.value_field.with_type(_micros(kind.value_type)), kind.list_size)
    if pa.types.is_list(kind):
        return pa.list_(kind.value_field.with_type(_micros(kind.value_type)))
    return kind


def _leaves(array: pa.Array, path: str) -> Iterator[tuple[str, pa.Array]]:
    """Every nanosecond leaf of ``array``, with its path (``s.t``, ``l[]``)."""
    kind = array.type
    if (pa.types.is_timestamp(kind) or pa.types.is_time64(kind)) and kind.unit == "ns":
        yield path, array
    elif pa.types.is_struct(kind):
        for index, field in enumerate(kind):
            if nanos(field.type):
                yield from _leaves(array.field(index), f"{path}.{field.name}")
    elif pa.types.is_map(kind):
        if nanos(kind.key_type):
            yield from _leaves(array.keys, f"{path}{{key}}")
        if nanos(kind.item_type):
            yield from _leaves(array.items, f"{path}{{value}}")
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        yield from _leaves(array.flatten(), f"{path}[]")


def _first_lost(array: pa.Array) -> int:
    """The index of the first value that is not whole microseconds (-1: none)."""
    raw = pc.cast(array, pa.int64())
    lost = pc.not_equal(pc.subtract(raw, pc.multiply(pc.divide(raw, 1_000), 1_000)), 0)
    index: int = pc.index(lost, True).as_py()
    return index


def in_micros(parts: Sequence[pa.Table], truncate: bool = False) -> list[pa.Table]:
    """``parts`` with every nanosecond timestamp and time in microseconds.
    PushRefusedError (nothing written) at the first value that would lose its
    nanoseconds, unless ``truncate``; whole microseconds convert exactly."""
    out: list[pa.Table] = []
    row0 = 0
    for given in parts:
        part = given
        for index, field in enumerate(given.schema):
            wanted = _micros(field.type)
            if wanted == field.type:
                continue
            column = given.column(index)
            if not truncate:
                _refuse_lost(column, field.name, row0)
            converted = pc.cast(column, wanted, safe=False)  # exact now, or truncation asked for
            part = part.set_column(index, field.with_type(wanted), converted)
        out.append(part)
        row0 += part.num_rows
    return out


def _refuse_lost(column: pa.ChunkedArray, name: str, row0: int) -> None:
    """PushRefusedError at the first value of column ``name`` (whose first
    row is the input's ``row0``) that is not whole microseconds."""
    seen = 0
    for chunk in column.chunks:
        for where, leaf in _leaves(chunk, name):
            at = _first_lost(leaf)
            if at >= 0:
                row = f"row {row0 + seen + at} " if where == name else ""
                raise PushRefusedError(
                    f"column {where!r} holds times finer than microseconds, which segments "
                    f"cannot store: {row}value {leaf[at]} ({pc.cast(leaf, pa.int64())[at]} ns); "
                    f"nothing was pushed ({TRUNCATE_FLAG} stores them truncated to microseconds)"
                )
        seen += len(chunk)
