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
    code, out, err = cli(zk_hosts, "push", "ev", "--input", str(_day(tmp_path, 2, 5)), "--mode", "refresh")
    assert code == 0, err
    assert "its 50 earlier rows are hidden" in out, out
    undo = out.split("undo this push with: ", 1)[1].split(")", 1)[0].split()
    assert undo[:3] == ["lineage", "rollback", "ev"], out
    assert _rows(zk_hosts, "ev") == 5
    code, out, err = cli(zk_hosts, "push", "ev", "--input", str(_day(tmp_path, 3, 5)))  # a later append
    assert code == 0, err
    code, out, err = cli(zk_hosts, *undo[1:])  # the undo the output named, typed later
    assert code == 0, err
    assert _rows(zk_hosts, "ev") == 50
    code, out, err = cli(
        zk_hosts, "--json", "push", "ev", "--input", str(_day(tmp_path, 2, 5)), "--mode", "refresh"
    )
    assert code == 0, err
    result = json.loads(out)
    assert (result["mode"], result["replaced_rows"], result["hides_appended"]) == ("refresh", 50, True)


def test_push_without_mode_refreshes_a_refresh_table(zk_hosts: str, tmp_path: Path) -> None:
    code, _, err = cli(zk_hosts, "table", "create", "snap", "--root", str(tmp_path / "snap"))
    assert code == 0, err
    for day, rows in ((0, 30), (1, 20)):
        code, out, err = cli(zk_hosts, "push", "snap", "--input", str(_day(tmp_path, day, rows)))
        assert code == 0, err
        assert "(refresh)" in out and "a refresh of APPEND" not in out, out
    assert "replaced 1 segment(s) of 30 rows" in out, out
    assert _rows(zk_hosts, "snap") == 20


