"""Statistics in the mirror's add actions, read from the files' footers:
what each type gets, bounds that stay bounds after rounding, and engines
that skip the files a filter rules out."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from benchmarks.mirror import polars_sources
from segment_lineage.ingest.readers import duckdb_connection
from segment_lineage.mirror.stats import MAX_TEXT, footer_stats
from tests.helpers.delta_reads import delta_counts, pruned_delta
from tests.helpers.run import cli as run

UTC = dt.UTC
DAY0 = dt.datetime(2024, 1, 1, tzinfo=UTC)


def stats_of(
    path: Path, table: pa.Table, columns: list[str] | None = None, **options: object
) -> dict[str, object]:
    """The statistics the mirror writes for ``table`` written at ``path``, in a table of ``columns``."""
    pq.write_table(table, path, **options)  # type: ignore[arg-type]
    wanted = table.column_names if columns is None else columns
    result: dict[str, object] = json.loads(footer_stats(str(path), pafs.LocalFileSystem(), wanted))
    return result


def test_each_type_gets_bounds_that_still_hold_after_rounding(tmp_path: Path) -> None:
    long_text = "x" * (MAX_TEXT + 5)
    table = pa.table(
        {
            "i": pa.array([3, None, -7, 12], pa.int32()),
            "f": [1.5, None, None, -2.25],
            "s": ["b", "a", None, "c"],
            "long": ["a" + long_text, long_text, "b", "c"],
            "d": [dt.date(2024, 1, 2), dt.date(2023, 12, 31), None, dt.date(2024, 1, 1)],
            "ts": pa.array(
                [
                    DAY0 + dt.timedelta(microseconds=1_500),
                    None,
                    DAY0 + dt.timedelta(hours=1, microseconds=1),
                    DAY0,
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "local": pa.array([1_000_000_001, 2, 3, 4], pa.timestamp("ns")),
            "flag": [True, None, False, True],
            "dec": pa.array(
                [Decimal("19.99"), None, Decimal("-0.10"), Decimal("1E+3")], pa.decimal128(10, 2)
            ),
            "none": pa.array([None, None, None, None], pa.int64()),
        }
    )
    columns = [*table.column_names, "later"]  # a column the table gained after this file
    stats = stats_of(tmp_path / "a.parquet", table, columns, row_group_size=2)  # over two row groups
    assert stats["numRecords"] == 4
    assert stats["minValues"] == {
        "i": -7,
        "f": -2.25,
        "s": "a",
        "long": "a" + "x" * (MAX_TEXT - 1),  # a prefix sorts before the text
        "d": "2023-12-31",
        "ts": "2024-01-01T00:00:00.000Z",  # an instant: Z
        "local": "1970-01-01T00:00:00.000",  # a local date-time: no zone
        "flag": False,
        "dec": -0.1,
    }
    assert stats["maxValues"] == {
        "i": 12,
        "f": 1.5,
        "s": "c",
        "long": "x" * (MAX_TEXT - 1) + "y",  # the prefix raised: still above the text
        "d": "2024-01-02",
        "ts": "2024-01-01T01:00:00.001Z",  # 01:00:00.000001 rounded up: still a maximum
        "local": "1970-01-01T00:00:01.001",
        "flag": True,
        "dec": 1000,
    }
    assert stats["nullCount"] == {
        "i": 1, "f": 2, "s": 1, "long": 0, "d": 1, "ts": 1, "local": 0,
        "flag": 1, "dec": 1, "none": 4, "later": 4,
    }  # fmt: skip
    text = footer_stats(str(tmp_path / "a.parquet"), pafs.LocalFileSystem(), columns)
    assert '"dec":-0.10' in text and '"dec":1000.00' in text  # decimals as exact numbers


@pytest.mark.parametrize(
    ("column", "why"),
    [
        (pa.array([1.0, float("nan"), 3.0]), "a NaN, which DuckDB orders above every number"),
        (pa.array([1.0, float("inf"), 3.0]), "an infinity, which JSON cannot say"),
        (pa.array([b"a", b"b", b"c"]), "binary"),
        (pa.array([{"x": 1}, {"x": 2}, None]), "a nested column"),
        (pa.array([-719162, 2932897, 100_000_000], pa.int32()).cast(pa.date32()), "a date past year 9999"),
    ],
)
def test_a_column_that_cannot_be_bounded_takes_every_bound_from_the_file(
    tmp_path: Path, column: pa.Array, why: str
) -> None:
    """delta-rs reads a bound missing beside others as null, and skips the
    file for any filter on that column: such a file carries counts only."""
    table = pa.table({"id": [1, 2, 3], "odd": column})
    stats = stats_of(tmp_path / "a.parquet", table)
    assert "minValues" not in stats and "maxValues" not in stats, why
    assert stats["numRecords"] == 3 and stats["nullCount"]["id"] == 0  # type: ignore[index]


def test_a_row_group_without_statistics_leaves_the_file_with_counts(tmp_path: Path) -> None:
    table = pa.table({"a": [1, 2, 3, 4], "b": [5, 6, 7, 8]})
    stats = stats_of(tmp_path / "a.parquet", table, write_statistics=["b"])
    assert stats == {"numRecords": 4, "nullCount": {"b": 0}}
    nulls_only = stats_of(
        tmp_path / "n.parquet", pa.table({"a": [1, 2], "b": pa.array([None, None], pa.int64())})
    )
    assert nulls_only == {
        "numRecords": 2,
        "minValues": {"a": 1},
        "maxValues": {"a": 2},
        "nullCount": {"a": 0, "b": 2},
    }
    empty = stats_of(tmp_path / "e.parquet", table.slice(0, 0))
    assert empty == {"numRecords": 0}  # no row group: nothing to count


def _day_rows(days: int) -> pa.Table:
    """Four rows a day, each half a millisecond past its hour: a bound cut to
    the millisecond without rounding up would hide the day's last row."""
    stamps = [
        DAY0 + dt.timedelta(days=d, hours=h, microseconds=500) for d in range(days) for h in (0, 6, 12, 18)
    ]
    return pa.table({"ts": pa.array(stamps, pa.timestamp("us", tz="UTC")), "value": list(range(len(stamps)))})


