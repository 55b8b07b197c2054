"""A table's settings after creation: ``table alter`` (one commit, recorded
with old and new values), and the number of versions a table keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from segment_lineage.lineage.core.errors import InvalidInputError, VersionGoneError
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.core.settings import SettingsChange
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.zk.store import ZkStore
from tests.helpers.run import cli as run
from tests.helpers.run import cli_history as history


def test_alter_changes_settings_in_one_recorded_commit(zk_hosts: str, tmp_path: Path) -> None:
    root = str(tmp_path / "events")
    create = ("table", "create", "events", "--root", root, "--type", "APPEND", "--time-column", "ts")
    assert run(zk_hosts, *create)[0] == 0
    code, out, err = run(
        zk_hosts, "--json", "table", "alter", "events", "--max-snapshots", "5", "--versions-kept", "200",
        "--time-retention", "30d", "--time-granularity", "month", "--reason", "keep more",
    )  # fmt: skip
    assert code == 0, err
    view = json.loads(out)
    assert view["max_snapshots"] == 5 and view["versions_kept"] == 200
    assert view["time_retention"] == "30d" and view["time_granularity"] == "month"
    assert view["changed"] == (
        "max_snapshots 2 -> 5; time_retention none -> 30d; versions_kept default -> 200; "
        "time_granularity none -> month"
    )
    code, _, err = run(zk_hosts, "table", "alter", "events", "--time-granularity", "week")
    assert code == 2 and "invalid time granularity 'week': use hour, day, month" in err
    _, out, _ = run(zk_hosts, "--json", "history", "events", "--limit", "1")
    record = json.loads(out)[0]
    assert record["operation"] == "ALTER_TABLE" and record["reason"] == "keep more"
    assert record["settings"] == view["changed"]
    code, out, _ = run(zk_hosts, "table", "alter", "events", "--max-snapshots", "5")
    assert code == 0 and "already has these settings" in out
    code, _, _ = run(
        zk_hosts, "table", "alter", "events", "--time-retention", "none", "--versions-kept", "none"
    )
    _, out, _ = run(zk_hosts, "--json", "table", "show", "events")
    shown = json.loads(out)
    assert code == 0 and shown["time_retention"] is None and shown["versions_kept"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "nothing to alter"),
        (("--max-snapshots", "0"), "invalid max snapshots 0"),
        (("--versions-kept", "1"), "invalid versions kept 1"),
        (("--versions-kept", "many"), "invalid versions kept 'many'"),
        (("--replaced-retention", "soon"), "invalid period 'soon'"),
        (("--time-granularity", "day"), "time granularity 'day' needs a time column"),
        (("--time-retention", "7d"), "applies to APPEND tables only"),
    ],
)
def test_a_bad_alter_is_refused_naming_the_setting_and_changes_nothing(
    zk_hosts: str, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    assert run(zk_hosts, "table", "create", "dims", "--root", str(tmp_path / "dims"))[0] == 0
    _, before, _ = run(zk_hosts, "--json", "table", "show", "dims")
    code, _, err = run(zk_hosts, "table", "alter", "dims", *args)
    assert code == 2 and message in err, err
    assert run(zk_hosts, "--json", "table", "show", "dims")[1] == before


def test_two_alters_at_once_keep_each_others_settings(zk_manager: LineageManager, tmp_path: Path) -> None:
    """Each alter applies its change to the config its own commit reads."""
    m = zk_manager
    m.create_table(TableConfig.build("both", str(tmp_path / "both")))
    original = m.commit

    def interleaved(table: str, update: object, reason: str | None = None) -> object:
        m.commit = original  # type: ignore[method-assign]
        m.alter_table("both", SettingsChange(versions_kept=10))  # lands between the check and the commit
        return original(table, update, reason)  # type: ignore[arg-type]

    m.commit = interleaved  # type: ignore[method-assign]
    m.alter_table("both", SettingsChange(max_snapshots=4))
    config = m.table("both").config
    assert config.max_snapshots == 4 and config.versions_kept == 10


def test_a_table_keeps_as_many_versions_as_it_says(zk_manager: LineageManager, tmp_path: Path) -> None:
    m = zk_manager
    m.create_table(TableConfig.build("few", str(tmp_path / "few"), versions_kept=3))
    for i in range(8):
        m.register_segments("few", [Segment(f"s{i}", f"f/s{i}.parquet")])
    store = m.store
    assert isinstance(store, ZkStore)
    store.collect_garbage("few", grace_ms=0)
    newest = m.table("few").version
    assert store.versions("few") == [newest - 2, newest - 1, newest]
    with pytest.raises(VersionGoneError):
        m.table_as_of("few", newest - 3)
    with pytest.raises(InvalidInputError, match="invalid versions kept"):
        TableConfig.build("x", "/x", versions_kept=100_001)


def test_a_push_splits_its_output_by_the_tables_time_chunks(zk_hosts: str, tmp_path: Path) -> None:
    """Through the CLI (Arrow engine): days of three months in one file
    become a segment per month (hours of one day, a segment per hour once
    the granularity is altered), and replacing February afterwards works."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    def at(month: int, day: int, hour: int = 12) -> dt.datetime:
        return dt.datetime(2013, month, day, hour, tzinfo=dt.UTC)

    stamps = [at(mo, d) for mo in (1, 2, 3) for d in (1, 28)]
    pq.write_table(pa.table({"n": list(range(6)), "ts": stamps}), tmp_path / "q1.parquet")
    pq.write_table(pa.table({"n": [10], "ts": [at(2, 3)]}), tmp_path / "feb.parquet")
    pq.write_table(pa.table({"n": [20, 21], "ts": [at(4, 1, 0), at(4, 1, 1)]}), tmp_path / "apr.parquet")
    create = (
        "table",
        "create",
        "fl",
        "--root",
        str(tmp_path / "fl"),
        "--type",
        "APPEND",
        "--time-column",
        "ts",
    )
    assert run(zk_hosts, *create, "--time-granularity", "month")[0] == 0
    code, _, err = run(zk_hosts, "push", "fl", "--input", str(tmp_path / "q1.parquet"), "--mode", "append")
    assert code == 0, err
    _, out, _ = run(zk_hosts, "--json", "segments", "fl")
    months = sorted(
        (dt.datetime.fromtimestamp(s["min_time"] / 1000, dt.UTC).month, s["rows"]) for s in json.loads(out)
    )
    assert months == [(1, 2), (2, 2), (3, 2)]
    feb = ("--mode", "replace-range", "--interval", "2013-02-01/2013-03-01")
    code, _, err = run(zk_hosts, "push", "fl", "--input", str(tmp_path / "feb.parquet"), *feb)
    assert code == 0, err
    assert run(zk_hosts, "table", "alter", "fl", "--time-granularity", "hour")[0] == 0
    code, _, err = run(zk_hosts, "push", "fl", "--input", str(tmp_path / "apr.parquet"), "--mode", "append")
    assert code == 0, err
    _, out, _ = run(zk_hosts, "--json", "segments", "fl")
    april = sorted(
        (s["min_time"], s["rows"]) for s in json.loads(out) if (s["min_time"] or 0) >= 1364774400000
    )
    assert [rows for _, rows in april] == [1, 1]
    _, out, _ = run(zk_hosts, "--json", "read", "fl", "--limit", "100")
    assert sorted(r["n"] for r in json.loads(out)["rows"]) == [0, 1, 4, 5, 10, 20, 21]


