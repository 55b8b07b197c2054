"""A production week: defaults that are safe, typed the way users type them.

Each test runs the command line against a real ZooKeeper, without the flags a
user forgets.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers.run import cli

pytestmark = pytest.mark.zk


def _day(tmp_path: Path, day: int, rows: int) -> Path:
    """One day's input: ``rows`` rows stamped within day ``day`` of 2013-01."""
    start = 1_356_998_400_000 + day * 86_400_000  # 2013-01-01T00:00Z
    ts = pa.array([start + 1000 * i for i in range(rows)], pa.timestamp("ms", tz="UTC"))
    path = tmp_path / f"day{day}.parquet"
    pq.write_table(pa.table({"ts": ts, "v": pa.array(range(rows), pa.int64())}), path)
    return path


def _rows(zk: str, table: str) -> int:
    code, out, err = cli(zk, "--json", "table", "show", table)
    assert code == 0, err
    return int(json.loads(out)["rows_visible"])


def test_push_without_mode_appends_to_an_append_table(zk_hosts: str, tmp_path: Path) -> None:
    """A nightly job that forgot --mode: each day's push is added to the
    APPEND table, as the table's type says, never a replacement of it."""
    code, _, err = cli(
        zk_hosts, "table", "create", "flights", "--root", str(tmp_path / "flights"), "--type", "APPEND",
        "--time-column", "ts",
    )  # fmt: skip
    assert code == 0, err
    for day, rows in ((0, 30), (1, 20), (2, 10)):
        code, out, err = cli(zk_hosts, "push", "flights", "--input", str(_day(tmp_path, day, rows)))
        assert code == 0, err
        assert "(append)" in out and "replaced 0 segment(s)" in out, out
    assert _rows(zk_hosts, "flights") == 60


def test_a_refresh_of_an_append_table_is_said_out_loud_and_says_what_it_hides(
    zk_hosts: str, tmp_path: Path
) -> None:
    """--mode refresh on an APPEND table replaces it (asked for), and its
    output, text and JSON, says how many rows became hidden and how to undo."""
    code, _, err = cli(
        zk_hosts, "table", "create", "ev", "--root", str(tmp_path / "ev"), "--type", "APPEND",
        "--time-column", "ts",
    )  # fmt: skip
    assert code == 0, err
    for day in (0, 1):
        code, _, err = cli(zk_hosts, "push", "ev", "--input", str(_day(tmp_path, day, 25)))
        assert code == 0, err
    code, out, err = cli(
        zk_hosts, "push", "ev", "--input", str(_day(tmp_path, 2, 5)), "--mode", "refresh", "--dry-run"
    )
    assert code == 0, err
    assert "hides all 50 earlier rows" in out, out
    assert _rows(zk_hosts, "ev") == 50
    code, out, err = cli(
        zk_hosts, "--json", "push", "ev", "--input", str(_day(tmp_path, 2, 5)), "--mode", "refresh"
    )
    assert code == 0, err
    result = json.loads(out)
    assert (result["mode"], result["replaced_rows"], result["hides_appended"]) == ("refresh", 50, True)
    assert _rows(zk_hosts, "ev") == 5
    code, out, err = cli(zk_hosts, "rollback", "ev")  # the undo the output names
    assert code == 0, err
    assert _rows(zk_hosts, "ev") == 50


def test_push_without_mode_refreshes_a_refresh_table(zk_hosts: str, tmp_path: Path) -> None:
    code, _, err = cli(zk_hosts, "table", "create", "snap", "--root", str(tmp_path / "snap"))
    assert code == 0, err
    for day, rows in ((0, 30), (1, 20)):
        code, out, err = cli(zk_hosts, "push", "snap", "--input", str(_day(tmp_path, day, rows)))
        assert code == 0, err
        assert "(refresh)" in out and "a refresh of APPEND" not in out, out
    assert "replaced 1 segment(s) of 30 rows" in out, out
    assert _rows(zk_hosts, "snap") == 20
