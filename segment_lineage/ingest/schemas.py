"""What a push's input's Arrow columns are as the table schema's logical
types (``lineage.core.schema``), and the checks a push makes on them before
anything is written. The other way, logical to Arrow, is
:mod:`segment_lineage.lineage.storage.arrow_types` (the mirror speaks it too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from segment_lineage.ingest.errors import PushRefusedError
from segment_lineage.lineage.core.model import TableConfig
from segment_lineage.lineage.core.schema import (
    DataType,
    Field,
    Schema,
    SchemaPolicy,
    check_fields,
    resolve,
    written_schema,
)
from segment_lineage.lineage.storage.arrow_types import to_arrow

_FROM_ARROW_ID = {
    pa.null(): "null",
    pa.bool_(): "boolean",
    pa.int8(): "int8",
    pa.int16(): "int16",
    pa.int32(): "int32",
    pa.int64(): "int64",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.string(): "string",
    pa.large_string(): "string",
    pa.binary(): "binary",
    pa.large_binary(): "binary",
    pa.date32(): "date",
    pa.date64(): "date",
}
# Arrow types Spark (and so every reader of the table) cannot read, and what to use instead.
_UNREADABLE = {
    "uint": "a signed integer (int64 holds every uint32)",
    "halffloat": "float or double",
    "month_day_nano_interval": "a duration in an integer column",
}


def _refuse_unreadable(kind: pa.DataType, where: str) -> None:
    for prefix, instead in _UNREADABLE.items():
        if str(kind).startswith(prefix):
            raise PushRefusedError(
                f"column {where!r} has type {kind}, which Spark cannot read: cast it to {instead}"
            )
    if pa.types.is_decimal(kind) and kind.precision > 38:
        raise PushRefusedError(f"column {where!r} has type {kind}: a decimal holds at most 38 digits here")


def _list(kind: Any, where: str) -> DataType:
    return DataType("list", (), (Field("element", from_arrow(kind.value_type, where)),))


def _map(kind: Any, where: str) -> DataType:
    key, value = from_arrow(kind.key_type, where), from_arrow(kind.item_type, where)
    return DataType("map", (), (Field("key", key), Field("value", value)))


def _struct(kind: Any, where: str) -> DataType:
    return DataType("struct", (), tuple(Field(f.name, from_arrow(f.type, f"{where}.{f.name}")) for f in kind))


# The Arrow types with parameters or children, each with its logical type, in order.
_SHAPED: tuple[tuple[Callable[[Any], bool], Callable[[Any, str], DataType]], ...] = (
    (pa.types.is_string_view, lambda _k, _w: DataType("string")),
    (pa.types.is_binary_view, lambda _k, _w: DataType("binary")),
    (pa.types.is_timestamp, lambda k, _w: DataType("timestamp" if k.tz is not None else "timestamp_ntz")),
    (pa.types.is_time, lambda _k, _w: DataType("time")),
    (pa.types.is_decimal, lambda k, _w: DataType("decimal", (k.precision, k.scale))),
    (pa.types.is_fixed_size_binary, lambda k, _w: DataType("fixed_binary", (k.byte_width,))),
    (pa.types.is_dictionary, lambda k, w: from_arrow(k.value_type, w)),
    (pa.types.is_map, _map),
    (pa.types.is_list, _list),
    (pa.types.is_large_list, _list),
    (pa.types.is_fixed_size_list, _list),
    (pa.types.is_struct, _struct),
)


def from_arrow(kind: pa.DataType, where: str = "") -> DataType:
    """The logical type of an Arrow type; PushRefusedError for one a table
    cannot hold (unsigned integers, half floats, intervals, decimals over 38
    digits, a union, a duration, an extension type), before anything is written."""
    _refuse_unreadable(kind, where)
    if kind in _FROM_ARROW_ID:
        return DataType(_FROM_ARROW_ID[kind])
    for matches, logical in _SHAPED:
        if matches(kind):
            return logical(kind, where)
    raise PushRefusedError(f"column {where!r} has type {kind}, which a table cannot hold")


def schema_of(arrow: pa.Schema) -> Schema:
    """A table schema from an Arrow schema; PushRefusedError for a column a
    table cannot record, or columns a table cannot have (a name twice)."""
    fields = tuple(Field(f.name, from_arrow(f.type, f.name)) for f in arrow)
    try:
        return check_fields(fields)
    except ValueError as exc:
        raise PushRefusedError(f"the input's columns cannot be recorded: {exc}") from None


def plan_schema(config: TableConfig, given: Schema, policy: SchemaPolicy, *, full_refresh: bool) -> Schema:
    """The columns a push into the table of ``config`` writes (``given``,
    narrower integers and floats widened to the recorded types), once they
    were found to fit it under ``policy`` (and its mirror, if it has one):
    SchemaMismatchError before anything is written if they do not. The
    commit checks again, on the state it commits to."""
    recorded = config.schema
    mirrored = config.mirror is not None
    resolve(recorded, given, policy, config.name, full_refresh=full_refresh, mirrored=mirrored)
    return written_schema(recorded, given)


def conform(data: pa.Table, schema: Schema) -> pa.Table:
    """``data`` with each column whose logical type differs from ``schema``'s
    (a narrower integer) cast to it, checked."""
    wanted = {f.name: f.type for f in schema}
    for index, field in enumerate(data.schema):
        kind = wanted.get(field.name)
        if kind is not None and from_arrow(field.type, field.name) != kind:
            try:
                column = data.column(index).cast(to_arrow(kind))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise PushRefusedError(f"column {field.name!r} cannot be written as {kind}: {exc}") from None
            data = data.set_column(index, pa.field(field.name, column.type), column)
    return data
