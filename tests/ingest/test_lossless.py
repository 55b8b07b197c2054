"""A push never changes a value without saying so: nanosecond timestamps that
are not whole microseconds (segments store microseconds) are refused with the
first such value and the flag that accepts truncation; whole microseconds
convert without loss. Through the command line, on real ZooKeeper."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers.run import cli

pytestmark = pytest.mark.zk

BASE = 1_700_000_000_000_000_000  # ns


def _write(path: Path, nanos: list[int]) -> Path:
    ts = pa.array(nanos, pa.timestamp("ns", tz="UTC"))
    pq.write_table(
        pa.table({"ts": ts, "v": pa.array(range(len(nanos)), pa.int64())}), path, coerce_timestamps=None
    )
    assert pq.read_schema(path).field("ts").type.unit == "ns"
    return path


def _stored(root: Path) -> list[int]:
    files = sorted(root.rglob("*.parquet"))
    values: list[int] = []
    for f in files:
        column = pq.read_table(f).column("ts")
        values += column.cast(pa.timestamp(column.type.unit, tz="UTC")).cast(pa.int64()).to_pylist()
        assert column.type.unit == "us"
    return values


def test_nanoseconds_that_would_be_truncated_are_refused_then_accepted_out_loud(
    zk_hosts: str, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    code, _, err = cli(
        zk_hosts, "table", "create", "t", "--root", str(root), "--type", "APPEND", "--time-column", "ts"
    )
    assert code == 0, err
    data = _write(tmp_path / "in.parquet", [BASE + 123_456_789, BASE + 1, BASE + 2])

    code, _, err = cli(zk_hosts, "push", "t", "--input", str(data), "--mode", "append")
    assert code != 0
    assert "row 0" in err and "1700000000123456789 ns" in err and "--truncate-timestamps" in err, err
    assert not list(root.rglob("*.parquet"))
    code, _, err = cli(zk_hosts, "push", "t", "--input", str(data), "--mode", "append", "--dry-run")
    assert code != 0 and "--truncate-timestamps" in err

    code, _, err = cli(
        zk_hosts, "push", "t", "--input", str(data), "--mode", "append", "--truncate-timestamps"
    )
    assert code == 0, err
    assert sorted(_stored(root)) == sorted([(BASE + 123_456_789) // 1000, BASE // 1000, BASE // 1000])


def test_whole_microseconds_in_nanoseconds_convert_without_loss(zk_hosts: str, tmp_path: Path) -> None:
    root = tmp_path / "root"
    code, _, err = cli(
        zk_hosts, "table", "create", "t", "--root", str(root), "--type", "APPEND", "--time-column", "ts"
    )
    assert code == 0, err
    nanos = [BASE + 123_456_000, BASE + 1_000, BASE - 5_000]
    code, _, err = cli(
        zk_hosts, "push", "t", "--input", str(_write(tmp_path / "in.parquet", nanos)), "--mode", "append"
    )
    assert code == 0, err
    assert sorted(_stored(root)) == sorted(n // 1000 for n in nanos)


def test_a_nanosecond_input_is_refused_before_spark_starts(zk_hosts: str, tmp_path: Path) -> None:
    """Spark cannot read nanosecond Parquet: said before a JVM starts, with the way out."""
    root = tmp_path / "root"
    code, _, err = cli(
        zk_hosts, "table", "create", "t", "--root", str(root), "--type", "APPEND", "--time-column", "ts"
    )
    assert code == 0, err
    data = _write(tmp_path / "in.parquet", [BASE + 1_000])
    code, _, err = cli(zk_hosts, "push", "t", "--input", str(data), "--mode", "append", "--engine", "spark")
    assert code != 0
    assert "nanosecond times" in err and "--engine arrow" in err, err


@pytest.mark.parametrize(
    "column",
    [
        pa.array([1001], pa.time64("ns")),
        pa.array([{"t": BASE + 3}], pa.struct([("t", pa.timestamp("ns", tz="UTC"))])),
        pa.array([[BASE, BASE + 3]], pa.list_(pa.timestamp("ns", tz="UTC"))),
        pa.array([[("k", BASE + 5)]], pa.map_(pa.string(), pa.timestamp("ns", tz="UTC"))),
    ],
    ids=["time64", "struct", "list", "map"],
)
def test_nanoseconds_at_any_depth_are_refused_then_stored_as_microseconds(
    zk_hosts: str, tmp_path: Path, column: pa.Array
) -> None:
    """A nanosecond time (time64) or a nanosecond timestamp inside a struct, a
    list or a map is checked as a top-level one is; with the flag it is stored
    in microseconds, and the table reads."""
    root = tmp_path / "root"
    code, _, err = cli(zk_hosts, "table", "create", "t", "--root", str(root), "--type", "APPEND")
    assert code == 0, err
    data = tmp_path / "in.parquet"
    pq.write_table(pa.table({"c": column}), data, coerce_timestamps=None)
    code, _, err = cli(zk_hosts, "push", "t", "--input", str(data), "--mode", "append")
    assert code != 0 and "--truncate-timestamps" in err and "finer than microseconds" in err, err
    assert not list(root.rglob("*.parquet"))
    code, _, err = cli(
        zk_hosts, "push", "t", "--input", str(data), "--mode", "append", "--truncate-timestamps"
    )
    assert code == 0, err
    stored = pq.read_schema(next(root.rglob("*.parquet"))).field("c").type
    assert "ns" not in str(stored), stored
    code, _, err = cli(zk_hosts, "read", "t")
    assert code == 0, err
