"""Columns as stored: a column type as its name (a primitive) or as
[name, params, fields], a schema as a list of [name, type] pairs. One codec,
used by a head's config and by a staged push's record."""

from __future__ import annotations

from segment_lineage.lineage.codec.envelope import _Bad
from segment_lineage.lineage.core.schema import DataType, Field, Schema, check_fields


def type_to_json(kind: DataType) -> object:
    """A primitive as its name; another type as [name, params, fields]."""
    if not kind.params and not kind.children:
        return kind.name
    return [kind.name, list(kind.params), [[f.name, type_to_json(f.type)] for f in kind.children]]


def _type_from_json(value: object) -> DataType:
    if isinstance(value, str):
        return DataType(value)
    if not isinstance(value, list) or len(value) != 3 or not isinstance(value[0], str):
        raise _Bad(f"malformed column type {str(value)[:80]}")
    name, params, children = value
    if not isinstance(params, list) or not all(type(p) is int for p in params):
        raise _Bad(f"malformed parameters of type {name!r}")
    return DataType(name, tuple(params), _fields_from_json(children))


def _fields_from_json(value: object) -> tuple[Field, ...]:
    if not isinstance(value, list):
        raise _Bad("a schema must be a list of [name, type] pairs")
    out = []
    for item in value:
        if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str):
            raise _Bad(f"malformed column {str(item)[:80]}")
        out.append(Field(item[0], _type_from_json(item[1])))
    return tuple(out)


def schema_from_json(value: object) -> Schema | None:
    if value is None:
        return None
    return check_fields(_fields_from_json(value))
