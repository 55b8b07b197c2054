"""A table's schema: recorded at its first push, enforced on later ones,
evolved or replaced only when asked; in the store's codec, the history and
the CLI (on real ZooKeeper)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.schemas import from_arrow, schema_of
from segment_lineage.lineage import codec
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.lineage.core.model import Audit, Segment, TableConfig, TableState
from segment_lineage.lineage.core.schema import (
    DataType,
    Field,
    SchemaMismatchError,
    SchemaPolicy,
    check_fields,
    resolve,
)
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.arrow_types import arrow_schema
from tests.helpers.run import cli as run
from tests.helpers.run import cli_history as history

INT64, INT32, DOUBLE, STRING = DataType("int64"), DataType("int32"), DataType("double"), DataType("string")
BASE = (Field("carrier", STRING), Field("dep_delay", DOUBLE), Field("flight", INT64))


# ---- the rules, pure ---------------------------------------------------------------


def test_the_first_push_records_its_columns_and_the_same_columns_change_nothing() -> None:
    assert resolve(None, BASE, SchemaPolicy.ENFORCE, "t", full_refresh=False) == (
        BASE,
        "schema recorded: 3 columns",
    )
    shuffled = (BASE[2], BASE[0], BASE[1])  # readers match columns by name
    assert resolve(BASE, shuffled, SchemaPolicy.ENFORCE, "t", full_refresh=False) == (BASE, None)


def test_a_narrower_integer_or_float_is_widened_and_a_wider_one_refused() -> None:
    narrow = (BASE[0], Field("dep_delay", DataType("float")), Field("flight", INT32))
    assert resolve(BASE, narrow, SchemaPolicy.ENFORCE, "t", full_refresh=False) == (BASE, None)
    with pytest.raises(SchemaMismatchError, match="column 'flight' is int64, the table has int32"):
        resolve(
            (Field("flight", INT32),),
            (Field("flight", INT64),),
            SchemaPolicy.ENFORCE,
            "t",
            full_refresh=False,
        )


def test_a_changed_type_is_refused_for_itself_and_a_missing_column_is_said_to_be_fine() -> None:
    """Columns a push lacks are accepted (they read as null): a push refused
    for a changed type says so, and does not list the lacking column as a
    reason."""
    changed = (BASE[0], Field("dep_delay", STRING))  # 'flight' left out
    with pytest.raises(SchemaMismatchError) as caught:
        resolve(BASE, changed, SchemaPolicy.ENFORCE, "flights", full_refresh=False)
    message = caught.value.message
    assert "column 'dep_delay' is string, the table has double" in message
    assert "is missing" not in message
    assert "it also lacks 'flight', which alone is accepted: read as null" in message


def test_a_renamed_column_is_refused_naming_both_sides_even_when_evolving() -> None:
    renamed = (BASE[0], Field("dep_delay_min", DOUBLE), BASE[2])
    for policy in (SchemaPolicy.ENFORCE, SchemaPolicy.EVOLVE):
        with pytest.raises(SchemaMismatchError) as caught:
            resolve(BASE, renamed, policy, "flights", full_refresh=False)
        message = caught.value.message
        assert "column 'dep_delay' (double) is missing" in message
        assert "column 'dep_delay_min' (double) is new" in message
        assert caught.value.remedy is not None and "--replace-schema" in caught.value.remedy


def test_a_new_column_needs_evolve_and_is_then_added_at_the_end() -> None:
    wider = (*BASE, Field("tailnum", STRING))
    with pytest.raises(SchemaMismatchError, match="is new") as caught:
        resolve(BASE, wider, SchemaPolicy.ENFORCE, "t", full_refresh=False)
    assert caught.value.remedy == "push with --evolve-schema to add the new columns"
    after, note = resolve(BASE, (wider[3], *BASE), SchemaPolicy.EVOLVE, "t", full_refresh=False)
    assert after == wider and note == "schema evolved: added tailnum (string)"


def test_replacing_the_schema_takes_a_full_refresh() -> None:
    other = (Field("code", STRING), Field("name", STRING))
    with pytest.raises(InvalidInputError, match="only a refresh push"):
        resolve(BASE, other, SchemaPolicy.REPLACE, "t", full_refresh=False)
    after, note = resolve(BASE, other, SchemaPolicy.REPLACE, "t", full_refresh=True)
    assert after == other and note is not None and note.startswith("schema replaced")


def test_odd_columns_are_refused_by_name() -> None:
    for fields, problem in (
        ((Field("a", INT64), Field("a", STRING)), "appears twice"),
        ((Field("", INT64),), "invalid column name"),
        ((Field("x\n", INT64),), "invalid column name"),
        ((Field("\ud800", INT64),), "invalid column name"),
        ((Field("é" * 300, INT64),), "invalid column name"),
        ((Field("a", DataType("decimal", (10,))),), "malformed type"),
        ((Field("a", DataType("varchar")),), "unknown type"),
        (tuple(Field(f"c{i}", INT64) for i in range(5000)), "at most 4096"),
    ):
        with pytest.raises(InvalidInputError, match=problem):
            check_fields(fields)


def test_arrow_types_map_to_logical_types_and_back() -> None:
    source = pa.schema(
        [
            ("s", pa.large_string()),
            ("d", pa.dictionary(pa.int8(), pa.string())),
            ("t", pa.timestamp("ns", tz="America/New_York")),
            ("w", pa.timestamp("ms")),
            ("m", pa.decimal128(12, 2)),
            ("l", pa.large_list(pa.int32())),
            ("k", pa.map_(pa.string(), pa.float64())),
            ("r", pa.struct([("x", pa.int16()), ("y dot.", pa.date32())])),
        ]
    )
    schema = schema_of(source)
    assert [str(f.type) for f in schema] == [
        "string",
        "string",
        "timestamp",
        "timestamp_ntz",
        "decimal(12, 2)",
        "list<int32>",
        "map<string, double>",
        "struct<x: int16, y dot.: date>",
    ]
    assert schema_of(arrow_schema(schema)) == schema  # what readers read with holds the same types
    assert from_arrow(pa.timestamp("us", tz="UTC")) == DataType("timestamp")


def test_the_schema_survives_the_codec_and_a_bad_one_fails_closed() -> None:
    nested = (
        *BASE,
        Field(
            "r",
            DataType(
                "struct",
                (),
                (Field("x", INT64), Field("é ü", DataType("list", (), (Field("element", STRING),)))),
            ),
        ),
    )
    config = TableConfig.build("t", "/r")
    head = codec.Head(
        config.__class__(**{**config.__dict__, "schema": nested, "schema_replaced_at": 7}),
        3,
        "c",
        {k: ("b",) for k in codec.KINDS},
        None,
        (),
    )
    back = codec.decode_head(codec.encode_head(head), "/h")
    assert back.config.schema == nested and back.config.schema_replaced_at == 7
    doc = json.loads(codec.encode_head(head))
    doc["table"]["schema"] = [["a", ["decimal", [1], []]]]
    with pytest.raises(Exception, match="malformed type"):
        codec.decode_head(json.dumps(doc).encode(), "/h")


def test_the_commit_judges_the_schema_on_the_state_it_commits_to() -> None:
    """Two first pushes with different columns: each checked none recorded
    before it started, the second to commit is refused, nothing of it lands."""
    state = TableState(TableConfig.build("t", "/r"), version=1)
    audit = Audit("test")
    e1, e2 = str(uuid.uuid4()), str(uuid.uuid4())
    for entry in (e1, e2):
        to = [f"s{entry[:8]}"]
        state = transitions.start_replace(state, [], to, entry_id=entry, audit=audit, now_ms=1).state
    first = transitions.complete_replace(
        state, e1, [Segment(f"s{e1[:8]}", "p/e1.parquet", rows=1)], 2, schema=BASE, mode="append"
    )
    assert first.state.config.schema == BASE and first.detail is not None
    assert first.detail.schema == "schema recorded: 3 columns" and first.detail.mode == "append"
    other = (Field("code", STRING),)
    with pytest.raises(SchemaMismatchError):
        transitions.complete_replace(
            first.state, e2, [Segment(f"s{e2[:8]}", "p/e2.parquet", rows=1)], 3, schema=other, mode="append"
        )


# ---- through the API and the CLI, on real ZooKeeper ----------------------------------------


def test_reads_see_an_added_column_as_null_in_older_files(zk_manager: LineageManager, tmp_path: Path) -> None:
    from segment_lineage.ingest.readers import SnapshotReader

    zk_manager.create_table(TableConfig.build("grow", str(tmp_path / "grow"), "APPEND"))
    push_arrow(zk_manager, "grow", [pa.table({"a": [1]})], mode="append")
    narrow = pa.table({"a": pa.array([2], pa.int32()), "b": ["x"]})  # widened to the table's int64
    push_arrow(zk_manager, "grow", [narrow], mode="append", schema_policy="evolve")
    with SnapshotReader(zk_manager, "grow") as reader:
        rows = sorted(reader.to_arrow().to_pylist(), key=lambda r: r["a"])
        fs = reader.store.filesystem()
        files = [pq.read_schema(reader.store.path(s.location), filesystem=fs) for s in reader.segments]
    assert rows == [{"a": 1, "b": None}, {"a": 2, "b": "x"}]
    assert zk_manager.table("grow").config.schema == (Field("a", INT64), Field("b", STRING))
    assert {str(f.field("a").type) for f in files} == {"int64"}


def test_the_first_weeks_schema_surprises_are_refused_and_change_nothing(
    zk_hosts: str, tmp_path: Path
) -> None:
    """A renamed column, a time column turned integer, another table's file:
    refused before anything is written, naming what differs; history and
    the visible rows unchanged."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    stamps = pa.array([1_700_000_000_000_000, 1_700_000_100_000_000], pa.timestamp("us", tz="UTC"))
    pq.write_table(
        pa.table({"ts": stamps, "carrier": ["UA", "AA"], "dep_delay": [1.5, -2.0]}), inputs / "m1.parquet"
    )
    pq.write_table(
        pa.table({"ts": stamps, "carrier": ["UA", "AA"], "dep_delay_min": [1.5, -2.0]}),
        inputs / "renamed.parquet",
    )
    pq.write_table(
        pa.table(
            {"ts": [1_700_000_000_000, 1_700_000_100_000], "carrier": ["UA", "AA"], "dep_delay": [1.0, 2.0]}
        ),
        inputs / "int_ts.parquet",
    )
    pq.write_table(pa.table({"faa": ["JFK"], "name": ["Kennedy"]}), inputs / "airports.parquet")
    pq.write_table(
        pa.table({"ts": stamps, "carrier": ["B6", "DL"], "dep_delay": [0.0, 3.0], "tailnum": ["N1", "N2"]}),
        inputs / "wider.parquet",
    )
    root = str(tmp_path / "flights")
    assert (
        run(
            zk_hosts, "table", "create", "flights", "--root", root, "--type", "APPEND", "--time-column", "ts"
        )[0]
        == 0
    )
    code, _, err = run(zk_hosts, "push", "flights", "--input", str(inputs / "m1.parquet"), "--mode", "append")
    assert code == 0, err
    code, out, _ = run(zk_hosts, "table", "show", "flights")
    assert "ts: timestamp  (timestamp[us, tz=UTC])" in out and "carrier: string\n" in out, out
    code, out, _ = run(zk_hosts, "--json", "table", "show", "flights")
    shown = json.loads(out)
    assert "ts: timestamp" in shown["schema"] and "ts: timestamp[us, tz=UTC]" in shown["arrow_schema"]
    before = history(zk_hosts, "flights")
    assert before[0]["schema"] == "schema recorded: 3 columns" and before[0]["mode"] == "append"
    for name, message in (
        ("renamed.parquet", "column 'dep_delay' (double) is missing; column 'dep_delay_min' (double) is new"),
        ("int_ts.parquet", "column 'ts' is int64, the table has timestamp"),
        ("airports.parquet", "the input has no time column 'ts'"),
        ("wider.parquet", "column 'tailnum' (string) is new"),
    ):
        code, _, err = run(zk_hosts, "push", "flights", "--input", str(inputs / name), "--mode", "append")
        assert code == 1 and message in err, (name, err)
        assert history(zk_hosts, "flights") == before, name
    wider = ("--input", str(inputs / "wider.parquet"), "--mode", "append", "--evolve-schema")
    code, _, err = run(zk_hosts, "push", "flights", *wider)
    assert code == 0, err
    newest = history(zk_hosts, "flights")[0]
    assert newest["schema"] == "schema evolved: added tailnum (string)"
    code, out, _ = run(zk_hosts, "--json", "read", "flights", "--limit", "10")
    rows = json.loads(out)["rows"]
    assert sorted((r["carrier"], r["tailnum"]) for r in rows) == [
        ("AA", None),
        ("B6", "N1"),
        ("DL", "N2"),
        ("UA", None),
    ]
    code, _, err = run(zk_hosts, "push", "flights", "--input", str(inputs / "m1.parquet"), "--mode", "append",
                       "--replace-schema")  # fmt: skip
    assert code == 2 and "--replace-schema needs --mode refresh" in err


