"""The command line, through Typer's CliRunner, on real ZooKeeper."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from segment_lineage.cli import app
from segment_lineage.cli.ingest import choose_engine
from segment_lineage.lineage.core.roots import canonical_root, file_uri
from segment_lineage.lineage.zk.server import ZkServer, free_port
from tests.helpers.files import parquet_file
from tests.helpers.paths import REPO

runner = CliRunner()
JVM_LINES = (
    "log4j",
    "incubator modules",
    "NativeCodeLoader",
    "setLogLevel",
    "SparkContext",
)  # Spark starting


def process(zk: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``lineage --zk ZK ARGS...`` in a fresh process, as a user runs it."""
    command = [sys.executable, "-m", "segment_lineage", "--zk", zk, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def run(zk: str, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--zk", zk, *args])
    return result.exit_code, result.stdout, result.stderr


def test_round_trip(zk_hosts: str, tmp_path: Path) -> None:
    code, out, _ = run(zk_hosts, "table", "create", "events", "--root", str(tmp_path / "events"))
    assert code == 0 and "created table events" in out
    assert run(zk_hosts, "segment", "add", "events", "a", "b", "--rows", "5", "--no-check")[0] == 0
    code, out, _ = run(zk_hosts, "--json", "start-replace", "events", "--from", "a,b", "--to", "c")
    entry = json.loads(out)["entry"]
    assert run(zk_hosts, "segment", "add", "events", "c", "--rows", "7", "--no-check")[0] == 0
    code, out, _ = run(zk_hosts, "--json", "segments", "events")
    assert [s["name"] for s in json.loads(out)] == ["a", "b"]
    assert run(zk_hosts, "end-replace", "events", entry)[0] == 0
    code, out, _ = run(zk_hosts, "segments", "events")
    assert "1 visible segment(s), 7 rows" in out
    code, out, _ = run(zk_hosts, "end-replace", "events", entry)
    assert code == 0 and "already completed" in out
    code, out, _ = run(zk_hosts, "--json", "entries", "events")
    assert json.loads(out)[0]["state"] == "COMPLETED"
    code, out, _ = run(zk_hosts, "revert", "events", entry, "--reason", "bad data")
    assert code == 0
    code, out, _ = run(zk_hosts, "--json", "history", "events", "--limit", "1")
    top = json.loads(out)[0]
    assert top["operation"] == "REVERT_REPLACE" and top["reason"] == "bad data"
    code, out, _ = run(zk_hosts, "export", "events", "--format", "pinot")
    record = json.loads(out)
    assert record["id"] == "events" and record["listFields"][entry][:3] == ["a,b", "c", "REVERTED"]
    code, out, _ = run(zk_hosts, "--json", "table", "show", "events")
    assert json.loads(out)["segments_visible"] == 2
    code, out, _ = run(zk_hosts, "--json", "segment", "list", "events")
    assert {s["name"]: s["visible"] for s in json.loads(out)} == {"a": True, "b": True, "c": False}


def test_history_fits_100_columns_and_says_what_its_counts_mean(zk_hosts: str, tmp_path: Path) -> None:
    assert run(zk_hosts, "table", "create", "events", "--root", str(tmp_path / "events"))[0] == 0
    assert run(zk_hosts, "segment", "add", "events", "a", "--rows", "5", "--no-check")[0] == 0
    why = "nightly rebuild of the events table after the upstream fix to the clickstream job"
    code, out, _ = run(
        zk_hosts, "--json", "start-replace", "events", "--from", "a", "--to", "b", "--reason", why
    )
    entry = json.loads(out)["entry"]
    assert run(zk_hosts, "segment", "add", "events", "b", "--rows", "7", "--no-check")[0] == 0
    assert run(zk_hosts, "end-replace", "events", entry)[0] == 0
    code, out, _ = run(zk_hosts, "history", "events")
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100, out
    assert lines[0].split() == ["VERSION", "AT", "OPERATION", "ENTRY", "SEGS", "ROWS", "ACTOR"]
    assert f"reason: {why}" in out and entry[:8] in out and entry not in out
    assert "SEGS: the segments a version names" in out and "ROWS: the rows it made visible" in out
    code, out, _ = run(zk_hosts, "--json", "history", "events")
    assert json.loads(out)[0]["entry"] == entry  # in full where scripts read it


def test_a_retention_below_the_grace_floor_says_when_files_really_go(zk_hosts: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["--zk", zk_hosts, "table", "create", "t", "--root", str(tmp_path / "t")])
    assert result.exit_code == 0 and "note:" not in result.stderr  # the default (1d) is above it
    result = runner.invoke(app, ["--zk", zk_hosts, "table", "alter", "t", "--replaced-retention", "1m"])
    assert result.exit_code == 0
    assert "note: replaced segments become deletable 1m after they go" in result.stderr
    assert "minimum grace (10m; lower only with --force)" in result.stderr
    args = ["table", "create", "u", "--root", str(tmp_path / "u"), "--entry-retention", "0s"]
    result = runner.invoke(app, ["--zk", zk_hosts, *args])
    assert result.exit_code == 0 and "note: a reverted push's files become deletable 0s" in result.stderr


def test_global_options_work_after_the_command_too(zk_hosts: str, tmp_path: Path) -> None:
    before = runner.invoke(app, ["--zk", zk_hosts, "table", "create", "g", "--root", str(tmp_path / "g")])
    assert before.exit_code == 0, before.stderr
    after = runner.invoke(app, ["segment", "add", "g", "a", "--rows", "5", "--no-check", "--zk", zk_hosts])
    assert after.exit_code == 0, after.stderr
    for args in (
        ["segments", "g", "--json", "--zk", zk_hosts],
        ["table", "show", "g", f"--zk={zk_hosts}", "--json"],
        ["--zk", zk_hosts, "history", "g", "--limit", "1", "--json"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.stderr)
        json.loads(result.stdout)  # JSON, wherever --json was
    shown = runner.invoke(app, ["table", "show", "g", "-v", "--json", "--zk", zk_hosts])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["name"] == "g"
    listed = runner.invoke(app, ["segments", "g", "--zk", zk_hosts])
    assert "1 visible segment(s), 5 rows" in listed.stdout
    # After "--", and as the value of the command's own option, it is an argument.
    refused = runner.invoke(app, ["--zk", zk_hosts, "segments", "--", "--json"])
    assert refused.exit_code == 2 and "table" in refused.stderr
    code, out, _ = run(zk_hosts, "revert", "g", "00000000-0000-4000-8000-000000000000", "--reason", "--json")
    assert code != 0 and not out.lstrip().startswith("{")


def test_json_listings_give_each_files_absolute_uri(zk_hosts: str, tmp_path: Path) -> None:
    root = tmp_path / "with space"
    assert run(zk_hosts, "table", "create", "u", "--root", str(root))[0] == 0
    assert run(zk_hosts, "segment", "add", "u", "a", "--rows", "1", "--no-check")[0] == 0
    for command in (["segments", "u"], ["segment", "list", "u"]):
        code, out, _ = run(zk_hosts, *command, "--json")
        [row] = json.loads(out)
        assert code == 0 and row["location"] == "a.parquet"
        assert row["uri"] == (root / "a.parquet").as_uri() and "%20" in row["uri"]
    assert (
        file_uri(canonical_root("s3://Lake/warehouse/s/"), "k=1/b.parquet")
        == "s3://lake/warehouse/s/k=1/b.parquet"
    )
    assert file_uri("hdfs://nn:8020/t", "b.parquet") == "hdfs://nn:8020/t/b.parquet"
    assert file_uri("relative/legacy", "b.parquet") is None


def test_a_push_that_cannot_fit_is_refused_before_spark_starts(zk_hosts: str, tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), source)
    assert run(zk_hosts, "table", "create", "dims", "--root", str(tmp_path / "dims"))[0] == 0  # REFRESH

    def push(*args: str) -> subprocess.CompletedProcess[str]:
        return process(zk_hosts, "push", "dims", *args)

    appended = push("--input", str(source), "--mode", "append")
    assert appended.returncode == 1, appended.stderr
    assert "append into REFRESH table 'dims'" in appended.stderr and "--mode refresh" in appended.stderr
    missing = push("--input", str(tmp_path / "nope.parquet"))
    assert missing.returncode == 2 and "does not exist; nothing was pushed" in missing.stderr
    for done in (appended, missing):  # refused before any JVM started
        assert not [line for line in JVM_LINES if line in done.stderr], done.stderr
    _, out, _ = run(zk_hosts, "history", "dims", "--json")
    assert [h["operation"] for h in json.loads(out)] == ["CREATE_TABLE"]


def test_the_runbook_undoes_a_rollback_by_rolling_forward(zk_hosts: str, tmp_path: Path) -> None:
    """docs/operations.md, "A bad push went out": what its commands claim."""
    assert run(zk_hosts, "table", "create", "rb", "--root", str(tmp_path / "rb"), "--type", "APPEND")[0] == 0
    for name in ("good", "bad"):  # two pushes, by hand
        _, out, _ = run(zk_hosts, "--json", "start-replace", "rb", "--to", name)
        assert run(zk_hosts, "segment", "add", "rb", name, "--rows", "3", "--no-check")[0] == 0
        assert run(zk_hosts, "end-replace", "rb", json.loads(out)["entry"])[0] == 0

    def visible() -> set[str]:
        return {s["name"] for s in json.loads(run(zk_hosts, "segments", "rb", "--json")[1])}

    assert run(zk_hosts, "rollback", "rb", "--reason", "bad data")[0] == 0
    assert visible() == {"good"}
    # Running it again would not undo it: it would undo the push before.
    _, out, _ = run(zk_hosts, "rollback", "rb", "--dry-run", "--json")
    assert json.loads(out)["disappear"] == ["good"]
    # The runbook: the rollback is the newest version V; roll forward to V-1.
    _, out, _ = run(zk_hosts, "history", "rb", "--limit", "2", "--json")
    newest = json.loads(out)[0]
    assert newest["operation"] == "ROLLBACK"
    before = str(newest["version"] - 1)
    _, out, _ = run(zk_hosts, "rollback", "rb", "--to-version", before, "--dry-run", "--json")
    assert json.loads(out)["appear"] == ["bad"]
    code, _, _ = run(zk_hosts, "rollback", "rb", "--to-version", before, "--reason", "undo")
    assert code == 0 and visible() == {"good", "bad"}
    runbook = (REPO / "docs" / "operations.md").read_text()
    assert "lineage rollback events --to-version V-1" in runbook


def test_a_small_local_push_runs_without_a_jvm_and_says_so(zk_hosts: str, tmp_path: Path) -> None:
    assert run(zk_hosts, "table", "create", "small", "--root", str(tmp_path / "small"))[0] == 0
    csv = tmp_path / "in.csv"
    csv.write_text("label,i\n" + "".join(f"csv,{i}\n" for i in range(12)))
    lines = tmp_path / "lines"
    lines.mkdir()
    (lines / "part-0.json").write_text(
        "".join(json.dumps({"label": "json", "i": i}) + "\n" for i in range(5))
    )
    (lines / "_SUCCESS").write_text("")  # a marker Spark would skip: so does Arrow

    def push(*args: str) -> subprocess.CompletedProcess[str]:
        return process(zk_hosts, "push", "small", *args, "--json")

    done = push("--input", str(csv), "--format", "csv", "--segments", "2", "--reason", "small csv")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) | {"entry": None, "seconds": None} == json.loads(done.stdout) | {
        "engine": "arrow",
        "segments": 2,
        "rows": 12,
        "entry": None,
        "seconds": None,
    }
    assert done.stderr == ""  # with --json, nothing but an error's JSON goes to stderr
    said = process(zk_hosts, "push", "small", "--input", str(csv), "--format", "csv", "--dry-run")
    assert said.returncode == 0 and "engine: arrow (local input of" in said.stderr, said.stderr
    assert not [line for line in JVM_LINES if line in said.stderr], said.stderr
    _, out, _ = run(zk_hosts, "read", "small", "--json", "--limit", "100")
    assert sorted(r["i"] for r in json.loads(out)["rows"]) == list(range(12))
    again = push("--input", str(lines), "--format", "json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["rows"] == 5 and json.loads(again.stdout)["replaced"] == 2
    empty = tmp_path / "empty.csv"
    empty.write_text("label,i\n")
    refused = push("--input", str(empty), "--format", "csv")
    assert refused.returncode == 1 and "the input has no rows" in refused.stderr
    headless = tmp_path / "headless.csv"
    headless.write_text("1,2\n3,4\n")  # no header: its first row would name the columns
    for args, message in (
        (["--input", str(headless), "--format", "csv"], "has no header row: its first row (1, 2) is numbers"),
        (["--input", str(csv), "--engine", "magic"], "unknown engine 'magic'"),
        (["--input", str(csv), "--segments", "0"], "--segments must be at least 1"),
        (["--input", str(csv), "--format", "xml"], "unknown input format 'xml'"),
    ):
        bad = push(*args)
        assert bad.returncode == 2 and message in bad.stderr, (args, bad.stderr)
    _, out, _ = run(zk_hosts, "segments", "small", "--json")
    assert {s["rows"] for s in json.loads(out)} == {5}  # the JSON push is what readers see


def test_the_engine_follows_the_input(tmp_path: Path) -> None:
    small, big = tmp_path / "small.parquet", tmp_path / "big" / "part.parquet"
    small.write_bytes(b"x" * 1000)
    big.parent.mkdir()
    with big.open("wb") as f:
        f.truncate(65 * 2**20)  # sparse: 65 MB on paper
    assert choose_engine("auto", str(small), None, {}) == (
        "arrow",
        "local input of 1000 bytes; --engine spark to use Spark",
    )  # a small input in its own unit, not 0.0 MB
    assert choose_engine("auto", f"file://{small}", None, {})[0] == "arrow"
    assert choose_engine("auto", str(big.parent), None, {}) == ("spark", "input over 64 MB")
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "sub").symlink_to(big.parent)  # a reader follows the link: so does the size
    assert choose_engine("auto", str(tmp_path / "linked"), None, {})[0] == "spark"
    odd = tmp_path / "br[1]"
    odd.mkdir()
    (odd / "a.parquet").write_bytes(b"x")
    assert choose_engine("auto", str(odd), None, {})[0] == "arrow"  # an existing path, not a glob
    assert choose_engine("auto", str(small), "spark://h:7077", {})[0] == "spark"
    assert choose_engine("auto", str(small), None, {"spark.x": "1"})[0] == "spark"
    assert choose_engine("auto", "s3://lake/in", None, {})[0] == "spark"
    assert choose_engine("auto", str(tmp_path / "*.parquet"), None, {})[0] == "spark"
    assert choose_engine("arrow", str(big), None, {}) == ("arrow", "asked for")


def _background_push(
    zk: str, tmp_path: Path, table: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """A new table and a push of three rows into it, started as a push in the
    background of a script runs: SIGINT inherited ignored."""
    assert run(zk, "table", "create", table, "--root", str(tmp_path / table))[0] == 0
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3]}), source)
    command = [sys.executable, "-m", "segment_lineage", "--zk", zk, "push", table, "--input", str(source)]
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509
    )  # fmt: skip


