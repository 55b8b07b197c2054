"""The table schema's logical types (``lineage.core.schema``) as Arrow
types: what a segment's columns are written as, and what the mirror's Delta
schema is made from. Below both ingest and the mirror; the checks a push
makes on its input (Arrow to logical) stay with the push
(:mod:`segment_lineage.ingest.schemas`).
"""

from __future__ import annotations

import pyarrow as pa

from segment_lineage.lineage.core.schema import DataType, Schema

_TO_ARROW = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "time": pa.time64("us"),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}


def to_arrow(kind: DataType) -> pa.DataType:
    if kind.name in _TO_ARROW:
        return _TO_ARROW[kind.name]
    if kind.name == "decimal":
        precision, scale = kind.params
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    if kind.name == "fixed_binary":
        return pa.binary(kind.params[0])
    if kind.name == "list":
        return pa.list_(to_arrow(kind.children[0].type))
    if kind.name == "map":
        return pa.map_(to_arrow(kind.children[0].type), to_arrow(kind.children[1].type))
    if kind.name == "struct":
        return pa.struct([pa.field(f.name, to_arrow(f.type)) for f in kind.children])
    raise ValueError(f"no Arrow type for {kind}")  # check_type admits no other


def arrow_schema(schema: Schema) -> pa.Schema:
    """The Arrow schema of a table schema, column for column."""
    return pa.schema([pa.field(f.name, to_arrow(f.type)) for f in schema])