def test_a_refresh_may_replace_the_schema_and_a_rollback_across_it_brings_the_old_one_back(
    zk_hosts: str, tmp_path: Path
) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    pq.write_table(pa.table({"carrier": ["UA"], "name": ["United"]}), inputs / "airlines.parquet")
    pq.write_table(pa.table({"faa": ["JFK"], "name": ["Kennedy"]}), inputs / "airports.parquet")
    assert run(zk_hosts, "table", "create", "dim", "--root", str(tmp_path / "dim"))[0] == 0
    assert run(zk_hosts, "push", "dim", "--input", str(inputs / "airlines.parquet"))[0] == 0
    code, _, err = run(zk_hosts, "push", "dim", "--input", str(inputs / "airports.parquet"))
    assert code == 1 and "column 'carrier' (string) is missing" in err and "--replace-schema" in err
    first = history(zk_hosts, "dim")[0]["version"]
    code, _, err = run(
        zk_hosts, "push", "dim", "--input", str(inputs / "airports.parquet"), "--replace-schema"
    )
    assert code == 0, err
    replaced = history(zk_hosts, "dim")[0]
    assert str(replaced["schema"]).startswith("schema replaced")

    def columns(*args: str) -> list[str]:
        code, out, err = run(zk_hosts, "--json", *args)
        assert code == 0, err
        return list(json.loads(out)["schema" if args[0] == "table" else "columns"])

    def rows(*args: str) -> list[dict[str, object]]:
        code, out, err = run(zk_hosts, "--json", "read", "dim", *args)
        assert code == 0, err
        return list(json.loads(out)["rows"])

    assert columns("table", "show", "dim") == ["faa: string", "name: string"]
    assert rows("--as-of", str(first)) == [{"carrier": "UA", "name": "United"}]  # that version's columns
    code, out, _ = run(zk_hosts, "--json", "entries", "dim")
    replacer = json.loads(out)[-1]["id"]
    code, _, err = run(zk_hosts, "revert", "dim", replacer)
    assert code == 1 and f"lineage rollback dim --entry {replacer}" in err, err
    code, out, _ = run(zk_hosts, "--json", "rollback", "dim", "--entry", replacer, "--dry-run")
    hinted = str(json.loads(out)["target_version"])
    assert first <= int(hinted) < replaced["version"], out

    code, out, err = run(zk_hosts, "rollback", "dim", "--entry", replacer, "--dry-run")
    assert code == 0 and "schema of version" in out and "carrier (string) back" in out, out
    assert columns("table", "show", "dim") == ["faa: string", "name: string"]  # a dry run changes nothing
    code, out, err = run(zk_hosts, "rollback", "dim", "--entry", replacer)  # as the hint says
    assert code == 0 and "carrier (string) back" in out, out
    assert columns("table", "show", "dim") == ["carrier: string", "name: string"]
    assert rows() == [{"carrier": "UA", "name": "United"}]
    restored = history(zk_hosts, "dim")[0]
    assert restored["schema"] == (
        f"schema of version {hinted} restored: carrier (string) back, faa (string) gone"
    ), restored
    # Forward again: the replacement's schema comes back, and with it the refusal to revert it.
    code, _, err = run(zk_hosts, "rollback", "dim", "--to-version", str(replaced["version"]))
    assert code == 0, err
    assert columns("table", "show", "dim") == ["faa: string", "name: string"]
    assert rows() == [{"faa": "JFK", "name": "Kennedy"}]
    code, _, err = run(zk_hosts, "revert", "dim", replacer)
    assert code == 1 and "replaced the table's schema" in err, err