def _wait_until_caught(proc: subprocess.Popen[str], sent: int, timeout_s: float = 30.0) -> None:
    """Until the process catches ``sent`` (its handler is in place: the
    kernel's SigCgt mask says so), not a guess at how long starting takes
    on a busy machine (a signal sent sooner is ignored, or kills it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the push ended before it caught the signal"
        status = Path(f"/proc/{proc.pid}/status").read_text()
        caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
        if caught >> (sent - 1) & 1:
            return
        time.sleep(0.005)
    raise AssertionError(f"signal {sent} not caught within {timeout_s}s")


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_a_push_is_still_starting_stops_it_with_nothing_pushed(
    zk_hosts: str, tmp_path: Path, sent: int, code: int
) -> None:
    """A push started in the background of a script (SIGINT inherited
    ignored) and signalled while it is still loading: it stops with the
    signal's code and one line, and nothing is pushed (the signal was lost,
    and the push went on, when only the push's own handler listened)."""
    table = f"early{code}"
    proc = _background_push(zk_hosts, tmp_path, table)
    try:
        _wait_until_caught(proc, sent)  # the interpreter is up; the command is still importing
        proc.send_signal(sent)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert [line for line in err.splitlines() if line.startswith("error:")] == ["error: interrupted"], err
    assert "Traceback" not in err
    _, out, _ = run(zk_hosts, "--json", "entries", table)
    assert json.loads(out) == []  # nothing started


