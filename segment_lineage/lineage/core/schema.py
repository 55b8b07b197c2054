"""A table's schema: its columns and their logical types, recorded at its
first push and enforced on every later one. No I/O here, and no engine: the
Arrow mappings are ``lineage.storage.arrow_types`` (to Arrow) and
``ingest.schemas`` (a push's input).

Types are logical, as Spark, Delta and Parquet readers see them: ``string``
whatever its Arrow width, ``timestamp`` for an instant (UTC-adjusted) and
``timestamp_ntz`` for a wall-clock time, whatever the unit. A push may bring
an integer column narrower than the recorded one (an ``int32`` CSV column into
an ``int64`` table) or a ``float`` for a ``double``: the writer widens it, so
every file of the table holds the recorded type. A column the table has and
the push lacks reads as null in the push's rows (as Delta's and Iceberg's
appends have it): every column may hold nulls (the time column excepted,
which every push must bring). Anything else that differs is refused, unless
the push asks:

* ``evolve``: columns the table does not have yet are added (files written
  before read them as null); nothing may change type, and a push that lacks
  a column while it brings a new one is refused (a rename, most likely).
* ``replace``: the push's schema becomes the table's (a full refresh only).

Each version keeps the schema it had (``core.schema_versions``): a read of a
past version shows its columns, and a rollback across a replacement brings
the old schema back with the old rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from segment_lineage.lineage.core.errors import InvalidInputError, RefusedError

PRIMITIVES = frozenset(
    {
        "null",
        "boolean",
        "int8",
        "int16",
        "int32",
        "int64",
        "float",
        "double",
        "string",
        "binary",
        "date",
        "time",
        "timestamp",
        "timestamp_ntz",
    }
)
PARAMETRIC = {"decimal": 2, "fixed_binary": 1}  # name -> number of parameters
NESTED = {"list": 1, "map": 2, "struct": None}  # name -> number of children (None: any, named)

MAX_COLUMNS = 4096
MAX_NAME_BYTES = 512
MAX_DEPTH = 32

# A narrower type the writer widens into the recorded one, losslessly.
_WIDENS_TO = {
    "int64": {"int8", "int16", "int32"},
    "int32": {"int8", "int16"},
    "int16": {"int8"},
    "double": {"float"},
}
MAX_DECIMAL_PRECISION = 38  # Spark's, and Parquet readers'
MAX_SCHEMA_BYTES = 64 * 1024  # a schema lives in the table's head, beside everything else


@dataclass(frozen=True)
class DataType:
    """A logical type: a primitive name, ``decimal(p, s)``, ``fixed_binary(n)``,
    ``list<T>``, ``map<K, V>`` or ``struct<name: T, ...>``."""

    name: str
    params: tuple[int, ...] = ()
    children: tuple[Field, ...] = ()  # list: ("element",); map: ("key", "value"); struct: its fields

    def __str__(self) -> str:
        if self.params:
            return f"{self.name}({', '.join(map(str, self.params))})"
        if self.name == "struct":
            return "struct<" + ", ".join(f"{f.name}: {f.type}" for f in self.children) + ">"
        if self.children:
            return f"{self.name}<{', '.join(str(f.type) for f in self.children)}>"
        return self.name


@dataclass(frozen=True)
class Field:
    name: str
    type: DataType


Schema = tuple[Field, ...]


class SchemaPolicy(StrEnum):
    """What a push may do to the recorded schema."""

    ENFORCE = "enforce"  # the push's columns are the table's (integers and floats may be narrower)
    EVOLVE = "evolve"  # and it may add columns
    REPLACE = "replace"  # its schema becomes the table's (a full refresh only)

    @staticmethod
    def parse(value: SchemaPolicy | str) -> SchemaPolicy:
        try:
            return SchemaPolicy(value.lower() if isinstance(value, str) else value)
        except ValueError:
            raise InvalidInputError(
                f"unknown schema policy {value!r}: use enforce, evolve or replace"
            ) from None


class SchemaMismatchError(RefusedError):
    """A push's columns do not fit the table's recorded schema. Nothing changed."""


def check_type(kind: DataType, depth: int = 0) -> DataType:
    """``kind``, or InvalidInputError naming what is wrong with it."""
    if depth > MAX_DEPTH:
        raise InvalidInputError(f"type nests deeper than {MAX_DEPTH} levels")
    if not _well_formed(kind):
        raise InvalidInputError(f"malformed type {kind}")
    if kind.name in NESTED:
        check_fields(kind.children, f"{kind.name} field", depth + 1)
    return kind


def _well_formed(kind: DataType) -> bool:
    """Whether ``kind`` has the parameters and children its name takes (not
    looking into the children); InvalidInputError for a name no type has."""
    if kind.name in PRIMITIVES:
        return not kind.params and not kind.children
    if kind.name in PARAMETRIC:
        return (
            len(kind.params) == PARAMETRIC[kind.name]
            and not kind.children
            and all(_is_parameter(p) for p in kind.params)
        )
    if kind.name in NESTED:
        wanted = NESTED[kind.name]
        return not kind.params and (wanted is None or len(kind.children) == wanted)
    raise InvalidInputError(f"unknown type {kind.name!r}")


def _is_parameter(value: object) -> bool:
    """A type parameter (a precision, a scale, a width) is a plain int from 0 to a million."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 1_000_000