def test_entry_ids_are_taken_by_a_unique_prefix(zk_hosts: str, tmp_path: Path) -> None:
    """The 8 digits the tool prints in segment names name the entry; too
    short, not hexadecimal, unknown or shared prefixes are refused by name."""
    assert run(zk_hosts, "table", "create", "pre", "--root", str(tmp_path / "pre"))[0] == 0
    assert run(zk_hosts, "segment", "add", "pre", "a", "--no-check")[0] == 0
    _, out, _ = run(zk_hosts, "--json", "start-replace", "pre", "--from", "a", "--to", "b")
    entry = json.loads(out)["entry"]
    assert run(zk_hosts, "segment", "add", "pre", "b", "--no-check", "--entry", entry[:8])[0] == 0
    code, out, err = run(zk_hosts, "--json", "end-replace", "pre", entry[:8].upper())
    assert code == 0 and json.loads(out)["entry"] == entry, err
    code, _, err = run(zk_hosts, "--json", "rollback", "pre", "--entry", entry[:6], "--dry-run")
    assert code == 0, err
    for prefix, code_wanted, message in (
        ("ab", 2, "at least 4"),
        ("zzzzzzzz", 2, "hexadecimal"),
        ("0000000", 3, "no entry of table 'pre' starts with '0000000'"),
        ("a" * 5000, 2, "... (5000 characters)': a whole id (36 characters)"),  # longer than any id
        (entry + "0", 2, "a whole id (36 characters)"),
    ):
        code, _, err = run(zk_hosts, "revert", "pre", prefix)
        assert code == code_wanted and message in err and len(err) < 500, (prefix, err)