@pytest.mark.parametrize(
    ("sent", "code", "name", "then"),
    [
        (signal.SIGTERM, 143, "SIGTERM", None),
        (signal.SIGINT, 130, "SIGINT", None),
        (signal.SIGTERM, 143, "SIGTERM", signal.SIGINT),  # a second signal at once: let go
    ],
)
def test_a_signal_mid_push_reverts_says_so_in_one_line_and_exits_with_its_code(
    zk_hosts: str, tmp_path: Path, sent: signal.Signals, code: int, name: str, then: signal.Signals | None
) -> None:
    """The first signal stops the push; one right after it (a service
    manager's SIGTERM and an operator's Ctrl-C) neither cuts the revert
    short nor changes the code or the line (it once exited 130 saying
    SIGTERM)."""
    table = f"sig{code}{'' if then is None else then.value}"
    proc = _background_push(
        zk_hosts, tmp_path, table, dict(os.environ, LINEAGE_FAILPOINT="push.mid-write:sleep")
    )
    head = []
    try:
        assert proc.stderr is not None
        # Until the push says it started (its entry is IN_PROGRESS): its own line, not a poll of
        # ZooKeeper, which a loaded machine may answer after the write's sleep ran out.
        for _ in range(10):
            line = proc.stderr.readline()
            head.append(line)
            if not line or line.startswith("started entry"):
                break
        time.sleep(0.5)  # into the write, which then sleeps a minute
        proc.send_signal(sent)
        if then is not None:
            time.sleep(0.005)
            proc.send_signal(then)
        _, rest = proc.communicate(timeout=60)
        err = "".join(head) + rest
    finally:
        proc.kill()
    assert proc.returncode == code, err
    said = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(said) == 1 and f"interrupted by {name}" in said[0] and "reverted" in said[0], err
    assert "Traceback" not in err
    _, out, _ = run(zk_hosts, "entries", table, "--json")
    assert [e["state"] for e in json.loads(out)] == ["REVERTED"]
    _, out, _ = run(zk_hosts, "segments", table, "--json")
    assert json.loads(out) == []