def check_fields(fields: Sequence[Field], what: str = "column", depth: int = 0) -> Schema:
    """``fields`` as a schema, or InvalidInputError: names non-empty text of
    at most MAX_NAME_BYTES, unique even ignoring case (Spark and SQL engines
    do), at most MAX_COLUMNS of them, MAX_SCHEMA_BYTES in all."""
    if len(fields) > MAX_COLUMNS:
        raise InvalidInputError(f"{len(fields)} {what}s: at most {MAX_COLUMNS} are recorded")
    if depth == 0:
        _check_schema_size(fields)
    seen: dict[str, str] = {}  # name -> its case-folded form
    for field in fields:
        _check_field_name(field.name, what)
        _check_unique(field.name, what, seen)
        seen[field.name] = field.name.casefold()
        check_type(field.type, depth)
    return tuple(fields)


def _check_schema_size(fields: Sequence[Field]) -> None:
    size = schema_bytes(fields)
    if size > MAX_SCHEMA_BYTES:
        raise InvalidInputError(
            f"the columns take {size // 1024} KB to record, at most {MAX_SCHEMA_BYTES // 1024} KB: "
            "shorter names, or fewer columns"
        )


def _check_field_name(name: str, what: str) -> None:
    """A field's name is 1 to MAX_NAME_BYTES of printable UTF-8 text."""
    size = len(name.encode("utf-8", "replace")) if isinstance(name, str) else 0
    if not 0 < size <= MAX_NAME_BYTES or not name.isprintable() or not _utf8(name):
        raise InvalidInputError(
            f"invalid {what} name {name!r}: 1 to {MAX_NAME_BYTES} bytes of printable UTF-8 text"
        )


def _check_unique(name: str, what: str, seen: dict[str, str]) -> None:
    """``name`` is none of the names ``seen`` before it, not even ignoring case."""
    if name in seen:
        raise InvalidInputError(f"{what} {name!r} appears twice")
    if name.casefold() in seen.values():
        other = next(k for k, v in seen.items() if v == name.casefold())
        raise InvalidInputError(
            f"{what}s {other!r} and {name!r} differ only in case, "
            "which Spark and SQL engines do not tell apart"
        )


def schema_bytes(fields: Sequence[Field]) -> int:
    """About what recording ``fields`` takes, in bytes."""
    return sum(len(f.name.encode("utf-8", "replace")) + len(str(f.type)) + 8 for f in fields)


@dataclass(frozen=True)
class PastSchema:
    """The schema versions ``since`` to ``until - 1`` of a table had (None:
    none recorded yet, before its first push); ``by``: the push whose
    replacement brought it, if one did."""

    since: int
    until: int
    schema: Schema | None
    by: str | None = None


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


NULL = DataType("null")


def widens(recorded: DataType, given: DataType) -> bool:
    """Whether a column of type ``given`` may be written as ``recorded``: the
    same type, a narrower integer or float, or no values at all (``null``);
    a column recorded ``null`` (no values yet) takes any type."""
    return recorded == given or NULL in (given, recorded) or given.name in _WIDENS_TO.get(recorded.name, ())