def test_a_prefix_shared_by_two_entries_is_refused_naming_both(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    m = zk_manager
    m.create_table(TableConfig.build("twins", str(tmp_path / "twins")))
    first = m.start_replace("twins", [], ["x"], entry_id="abcd0000-0000-4000-8000-000000000001")
    second = m.start_replace("twins", [], ["y"], entry_id="abcd0000-0000-4000-8000-000000000002")
    with pytest.raises(InvalidInputError, match="matches 2 entries") as caught:
        m.resolve_entry("twins", "abcd0000")
    assert first in caught.value.message and second in caught.value.message
    assert m.resolve_entry("twins", second) == second


def test_dry_runs_of_push_and_revert_say_what_would_change_and_change_nothing(
    zk_hosts: str, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "dry"
    pq.write_table(pa.table({"k": [1, 2, 3]}), tmp_path / "three.parquet")
    pq.write_table(pa.table({"k": [4, 5], "extra": ["a", "b"]}), tmp_path / "wider.parquet")
    assert run(zk_hosts, "table", "create", "dry", "--root", str(root))[0] == 0
    code, out, err = run(
        zk_hosts, "--json", "push", "dry", "--input", str(tmp_path / "three.parquet"), "--dry-run"
    )
    plan = json.loads(out)
    assert code == 0 and plan["dry_run"] and plan["rows"] == 3 and plan["segments"] == 1, err
    assert plan["schema"] == "schema recorded: 1 columns" and plan["replaced"] == 0
    assert history(zk_hosts, "dry")[0]["operation"] == "CREATE_TABLE"
    assert not [p for p in root.rglob("*") if not p.name.startswith(".segment-lineage-root")]
    assert run(zk_hosts, "push", "dry", "--input", str(tmp_path / "three.parquet"))[0] == 0
    before = history(zk_hosts, "dry")
    wider = ("push", "dry", "--input", str(tmp_path / "wider.parquet"), "--dry-run")
    code, _, err = run(zk_hosts, *wider)
    assert code == 1 and "column 'extra' (string) is new" in err
    code, out, _ = run(zk_hosts, *wider, "--evolve-schema")
    assert (
        code == 0 and "replacing 1 segment(s) of 3 rows; schema: schema evolved: added extra (string)" in out
    )
    entry = str(before[0]["entry"])
    code, out, err = run(zk_hosts, "revert", "dry", entry[:8], "--dry-run")
    assert code == 0 and "would show 0 segment(s) (0 rows) and hide 1 (3 rows)" in out, err
    assert history(zk_hosts, "dry") == before


def test_the_retention_dry_run_names_each_file_it_would_delete_or_keep_and_why(
    zk_hosts: str, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"k": [1]}), tmp_path / "one.parquet")
    assert run(zk_hosts, "table", "create", "kept", "--root", str(tmp_path / "kept"))[0] == 0
    for _ in range(2):
        assert run(zk_hosts, "push", "kept", "--input", str(tmp_path / "one.parquet"))[0] == 0
    _, out, _ = run(zk_hosts, "--json", "segment", "list", "kept")
    replaced = next(s for s in json.loads(out) if not s["visible"])
    newest = history(zk_hosts, "kept")[0]
    code, out, err = run(zk_hosts, "retention", "run", "--table", "kept")
    tag = str(newest["entry"])[:8]
    assert (
        code == 0
        and f"keep    {replaced['location']}: replaced by push {tag}: kept for rollback until " in out
    )
    assert run(zk_hosts, "table", "alter", "kept", "--replaced-retention", "0s")[0] == 0
    code, out, err = run(zk_hosts, "retention", "run", "--table", "kept", "--min-grace", "0s")
    assert code == 0 and f"delete  REPLACED          {replaced['location']}" in out, out + err
    code, out, _ = run(zk_hosts, "--json", "retention", "run", "--table", "kept", "--min-grace", "0s")
    assert json.loads(out)[0]["planned"][0]["location"] == replaced["location"]
    assert (tmp_path / "kept" / replaced["location"]).exists()  # a dry run: nothing deleted