def test_odd_small_pushes_are_refused_before_anything_changes_or_pushed_right(
    zk_hosts: str, tmp_path: Path
) -> None:
    cmd = [
        "table",
        "create",
        "when",
        "--root",
        str(tmp_path / "when"),
        "--type",
        "APPEND",
        "--time-column",
        "ts",
    ]
    assert run(zk_hosts, *cmd)[0] == 0
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    days = pa.array([dt.date(2026, 1, 1), dt.date(2026, 1, 1)], pa.date32())
    pq.write_table(pa.table({"ts": days, "v": [1, 2]}), inputs / "dates.parquet")
    pq.write_table(pa.table({"ts": ["2026-01-01"], "v": [1]}), inputs / "text.parquet")
    pq.write_table(pa.table({"v": [1]}), inputs / "no_ts.parquet")
    (inputs / "empty.csv").write_text("ts,v\n")

    def push(name: str, *args: str) -> subprocess.CompletedProcess[str]:
        return process(zk_hosts, "push", "when", "--input", str(inputs / name), *args)

    day = ("--mode", "replace-range", "--interval", "2026-01-01/2026-01-02")
    dated = push("dates.parquet", *day)  # a date column is a time column
    assert dated.returncode == 0, dated.stderr
    _, out, _ = run(zk_hosts, "history", "when", "--json")
    version = json.loads(out)[0]["version"]
    for name, args, code, message in (
        ("text.parquet", day, 1, "the time column is of type string"),
        ("text.parquet", ("--mode", "append"), 1, "the time column is of type string"),
        ("no_ts.parquet", ("--mode", "append"), 1, "the input has no time column 'ts'"),
        ("empty.csv", ("--format", "csv", "--mode", "append"), 1, "the input has no rows"),
        ("dates.parquet", ("--mode", "append", "--target-mb", "1e-9"), 0, ""),
        ("dates.parquet", ("--mode", "append", "--target-mb", "1e308"), 0, ""),
    ):
        done = push(name, *args)
        assert done.returncode == code and message in done.stderr, (name, args, done.stderr)
        assert "Traceback" not in done.stderr
        if code:  # refused before the push started: no version
            _, out, _ = run(zk_hosts, "history", "when", "--json")
            assert json.loads(out)[0]["version"] == version, (name, args)
        else:
            version += 2
    empty = process("", "table", "list")
    assert empty.returncode == 2 and "--zk is empty" in empty.stderr


def test_version_is_printed_without_a_store() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("lineage ")
    assert result.stdout.split()[1][0].isdigit()


def test_refusals_exit_1_with_the_reason_and_a_hint(zk_hosts: str, tmp_path: Path) -> None:
    run(zk_hosts, "table", "create", "events", "--root", str(tmp_path / "d"))
    run(zk_hosts, "segment", "add", "events", "a", "--no-check")
    code, out, _ = run(zk_hosts, "--json", "start-replace", "events", "--from", "a", "--to", "b")
    entry = json.loads(out)["entry"]
    code, _, err = run(zk_hosts, "revert", "events", entry)
    assert code == 1
    assert "IN_PROGRESS" in err and "hint: pass --force" in err
    code, _, err = run(zk_hosts, "segment", "delete", "events", "a")
    assert code == 1 and f"locked by lineage entry {entry}" in err
    code, _, err = run(zk_hosts, "table", "create", "events", "--root", str(tmp_path / "d"))
    assert code == 1 and "already exists" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["table", "create", "../etc", "--root", "/d"], "invalid table name"),
        (["table", "create", "t", "--root", "/d", "--replaced-retention", "5"], "invalid period '5'"),
        (["table", "create", "t", "--root", "/d", "--type", "MERGE"], "invalid table type"),
        (["start-replace", "events", "--from", "", "--to", ""], "cannot both be empty"),
        (["end-replace", "events", "nope"], "invalid entry id 'nope'"),
        (["export", "events", "--format", "delta"], "unknown export format"),
        (["history", "events", "--limit", "0"], "invalid limit"),
        (["push", "events", "--input", "/dev/null"], "'/dev/null' as parquet: not a regular"),
        (["retention", "health", "--url", "notaurl"], "invalid daemon URL 'notaurl'"),
    ],
)
def test_bad_input_exits_2_and_changes_nothing(
    zk_hosts: str, args: list[str], message: str, tmp_path: Path
) -> None:
    run(zk_hosts, "table", "create", "events", "--root", str(tmp_path / "d"))
    _, before, _ = run(zk_hosts, "--json", "history", "events")
    code, _, err = run(zk_hosts, *args)
    assert code == 2 and message in err
    assert run(zk_hosts, "--json", "history", "events")[1] == before


def test_a_csv_input_pushed_without_its_format_is_refused_with_the_flag_to_give(
    zk_hosts: str, tmp_path: Path
) -> None:
    """The format is never guessed from a name (a folder of CSV files may
    be called anything), but a refused read says what the name suggests."""
    run(zk_hosts, "table", "create", "events", "--root", str(tmp_path / "d"))
    (tmp_path / "day.csv").write_text("id,label\n1,a\n")
    _, before, _ = run(zk_hosts, "--json", "history", "events")
    code, _, err = run(zk_hosts, "push", "events", "--input", str(tmp_path / "day.csv"))
    assert code == 2 and "as parquet" in err and "hint: its name says csv: --format csv" in err, err
    assert run(zk_hosts, "--json", "history", "events")[1] == before
    (tmp_path / "day.parquet").write_text("id,label\n1,a\n")  # a name that agrees: no hint
    code, _, err = run(zk_hosts, "push", "events", "--input", str(tmp_path / "day.parquet"))
    assert code == 2 and "as parquet" in err and "hint" not in err, err


