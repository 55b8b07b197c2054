"""Each version keeps the schema it had: the spans the config records
(pure), their codec, and reads and rollbacks across schema changes on both
stores (``manager`` runs each test on the in-memory store and on real
ZooKeeper)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pytest

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage import codec
from segment_lineage.lineage.core.errors import RefusedError
from segment_lineage.lineage.core.model import TableConfig
from segment_lineage.lineage.core.schema import DataType, Field, PastSchema
from segment_lineage.lineage.core.schema_versions import (
    CURRENT,
    MAX_PAST_SCHEMAS,
    columns_known,
    config_at,
    reads,
    span_at,
    with_schema,
)
from segment_lineage.lineage.manager import LineageManager

INT64, INT32, STRING = DataType("int64"), DataType("int32"), DataType("string")
A = (Field("a", STRING),)
AB = (Field("a", STRING), Field("b", INT64))
C = (Field("c", INT64),)


def config(**changes: object) -> TableConfig:
    return dataclasses.replace(TableConfig.build("t", "/r"), **changes)  # type: ignore[arg-type]


# ---- the spans, pure ----------------------------------------------------------------------


def test_each_change_closes_a_span_and_each_version_finds_its_schema() -> None:
    c = with_schema(config(), A, 1)  # the first push, at version 1
    c = with_schema(c, AB, 4)  # evolved at 4
    c = with_schema(c, C, 9)  # replaced at 9
    assert c.schema == C
    assert c.past_schemas == (PastSchema(0, 1, None), PastSchema(1, 4, A), PastSchema(4, 9, AB))
    assert [config_at(c, v).schema for v in (0, 1, 3, 4, 8, 9, 12)] == [None, A, A, AB, AB, C, C]
    assert span_at(c, 9) == PastSchema(9, CURRENT, C)
    assert with_schema(c, C, 11) is c  # the same schema: nothing recorded


def test_spans_no_retained_version_needs_go_and_the_rest_stay_bounded() -> None:
    c = config(versions_kept=10)
    c = with_schema(with_schema(c, A, 1), AB, 3)
    c = with_schema(c, C, 30)  # versions 1 to 20 are no longer retained
    assert c.past_schemas == (PastSchema(3, 30, AB),)
    assert span_at(c, 2) is None and config_at(c, 2).schema == C  # unknown: read as it is
    many = config()
    for version in range(1, 3 * MAX_PAST_SCHEMAS):
        many = with_schema(many, (Field(f"c{version}", INT64),), version)
    assert len(many.past_schemas) == MAX_PAST_SCHEMAS
    wide = tuple(Field(f"{'x' * 500}{i}", INT64) for i in range(100))  # about 50 KB each
    big = config()
    for version in range(1, 6):
        big = with_schema(big, (*wide, Field(f"v{version}", INT64)), version)
    assert 0 < len(big.past_schemas) <= 3  # 128 KB of past schemas at most


def test_a_table_replaced_before_versions_kept_schemas_knows_only_since_then() -> None:
    legacy = config(schema=C, schema_replaced_at=7, schema_replaced_by="e7")
    assert span_at(legacy, 6) is None and not columns_known(legacy, 6)
    assert span_at(legacy, 7) == PastSchema(7, CURRENT, C, "e7") and columns_known(legacy, 8)
    evolved_only = config(schema=AB)  # no replacement: every version reads with the current columns
    assert span_at(evolved_only, 0) is not None and columns_known(evolved_only, 0)


def test_what_a_schema_reads() -> None:
    assert reads(AB, A)  # a column added reads as null
    assert reads((Field("a", STRING), Field("n", INT64)), (Field("a", STRING), Field("n", INT32)))  # widened
    assert not reads(A, AB)  # the older files have a column the current schema lacks
    assert not reads(C, A) and reads(C, None) and not reads(None, A)


def test_the_spans_survive_the_codec_and_malformed_ones_fail_closed() -> None:
    c = with_schema(with_schema(with_schema(config(), A, 1), AB, 3), C, 5)
    named = dataclasses.replace(c.past_schemas[-1], by="e")
    c = dataclasses.replace(c, past_schemas=(*c.past_schemas[:-1], named))
    head = codec.Head(c, 6, "x", {k: ("b",) for k in codec.KINDS}, None, ())
    raw = codec.encode_head(head)
    assert codec.decode_head(raw, "/h").config == c
    for bad in (
        [{"since": 3, "until": 1, "schema": None, "by": None}],
        [{"since": 0, "until": 4, "schema": None}, {"since": 2, "until": 5, "schema": None}],
        [["a"]],
        {"since": 0},
    ):
        doc = json.loads(raw)
        doc["table"]["past_schemas"] = bad
        with pytest.raises(Exception, match=r"past.schema"):
            codec.decode_head(json.dumps(doc).encode(), "/h")


# ---- on both stores ------------------------------------------------------------------------


def column(m: LineageManager, table: str, name: str, version: int | None = None) -> list[object]:
    with SnapshotReader(m, table, version) as reader:
        data = reader.to_arrow()
        return data.column(name).to_pylist() if name in data.column_names else []


def test_a_rollback_across_an_evolution_keeps_the_added_column(
    manager: LineageManager, tmp_path: Path
) -> None:
    """The current schema reads the older files (the column added reads as
    null): it stays, so pushes planned on it and the mirror go on."""
    m = manager
    m.create_table(TableConfig.build("ev", str(tmp_path / "ev"), "APPEND"))
    push_arrow(m, "ev", [pa.table({"a": ["x"]})], mode="append")
    before = m.table("ev").version
    push_arrow(m, "ev", [pa.table({"a": ["y"], "b": [1]})], mode="append", schema_policy="evolve")
    assert m.table_as_of("ev", before).config.schema == A  # the version's own columns
    assert column(m, "ev", "b", before) == []
    m.rollback("ev", before)
    assert m.table("ev").config.schema == AB
    assert column(m, "ev", "a") == ["x"] and column(m, "ev", "b") == [None]
    assert m.history("ev", 1)[0].detail.schema is None  # type: ignore[union-attr]


def test_rollbacks_back_and_forth_across_two_replacements(manager: LineageManager, tmp_path: Path) -> None:
    m = manager
    m.create_table(TableConfig.build("rr", str(tmp_path / "rr"), max_snapshots=5))
    push_arrow(m, "rr", [pa.table({"a": ["x"]})])
    v1 = m.table("rr").version
    first = push_arrow(m, "rr", [pa.table({"c": [1]})], schema_policy="replace")
    v2 = m.table("rr").version
    second = push_arrow(m, "rr", [pa.table({"a": [7]})], schema_policy="replace")  # a: string -> int64
    v3 = m.table("rr").version
    assert [m.table_as_of("rr", v).config.schema for v in (v1, v2, v3)] == [A, C, (Field("a", INT64),)]
    m.rollback("rr", v1)
    assert m.table("rr").config.schema == A and column(m, "rr", "a") == ["x"]
    m.rollback("rr", v2)
    assert m.table("rr").config.schema == C and column(m, "rr", "c") == [1]
    with pytest.raises(RefusedError, match="replaced the table's schema"):
        m.revert_replace("rr", first.entry_id)  # its data has the columns shown again
    m.rollback("rr", v3)
    assert column(m, "rr", "a") == [7]
    with pytest.raises(RefusedError, match="replaced the table's schema"):
        m.revert_replace("rr", second.entry_id)
    for version, schema in ((v1, A), (v2, C), (v3, (Field("a", INT64),))):  # each with its own columns
        assert m.table_as_of("rr", version).config.schema == schema