def _duck_files(root: str, where: str) -> tuple[str, int]:
    con = duckdb_connection()
    plan = str(
        con.execute(f"EXPLAIN ANALYZE SELECT count(*) FROM delta_scan(?) WHERE {where}", [root]).fetchall()
    )
    count = con.execute(f"SELECT count(*) FROM delta_scan(?) WHERE {where}", [root]).fetchone()
    assert count is not None
    return re.findall(r"Scanning Files: (\d+/\d+)", plan)[0], int(count[0])


def test_engines_skip_the_days_a_filter_rules_out(zk_hosts: str, tmp_path: Path) -> None:
    """A month of day-chunked data through the CLI: a one-day query opens
    one file of 30 in delta-rs and Polars (by time) and DuckDB (by value; its
    delta reader skips no file on a timestamp, whoever wrote the log), and
    every engine still finds the row half a millisecond before the bound."""
    root = str(tmp_path / "days")
    create = ("table", "create", "days", "--root", root, "--type", "APPEND", "--time-column", "ts")
    code, _, err = run(zk_hosts, *create, "--time-granularity", "day", "--mirror", "delta")
    assert code == 0, err
    pq.write_table(_day_rows(30), tmp_path / "month.parquet")
    code, _, err = run(
        zk_hosts, "push", "days", "--input", str(tmp_path / "month.parquet"), "--mode", "append"
    )
    assert code == 0 and "warning" not in err, err

    low, high = DAY0 + dt.timedelta(days=4), DAY0 + dt.timedelta(days=5)
    assert pruned_delta(root, "ts", low, high) == (30, 1, 4)
    day = pl.scan_delta(root).filter((pl.col("ts") >= low) & (pl.col("ts") < high))
    assert day.collect().height == 4 and polars_sources(day.explain()) == 1
    assert polars_sources(pl.scan_delta(root).explain()) == 30
    assert _duck_files(root, "value BETWEEN 16 AND 19") == ("1/30", 4)
    # The month's last row is at 18:00:00.0005 on the 30th: past a maximum cut to 18:00:00.000.
    edge = DAY0 + dt.timedelta(days=29, hours=18, microseconds=100)
    assert _duck_files(root, f"ts > TIMESTAMPTZ '{edge.isoformat()}'")[1] == 1
    assert pl.scan_delta(root).filter(pl.col("ts") > edge).collect().height == 1
    assert pruned_delta(root, "ts", edge, DAY0 + dt.timedelta(days=31))[1:] == (1, 1)