def test_usage_errors_exit_2(zk_hosts: str) -> None:
    assert run(zk_hosts, "no-such-command")[0] == 2
    assert run(zk_hosts, "revert")[0] == 2


def test_not_found_exits_3_in_every_command(zk_hosts: str, tmp_path: Path) -> None:
    """Not found is one exit code everywhere (README): a table, an entry, a
    segment, a version; with --json the error is one JSON object on stderr."""
    code, _, err = run(zk_hosts, "entries", "ghost")
    assert code == 3 and "table 'ghost' does not exist" in err
    run(zk_hosts, "table", "create", "nf", "--root", str(tmp_path / "nf"))
    for args in (
        ["table", "show", "ghost"],
        ["read", "ghost"],
        ["revert", "nf", "00000000-0000-4000-8000-000000000000"],
        ["segment", "delete", "nf", "nosuch"],
        ["segments", "nf", "--as-of", "999"],
        ["history", "ghost"],
        ["read", "nf", "--as-of", "2001-01-01"],  # a time before the table: no version then
    ):
        code, out, err = run(zk_hosts, *args)
        assert code == 3 and err.startswith("error: "), (args, code, out, err)
    code, out, err = run(zk_hosts, "--json", "table", "show", "ghost")
    report = json.loads(err)
    assert code == 3 and report["code"] == 3 and report["kind"] == "TableNotFoundError", err
    assert report["error"] == "table 'ghost' does not exist" and "hint" in report and out == ""
    code, out, err = run(zk_hosts, "push", "nf", "--input", str(tmp_path / "none.parquet"), "--json")
    report = json.loads(err)  # a global option after the command counts too
    assert code == report["code"] == 2 and report["error"], err


def test_with_json_stderr_holds_only_an_errors_one_json_object(zk_hosts: str, tmp_path: Path) -> None:
    """A push that starts, writes, then fails (its input does not fit the
    table) prints its progress lines without --json, and with --json
    nothing but the error's JSON object: a script parses stderr whole. A
    push that lands prints nothing on stderr; --verbose brings the lines back."""
    assert run(zk_hosts, "table", "create", "pj", "--root", str(tmp_path / "pj"))[0] == 0
    good, bad = tmp_path / "good.parquet", tmp_path / "bad.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), good)
    pq.write_table(pa.table({"b": ["x"]}), bad)
    plain = process(zk_hosts, "push", "pj", "--input", str(good))
    assert plain.returncode == 0 and "wrote 1 segment(s)" in plain.stderr, plain.stderr
    landed = process(zk_hosts, "--json", "push", "pj", "--input", str(good))
    assert landed.returncode == 0 and landed.stderr == "" and json.loads(landed.stdout)["rows"] == 2
    failed = process(zk_hosts, "push", "pj", "--input", str(bad), "--json")
    report = json.loads(failed.stderr)
    assert failed.returncode == report["code"] == 1 and "does not fit table 'pj'" in report["error"], report
    verbose = process(zk_hosts, "--json", "-v", "push", "pj", "--input", str(good))
    assert verbose.returncode == 0 and "wrote 1 segment(s)" in verbose.stderr, verbose.stderr


