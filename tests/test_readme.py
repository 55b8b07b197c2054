"""The README's tour of the command line, run line by line on real
ZooKeeper and real files, checking what its comments claim.

Its placeholders become local things: the S3 root a directory, ``/data/...``
small Parquet inputs, the Spark master local mode, ``ENTRY`` the entry the
line before opened, ``STAGED`` the entry the staged push made, ``SET`` the
set the push set made (``nightly.toml`` pushes ``events`` and a table
``dims`` made for it), version 42 a version the table has. Three lines need infrastructure other tests start
(the retention daemon and its health check, the embedded server's start and
stop): they are named in SKIPPED.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from segment_lineage.cli import app
from tests.helpers.paths import REPO

README = REPO / "README.md"
SKIPPED = ("lineage retention daemon", "lineage retention health", "lineage zk start | stop | status")
pytestmark = pytest.mark.slow  # one line starts Spark

runner = CliRunner()


def tour() -> list[str]:
    """The README's command lines (continuations joined), in order."""
    text = README.read_text()
    section = text[text.index("## A tour of the command line") : text.index("## Benchmarks")]
    lines: list[str] = []
    for block in re.findall(r"```\n(.*?)```", section, re.S):
        joined = block.replace("\\\n", " ")
        lines += [line.strip() for line in joined.splitlines() if line.strip().startswith("lineage ")]
    return lines


def test_the_readme_tour_does_what_it_says(zk_hosts: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    day = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    later = {"day2": 1, "day3": 2, "day4": 3, "day5": 4}  # days after the first
    staged = ""  # the entry the staged push made
    for name in ("day1", "fix", "all", "day2", "day3", "day4", "day5"):
        start = day + dt.timedelta(days=later.get(name, 0))
        count = 1000 if name == "day4" else 3  # day4's push is audited for at least 1,000 rows
        stamps = [start + dt.timedelta(seconds=60 * k) for k in range(count)]
        (data / name).mkdir()  # an input directory, as a batch job leaves one
        pq.write_table(pa.table({"ts": stamps, "v": list(range(count))}), data / name / "part-0.parquet")
    root = tmp_path / "lake" / "events"
    entry = ""
    pq.write_table(pa.table({"id": [1, 2], "name": ["a", "b"]}), data / "dims.parquet")
    spec = tmp_path / "nightly.toml"
    blocks = [("events", "data/day5"), ("dims", "data/dims.parquet")]
    spec.write_text("".join(f'[[push]]\ntable = "{t}"\ninput = "{i}"\n\n' for t, i in blocks))
    made_set = ""

    def run(*args: str) -> tuple[int, str]:
        result = runner.invoke(app, ["--zk", zk_hosts, *args])
        return result.exit_code, result.stdout + result.stderr

    def history() -> list[dict[str, object]]:
        return list(json.loads(run("--json", "history", "events")[1]))

    lines = tour()
    assert run("table", "create", "dims", "--root", str(tmp_path / "lake" / "dims"))[0] == 0
    assert len(lines) >= 25 and len([line for line in lines if line.startswith(SKIPPED)]) == len(SKIPPED)
    for line in lines:
        if line.startswith(SKIPPED):
            continue
        command = line.split(" #")[0].strip()
        command = command.replace("s3://lake/events", str(root)).replace("/data/", f"{data}/")
        command = command.replace("spark://host:7077", "local[1]").replace("ENTRY", entry)
        command = command.replace("STAGED", staged).replace("nightly.toml", str(spec))
        command = command.replace("--set SET", f"--set {made_set}")
        command = command.replace("--as-of 2026-11-21T09:00:00Z", "--as-of 2026-11-01T00:00:00Z")
        if "--to-version 42" in command:
            command = command.replace("42", str(history()[1]["version"]))
        if command.startswith("lineage segment add events day"):
            for name in re.findall(r"day\d_\d", command):
                rows = int(re.findall(r"--rows (\d+)", command)[0])
                pq.write_table(pa.table({"v": list(range(rows))}), root / f"{name}.parquet")
        before = history() if "table create" not in command else []
        code, out = run(*shlex.split(command)[1:])
        if "--as-of 2026-11-01T00:00:00Z" in command:  # before the table existed: a clear refusal
            assert code == 3 and "did not exist at 2026-11-01T00:00:00Z" in out, (line, out)
            continue
        assert code == 0, (line, out)
        if "--dry-run" in command or command == "lineage retention run":
            assert history() == before, line  # nothing changed
        if command.startswith("lineage start-replace"):
            entry = out.split()[0]
        if "--stage" in command:
            staged = out.split("entry ")[1].split(",")[0]
            assert "readers see none of it" in out, out
        if command.startswith("lineage push-set"):
            made_set = out.split()[2]  # "pushed set ID across ...": the id stands alone
            assert history()[0]["set"] == made_set, out
        if command.startswith("lineage cut"):
            assert out.count(made_set) == 2, out  # both tables at versions with the set
        if command.startswith("lineage publish"):
            assert "published the staged push" in out and history()[0]["operation"] == "END_REPLACE", out
        if "--audit-" in command:  # what it passed is on record
            assert str(history()[0]["audit"]).startswith("passed: min-rows 1000 (1000 rows written)"), out
        if "--job-id" in command:  # run again: nothing pushed twice
            again = run(*shlex.split(command)[1:])
            assert again[0] == 0 and "nothing pushed again" in again[1]
            assert len(history()) == len(before) + 2
    visible = json.loads(run("--json", "segments", "events")[1])
    assert {"day1_0", "day1_1"} <= {s["name"] for s in visible}  # the revert brought day1_* back