def test_every_time_argument_takes_one_form_and_every_message_prints_iso_utc(
    zk_hosts: str, tmp_path: Path
) -> None:
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    stamps = [dt.datetime(2013, 2, 10, tzinfo=dt.UTC), dt.datetime(2013, 3, 1, 4, tzinfo=dt.UTC)]
    pq.write_table(pa.table({"ts": stamps}), tmp_path / "feb.parquet")
    create = (
        "table",
        "create",
        "zoned",
        "--root",
        str(tmp_path / "z"),
        "--type",
        "APPEND",
        "--time-column",
        "ts",
    )
    assert run(zk_hosts, *create)[0] == 0
    push = (
        "push",
        "zoned",
        "--input",
        str(tmp_path / "feb.parquet"),
        "--mode",
        "replace-range",
        "--interval",
    )
    code, _, err = run(zk_hosts, *push, "2013-02/2013-03")
    assert code == 1 and "rows from 2013-02-10T00:00:00Z to 2013-03-01T04:00:00Z, outside the interval" in err
    assert "[2013-02-01T00:00:00Z, 2013-03-01T00:00:00Z)" in err
    code, _, err = run(zk_hosts, *push, "2013-02-01T00:00:00-05:00/2013-03-01T00:00:00-05:00")
    assert code == 0, err  # February in New York ends at 05:00 UTC on March 1st
    code, _, err = run(zk_hosts, *push, "1359676800000/1362096000000")
    assert code == 2 and "write ms:1359676800000 for epoch milliseconds" in err
    code, _, err = run(zk_hosts, *push, "ms:1359676800000/ms:1362200000000")
    assert code == 0, err
    code, before, _ = run(zk_hosts, "history", "zoned")
    # An end in microseconds, as milliseconds, was an end 56,000 years away: every later row hidden.
    code, _, err = run(zk_hosts, *push, "ms:1359676800000/ms:1362200000000000")
    assert code == 2 and "past the years 1 to 9999; if it is in microseconds: ms:1362200000000" in err, err
    assert "(2013-03-02T04:53:20Z)" in err, err  # the date it would be, for the user to judge
    code, _, err = run(zk_hosts, "read", "zoned", "--as-of", "1362200000000000000", "--limit", "1")
    assert code == 2 and "if it is in nanoseconds: ms:1362200000000" in err, err
    # A date at the calendar's edge, moved past it by its zone (an outside trial recorded one).
    code, _, err = run(zk_hosts, *push, "2013-02-01/9999-12-31T23:30:00-05:00")
    assert code == 2 and "in UTC it is past the years 1 to 9999" in err, err
    code, _, err = run(zk_hosts, "read", "zoned", "--as-of", "0001-01-01T00:00:00+01:00", "--limit", "1")
    assert code == 2 and "in UTC it is past the years 1 to 9999" in err, err
    assert run(zk_hosts, "history", "zoned")[1] == before  # nothing changed
    code, _, err = run(zk_hosts, "rollback", "zoned", "--to-time", "2001-01-01", "--dry-run")
    assert code == 3 and "did not exist at 2001-01-01T00:00:00Z" in err
    code, _, err = run(zk_hosts, "rollback", "zoned", "--to-time", "978307200000", "--dry-run")
    assert code == 2 and "ms:978307200000" in err


