"""A table's head (its config, bucket ids and history tail: the one node a
commit compares and swaps) and its floor (the commit holding the table's
commits, and until when).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from segment_lineage.lineage.codec.buckets import KINDS, bucket_ids
from segment_lineage.lineage.codec.columns import schema_from_json, type_to_json
from segment_lineage.lineage.codec.envelope import (
    _Bad,
    _decoding,
    _enum,
    _envelope,
    _envelope_at,
    _get,
    _opt,
    _str_list,
    dumps,
    parse,
)
from segment_lineage.lineage.codec.history import history_from_dict, history_to_dict
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import MirrorFormat, TableConfig, TableType, TimeGranularity, TimeUnit
from segment_lineage.lineage.core.schema import PastSchema, Schema

HEAD = "segment-lineage.head"


# ---- table config -----------------------------------------------------------


def config_to_dict(config: TableConfig) -> dict[str, object]:
    d: dict[str, object] = {
        "name": config.name,
        "root": config.root,
        "type": config.table_type.value,
        "time_column": config.time_column,
        "replaced_segments_retention_ms": config.replaced_segments_retention_ms,
        "lineage_entry_cleanup_retention_ms": config.lineage_entry_cleanup_retention_ms,
        "max_snapshots": config.max_snapshots,
        "exclusive_delete": config.exclusive_delete,
        "time_retention_ms": config.time_retention_ms,
    }
    # Optional within format version 1, each written only when set: a record
    # without one (a table from before it was declared) reads as "not declared".
    optional: dict[str, object] = {
        "time_unit": _value(config.time_unit),
        "schema": None if config.schema is None else _schema_to_json(config.schema),  # at the first push
        "purging_ms": config.purging_ms,  # a table dropped with --purge
        "past_schemas": _pasts_to_json(config.past_schemas),  # recorded when a schema first changes
        "schema_replaced_at": config.schema_replaced_at,
        "schema_replaced_by": config.schema_replaced_by,
        "versions_kept": config.versions_kept,
        "time_granularity": _value(config.time_granularity),
        "mirror": _value(config.mirror),
        "mirror_retention_ms": config.mirror_retention_ms,
    }
    d.update((key, value) for key, value in optional.items() if value is not None)
    return d


def _value(member: Enum | None) -> object:
    """An optional enum setting as stored: its value, or None when not set."""
    return None if member is None else member.value


def _schema_to_json(schema: Schema) -> list[list[object]]:
    return [[f.name, type_to_json(f.type)] for f in schema]


def _pasts_to_json(spans: tuple[PastSchema, ...]) -> list[dict[str, object]] | None:
    """The spans of earlier schemas as stored; None when there are none (nothing stored)."""
    return [_past_to_json(span) for span in spans] if spans else None


def _past_to_json(span: PastSchema) -> dict[str, object]:
    schema = None if span.schema is None else _schema_to_json(span.schema)
    return {"since": span.since, "until": span.until, "schema": schema, "by": span.by}


def _past_from_json(value: object) -> tuple[PastSchema, ...]:
    """The spans of earlier schemas, oldest first: each ends where the next begins or before."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _Bad("past_schemas is not a list")
    out: list[PastSchema] = []
    for item in value:
        if not isinstance(item, dict):
            raise _Bad(f"malformed past schema {str(item)[:80]}")
        span = PastSchema(
            _get(item, "since", int),
            _get(item, "until", int),
            schema_from_json(item.get("schema")),
            _opt(item, "by", str),
        )
        if not 0 <= span.since < span.until or (out and span.since < out[-1].until):
            raise _Bad(f"past schema of versions {span.since} to {span.until} is out of order")
        out.append(span)
    return tuple(out)


