"""A push set's spec file (``lineage push-set SPEC.toml``), read and checked
before anything else happens: one ``[[push]]`` block per table.

    [[push]]
    table = "facts"
    input = "out/facts"          # relative to the spec file's folder
    mode = "refresh"             # optional: the table's type decides
    format = "parquet"           # optional: parquet, csv or json
    interval = "2024-01-01/2024-02-01"   # replace-range only
    evolve_schema = true         # optional: add the input's new columns
    job_id = "facts-2024-01-31"  # optional: this table's own job
    audit_min_rows = 1000        # optional: the push's audit (as --audit-*)
    audit_max_change = 20
    audit_not_null = ["id"]
    audit_sql = "SELECT count(*) > 0 FROM staged"

Every problem is an InvalidInputError naming the block and the key.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.lineage.manager.together import check_set_tables

SPEC_MAX_BYTES = 1024 * 1024
KEYS: dict[str, type | tuple[type, ...]] = {
    "table": str,
    "input": str,
    "mode": str,
    "format": str,
    "interval": str,
    "evolve_schema": bool,
    "job_id": str,
    "audit_min_rows": int,
    "audit_max_change": (int, float),
    "audit_not_null": list,
    "audit_sql": str,
}

# A block's values, once their types are checked: each check in order, and
# the error when it fails ({where}: the block; {job}: its job id).
_VALUE_CHECKS: tuple[tuple[Callable[[dict[str, Any]], object], str], ...] = (
    (lambda raw: raw.get("table"), "{where} needs 'table'"),
    (lambda raw: raw.get("input"), "{where} needs 'input'"),
    (lambda raw: raw["input"].strip(), "{where}: 'input' is empty: name the files or directory to push"),
    # An empty job id would silently push without the guard against a retried job pushing twice.
    (
        lambda raw: "job_id" not in raw or (raw["job_id"].strip() and raw["job_id"] == raw["job_id"].strip()),
        "{where}: invalid job id {job!r}: give a non-empty id without surrounding spaces",
    ),
    (
        lambda raw: all(isinstance(c, str) and c for c in raw.get("audit_not_null", [])),
        "{where}: 'audit_not_null' lists column names",
    ),
)


@dataclass(frozen=True)
class SpecBlock:
    """One table of the set, as the spec gives it (the input made absolute)."""

    table: str
    input: str
    mode: str | None = None
    format: str = "parquet"
    interval: str | None = None
    evolve_schema: bool = False
    job_id: str | None = None
    audit_min_rows: int | None = None
    audit_max_change: float | None = None
    audit_not_null: tuple[str, ...] = ()
    audit_sql: str | None = None


def read_spec(path: str) -> list[SpecBlock]:
    """The blocks of the spec file at ``path``."""
    spec = Path(path)
    try:
        size = spec.stat().st_size
        if not spec.is_file():
            raise InvalidInputError(f"push set spec {path!r} is not a file")
        if size > SPEC_MAX_BYTES:
            raise InvalidInputError(f"push set spec {path!r} is {size} bytes; at most {SPEC_MAX_BYTES}")
        text = spec.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise InvalidInputError(f"push set spec {path!r} does not exist") from None
    except UnicodeDecodeError:
        raise InvalidInputError(f"push set spec {path!r} is not UTF-8 text") from None
    except OSError as exc:
        raise InvalidInputError(f"push set spec {path!r} cannot be read: {exc.strerror or exc}") from None
    return parse_spec(text, spec.resolve().parent, path)


def parse_spec(text: str, folder: Path, name: str = "spec") -> list[SpecBlock]:
    """The blocks of a spec's text; relative inputs are taken from ``folder``."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(f"push set spec {name!r} is not valid TOML: {exc}") from None
    extra = sorted(set(doc) - {"push"})
    if extra:
        raise InvalidInputError(f"push set spec {name!r}: unknown key {extra[0]!r} (only [[push]] blocks)")
    blocks = doc.get("push")
    if not isinstance(blocks, list) or not blocks:
        raise InvalidInputError(f"push set spec {name!r} has no [[push]] block")
    parsed = [_block(b, i + 1, folder) for i, b in enumerate(blocks)]
    check_set_tables([b.table for b in parsed])  # names, count and twins, before any input is read
    return parsed


def _block(raw: Any, number: int, folder: Path) -> SpecBlock:
    where = f"[[push]] block {number}"
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{where} is not a table of keys")
    _check_types(raw, where)
    for holds, message in _VALUE_CHECKS:
        if not holds(raw):
            raise InvalidInputError(message.format(where=where, job=raw.get("job_id", "")[:64]))
    not_null = raw.get("audit_not_null", [])
    change = raw.get("audit_max_change")
    return SpecBlock(
        table=raw["table"],
        input=_input(raw["input"], folder),
        mode=raw.get("mode"),
        format=raw.get("format", "parquet"),
        interval=raw.get("interval"),
        evolve_schema=raw.get("evolve_schema", False),
        job_id=raw.get("job_id"),
        audit_min_rows=raw.get("audit_min_rows"),
        audit_max_change=None if change is None else float(change),
        audit_not_null=tuple(not_null),
        audit_sql=raw.get("audit_sql"),
    )


def _check_types(raw: dict[str, Any], where: str) -> None:
    """Every key of the block is known, with a value of its type."""
    for key, value in raw.items():
        kind = KEYS.get(key)
        if kind is None:
            raise InvalidInputError(f"{where}: unknown key {key!r} (known: {', '.join(KEYS)})")
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise InvalidInputError(f"{where}: {key!r} has the wrong type ({type(value).__name__})")


def _input(given: str, folder: Path) -> str:
    """A local input relative to the spec's folder; a URI (s3://, ...) as it is."""
    if "://" in given or given.startswith("file:"):
        return given
    path = Path(given).expanduser()
    return str(path if path.is_absolute() else folder / path)