def test_engines_find_every_row_whatever_the_columns_hold(zk_hosts: str, tmp_path: Path) -> None:
    """An outside trial's wrong answers: booleans, long text, decimals and a
    float column holding NaN. Through the mirror, every engine returns what
    the same filter keeps of an unskipped read, in its own semantics (DuckDB
    orders NaN above every number)."""
    root = str(tmp_path / "odd")
    code, _, err = run(
        zk_hosts, "table", "create", "odd", "--root", root, "--type", "APPEND", "--mirror", "delta"
    )
    assert code == 0, err
    for part, x in enumerate(([1.0, float("nan")], [3.0, 4.0])):
        data = pa.table(
            {
                "id": [2 * part, 2 * part + 1],
                "flag": [True, part == 1],
                "name": ["a" * 40 if part == 0 else "c", "b" * 40],
                "far": ["a", "b"] if part == 0 else ["c", "x" + chr(0x10FFFF)],  # an escape delta-rs misread
                "x": x,
                "dec": pa.array([Decimal("1.25"), Decimal(part)], pa.decimal128(10, 2)),
            }
        )
        pq.write_table(data, tmp_path / f"p{part}.parquet")
        code, _, err = run(
            zk_hosts, "push", "odd", "--input", str(tmp_path / f"p{part}.parquet"), "--mode", "append"
        )
        assert code == 0 and "warning" not in err, err
    filters = [
        ("flag", "==", True), ("name", "==", "c"), ("name", ">", "b"), ("x", ">", 3.5), ("x", "<", 2.0),
        ("far", "==", "x" + chr(0x10FFFF)), ("far", ">", "x"),
        ("dec", ">", Decimal("1.00")), ("dec", "<", Decimal("0.50")), ("id", "==", 3), ("x", "null", None),
    ]  # fmt: skip
    assert [found for found, _ in delta_counts(root, filters)] == [
        truth for _, truth in delta_counts(root, filters)
    ]
    con = duckdb_connection()
    files = [str(p) for p in Path(root).rglob("*.parquet") if "_delta_log" not in str(p)]
    far = "x" + chr(0x10FFFF)
    for where in (
        "x > 100",
        "x = 'nan'::double",
        "flag",
        "name = 'c'",
        "dec > 1.00",
        "name > 'b'",
        f"far = '{far}'",
    ):
        through = con.execute(f"SELECT count(*) FROM delta_scan(?) WHERE {where}", [root]).fetchone()
        truth = con.execute(f"SELECT count(*) FROM read_parquet(?) WHERE {where}", [files]).fetchone()
        assert through == truth, where
    for expr in (
        pl.col("flag"),
        pl.col("name") == "c",
        pl.col("x") > 3.5,
        pl.col("x").is_nan(),
        pl.col("far") == far,
    ):
        assert pl.scan_delta(root).filter(expr).collect().height == pl.read_parquet(files).filter(expr).height


def test_the_record_count_is_the_files_not_the_callers(zk_hosts: str, tmp_path: Path) -> None:
    root = tmp_path / "hand"
    assert run(zk_hosts, "table", "create", "hand", "--root", str(root), "--mirror", "delta")[0] == 0
    pq.write_table(pa.table({"v": [1, 2, 3]}), tmp_path / "in.parquet")
    assert run(zk_hosts, "push", "hand", "--input", str(tmp_path / "in.parquet"))[0] == 0
    pq.write_table(pa.table({"v": [7, 8]}), root / "extra.parquet")
    code, _, err = run(zk_hosts, "segment", "add", "hand", "extra", "--rows", "999", "--no-check")
    assert code == 0, err
    adds = [
        json.loads(line)["add"]
        for log in sorted((root / "_delta_log").glob("*.json"))
        for line in log.read_text().splitlines()
        if '"add"' in line
    ]
    extra = [json.loads(a["stats"]) for a in adds if a["path"] == "extra.parquet"]
    assert extra == [{"numRecords": 2, "minValues": {"v": 7}, "maxValues": {"v": 8}, "nullCount": {"v": 0}}]
