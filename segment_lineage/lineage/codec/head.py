"""A table's head (its config, bucket ids and history tail: the one node a
commit compares and swaps) and its floor (the commit holding the table's
commits, and until when).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from segment_lineage.lineage.codec.buckets import KINDS, bucket_ids
from segment_lineage.lineage.codec.envelope import (
    _Bad,
    _decoding,
    _enum,
    _envelope,
    _get,
    _opt,
    _str_list,
    dumps,
    parse,
)
from segment_lineage.lineage.codec.history import history_from_dict, history_to_dict
from segment_lineage.lineage.core.model import (
    HistoryRecord,
    TableConfig,
    TableType,
    TimeUnit,
)

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
    # Optional within format version 1: a record without it (every table
    # created before units were declared) reads as "not declared".
    if config.time_unit is not None:
        d["time_unit"] = config.time_unit.value
    return d


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


def encode_head(head: Head) -> bytes:
    return dumps(
        _envelope(
            HEAD,
            table=config_to_dict(head.config),
            version=head.version,
            commit=head.commit_id,
            buckets={k: list(v) for k, v in head.buckets.items()},
            history={
                "last": head.history_last,
                "tail": [history_to_dict(r) for r in head.history_tail],
            },
            dropping=head.dropping,
        )
    )


def decode_head(raw: bytes, where: str) -> Head:
    doc = parse(raw, HEAD, where)
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