def test_a_root_no_folder_can_be_made_at_is_bad_input(zk_hosts: str, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    for root, why in (
        (tmp_path / ("a" * 300), "a part of it is longer than 255 bytes"),
        (tmp_path / "a-file", "is a file, not a folder"),
        (tmp_path / "a-file" / "below", "is a file, not a folder"),
    ):
        code, _, err = run(zk_hosts, "table", "create", "nowhere", "--root", str(root))
        assert code == 2 and why in err, err
    assert "nowhere" not in run(zk_hosts, "table", "list")[1]


def test_a_limit_past_every_row_or_version_means_all_of_them(zk_hosts: str, tmp_path: Path) -> None:
    """A huge --limit (past a C int, past sys.maxsize) is no limit, not a traceback."""
    run(zk_hosts, "table", "create", "big", "--root", str(tmp_path / "big"))
    pq.write_table(pa.table({"i": [1, 2, 3]}), tmp_path / "in.parquet")
    assert run(zk_hosts, "push", "big", "--input", str(tmp_path / "in.parquet"))[0] == 0
    code, out, err = run(zk_hosts, "read", "big", "--limit", str(2**31))
    assert code == 0 and "3 of 3 rows" in out, err
    code, out, err = run(zk_hosts, "--json", "history", "big", "--limit", str(10**20))
    assert code == 0 and len(json.loads(out)) == 3, err


def test_verbose_shows_the_traceback(zk_hosts: str) -> None:
    result = runner.invoke(app, ["--zk", zk_hosts, "--verbose", "entries", "ghost"])
    assert result.exit_code == 3 and "Traceback" in result.stderr


def test_segment_batch_file(zk_hosts: str, tmp_path: Path) -> None:
    run(zk_hosts, "table", "create", "events", "--root", str(tmp_path / "d"))
    batch = tmp_path / "batch.json"
    size = parquet_file(tmp_path / "d" / "p=1" / "x1.parquet", 3)
    batch.write_text(json.dumps([{"name": "x1", "rows": 3, "bytes": size, "location": "p=1/x1.parquet"}]))
    assert run(zk_hosts, "segment", "add", "events", "--file", str(batch))[0] == 0
    code, out, _ = run(zk_hosts, "--json", "segments", "events")
    assert json.loads(out)[0]["location"] == "p=1/x1.parquet"
    batch.write_text(json.dumps([{"name": "x2", "colour": "red"}]))
    code, _, err = run(zk_hosts, "segment", "add", "events", "--file", str(batch))
    assert code == 2 and "unknown field(s) colour" in err


def test_drop(zk_hosts: str, tmp_path: Path) -> None:
    run(zk_hosts, "table", "create", "events", "--root", str(tmp_path / "d"))
    run(zk_hosts, "segment", "add", "events", "a", "--no-check")
    code, _, err = run(zk_hosts, "table", "drop", "events")
    assert code == 1 and "--force" in err
    assert run(zk_hosts, "table", "drop", "events", "--force")[0] == 0
    assert run(zk_hosts, "--json", "table", "list")[1].strip() == "[]"


def test_zk_start_status_stop_with_the_embedded_server(
    lineage_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LINEAGE_ZK_PORT", str(free_port()))
    result = runner.invoke(app, ["zk", "status"])
    assert result.exit_code == 1 and "not running" in result.stdout
    try:
        result = runner.invoke(app, ["zk", "start"])
        assert result.exit_code == 0 and "started" in result.stdout
        result = runner.invoke(app, ["zk", "start"])
        assert result.exit_code == 0 and "already running" in result.stdout
        assert runner.invoke(app, ["zk", "status"]).exit_code == 0
        # With no --zk and no LINEAGE_ZK, commands use the embedded server.
        result = runner.invoke(app, ["table", "create", "t", "--root", str(tmp_path / "d")])
        assert result.exit_code == 0, result.stderr
        assert runner.invoke(app, ["table", "list"]).stdout.strip() == "t"
    finally:
        result = runner.invoke(app, ["zk", "stop"])
    assert result.exit_code == 0 and "stopped" in result.stdout
    assert "not running" in runner.invoke(app, ["zk", "stop"]).stdout


def test_the_embedded_server_heap_is_sized_from_the_machine_or_given(
    lineage_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from segment_lineage.lineage.zk.server import default_heap_mb, machine_memory_mb

    total = machine_memory_mb()
    assert total is not None and default_heap_mb() == max(256, min(2048, total // 8))
    monkeypatch.setenv("LINEAGE_ZK_PORT", str(free_port()))
    for bad in ("lots", "3x", "70g", "10m"):
        result = runner.invoke(app, ["zk", "start", "--heap", bad])
        assert result.exit_code == 2 and f"invalid heap size '{bad}'" in result.stderr, result.output
    assert runner.invoke(app, ["zk", "status"]).exit_code == 1  # nothing was started
    try:
        result = runner.invoke(app, ["zk", "start", "--heap", "300m"])
        assert result.exit_code == 0 and "heap 300 MB" in result.stdout, result.output
        assert "heap 300 MB" in runner.invoke(app, ["zk", "status"]).stdout
        result = runner.invoke(app, ["--json", "zk", "start", "--heap", "1g"])  # running: keeps its heap
        assert json.loads(result.stdout)["heap_mb"] == 300
    finally:
        runner.invoke(app, ["zk", "stop"])
    monkeypatch.setenv("LINEAGE_ZK_HEAP", "1g")
    try:
        result = runner.invoke(app, ["zk", "start"])
        assert result.exit_code == 0 and "heap 1024 MB" in result.stdout, result.output
    finally:
        runner.invoke(app, ["zk", "stop"])


def test_commands_start_the_embedded_server_when_needed(
    lineage_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    monkeypatch.setenv("LINEAGE_ZK_PORT", str(port))
    try:
        result = runner.invoke(app, ["table", "list"])
        assert result.exit_code == 0 and "(no tables)" in result.stdout
        assert "starting the embedded ZooKeeper" in result.stderr  # said, so nobody mistakes it
        assert "keeps running for later commands: 'lineage zk stop' stops it" in result.stderr
        again = runner.invoke(app, ["table", "list"])
        assert again.exit_code == 0 and "embedded" not in again.stderr  # already running: quiet
    finally:
        ZkServer(lineage_home / "zookeeper", port).stop()


def test_a_frozen_embedded_server_is_said_to_be_frozen_within_one_bounded_wait(
    lineage_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command meeting the embedded server running but not answering (a
    frozen process) fails after one bounded wait, saying so; it waited out
    the whole start-up time (60 s) as if the server were starting."""
    import segment_lineage.lineage.zk.server as server_module

    port = free_port()
    monkeypatch.setenv("LINEAGE_ZK_PORT", str(port))
    monkeypatch.setattr(server_module, "ANSWER_TIMEOUT_S", 2.0, raising=False)
    server = ZkServer(lineage_home / "zookeeper", port)
    server.start()
    pid = server.pid()
    assert pid is not None
    long_ago = time.time() - 3600  # started an hour ago: its start-up is long over
    os.utime(server.pid_file, (long_ago, long_ago))
    os.kill(pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        result = runner.invoke(app, ["table", "list"])
        took = time.monotonic() - began
        status = runner.invoke(app, ["--json", "zk", "status"])
    finally:
        os.kill(pid, signal.SIGCONT)
        server.stop()
    assert result.exit_code == 1 and f"(pid {pid}) is running but did not answer" in result.stderr
    assert "frozen or overloaded" in result.stderr and "lineage zk stop" in result.stderr
    assert took < 10, f"waited {took:.0f}s"
    said = json.loads(status.stdout)  # running, and silent: not "not running"
    assert status.exit_code == 1 and said["running"] is True and said["answering"] is False


def test_a_stale_pid_file_naming_another_process_is_never_signalled(
    lineage_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a crash or a reboot the pid file may name an unrelated process:
    it is not the server, and 'zk stop' leaves it alone."""
    monkeypatch.setenv("LINEAGE_ZK_PORT", str(free_port()))
    other = subprocess.Popen(["sleep", "60"])
    try:
        server_dir = lineage_home / "zookeeper"
        server_dir.mkdir(parents=True, exist_ok=True)
        (server_dir / "zookeeper.pid").write_text(f"{other.pid}\n")
        status = runner.invoke(app, ["zk", "status"])
        assert status.exit_code == 1 and "not running" in status.stdout, status.output
        stopped = runner.invoke(app, ["zk", "stop"])
        assert "was not running" in stopped.stdout, stopped.output
        assert other.poll() is None  # still running: never signalled
    finally:
        other.kill()
        other.wait()


def test_missing_java_is_a_clear_error(lineage_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINEAGE_ZK_PORT", str(free_port()))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    result = runner.invoke(app, ["zk", "start"])
    assert result.exit_code == 1
    assert "Java was not found" in result.stderr and "hint:" in result.stderr


def test_bad_zk_address_is_a_clear_error() -> None:
    before = logging.getLogger("kazoo").level
    result = runner.invoke(app, ["--zk", "no-port-here", "table", "list"])
    assert result.exit_code == 2 and "use host:port" in result.stderr
    for reserved in ("/zookeeper", "/zookeeper/quota/t"):  # ZooKeeper's own tree: never a chroot
        result = runner.invoke(app, ["--zk", f"127.0.0.1:{free_port()}{reserved}", "table", "list"])
        assert result.exit_code == 2 and "/zookeeper is ZooKeeper's own" in result.stderr, result.output
    assert logging.getLogger("kazoo").level == before  # quiet for the command, not after it
    nobody = f"127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "segment_lineage", "--zk", nobody, "table", "list"]
    # Both wait out the connect timeout, side by side.
    runs = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for args in (command, [*command, "--verbose"])
    ]
    (_, quiet_err), (_, loud_err) = (run.communicate(timeout=60) for run in runs)
    assert runs[0].returncode == 1 and "cannot reach ZooKeeper" in quiet_err
    assert "Connection dropped" not in quiet_err and len(quiet_err.splitlines()) == 2  # error, hint
    assert runs[1].returncode == 1 and "Connection dropped" in loud_err


def test_bad_auth_format_is_refused(zk_hosts: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINEAGE_ZK_AUTH", "no-colon")
    result = runner.invoke(app, ["--zk", zk_hosts, "table", "list"])
    assert result.exit_code == 2 and "user:password" in result.stderr
    assert "no-colon" not in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["zk"],
        ["zk", "start"],
        ["table"],
        ["table", "create"],
        ["segment"],
        ["segment", "add"],
        ["start-replace"],
        ["end-replace"],
        ["revert"],
        ["entries"],
        ["history"],
        ["export"],
        ["segments"],
        ["demo"],
    ],
)
def test_help_works_for_every_command(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.stdout


def test_help_names_values_not_types_and_lists_commands_as_a_newcomer_meets_them() -> None:
    """No Typer type labels (<str>, <int>) in any help, every --reason says
    what it is for, and the commands come in a sensible order."""
    commands: list[list[str]] = [[c.name or ""] for c in app.registered_commands]
    for group in app.registered_groups:
        assert group.typer_instance is not None
        commands += [[group.name or "", c.name or ""] for c in group.typer_instance.registered_commands]
    for command in commands:
        text = runner.invoke(app, [*command, "--help"]).stdout
        assert not re.search(r"<(str|int|float|list|path|bool)", text), (command, text)
        flat = " ".join(text.split())
        if "--reason" in flat:
            assert "--reason TEXT" in flat and "kept with this version in the table's history" in flat, (
                command
            )
    top = runner.invoke(app, ["--help"]).stdout
    listed = [line.split()[0] for line in top.split("Commands:")[1].splitlines() if line.strip()]
    assert listed[:4] == ["demo", "table", "push", "read"] and listed[-1] == "config", listed
    assert "Usage: lineage push [OPTIONS] TABLE\n" in runner.invoke(app, ["push", "--help"]).stdout


def test_docs_name_every_command() -> None:
    text = (REPO / "docs" / "cli.md").read_text()
    for group in app.registered_groups:
        assert group.typer_instance is not None
        for command in group.typer_instance.registered_commands:
            assert f"## lineage {group.name} {command.name}" in text
    for command in app.registered_commands:
        assert f"## lineage {command.name}" in text


def test_dockerfile_copies_what_exists_and_runs_the_cli() -> None:
    root = REPO
    text = (root / "docker" / "Dockerfile").read_text()
    copies = [line.split()[1:-1] for line in text.splitlines() if line.startswith("COPY ")]
    assert copies
    for sources in copies:
        for source in sources:
            assert (root / source).exists(), source
    assert 'ENTRYPOINT ["lineage"]' in text


def test_start_replace_holds_an_entry_opened_by_hand_and_names_what_force_cleanup_takes(
    zk_hosts: str, tmp_path: Path
) -> None:
    run(zk_hosts, "table", "create", "events", "--root", str(tmp_path / "events"))
    run(zk_hosts, "segment", "add", "events", "a", "b", "--no-check")
    code, out, _ = run(zk_hosts, "--json", "start-replace", "events", "--from", "a", "--to", "c")
    manual = json.loads(out)
    assert manual["cleaned"] == [] and manual["held_until_ms"] is not None
    code, _, err = run(zk_hosts, "start-replace", "events", "--from", "a", "--to", "d", "--force-cleanup")
    assert code == 1 and f"entry {manual['entry']} overlaps this push and was opened by hand" in err
    assert "hint: end it, or revert it" in err
    run(zk_hosts, "revert", "events", manual["entry"], "--force")
    args = ["start-replace", "events", "--from", "b", "--to", "e", "--hold", "0s"]
    code, out, _ = run(zk_hosts, "--json", *args)
    stale = json.loads(out)
    assert stale["held_until_ms"] is None
    code, out, _ = run(zk_hosts, "start-replace", "events", "--from", "b", "--to", "f", "--force-cleanup")
    assert code == 0 and f"cleaned up stale entry {stale['entry']}" in out
    code, out, _ = run(zk_hosts, "--json", "history", "events", "--limit", "1")
    assert json.loads(out)[0]["cleaned"] == [stale["entry"]]
    code, _, err = run(zk_hosts, "start-replace", "events", "--from", "a", "--to", "g", "--hold", "soon")
    assert code == 2 and "invalid period 'soon'" in err


def test_segment_add_checks_each_file_and_changes_nothing_when_one_is_wrong(
    zk_hosts: str, tmp_path: Path
) -> None:
    from kazoo.client import KazooClient

    from tests.helpers.zk import dump

    root = tmp_path / "d"
    run(zk_hosts, "table", "create", "events", "--root", str(root))
    size = parquet_file(root / "a.parquet", 3)
    (root / "not-parquet.parquet").write_bytes(b"x" * 10)
    (root / "dir.parquet").mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "o.parquet").write_bytes(b"o")
    (root / "link").symlink_to(outside)
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps([{"name": "b", "location": "p=1/b.parquet"}]))
    client = KazooClient(hosts=zk_hosts)
    client.start()
    try:
        before = dump(client)
        for args, message in (
            (["missing"], "no file under the root"),
            (["a", "missing"], "1 segment(s): missing (missing.parquet); nothing was registered"),
            (["dir"], "dir (dir.parquet)"),
            (["a", "--bytes", str(size + 1)], f"a (given {size + 1}, file {size})"),
            (
                ["a", "--rows", "4"],
                "row count given for 1 segment(s) of table 'events' is not their file's: a (given 4, file 3)",
            ),
            (["a", "not-parquet"], "cannot be read as Parquet: not-parquet (not-parquet.parquet)"),
            (["--file", str(batch)], "b (p=1/b.parquet)"),
        ):
            code, out, err = run(zk_hosts, "segment", "add", "events", *args)
            assert code == 1 and message in err, (args, err)
            assert "hint:" in err and "--no-check" in err and "Traceback" not in err
            assert dump(client) == before, args
        link = tmp_path / "link.json"
        link.write_text(json.dumps([{"name": "o", "location": "link/o.parquet"}]))
        code, _, err = run(zk_hosts, "segment", "add", "events", "--file", str(link))
        assert code == 1 and "resolves outside the table root" in err
        assert dump(client) == before
    finally:
        client.stop()
        client.close()

    assert (
        run(zk_hosts, "segment", "add", "events", "a", "--rows", "3")[0] == 0
    )  # the size comes from the file
    assert run(zk_hosts, "segment", "add", "events", "ghost", "--no-check")[0] == 0  # registered unseen
    code, out, _ = run(zk_hosts, "--json", "segment", "list", "events")
    listed = {s["name"]: (s["bytes"], s["rows"]) for s in json.loads(out)}
    assert listed == {"a": (size, 3), "ghost": (0, 0)}


def test_segment_add_checks_files_on_an_object_store(zk_hosts: str, s3: str) -> None:
    import boto3

    run(zk_hosts, "table", "create", "events", "--root", "s3://lake/events")
    code, _, err = run(zk_hosts, "segment", "add", "events", "a")
    assert code == 1 and "no file under the root 's3://lake/events'" in err
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    body = io.BytesIO()
    pq.write_table(pa.table({"v": [1, 2]}), body)
    boto3.client("s3", endpoint_url=s3, region_name="us-east-1").put_object(
        Bucket="lake", Key="events/a.parquet", Body=body.getvalue()
    )
    assert run(zk_hosts, "segment", "add", "events", "a")[0] == 0
    assert run(zk_hosts, "segment", "add", "events", "b", "--no-check")[0] == 0
    code, out, _ = run(zk_hosts, "--json", "segment", "list", "events")
    listed = {s["name"]: (s["bytes"], s["rows"]) for s in json.loads(out)}
    assert listed == {"a": (len(body.getvalue()), 2), "b": (0, 0)}


def test_table_show_names_the_commit_holding_the_floor(zk_hosts: str, tmp_path: Path) -> None:
    from segment_lineage.lineage.zk.client import ZkSettings, connect
    from segment_lineage.lineage.zk.store import ZkStore

    run(zk_hosts, "table", "create", "events", "--root", str(tmp_path / "events"))
    code, out, _ = run(zk_hosts, "--json", "table", "show", "events")
    assert code == 0 and "floor" not in json.loads(out)
    store = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        assert store.floors.take("events", store.read("events").floor, "big-commit", store.now_ms() + 30_000)
        code, out, _ = run(zk_hosts, "table", "show", "events")
        assert code == 0 and "held by commit big-commit until 20" in out, out
        store.floors.leave("events", "big-commit")
    finally:
        store.close()
    code, out, _ = run(zk_hosts, "--json", "table", "show", "events")
    assert "floor" not in json.loads(out)


def test_loading_the_command_line_loads_no_pyarrow() -> None:
    """Every CLI command is a fresh process: pyarrow (about 150 ms and 40 MB
    to load) is loaded by the commands that touch deep storage, not by all."""
    code = (
        "import sys, segment_lineage.cli; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyarrow'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_the_runbook_clears_a_stuck_push_by_its_prefix(zk_hosts: str, tmp_path: Path) -> None:
    """docs/operations.md, "A push is stuck IN_PROGRESS": the commands it shows."""
    assert run(zk_hosts, "table", "create", "stuck", "--root", str(tmp_path / "stuck"))[0] == 0
    assert run(zk_hosts, "segment", "add", "stuck", "old", "--rows", "2", "--no-check")[0] == 0
    _, out, _ = run(zk_hosts, "--json", "start-replace", "stuck", "--from", "old", "--to", "new")
    entry = json.loads(out)["entry"]
    _, out, _ = run(zk_hosts, "--json", "entries", "stuck")
    assert json.loads(out)[-1]["held_until"] is not None  # opened by hand: held
    code, out, err = run(zk_hosts, "revert", "stuck", entry[:8], "--force", "--dry-run")
    assert code == 0 and "would show 0 segment(s) (0 rows) and hide 0 (0 rows)" in out, err
    code, out, err = run(zk_hosts, "revert", "stuck", entry[:8], "--force", "--reason", "pusher died")
    assert code == 0 and f"entry {entry} reverted" in out, err
    _, out, _ = run(zk_hosts, "--json", "entries", "stuck")
    assert json.loads(out)[-1]["state"] == "REVERTED"