def test_spark_is_not_started_for_a_parquet_input_that_does_not_fit(zk_hosts: str, tmp_path: Path) -> None:
    pq.write_table(pa.table({"a": [1]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"b": [1]}), tmp_path / "b.parquet")
    assert run(zk_hosts, "table", "create", "sp", "--root", str(tmp_path / "sp"))[0] == 0
    assert run(zk_hosts, "push", "sp", "--input", str(tmp_path / "a.parquet"))[0] == 0
    command = [sys.executable, "-m", "segment_lineage", "--zk", zk_hosts, "push", "sp", "--engine", "spark",
               "--input", str(tmp_path / "b.parquet")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1 and "column 'a' (int64) is missing" in done.stderr
    assert "engine: spark" not in done.stderr  # refused before the engine was even named


def test_a_rollback_records_its_target(zk_manager: LineageManager, tmp_path: Path) -> None:
    zk_manager.create_table(TableConfig.build("rb", str(tmp_path / "rb")))
    push_arrow(zk_manager, "rb", [pa.table({"a": [1]})])
    target = zk_manager.table("rb").version
    push_arrow(zk_manager, "rb", [pa.table({"a": [2]})])
    zk_manager.rollback("rb", target)
    record = zk_manager.history("rb", 1)[0]
    assert record.detail is not None and record.detail.target == target


def test_each_version_is_read_with_its_own_columns_and_a_revert_does_not_cross_a_replacement(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    from segment_lineage.ingest.readers import SnapshotReader
    from segment_lineage.lineage.core.errors import RefusedError

    m = zk_manager
    m.create_table(TableConfig.build("swap", str(tmp_path / "swap")))
    push_arrow(m, "swap", [pa.table({"a": ["x", "y"]})])
    old = m.table("swap").version
    done = push_arrow(m, "swap", [pa.table({"a": [1, 2]})], schema_policy="replace")
    with pytest.raises(RefusedError, match="replaced the table's schema"):
        m.revert_replace("swap", done.entry_id)
    with SnapshotReader(m, "swap", old) as reader:
        assert reader.to_arrow().column("a").to_pylist() == ["x", "y"]
    with SnapshotReader(m, "swap") as reader:
        assert reader.to_arrow().column("a").to_pylist() == [1, 2]
    assert old in m.readable_versions("swap")
    m.rollback("swap", old)
    assert m.table("swap").config.schema == (Field("a", STRING),)
    with SnapshotReader(m, "swap") as reader:
        assert reader.to_arrow().column("a").to_pylist() == ["x", "y"]


def test_an_append_landing_during_a_schema_replacement_refuses_the_replacement(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    """A refresh that replaces the schema must leave no segment of the old
    columns visible: an append committed while it ran makes it refuse."""
    m = zk_manager
    m.create_table(TableConfig.build("race", str(tmp_path / "race"), "APPEND"))
    push_arrow(m, "race", [pa.table({"v": ["a"]})], mode="append")
    entry = str(uuid.uuid4())
    m.start_replace("race", [s.name for s in m.visible_segments("race")], ["new0"], entry_id=entry)
    push_arrow(m, "race", [pa.table({"v": ["late"]})], mode="append")  # lands meanwhile
    with pytest.raises(SchemaMismatchError, match="old columns"):
        m.complete_replace(
            "race",
            entry,
            [Segment("new0", "p/new0.parquet", rows=1)],
            schema=(Field("b", INT64),),
            schema_policy=SchemaPolicy.REPLACE,
            mode="refresh",
        )
    assert m.table("race").config.schema == (Field("v", STRING),)


def test_old_builds_refuse_a_head_they_would_write_back_without_its_schema() -> None:
    from segment_lineage.lineage.codec.envelope import parse
    from segment_lineage.lineage.core.errors import CorruptRecordError

    plain = TableConfig.build("t", "/r")
    head = codec.Head(plain, 3, "c", {k: ("b",) for k in codec.KINDS}, None, ())
    assert json.loads(codec.encode_head(head))["v"] == 1  # nothing new: readable by older builds
    with_schema = codec.Head(
        TableConfig(**{**plain.__dict__, "schema": BASE}), 3, "c", {k: ("b",) for k in codec.KINDS}, None, ()
    )
    raw = codec.encode_head(with_schema)
    with pytest.raises(CorruptRecordError, match="unknown format version 2"):
        parse(raw, codec.head.HEAD, "/h")  # what a build reading format 1 only does
    assert codec.decode_head(raw, "/h").config.schema == BASE


def test_columns_spark_cannot_read_are_refused_and_a_null_column_takes_a_type() -> None:
    from segment_lineage.ingest.errors import PushRefusedError

    for kind, word in (
        (pa.uint32(), "uint32"),
        (pa.float16(), "halffloat"),
        (pa.decimal256(50, 2), "38 digits"),
    ):
        with pytest.raises(PushRefusedError, match=word):
            schema_of(pa.schema([("c", kind)]))
    with pytest.raises(PushRefusedError, match="differ only in case"):
        schema_of(pa.schema([("v", pa.int64()), ("V", pa.int64())]))
    nulls = (Field("a", INT64), Field("b", DataType("null")))
    after, note = resolve(
        nulls, (Field("a", INT64), Field("b", STRING)), SchemaPolicy.ENFORCE, "t", full_refresh=False
    )
    assert after == (Field("a", INT64), Field("b", STRING)) and note == "schema typed: b (string)"
    assert resolve(after, nulls, SchemaPolicy.ENFORCE, "t", full_refresh=False) == (after, None)
    with pytest.raises(InvalidInputError, match="unknown schema policy"):
        SchemaPolicy.parse("Evolves")


def test_an_input_whose_files_have_different_columns_is_refused(zk_hosts: str, tmp_path: Path) -> None:
    """A reader takes the first file's columns: the other file's would be
    dropped or converted. Refused, by either engine's path, before anything."""
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    pq.write_table(pa.table({"id": [1], "v": ["a"]}), mixed / "a.parquet")
    pq.write_table(pa.table({"id": [2], "v": ["b"], "extra": [1.5]}), mixed / "b.parquet")
    assert (
        run(zk_hosts, "table", "create", "mix", "--root", str(tmp_path / "mix"), "--type", "APPEND")[0] == 0
    )
    for engine in ("arrow", "spark"):  # spark: refused from the footers, before a JVM starts
        code, _, err = run(
            zk_hosts, "push", "mix", "--input", str(mixed), "--mode", "append", "--engine", engine
        )
        assert code == 1 and "have different columns" in err and "column 'extra' (double) is new" in err, err
    # CSV files whose headers differ (an outside trial's second file came out as nulls):
    texts = tmp_path / "texts"
    texts.mkdir()
    (texts / "1.csv").write_text("id,v\n1,a\n")
    (texts / "2.csv").write_text("ts,w\n2026-01-01,b\n")
    code, _, err = run(
        zk_hosts,
        "push",
        "mix",
        "--input",
        str(texts),
        "--format",
        "csv",
        "--mode",
        "append",
        "--engine",
        "arrow",
    )
    assert code == 1 and "have different columns" in err and "ts, w" in err, err
    # Spark took the second file's values by position, under the first's names:
    (texts / "2.csv").write_text("v,id\nb,2\n")
    csv_push = ("push", "mix", "--input", str(texts), "--format", "csv", "--mode", "append")
    (texts / "3.csv").write_text("")  # an empty file: Spark skips it, and so does the check
    code, _, err = run(zk_hosts, *csv_push, "--engine", "spark")
    assert code == 1 and "have different columns" in err and "v, id" in err, err
    assert history(zk_hosts, "mix")[0]["operation"] == "CREATE_TABLE"
    (texts / "2.csv").write_text("id,v\n2,b\n")  # the same columns, and the empty file: pushed
    code, out, err = run(zk_hosts, *csv_push, "--engine", "spark")
    assert code == 0 and "2 rows" in out, err


def test_a_push_missing_a_column_reads_as_null_but_a_rename_is_refused() -> None:
    """A push without a column the table has is accepted (its rows read the
    column as null, as Delta's and Iceberg's appends have it) and leaves the
    schema as it is; one that lacks a column while it brings a new one looks
    like a rename, and is refused naming both, even when evolving."""
    from segment_lineage.lineage.core.schema import (
        DataType,
        Field,
        SchemaMismatchError,
        SchemaPolicy,
        resolve,
    )

    recorded = (
        Field("ts", DataType("timestamp")),
        Field("v", DataType("int64")),
        Field("region", DataType("string")),
    )
    for policy in (SchemaPolicy.ENFORCE, SchemaPolicy.EVOLVE):
        assert resolve(recorded, recorded[:2], policy, "t", full_refresh=False) == (recorded, None)
    renamed = (*recorded[:2], Field("area", DataType("string")))
    with pytest.raises(
        SchemaMismatchError, match=r"'region' .* is missing; column 'area' .* is new"
    ) as caught:
        resolve(recorded, renamed, SchemaPolicy.EVOLVE, "t", full_refresh=False)
    assert caught.value.remedy is not None and "renamed" in caught.value.remedy
