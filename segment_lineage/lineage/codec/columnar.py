"""Records stored in columns (bucket format 2): one list per field, of one
length. An optional field is left out when no record has it, and stored
sparse, as {"<index>": value}, when fewer than half have it, so a bucket
grows by what one record adds. Shared by the segment and pending-deletion
codecs, which name their columns and check their values."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from segment_lineage.lineage.codec.envelope import _Bad


@dataclass(frozen=True)
class Columns:
    """A bucket's records as stored in format 2: equal-length lists (an
    optional field's absent values are None)."""

    kind: str  # the bucket's kind: segments or pending
    columns: Mapping[str, list[Any]]
    count: int
    optional: frozenset[str]

    def rows(self) -> list[dict[str, Any]]:
        """The records one by one, as format 1 holds them (absent: left out)."""
        cols = self.columns
        return [
            {k: v[i] for k, v in cols.items() if not (k in self.optional and v[i] is None)}
            for i in range(self.count)
        ]


def encode(columns: Mapping[str, list[Any]], optional: Collection[str]) -> dict[str, object]:
    """Format 2's ``columns``: an optional column with no value left out, one
    with values for fewer than half the records stored by index."""
    out: dict[str, object] = {}
    for name, values in columns.items():
        if name in optional:
            given = {str(i): v for i, v in enumerate(values) if v is not None}
            if not given:
                continue
            if 2 * len(given) < len(values):
                out[name] = given
                continue
        out[name] = values
    return out


def decode(kind: str, columns: Mapping[str, Any], names: Sequence[str], optional: frozenset[str]) -> Columns:
    """Format 2's ``columns``, their shape checked (raises _Bad); the first
    of ``names`` is required and gives the count."""
    unknown = sorted(set(columns) - set(names))
    if unknown:
        raise _Bad(f"unknown column(s) {', '.join(map(repr, unknown))}")
    required = [k for k in names if k not in optional]
    missing = [k for k in required if k not in columns]
    if missing:
        raise _Bad(f"missing column(s) {', '.join(map(repr, missing))}")
    if not all(isinstance(columns[k], list) for k in required):
        raise _Bad("columns must be lists")
    count = len(columns[names[0]])
    dense = {k: _dense(k, v, count, optional) if isinstance(v, dict) else v for k, v in columns.items()}
    if any(not isinstance(v, list) or len(v) != count for v in dense.values()):
        raise _Bad("columns must be lists of one length, or objects by index for optional fields")
    return Columns(kind, dense, count, optional)


def _dense(column: str, sparse: Mapping[str, Any], count: int, optional: frozenset[str]) -> list[Any]:
    """An optional column stored as {"<index>": value}, as a list."""
    if column not in optional:
        raise _Bad(f"column {column!r} must be a list")
    out: list[Any] = [None] * count
    for key, value in sparse.items():
        if not (key.isascii() and key.isdigit() and str(int(key)) == key and int(key) < count):
            raise _Bad(f"column {column!r}: index {key!r} is not one of the bucket's {count} records")
        if value is None:
            raise _Bad(f"column {column!r}: index {key!r} holds null")
        out[int(key)] = value
    return out


INT: frozenset[type] = frozenset({int})
OPT_INT: frozenset[type] = frozenset({int, type(None)})
STR: frozenset[type] = frozenset({str})
OPT_STR: frozenset[type] = frozenset({str, type(None)})


def typed(values: Sequence[object], types: frozenset[type]) -> bool:
    """Whether every value is of exactly one of ``types`` (bool is no int), at C speed."""
    return set(map(type, values)) <= types
