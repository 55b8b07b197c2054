"""Bad input through the command line, each refused with a message naming
the problem and no change: every byte the project keeps in ZooKeeper is
compared before and after each call (the clock node aside: it holds nothing)."""

from __future__ import annotations

import json
import unicodedata
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kazoo.client import KazooClient
from typer.testing import CliRunner

from segment_lineage.cli import app
from segment_lineage.lineage.zk.store import ROOT
from tests.helpers.zk import dump

runner = CliRunner()
T = "events"


@pytest.fixture
def table(zk_hosts: str, tmp_path: Path) -> Iterator[tuple[str, KazooClient, str, Path]]:
    def ok(*args: str) -> str:
        result = runner.invoke(app, ["--zk", zk_hosts, *args])
        assert result.exit_code == 0, result.stderr
        return result.stdout

    ok("table", "create", T, "--root", str(tmp_path / "root"))
    ok("segment", "add", T, "a", "b", "--rows", "5", "--no-check")
    entry = json.loads(ok("--json", "start-replace", T, "--from", "a", "--to", "c"))["entry"]
    client = KazooClient(hosts=zk_hosts)
    client.start()
    yield entry, client, zk_hosts, tmp_path
    client.stop()
    client.close()


def segments_file(tmp_path: Path, location: str) -> str:
    path = tmp_path / f"batch-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps([{"name": "x1", "location": location, "rows": 1}]))
    return str(path)


BAD_NAMES = [
    "",
    ".",
    "..",
    "a/b",
    "/etc",
    "a\x00b",
    "a\x07b",
    "a\ud800b",
    " events",
    "events ",
    "x" * 300,
    "a%2Fb",
    "a\\b",
    unicodedata.normalize("NFD", "café"),
]


@pytest.mark.parametrize("name", BAD_NAMES, ids=[repr(n)[:20] for n in BAD_NAMES])
def test_bad_names_change_nothing(table: tuple[str, KazooClient, str, Path], name: str) -> None:
    _, client, zk, _ = table
    before = dump(client)
    for args in (
        ["table", "create", name, "--root", "/d"],
        ["segment", "add", T, name],
        ["segment", "add", name, "a2"],
        ["segments", name],
    ):
        result = runner.invoke(app, ["--zk", zk, *args])
        assert result.exit_code == 2, (args, result.stdout, result.stderr)
        assert "invalid" in result.stderr.lower() or "name" in result.stderr.lower(), result.stderr
        assert dump(client) == before, args