def test_the_history_picture_tells_what_became_of_each_push(zk_hosts: str, tmp_path: Path) -> None:
    """A push whose data was replaced is not drawn live; an APPEND push whose
    entry retention removed is not drawn reclaimed while its rows show; the
    readable band holds exactly the versions ``read --as-of`` can read; the
    legend fits the canvas; every lane's state agrees with history."""
    import datetime as dt
    import re
    import xml.etree.ElementTree as ET

    import pyarrow as pa
    import pyarrow.parquet as pq

    def month(mo: int, n: int, name: str) -> Path:
        path = tmp_path / f"{name}.parquet"
        stamps = [dt.datetime(2013, mo, 1 + i, tzinfo=dt.UTC) for i in range(n)]
        pq.write_table(pa.table({"ts": stamps, "n": list(range(n))}), path)
        return path

    create = (
        "table",
        "create",
        "pic",
        "--root",
        str(tmp_path / "pic"),
        "--type",
        "APPEND",
        "--time-column",
        "ts",
    )
    assert run(zk_hosts, *create)[0] == 0

    def push(path: Path, *args: str) -> str:
        code, out, err = run(zk_hosts, "--json", "push", "pic", "--input", str(path), *args)
        assert code == 0, err
        return str(json.loads(out)["entry"])

    jan = push(month(1, 3, "jan"), "--mode", "append", "--reason", "January")
    feb = push(month(2, 2, "feb"), "--mode", "append")
    fix = push(
        month(2, 4, "fix"), "--mode", "replace-range", "--interval", "2013-02/2013-03", "--reason", "fix Feb"
    )
    mar = push(month(3, 5, "mar"), "--mode", "append")
    assert run(zk_hosts, "rollback", "pic")[0] == 0  # undoes March
    assert run(zk_hosts, "table", "alter", "pic", "--replaced-retention", "0s")[0] == 0
    code, _, err = run(
        zk_hosts, "retention", "run", "--table", "pic", "--yes", "--min-grace", "0s", "--force"
    )
    assert code == 0, err
    graph = tmp_path / "pic.svg"
    code, out, err = run(zk_hosts, "--json", "history", "pic", "--graph", str(graph))
    assert code == 0, err
    records = json.loads(out)
    svg = graph.read_text()
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    titles = [t.text or "" for t in root.iter(f"{ns}title")]
    drawn = {m[1]: m[2] for t in titles if (m := re.match(r"entry (\S+): versions \d+ to \S+, (\w+)", t))}
    _, out, _ = run(zk_hosts, "--json", "segment", "list", "pic")
    showing = {s["entry"] for s in json.loads(out) if s["visible"]}
    rolled_back = (
        {r["entry"] for r in records if r["operation"] == "START_REPLACE"} - showing - {jan, feb, fix}
    )
    assert drawn == {jan: "live", feb: "reclaimed", fix: "live", mar: "reverted"}
    assert {e for e, kind in drawn.items() if kind == "live"} == showing and rolled_back == {mar}
    assert "append 3 rows January" in svg and "replace-range 4 rows fix Feb" in svg
    band = [(int(a), int(b)) for t in titles for a, b in re.findall(r"readable versions (\d+) to (\d+)", t)]
    readable = {v for lo, hi in band for v in range(lo, hi + 1)}
    for record in records:
        version = int(record["version"])
        code, _, _ = run(zk_hosts, "read", "pic", "--as-of", str(version), "--limit", "1")
        assert (code == 0) == (version in readable), (version, readable)
    width = int(root.get("width") or 0)
    assert all(float(t.get("x") or 0) + 6 * len(t.text or "") <= width for t in root.iter(f"{ns}text"))


def test_the_demo_data_option_refuses_what_it_cannot_write(zk_hosts: str, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    code, _, err = run(zk_hosts, "demo", "--data", "weather")
    assert code == 2 and "unknown demo data 'weather': use flights" in err
    code, _, err = run(zk_hosts, "demo", "--data", "flights", "--out", str(tmp_path / "file"))
    assert code == 2 and "is a file, not a directory" in err


def test_progress_is_a_live_line_on_a_terminal_and_plain_lines_otherwise(
    zk_hosts: str, tmp_path: Path
) -> None:
    import os
    import pty
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"k": [1, 2]}), tmp_path / "two.parquet")
    assert run(zk_hosts, "table", "create", "tty", "--root", str(tmp_path / "tty"))[0] == 0
    command = [sys.executable, "-m", "segment_lineage", "--zk", zk_hosts, "push", "tty", "--input",
               str(tmp_path / "two.parquet")]  # fmt: skip
    piped = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert piped.returncode == 0 and "\x1b[" not in piped.stderr
    assert "wrote 1 segment(s), 2 rows" in piped.stderr.splitlines()[-1]
    leader, follower = pty.openpty()
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=follower, timeout=120, check=False)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    text = seen.decode("utf-8", "replace")
    assert done.returncode == 0
    assert "wrote 1 segment(s), 2 rows" in text and "\x1b[" in text  # kept lines, and the live status