@dataclass(frozen=True)
class SchemaDiff:
    missing: tuple[Field, ...]  # recorded, not in the push
    added: tuple[Field, ...]  # in the push, not recorded
    changed: tuple[tuple[str, DataType, DataType], ...]  # name, recorded, given (not a widening)

    def describe(self, limit: int = 8) -> str:
        parts = [f"column {f.name!r} ({f.type}) is missing" for f in self.missing]
        parts += [f"column {f.name!r} ({f.type}) is new" for f in self.added]
        parts += [f"column {n!r} is {g}, the table has {r}" for n, r, g in self.changed]
        shown = "; ".join(parts[:limit])
        return shown + (f"; and {len(parts) - limit} more" if len(parts) > limit else "")

    def refused(self, limit: int = 8) -> str:
        """What a push that does not fit is refused for. A column gone while
        a new one comes may be a rename: both sides are named. Otherwise the
        changed types and new columns, with the columns it lacks said apart,
        as accepted (alone, they read as null in its rows)."""
        if self.added and self.missing:
            return self.describe(limit)
        why = SchemaDiff((), self.added, self.changed).describe(limit)
        if not self.missing:
            return why
        names = ", ".join(repr(f.name) for f in self.missing[:limit])
        more = f" and {len(self.missing) - limit} more" if len(self.missing) > limit else ""
        return f"{why} (it also lacks {names}{more}, which alone is accepted: read as null)"


def compare(recorded: Schema, given: Schema) -> SchemaDiff:
    have = {f.name: f for f in recorded}
    got = {f.name: f for f in given}
    return SchemaDiff(
        missing=tuple(f for f in recorded if f.name not in got),
        added=tuple(f for f in given if f.name not in have),
        changed=tuple(
            (f.name, have[f.name].type, f.type)
            for f in given
            if f.name in have and not widens(have[f.name].type, f.type)
        ),
    )


def written_schema(recorded: Schema | None, given: Schema) -> Schema:
    """The columns as the writer writes them: ``given``, with each column the
    table records in a wider type widened to it."""
    if recorded is None:
        return given
    have = {f.name: f.type for f in recorded}
    return tuple(
        Field(f.name, have[f.name])
        if f.name in have and have[f.name] != NULL and widens(have[f.name], f.type)
        else f
        for f in given
    )


def typed(recorded: Schema, given: Schema) -> tuple[Schema, tuple[Field, ...]]:
    """``recorded`` with each column it holds as ``null`` (no values seen
    yet) given the type ``given`` brings, and those columns."""
    got = {f.name: f.type for f in given}
    filled = tuple(
        Field(f.name, got[f.name]) for f in recorded if f.type == NULL and got.get(f.name, NULL) != NULL
    )
    names = {f.name: f for f in filled}
    return tuple(names.get(f.name, f) for f in recorded), filled


def resolve(
    recorded: Schema | None,
    given: Schema,
    policy: SchemaPolicy,
    table: str,
    *,
    full_refresh: bool,
    mirrored: bool = False,
) -> tuple[Schema, str | None]:
    """The table's schema after a push of ``given`` columns, and what the
    history records of it (None: unchanged). SchemaMismatchError when the
    push does not fit under ``policy``, or (``mirrored``) brings a column
    the table's Delta mirror could not publish; InvalidInputError for a
    malformed schema or a replace that is not a full refresh."""
    recorded_after, note = _resolve(recorded, given, policy, table, full_refresh)
    if mirrored:
        mirror_columns(recorded_after, table)
    return recorded_after, None if note is None else note[:MAX_NOTE]


# Logical types Delta Lake has no type for: a table with a mirror cannot hold them.
NOT_IN_DELTA = frozenset({"time"})