@pytest.mark.slow
@pytest.mark.e2e
def test_a_configured_spark_master_makes_auto_push_with_spark(zk_hosts: str, tmp_path: Path) -> None:
    """A deployment's config file names a Spark master (as docker/lineage.toml
    does): `push` with the default --engine auto pushes with Spark, and says
    why, even for a small local input."""
    import os

    from tests.helpers.run import lineage_process

    code, _, err = cli(zk_hosts, "table", "create", "sp", "--root", str(tmp_path / "sp"))
    assert code == 0, err
    config = tmp_path / "lineage.toml"
    config.write_text('[spark]\nmaster = "local[1]"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "SPARK_MASTER"))}
    env["LINEAGE_CONFIG"] = str(config)
    done = lineage_process("--zk", zk_hosts, "push", "sp", "--input", str(_day(tmp_path, 0, 10)), env=env)
    assert done.returncode == 0, done.stderr
    assert "engine: spark (Spark master local[1] configured" in done.stderr, done.stderr
    assert _rows(zk_hosts, "sp") == 10


def test_a_grace_below_the_floor_from_a_config_file_is_refused_naming_the_file_and_key(
    zk_hosts: str, tmp_path: Path
) -> None:
    """`retention run --yes` with no grace flag, the config file setting a
    minimum grace below the floor: refused, naming the file and its key, not
    a flag nobody gave. The deployment's own file passes."""
    import os

    from tests.helpers.run import ROOT, lineage_process

    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGE_")}
    config = tmp_path / "lineage.toml"
    config.write_text('[retention]\nmin_grace = "5m"\n')
    done = lineage_process(
        "--zk", zk_hosts, "retention", "run", "--yes", env={**env, "LINEAGE_CONFIG": str(config)}
    )
    assert done.returncode != 0
    assert f"min_grace = '5m' (config file {config}, [retention]) is below the floor of 10m" in done.stderr
    assert "--min-grace" not in done.stderr.split("hint")[0], done.stderr
    done = lineage_process(
        "--zk", zk_hosts, "retention", "run", "--yes", env={**env, "LINEAGE_RETENTION_MIN_GRACE": "1m"}
    )
    assert done.returncode != 0 and "LINEAGE_RETENTION_MIN_GRACE=1m (environment)" in done.stderr, done.stderr
    deployed = ROOT / "docker" / "lineage.toml"  # as a hand-run pass in those containers reads it
    done = lineage_process(
        "--zk", zk_hosts, "retention", "run", "--yes", env={**env, "LINEAGE_CONFIG": str(deployed)}
    )
    assert done.returncode == 0, done.stderr


def test_as_of_a_future_time_is_refused(zk_hosts: str, tmp_path: Path) -> None:
    """`read --as-of` a time after now is refused (as Delta refuses a
    timestamp after its newest version), never answered with the current
    version; a rollback to a future time changes nothing."""
    code, _, err = cli(zk_hosts, "table", "create", "fut", "--root", str(tmp_path / "fut"))
    assert code == 0, err
    code, _, err = cli(zk_hosts, "push", "fut", "--input", str(_day(tmp_path, 0, 3)))
    assert code == 0, err
    code, out, err = cli(zk_hosts, "read", "fut", "--as-of", "2999-01-01")
    assert code != 0 and "2999-01-01T00:00:00" in err and "is in the future" in err, (out, err)
    code, out, err = cli(zk_hosts, "rollback", "fut", "--to-time", "2999-01-01")
    assert code != 0 and "is in the future" in err, (out, err)
    code, out, err = cli(zk_hosts, "read", "fut", "--as-of", "2000-01-01")  # before the table
    assert code != 0 and "did not exist" in err, (out, err)
    code, out, err = cli(zk_hosts, "--json", "table", "show", "fut")
    assert json.loads(out)["version"] == 3


def test_a_column_added_by_evolve_schema_is_not_mandatory_for_later_appends(
    zk_hosts: str, tmp_path: Path
) -> None:
    """A column added with --evolve-schema, then a day's append without it:
    accepted, its rows read the column as null (in `read` and in the
    mirror's Delta table), the schema unchanged."""
    from tests.helpers.delta_reads import read_delta

    code, _, err = cli(
        zk_hosts, "table", "create", "ev2", "--root", str(tmp_path / "ev2"), "--type", "APPEND",
        "--time-column", "ts", "--mirror", "delta",
    )  # fmt: skip
    assert code == 0, err
    code, _, err = cli(zk_hosts, "push", "ev2", "--input", str(_day(tmp_path, 0, 2)))
    assert code == 0, err
    ts = pa.array([1_357_171_200_000, 1_357_171_201_000], pa.timestamp("ms", tz="UTC"))  # 2013-01-03
    wide = tmp_path / "wide.parquet"
    pq.write_table(pa.table({"ts": ts, "v": pa.array([7, 8], pa.int64()), "note": ["a", "b"]}), wide)
    code, _, err = cli(zk_hosts, "push", "ev2", "--input", str(wide), "--evolve-schema")
    assert code == 0, err
    code, out, err = cli(zk_hosts, "push", "ev2", "--input", str(_day(tmp_path, 5, 3)))  # no 'note'
    assert code == 0, err
    code, out, err = cli(zk_hosts, "--json", "read", "ev2", "--limit", "100")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert sorted((r["v"], r["note"]) for r in rows) == sorted(
        [(0, None), (1, None), (7, "a"), (8, "b"), (0, None), (1, None), (2, None)]
    )
    assert read_delta(str(tmp_path / "ev2")).num_rows == 7
    code, out, err = cli(zk_hosts, "--json", "table", "show", "ev2")
    assert [c.split(":")[0] for c in json.loads(out)["schema"]] == ["ts", "v", "note"], out


def test_mirror_versions_marks_the_versions_retention_reclaimed(zk_hosts: str, tmp_path: Path) -> None:
    """After retention reclaimed the files of versions past the mirror's
    retention, `mirror versions` says which Delta versions engines can no
    longer read; what it says is what deltalake finds."""
    import time

    from deltalake import DeltaTable

    root = tmp_path / "mv"
    code, _, err = cli(
        zk_hosts, "table", "create", "mv", "--root", str(root), "--mirror", "delta",
        "--mirror-retention", "1s", "--replaced-retention", "0s",
    )  # fmt: skip
    assert code == 0, err
    for day in (0, 1, 2):
        code, _, err = cli(zk_hosts, "push", "mv", "--input", str(_day(tmp_path, day, 3 + day)))
        assert code == 0, err
    time.sleep(1.5)  # the first versions fall out of the mirror's retention
    code, _, err = cli(zk_hosts, "retention", "run", "--force", "--min-grace", "0s")
    assert code == 0, err
    code, out, err = cli(zk_hosts, "--json", "mirror", "versions", "mv")
    assert code == 0, err
    said = {row["delta_version"]: row["readable"] for row in json.loads(out)}
    newest = max(said)
    assert said[newest] == "yes" and said[0] == "no: 1 file(s) reclaimed", said
    code, _, err = cli(zk_hosts, "table", "alter", "mv", "--mirror-retention", "7d")
    assert code == 0, err  # the window now reaches back past files already reclaimed
    code, out, err = cli(zk_hosts, "--json", "mirror", "versions", "mv")
    assert code == 0, err
    assert {row["delta_version"]: row["readable"] for row in json.loads(out)} == said
    for version, readable in said.items():
        try:
            DeltaTable(str(root), version=version).to_pyarrow_table()
            read = True
        except OSError:
            read = False
        assert read == (readable == "yes"), (version, readable)


def test_a_repeated_job_is_reported_as_it_was_pushed(zk_hosts: str, tmp_path: Path) -> None:
    """A job pushed as a refresh of an APPEND table, run again without
    --mode (or with flags that would not do for a push): its completed push
    is reported with the mode it had, nothing pushed again."""
    code, _, err = cli(
        zk_hosts, "table", "create", "jobs", "--root", str(tmp_path / "jobs"), "--type", "APPEND",
        "--time-column", "ts",
    )  # fmt: skip
    assert code == 0, err
    day = str(_day(tmp_path, 0, 4))
    code, _, err = cli(zk_hosts, "push", "jobs", "--input", day, "--mode", "refresh", "--job-id", "j1")
    assert code == 0, err
    for extra in ([], ["--mode", "replace-range"]):
        code, out, err = cli(zk_hosts, "--json", "push", "jobs", "--input", day, "--job-id", "j1", *extra)
        assert code == 0, err
        result = json.loads(out)
        assert (result["mode"], result["repeated"]) == ("refresh", True), result
    assert _rows(zk_hosts, "jobs") == 4


def test_read_prints_nulls_as_null_and_columns_in_their_own_case(zk_hosts: str, tmp_path: Path) -> None:
    path = tmp_path / "mixed.parquet"
    table = pa.table({"UserId": pa.array([1, None], pa.int64()), "tags": [["a", None], None]})
    pq.write_table(table, path)
    code, _, err = cli(zk_hosts, "table", "create", "mixed", "--root", str(tmp_path / "mixed"))
    assert code == 0, err
    code, _, err = cli(zk_hosts, "push", "mixed", "--input", str(path))
    assert code == 0, err
    code, out, err = cli(zk_hosts, "read", "mixed")
    assert code == 0, err
    header, first, second = out.splitlines()[:3]
    assert header.split() == ["UserId", "tags"]
    assert first.split() == ["1", "[a,", "null]"] and second.split() == ["null", "null"], out


def test_segments_of_a_timed_table_show_their_time_ranges(zk_hosts: str, tmp_path: Path) -> None:
    code, _, err = cli(
        zk_hosts, "table", "create", "days", "--root", str(tmp_path / "days"), "--type", "APPEND",
        "--time-column", "ts",
    )  # fmt: skip
    assert code == 0, err
    for day in (0, 3):
        code, _, err = cli(zk_hosts, "push", "days", "--input", str(_day(tmp_path, day, 2)))
        assert code == 0, err
    code, out, err = cli(zk_hosts, "segments", "days")
    assert code == 0, err
    assert out.splitlines()[0].split() == ["NAME", "ROWS", "BYTES", "FIRST", "LAST", "ENTRY"]
    assert "2013-01-04T00:00:00Z  2013-01-04T00:00:01Z" in out, out
    assert out.splitlines()[-1] == "time range: 2013-01-01T00:00:00Z to 2013-01-04T00:00:01Z", out


def test_segment_add_checks_each_files_columns_against_the_tables(zk_hosts: str, tmp_path: Path) -> None:
    """A registered file's rows come from its footer (a wrong --rows is
    refused), and so do its columns: a column the table lacks, or of another
    type, is refused with nothing registered; one the file lacks reads null."""
    root = tmp_path / "reg"
    code, _, err = cli(zk_hosts, "table", "create", "reg", "--root", str(root))
    assert code == 0, err
    code, _, err = cli(zk_hosts, "push", "reg", "--input", str(_day(tmp_path, 0, 2)))  # ts, v
    assert code == 0, err
    ts = pa.array([1_357_000_000_000], pa.timestamp("ms", tz="UTC"))
    pq.write_table(pa.table({"ts": ts, "v": pa.array(["x"])}), root / "typed.parquet")  # v: string
    pq.write_table(pa.table({"ts": ts, "v": [1], "extra": [2]}), root / "wide.parquet")
    pq.write_table(pa.table({"ts": ts}), root / "narrow.parquet")  # no v: it reads as null
    code, _, err = cli(zk_hosts, "segment", "add", "reg", "typed", "wide")
    assert code == 1, err
    assert "typed.parquet: column 'v' is string, the table has int64" in err, err
    assert "wide.parquet: column 'extra' (int64) is new" in err and "nothing was registered" in err, err
    code, _, err = cli(zk_hosts, "segment", "add", "reg", "narrow", "--rows", "2")
    assert code == 1 and "row" in err, err  # the footer says 1
    code, _, err = cli(zk_hosts, "segment", "add", "reg", "narrow")
    assert code == 0, err
    code, out, err = cli(zk_hosts, "--json", "read", "reg", "--limit", "10")
    assert code == 0, err
    assert sorted(str(r["v"]) for r in json.loads(out)["rows"]) == ["0", "1", "None"]


def test_drop_purge_reclaims_the_files_through_retention_and_then_drops_the_table(
    zk_hosts: str, tmp_path: Path
) -> None:
    """``table drop --purge``: every file queued at once, nothing else changes
    the table, a reader's pin keeps its files; retention deletes the files
    past the grace and drops the table; the name is free again."""
    from segment_lineage.ingest.readers import SnapshotReader
    from segment_lineage.lineage.manager import LineageManager
    from segment_lineage.lineage.zk.connect import open_store

    root = tmp_path / "gone"
    code, _, err = cli(zk_hosts, "table", "create", "gone", "--root", str(root), "--type", "APPEND",
                       "--time-column", "ts", "--mirror", "delta")  # fmt: skip
    assert code == 0, err
    for day in (0, 1):
        assert cli(zk_hosts, "push", "gone", "--input", str(_day(tmp_path, day, 5)))[0] == 0
    assert (root / "_delta_log").exists()
    code, _, err = cli(zk_hosts, "table", "drop", "gone", "--purge", "--force")
    assert code == 2 and "give --purge or --force" in err, err
    store = open_store(zk_hosts)
    try:
        reader = SnapshotReader(LineageManager(store), "gone")  # pins the two segments
        code, out, err = cli(zk_hosts, "table", "drop", "gone", "--purge")
        assert code == 0, err
        assert "2 segment(s) (10 rows" in out and "2 file(s) queued" in out and "cannot be undone" in out, out
        assert not (root / "_delta_log").exists()  # engines lose the table at once
        assert _rows(zk_hosts, "gone") == 0
        code, out, _ = cli(zk_hosts, "--json", "table", "show", "gone")
        assert "dropped with --purge" in json.loads(out)["purging"]
        code, _, err = cli(zk_hosts, "push", "gone", "--input", str(_day(tmp_path, 2, 5)))
        assert code == 1 and "being dropped with --purge" in err, err
        code, _, err = cli(zk_hosts, "table", "alter", "gone", "--max-snapshots", "3")
        assert code == 1 and "being dropped with --purge" in err, err
        sweep = ("retention", "run", "--table", "gone", "--yes", "--min-grace", "0s", "--force")
        code, out, err = cli(zk_hosts, *sweep)
        assert code == 0 and "deleted 0 file(s)" in out and "purging: 2 file(s) left" in out, (out, err)
        code, out, err = cli(zk_hosts, "retention", "run", "--table", "gone", "--dry-run")
        assert out.count("pinned by a reader") == 2, out
        assert reader.to_arrow().num_rows == 10  # the pinned snapshot still reads
        reader.close()
    finally:
        store.close()
    code, out, err = cli(zk_hosts, *sweep)
    assert code == 0 and "deleted 2 file(s)" in out and "the table dropped" in out, (out, err)
    assert not list(root.rglob("*.parquet"))
    code, _, err = cli(zk_hosts, "table", "show", "gone")
    assert code == 3 and "does not exist" in err, err
    code, _, err = cli(zk_hosts, "table", "create", "gone", "--root", str(root))  # the name and root are free
    assert code == 0, err


def test_drop_purge_is_refused_while_a_push_runs_and_drops_an_empty_table_at_once(
    zk_hosts: str, tmp_path: Path
) -> None:
    from segment_lineage.lineage.manager import LineageManager
    from segment_lineage.lineage.zk.connect import open_store

    assert cli(zk_hosts, "table", "create", "busy", "--root", str(tmp_path / "busy"))[0] == 0
    assert cli(zk_hosts, "push", "busy", "--input", str(_day(tmp_path, 0, 3)))[0] == 0
    store = open_store(zk_hosts)
    try:
        m = LineageManager(store)
        entry = m.start_replace("busy", [s.name for s in m.visible_segments("busy")], ["next"])
    finally:
        store.close()
    code, _, err = cli(zk_hosts, "table", "drop", "busy", "--purge")
    assert code == 1 and f"push {entry} is in progress" in err and "--force" in err, err
    assert _rows(zk_hosts, "busy") == 3  # nothing changed
    assert cli(zk_hosts, "table", "create", "empty", "--root", str(tmp_path / "empty"))[0] == 0
    code, out, err = cli(zk_hosts, "table", "drop", "empty", "--purge")
    assert code == 0 and "dropped table empty" in out, err


def test_drop_purge_leaves_nothing_behind_and_every_other_door_names_it(
    zk_hosts: str, tmp_path: Path
) -> None:
    """Files nothing registered keep a purge open until retention takes them;
    --force on a purging table, a push's dry run, a rollback and a mirror
    sync are refused naming the purge; purging again says so."""
    root = tmp_path / "left"
    assert cli(zk_hosts, "table", "create", "left", "--root", str(root), "--mirror", "delta")[0] == 0
    assert cli(zk_hosts, "push", "left", "--input", str(_day(tmp_path, 0, 4)))[0] == 0
    stray = root / "crashed" / "part-0.parquet"  # a push that died before it registered anything
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"PAR1")
    code, out, err = cli(zk_hosts, "table", "drop", "left", "--purge")
    assert code == 0 and "1 file(s) under its root that nothing registered" in out, (out, err)
    code, out, _ = cli(zk_hosts, "table", "drop", "left", "--purge")
    assert code == 0 and "still being purged: 2 file(s)" in out, out
    for words in (
        ("table", "drop", "left", "--force"),
        ("push", "left", "--input", str(_day(tmp_path, 1, 2)), "--dry-run"),
        ("rollback", "left"),
        ("mirror", "sync", "left"),
    ):
        code, _, err = cli(zk_hosts, *words)
        assert code == 1 and "--purge" in err, (words, err)
    assert stray.exists() and cli(zk_hosts, "table", "show", "left")[0] == 0
    sweep = (
        "retention",
        "run",
        "--table",
        "left",
        "--yes",
        "--min-grace",
        "0s",
        "--orphan-grace",
        "0s",
        "--force",
    )
    passes = 0
    while cli(zk_hosts, "table", "show", "left")[0] == 0 and passes < 4:  # the stray: seen, then taken
        code, out, err = cli(zk_hosts, *sweep)
        assert code == 0, (out, err)
        passes += 1
    assert passes == 2 and "the table dropped" in out, (passes, out)
    assert not stray.exists() and not list(root.rglob("*.parquet"))
    assert cli(zk_hosts, "table", "show", "left")[0] == 3