def test_alter_refuses_values_of_the_wrong_kind_before_they_reach_the_head(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    m = zk_manager
    m.create_table(TableConfig.build("kinds", str(tmp_path / "kinds"), "APPEND", time_column="ts"))
    for change, message in (
        (SettingsChange(exclusive_delete="no"), "invalid exclusive delete 'no'"),  # type: ignore[arg-type]
        (SettingsChange(time_granularity=5), "invalid time granularity 5"),  # type: ignore[arg-type]
        (SettingsChange(replaced_segments_retention="none"), "invalid replaced segments retention 'none'"),
        (SettingsChange(lineage_entry_cleanup_retention="none"), "invalid lineage entry cleanup retention"),
    ):
        with pytest.raises(InvalidInputError, match=message):
            m.alter_table("kinds", change)
    assert m.table("kinds").version == 1


def test_a_prefix_naming_a_live_entry_and_a_past_one_is_ambiguous(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    m = zk_manager
    m.create_table(TableConfig.build("past", str(tmp_path / "past"), "APPEND"))
    first = "abcd0000-0000-4000-8000-000000000001"
    m.start_replace("past", [], ["x"], entry_id=first)
    m.revert_replace("past", first, force=True)
    m.alter_table("past", SettingsChange(lineage_entry_cleanup_retention="0s"))
    from segment_lineage.retention.executor import PassOptions, run_pass

    run_pass(m, ["past"], PassOptions(min_grace_ms=0))  # the reverted entry goes: history still names it
    assert first not in m.table("past").entries
    m.start_replace("past", [], ["y"], entry_id="abcd0000-0000-4000-8000-000000000002")
    with pytest.raises(InvalidInputError, match="matches 2 entries"):
        m.resolve_entry("past", "abcd", in_history=True)
    assert m.resolve_entry("past", "abcd") == "abcd0000-0000-4000-8000-000000000002"


def test_a_root_that_already_holds_files_is_refused_unless_asked(zk_hosts: str, tmp_path: Path) -> None:
    """Retention takes every unreferenced file under a root: a user's own
    files there would go a day later, so creating over them is refused."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.docx").write_text("precious")
    code, _, err = run(zk_hosts, "table", "create", "over", "--root", str(mine))
    assert code == 1 and "already holds 'report.docx'" in err and "--existing-files" in err
    code, out, _ = run(zk_hosts, "table", "list")
    assert "over" not in out.split() and not (mine / ".segment-lineage-root.json").exists()
    assert run(zk_hosts, "table", "create", "over", "--root", str(mine), "--existing-files")[0] == 0
    assert run(zk_hosts, "table", "create", "fresh", "--root", str(tmp_path / "new" / "dir"))[0] == 0


def test_a_refused_create_leaves_no_folder_behind(zk_hosts: str, tmp_path: Path) -> None:
    """A root that is another table's (in another case), or a name taken (in
    another case), is refused before the root's marker and its folder are made."""
    roots = tmp_path / "roots"
    assert run(zk_hosts, "table", "create", "twin1", "--root", str(roots / "t1"))[0] == 0
    code, _, err = run(zk_hosts, "table", "create", "twin2", "--root", str(roots / "T1"))
    assert code == 1 and "is the root of table 'twin1'" in err, err
    code, _, err = run(zk_hosts, "table", "create", "TWIN1", "--root", str(roots / "t2"))
    assert code == 1 and "differs only in case from existing table 'twin1'" in err, err
    assert sorted(p.name for p in roots.iterdir()) == ["t1"]


def test_rows_without_a_time_are_refused_where_the_table_has_a_time_column(
    zk_hosts: str, tmp_path: Path
) -> None:
    """A row without a time could never be judged by replace-range, time
    chunks or time retention: one such segment blocked every replace-range."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    stamps = [dt.datetime(2024, 1, 2, 1, tzinfo=dt.UTC), None]
    pq.write_table(
        pa.table({"ts": pa.array(stamps, pa.timestamp("us", tz="UTC")), "v": [1, 2]}), tmp_path / "n.parquet"
    )
    create = (
        "table",
        "create",
        "nt",
        "--root",
        str(tmp_path / "nt"),
        "--type",
        "APPEND",
        "--time-column",
        "ts",
    )
    assert run(zk_hosts, *create)[0] == 0
    code, _, err = run(zk_hosts, "push", "nt", "--input", str(tmp_path / "n.parquet"), "--mode", "append")
    assert code == 1 and "1 row(s) of the input have no 'ts'" in err
    assert history(zk_hosts, "nt")[0]["operation"] == "CREATE_TABLE"


def test_a_repeated_job_says_when_its_push_was_rolled_back_since(zk_hosts: str, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"k": [1, 2]}), tmp_path / "two.parquet")
    assert run(zk_hosts, "table", "create", "jobs", "--root", str(tmp_path / "jobs"))[0] == 0
    push = ("push", "jobs", "--input", str(tmp_path / "two.parquet"), "--job-id", "nightly-1")
    assert run(zk_hosts, *push)[0] == 0
    code, out, _ = run(zk_hosts, *push)
    assert code == 0 and "nothing pushed again" in out and "rolled back since" not in out
    assert run(zk_hosts, "rollback", "jobs")[0] == 0
    code, out, _ = run(zk_hosts, "--json", *push)
    result = json.loads(out)
    assert code == 0 and result["repeated"] and result["undone"]
    code, out, _ = run(zk_hosts, *push)
    assert "reverted or rolled back since, so its rows are hidden" in out