def mirror_columns(schema: Schema | None, table: str) -> Schema:
    """The columns a Delta mirror publishes for a recorded schema: every one
    but those still typed null (no value pushed yet). SchemaMismatchError
    naming a column of a type Delta Lake lacks."""
    if schema is None:
        return ()
    out = []
    for column in schema:
        if column.type.name == "null":
            continue
        bad = _not_in_delta(column.type)
        if bad is not None:
            raise SchemaMismatchError(
                f"column {column.name!r} of table {table!r} has type {bad}, which Delta Lake cannot hold",
                table=table,
                remedy="a table with a Delta mirror cannot have this column: push without it, or "
                "keep the table without a mirror",
            )
        out.append(column)
    if schema and not out:
        raise SchemaMismatchError(
            f"every column of table {table!r} is typed null (no value in any row): a Delta mirror "
            "needs at least one column with a type",
            table=table,
            remedy="push at least one column with values",
        )
    return tuple(out)


def _not_in_delta(kind: DataType) -> DataType | None:
    if kind.name in NOT_IN_DELTA or kind.name == "null":
        return kind
    for child in kind.children:
        bad = _not_in_delta(child.type)
        if bad is not None:
            return bad
    return None


MAX_NOTE = 1000  # characters of a history record's schema note


def _resolve(
    recorded: Schema | None, given: Schema, policy: SchemaPolicy, table: str, full_refresh: bool
) -> tuple[Schema, str | None]:
    check_fields(given)
    if policy is SchemaPolicy.REPLACE and not full_refresh:
        raise InvalidInputError(
            "only a refresh push replaces every segment, so only it may replace the schema"
        )
    written = written_schema(recorded, given)
    if recorded is None:
        return written, f"schema recorded: {len(written)} columns"
    if policy is SchemaPolicy.REPLACE:
        return _replaced(recorded, written)
    return _fitted(recorded, given, policy, table)


def _replaced(recorded: Schema, written: Schema) -> tuple[Schema, str | None]:
    """The schema a replace push records: its own, and what changed (None: nothing)."""
    if written == recorded:
        return recorded, None
    return written, f"schema replaced: {compare(recorded, written).describe(4)}"


def _fitted(recorded: Schema, given: Schema, policy: SchemaPolicy, table: str) -> tuple[Schema, str | None]:
    """The schema after an enforce or evolve push: its null columns typed,
    with the columns an evolve adds; SchemaMismatchError when it does not fit."""
    diff = compare(recorded, given)
    after, filled = typed(recorded, given)
    note = "schema typed: " + ", ".join(f"{f.name} ({f.type})" for f in filled[:8]) if filled else None
    if not diff.changed and not diff.added:  # columns it lacks read as null in its rows
        return after, note
    if diff.added and not diff.changed and not diff.missing and policy is SchemaPolicy.EVOLVE:
        return (*after, *diff.added), _evolved_note(diff.added, note)
    raise _mismatch(recorded, given, diff, table)


def _evolved_note(added: tuple[Field, ...], typed_note: str | None) -> str:
    """The history's note for an evolve that added columns (and typed others)."""
    names = ", ".join(f"{f.name} ({f.type})" for f in added[:8])
    more = f" and {len(added) - 8} more" if len(added) > 8 else ""
    return f"schema evolved: added {names}{more}" + (f"; {typed_note}" if typed_note else "")


def _columns(schema: Schema) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema[:20]) + (" ..." if len(schema) > 20 else "")


def _mismatch(recorded: Schema, given: Schema, diff: SchemaDiff, table: str) -> SchemaMismatchError:
    """Why the input does not fit the recorded schema, and what to do."""
    if diff.added and not diff.changed and not diff.missing:
        hint = "push with --evolve-schema to add the new columns"
    elif diff.added and not diff.changed:  # one column gone and one new: a rename, not an evolution
        hint = (
            "a column the table has is missing while a new one comes: if it was renamed, push it under "
            "its old name; else add the missing columns to the input, or replace the schema with a "
            "refresh push and --replace-schema"
        )
    else:
        hint = "fix the input's columns, or replace the schema with a refresh push and --replace-schema"
    return SchemaMismatchError(
        f"the input does not fit table {table!r}: {diff.refused()}",
        table=table,
        expected=_columns(recorded),
        found=_columns(given),
        remedy=hint,
    )


def render(schema: Schema) -> list[str]:
    """One line per column: ``name: type``."""
    return [f"{f.name}: {f.type}" for f in schema]