def config_from_dict(d: Mapping[str, Any]) -> TableConfig:
    return TableConfig(
        name=_get(d, "name", str),
        root=_get(d, "root", str),
        table_type=_enum(TableType, d.get("type"), "table type"),
        time_column=_opt(d, "time_column", str),
        replaced_segments_retention_ms=_get(d, "replaced_segments_retention_ms", int),
        lineage_entry_cleanup_retention_ms=_get(d, "lineage_entry_cleanup_retention_ms", int),
        max_snapshots=_get(d, "max_snapshots", int),
        exclusive_delete=_get(d, "exclusive_delete", bool),
        time_retention_ms=_opt(d, "time_retention_ms", int),
        time_unit=None if d.get("time_unit") is None else _enum(TimeUnit, d["time_unit"], "time unit"),
        schema=schema_from_json(d.get("schema")),
        schema_replaced_at=_opt(d, "schema_replaced_at", int),
        schema_replaced_by=_opt(d, "schema_replaced_by", str),
        past_schemas=_past_from_json(d.get("past_schemas")),
        purging_ms=_opt(d, "purging_ms", int),
        versions_kept=_opt(d, "versions_kept", int),
        time_granularity=None
        if d.get("time_granularity") is None
        else _enum(TimeGranularity, d["time_granularity"], "time granularity"),
        mirror=None if d.get("mirror") is None else _enum(MirrorFormat, d["mirror"], "mirror format"),
        mirror_retention_ms=_opt(d, "mirror_retention_ms", int),
    )


FLOOR = "segment-lineage.floor"


def encode_floor(holder: str | None, until_ms: int) -> bytes:
    """A table's floor: the commit holding the table's commits, and until when."""
    return dumps(_envelope(FLOOR, holder=holder, until=until_ms))


def decode_floor(raw: bytes, where: str) -> tuple[str | None, int]:
    doc = parse(raw, FLOOR, where)
    with _decoding(where):
        return _opt(doc, "holder", str), _get(doc, "until", int)


# ---- head -------------------------------------------------------------------


@dataclass(frozen=True)
class Head:
    """A table's root record: the one node every commit compares and swaps."""

    config: TableConfig
    version: int
    commit_id: str
    buckets: Mapping[str, tuple[str, ...]]  # kind -> blob ids, a power of two each
    history_last: str | None  # newest sealed history chunk; each names the one before
    history_tail: tuple[HistoryRecord, ...]
    dropping: bool = False

    def bucket_blobs(self) -> set[str]:
        return bucket_ids(self.buckets)


# Format 2: a head whose table holds what format 1 has no field for (a schema,
# versions kept, a time granularity, a mirror). A build that reads format 1 only refuses
# it instead of reading it and writing the table back without those fields.
HEAD_V2 = 2
_V2_FIELDS = (
    "schema",
    "schema_replaced_at",
    "schema_replaced_by",
    "past_schemas",
    "purging_ms",
    "versions_kept",
    "time_granularity",
    "mirror",
    "mirror_retention_ms",
)


def encode_head(head: Head) -> bytes:
    table = config_to_dict(head.config)
    body = {
        "table": table,
        "version": head.version,
        "commit": head.commit_id,
        "buckets": {k: list(v) for k, v in head.buckets.items()},
        "history": {
            "last": head.history_last,
            "tail": [history_to_dict(r) for r in head.history_tail],
        },
        "dropping": head.dropping,
    }
    if any(field in table for field in _V2_FIELDS):
        return dumps(_envelope_at(HEAD, HEAD_V2, body))
    return dumps(_envelope(HEAD, **body))


def decode_head(raw: bytes, where: str) -> Head:
    doc = parse(raw, HEAD, where, (1, HEAD_V2))
    with _decoding(where):
        buckets_doc = _get(doc, "buckets", dict)
        buckets: dict[str, tuple[str, ...]] = {}
        for kind in KINDS:
            ids = tuple(_str_list(buckets_doc, kind))
            if not ids or len(ids) & (len(ids) - 1):
                raise _Bad(f"{kind} bucket count {len(ids)} is not a power of two")
            buckets[kind] = ids
        history = _get(doc, "history", dict)
        tail = tuple(history_from_dict(r) for r in _get(history, "tail", list))
        head = Head(
            config=config_from_dict(_get(doc, "table", dict)),
            version=_get(doc, "version", int),
            commit_id=_get(doc, "commit", str),
            buckets=buckets,
            history_last=_opt(history, "last", str),
            history_tail=tail,
            dropping=_get(doc, "dropping", bool),
        )
        if head.version < 0:
            raise _Bad("negative version")
        return head