def cases(entry: str, tmp_path: Path) -> list[tuple[list[str], int, str]]:
    """(arguments, exit code, what the message must name)."""
    unknown = str(uuid.uuid4())
    data = tmp_path / "one-row.parquet"
    pq.write_table(pa.table({"k": [1]}), data)
    return [
        (["push", T, "--input", ""], 2, "--input is empty"),  # not handed to Spark as a path
        (["push", T, "--input", " ", "--dry-run"], 2, "--input is empty"),
        (["push", T, "--input", str(data), "--master", ""], 2, "--master is empty"),
        # A dry run makes the push's checks: the reason its commits would refuse, too.
        (["push", T, "--input", str(data), "--dry-run", "--reason", "\u00fc" * 3000], 2, "6000 bytes"),
        (["table", "create", "Events", "--root", "/d"], 1, "events"),  # a case-only twin
        (["table", "create", "t2", "--root", ""], 2, "root"),
        (["table", "create", "t2", "--root", "/d", "--max-snapshots", "-1"], 2, "snapshots"),
        (["table", "create", "t2", "--root", "/d", "--time-retention", "5x"], 2, "5x"),
        (["table", "create", "t2", "--root", "/d", "--type", "DAILY"], 2, "DAILY"),
        (["segment", "add", T, "--file", segments_file(tmp_path, "../evil.parquet")], 2, "location"),
        (["segment", "add", T, "--file", segments_file(tmp_path, "/etc/passwd")], 2, "location"),
        (["segment", "add", T, "--file", segments_file(tmp_path, "file:///etc/passwd")], 2, "location"),
        (["segment", "add", T, "--file", segments_file(tmp_path, "s3://other/x.parquet")], 2, "location"),
        (["segment", "add", T, "a"], 1, "a"),  # already registered
        (["segment", "add", T, "n", "--rows", "-3"], 2, "rows"),
        (["segment", "delete", T, "a"], 1, "a"),  # locked by the running push
        (["end-replace", T, "not-a-uuid"], 2, "entry"),
        (["end-replace", T, unknown], 3, unknown),
        (["revert", T, unknown], 3, unknown),
        (["revert", T, entry], 1, "IN_PROGRESS"),  # without --force
        (["start-replace", T, "--from", "a", "--to", "d"], 1, "a"),  # overlaps the running push
        (["start-replace", T, "--from", "b,b", "--to", "e"], 2, "b"),
        (["rollback", T, "--to-version", "0"], 2, "version"),
        (["rollback", T, "--to-version", "999"], 3, "999"),
        (["rollback", T, "--to-version", "9999999999"], 3, "9999999999"),  # a version yet to come
        # Past any version there can be: bad input wherever a version is taken, not "not found".
        (["rollback", T, "--to-version", "12345678901234567890123"], 2, "out of range"),
        (["rollback", T, "--to-version", "10000000000", "--dry-run"], 2, "out of range"),
        (["rollback", T, "--to-version", "9" * 5000], 2, "5000 digits, out of range"),  # not echoed
        (["rollback", T, "--to-version", "abc"], 2, "invalid version 'abc'"),
        (["rollback", "--set", ""], 2, "set id is empty"),
        (["rollback", "--set", "x" * 3000, "--dry-run"], 2, "3000 bytes"),
        (["rollback", "--set", "no-such-set"], 3, "no-such-set"),
        (["rollback", "--set", "  no-such-set \n"], 3, "set 'no-such-set' in"),  # pasted with spaces
        (["publish", "--set", "y" * 100], 2, "push-set printed"),
        (["publish", "--set", " "], 2, "set id is empty"),
        (["read", T, "--as-of", "12345678901234567890123"], 2, "at most 10 digits"),
        (["segments", T, "--as-of", "10000000000"], 2, "at most 10 digits"),
        (["read", T, "--as-of", "0"], 2, "from 1 to 9999999999"),
        (["rollback", T, "--to-time", "yesterday-ish"], 2, "yesterday-ish"),
        (["rollback", T, "--entry", "nope"], 2, "entry"),
        (["rollback", T, "--to-version", "2", "--entry", unknown], 2, "at most one"),
        (["history", T, "--limit", "0"], 2, "limit"),
        (["segments", T, "--as-of", "not-a-time"], 2, "not-a-time"),
        (["retention", "run", "--min-grace", "bogus"], 2, "bogus"),
        (["retention", "run", "--table", "no_such_table"], 3, "no_such_table"),
        # An empty name is a bad name, not every table:
        (
            ["retention", "run", "--table", "", "--yes", "--min-grace", "0s"],
            2,
            "table name ''",
        ),  # not every table
        (["retention", "run", "--table", ""], 2, "must not be empty"),
        (["table", "drop", T], 1, T),  # has segments: needs --force
    ]


def test_misuse_is_refused_by_name_and_changes_nothing(table: tuple[str, KazooClient, str, Path]) -> None:
    entry, client, zk, tmp_path = table
    before = dump(client)
    assert f"{ROOT}/tables/{T}" in before and len(before) > 5  # the comparison sees the table
    for args, code, named in cases(entry, tmp_path):
        result = runner.invoke(app, ["--zk", zk, *args])
        message = result.stderr + result.stdout
        assert result.exit_code == code, (args, result.exit_code, message)
        assert named.lower() in message.lower(), (args, message)
        assert "Traceback" not in message, (args, message)
        assert not [a for a in args if len(a) > 200 and a in message], (args[:2], message[:300])  # not echoed
        assert dump(client) == before, args


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--json", "rollback", T, "--bogus"], "No such option: --bogus"),
        (["rollback", T, "--json", "--to-version"], "requires an argument"),
        (["--json", "history"], "Missing argument 'TABLE'"),
        (["--json", "no-such-command"], "No such command"),
        (["--json", "-x", "table", "list"], "No such option: -x"),  # a global option mistyped
        (["--json", "--config"], "requires an argument"),
        # A group with no command: which it takes, not its whole help text.
        (["--json", "table"], "missing command: 'lineage table' takes one of: create, alter, list"),
        (["table", "--json"], "missing command: 'lineage table' takes one of: create, alter, list"),
        (["table", "--json", "show"], "Missing argument 'NAME'"),  # between a group and its command
    ],
)
def test_a_mistyped_command_with_json_says_so_in_one_json_object(
    table: tuple[str, KazooClient, str, Path], args: list[str], named: str
) -> None:
    """Scripts read one JSON object on stderr, a usage error included."""
    _, client, zk, _ = table
    before = dump(client)
    result = runner.invoke(app, ["--zk", zk, *args])
    assert result.exit_code == 2, result.stderr
    report = json.loads(result.stderr)
    assert named in report["error"] and report["code"] == 2 and report["kind"] == "UsageError", report
    assert result.stdout == ""
    assert dump(client) == before
