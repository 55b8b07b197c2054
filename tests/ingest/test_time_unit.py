"""The unit of an integer time column: declared with the table or inferred per
push, and used by every place that turns values into epoch milliseconds, so
time retention never reads epoch seconds as January 1970."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from segment_lineage.cli import app
from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.errors import PushRefusedError
from segment_lineage.ingest.segments import time_as_ms
from segment_lineage.ingest.time_units import plausible_units, to_ms
from segment_lineage.lineage import codec
from segment_lineage.lineage.core.errors import CorruptRecordError, InvalidInputError
from segment_lineage.lineage.core.model import DeletionReason, TableConfig, TimeUnit
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claims import CLAIM_FILE
from segment_lineage.retention.executor import PassOptions, run_table
from segment_lineage.retention.planner import Policy, plan

DAY_S = 86_400


def seconds_part(now_ms: int, *days_ago: int) -> pa.Table:
    """Rows stamped ``days_ago`` days before ``now_ms``, in epoch seconds (int64)."""
    stamps = [now_ms // 1000 - d * DAY_S for d in days_ago]
    return pa.table({"ts": pa.array(stamps, pa.int64()), "v": list(range(len(stamps)))})


def create(m: LineageManager, tmp_path: Path, unit: str | None) -> None:
    m.create_table(
        TableConfig.build(
            "events",
            str(tmp_path / "events"),
            "APPEND",
            time_column="ts",
            time_retention="30d",
            time_unit=unit,
        )
    )


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file() and p.name != CLAIM_FILE] if path.exists() else []


def check_seconds_read_as_seconds(m: LineageManager, now: int) -> None:
    """A recent segment keeps exact milliseconds; only the 40-day-old one expires."""
    by_rows = {s.rows: s for s in m.visible_segments("events")}
    recent, old = by_rows[2], by_rows[1]
    assert (recent.min_time, recent.max_time) == ((now // 1000 - DAY_S) * 1000, now // 1000 * 1000)
    assert old.max_time == (now // 1000 - 40 * DAY_S) * 1000
    planned = plan(m.table("events"), Policy(m.store.now_ms()))
    assert planned.condemn == {old.name: DeletionReason.EXPIRED}
    report = run_table(m, "events", PassOptions(force=True, min_grace_ms=0))
    assert report.condemned == 1
    assert [s.name for s in m.visible_segments("events")] == [recent.name]


def test_declared_seconds_give_exact_milliseconds_and_retention_keeps_recent_data(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    m = zk_manager
    create(m, tmp_path, "s")
    assert m.table("events").config.time_unit is TimeUnit.S
    now = m.store.now_ms()
    said: list[str] = []
    push_arrow(
        m, "events", [seconds_part(now, 1, 0), seconds_part(now, 40)], mode="append", progress=said.append
    )
    assert not [s for s in said if "inferred" in s]  # declared: nothing to infer
    check_seconds_read_as_seconds(m, now)


def test_undeclared_seconds_are_inferred_and_reported(
    zk_manager: LineageManager, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    m = zk_manager
    create(m, tmp_path, None)
    now = m.store.now_ms()
    said: list[str] = []
    with caplog.at_level(logging.INFO, logger="segment_lineage.ingest.time_units"):
        push_arrow(
            m, "events", [seconds_part(now, 1, 0), seconds_part(now, 40)], mode="append", progress=said.append
        )
    inferred = [s for s in said if "epoch seconds" in s and "inferred" in s]
    assert len(inferred) == 1 and "'ts'" in inferred[0]
    assert inferred[0] in caplog.messages
    check_seconds_read_as_seconds(m, now)


@pytest.mark.parametrize(
    "values",
    [
        list(range(1, 101)),  # seconds of 1970, or anything: no unit fits
        [1_700_000_000, 1_700_000_000_000],  # seconds and milliseconds mixed in one push
    ],
    ids=["implausible", "mixed"],
)
def test_undeclared_integers_that_fit_no_single_unit_are_refused_before_writing(
    zk_manager: LineageManager, tmp_path: Path, values: list[int]
) -> None:
    m = zk_manager
    create(m, tmp_path, None)
    before = m.table("events")
    part = pa.table({"ts": pa.array(values, pa.int64())})
    with pytest.raises(PushRefusedError) as caught:
        push_arrow(m, "events", [part], mode="append")
    text = str(caught.value)
    assert "'ts'" in text and f"from {min(values)} to {max(values)}" in text and "--time-unit" in text
    assert m.table("events") == before  # no entry, no segment, no pending file
    assert files_under(tmp_path) == []


def test_a_replace_range_checks_its_interval_in_the_declared_unit(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    m = zk_manager
    create(m, tmp_path, "s")
    now = m.store.now_ms()
    day_ms = DAY_S * 1000
    today = now // day_ms * day_ms
    part = pa.table({"ts": pa.array([today // 1000 + 60, today // 1000 + 120], pa.int64())})
    result = push_arrow(m, "events", [part], mode="replace-range", interval=(today, today + day_ms))
    assert result.segments == 1
    with pytest.raises(PushRefusedError, match="outside the interval"):
        push_arrow(m, "events", [part], mode="replace-range", interval=(today + day_ms, today + 2 * day_ms))


def test_a_timestamp_column_keeps_its_own_unit(zk_manager: LineageManager, tmp_path: Path) -> None:
    m = zk_manager
    create(m, tmp_path, "s")  # declared for integers; a timestamp column ignores it
    now = m.store.now_ms()
    push_arrow(m, "events", [pa.table({"ts": pa.array([now], pa.timestamp("ms"))})], mode="append")
    assert [s.max_time for s in m.visible_segments("events")] == [now]


def test_units_and_windows() -> None:
    assert to_ms(1_700_000_000, TimeUnit.S) == 1_700_000_000_000
    assert to_ms(1_700_000_000_123_999, TimeUnit.US) == 1_700_000_000_123
    assert to_ms(-1_500_000, TimeUnit.NS) == -2  # rounded down, as Spark's unix_millis
    arrow = time_as_ms(pa.chunked_array([pa.array([-1_500_000, -1_000_000, 1_500_000])]), TimeUnit.NS)
    assert arrow.to_pylist() == [-2, -1, 1]  # and Arrow's segment times alike
    assert plausible_units(1_700_000_000, 1_800_000_000) == (TimeUnit.S,)
    assert plausible_units(1_700_000_000_000_000_000, 1_700_000_000_000_000_001) == (TimeUnit.NS,)
    assert plausible_units(1, 100) == ()


def test_build_refuses_a_zero_time_retention_and_misplaced_or_bad_units() -> None:
    for zero in ("0s", "0m", "0d0h"):
        with pytest.raises(InvalidInputError, match="longer than zero"):
            TableConfig.build("t", "/d", "APPEND", time_column="ts", time_retention=zero)
    with pytest.raises(InvalidInputError, match="needs a time column"):
        TableConfig.build("t", "/d", "APPEND", time_unit="s")
    with pytest.raises(InvalidInputError, match="invalid time unit 'sec'"):
        TableConfig.build("t", "/d", "APPEND", time_column="ts", time_unit="sec")
    assert TableConfig.build("t", "/d", "APPEND", time_column="ts", time_unit="NS").time_unit is TimeUnit.NS


def head_of(config: TableConfig) -> codec.Head:
    buckets = {kind: ("b0",) for kind in codec.KINDS}
    return codec.Head(config, 1, "c1", buckets, None, ())


def test_codec_keeps_the_unit_and_reads_old_records_as_undeclared() -> None:
    config = TableConfig.build("t", "/d", "APPEND", time_column="ts", time_unit="us")
    assert codec.decode_head(codec.encode_head(head_of(config)), "t").config == config
    plain = codec.encode_head(head_of(TableConfig.build("t", "/d", "APPEND", time_column="ts")))
    assert b"time_unit" not in plain  # heads of tables without a unit are written as before
    assert codec.decode_head(plain, "t").config.time_unit is None
    doc = json.loads(plain)
    doc["table"]["time_unit"] = "minutes"
    with pytest.raises(CorruptRecordError, match="unknown time unit 'minutes'"):
        codec.decode_head(json.dumps(doc).encode(), "t")


def test_cli_create_with_a_unit_round_trips_through_show(zk_hosts: str, tmp_path: Path) -> None:
    runner = CliRunner()

    def run(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(app, ["--zk", zk_hosts, *args])
        return result.exit_code, result.stdout, result.stderr

    create = [
        "table",
        "create",
        "events",
        "--root",
        str(tmp_path / "d"),
        "--type",
        "APPEND",
        "--time-column",
        "ts",
    ]
    code, _, err = run(*create, "--time-unit", "s")
    assert code == 0, err
    code, out, _ = run("--json", "table", "show", "events")
    assert code == 0 and json.loads(out)["time_unit"] == "s"
    code, out, _ = run("table", "show", "events")
    assert any(line.split() == ["time_unit", "s"] for line in out.splitlines())
    code, _, err = run("table", "create", "other", "--root", str(tmp_path / "o"), "--time-unit", "s")
    assert code == 2 and "needs a time column" in err
    code, _, err = run(*create[:2], "other", *create[3:], "--time-retention", "0s")
    assert code == 2 and "longer than zero" in err


def test_a_declared_unit_refuses_values_it_reads_far_in_the_future_and_an_inferred_one_is_kept(
    manager: LineageManager, tmp_path: Path
) -> None:
    """Milliseconds pushed into a table of seconds read as the year 55,000:
    refused. A unit inferred at the first push is recorded, so a later push
    of another scale is refused instead of mixing units in one column."""
    manager.create_table(
        TableConfig.build("secs", str(tmp_path / "secs"), "APPEND", time_column="ts", time_unit="s")
    )
    millis = pa.table({"ts": pa.array([1_704_067_200_000], pa.int64())})
    with pytest.raises(PushRefusedError, match="reads after 2200"):
        push_arrow(manager, "secs", [millis], mode="append")
    manager.create_table(TableConfig.build("infer", str(tmp_path / "infer"), "APPEND", time_column="ts"))
    push_arrow(manager, "infer", [pa.table({"ts": pa.array([1_704_067_200], pa.int64())})], mode="append")
    assert manager.table("infer").config.time_unit is TimeUnit.S
    with pytest.raises(PushRefusedError, match="reads after 2200"):
        push_arrow(manager, "infer", [millis], mode="append")


def test_each_time_chunk_gets_its_share_of_the_partitions_asked_for() -> None:
    """Spark's chunk split: as many partitions as asked (one per chunk at
    least, never more than a chunk's rows), shared by rows."""
    from segment_lineage.ingest.spark_plan import chunk_shares

    assert chunk_shares({1: 3, 2: 3, 3: 3}, 8) == {1: 3, 2: 3, 3: 2}
    assert chunk_shares({1: 1, 2: 1, 3: 1}, 50) == {1: 1, 2: 1, 3: 1}
    assert chunk_shares({1: 1000, 2: 10}, 4) == {1: 3, 2: 1}
    assert chunk_shares({1: 5}, 1) == {1: 1}
    assert sum(chunk_shares({k: 100 + k for k in range(12)}, 30).values()) == 30
