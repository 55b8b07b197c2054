"""``lineage push --audit-*`` as a user types it, on real ZooKeeper: a push
that passes shows its checks in its output and in ``lineage history``; one
that fails exits 1 naming the check, and readers keep the old rows; an audit
that cannot pass whatever the data exits 2 before anything is written."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_cli import process, run


def test_push_with_an_audit_from_the_command_line(zk_hosts: str, tmp_path: Path) -> None:
    assert run(zk_hosts, "table", "create", "daily", "--root", str(tmp_path / "daily"))[0] == 0
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("city,amount\n" + "".join(f"c{i},{i}\n" for i in range(20)))
    bad.write_text("city,amount\n" + "".join(f"c{i},{'' if i % 4 else i}\n" for i in range(8)))
    assert process(zk_hosts, "push", "daily", "--input", str(good), "--format", "csv").returncode == 0

    failing = process(
        zk_hosts, "push", "daily", "--input", str(bad), "--format", "csv",
        "--audit-min-rows", "10", "--audit-not-null", "amount", "--audit-max-change", "25",
    )  # fmt: skip
    assert failing.returncode == 1, failing.stderr
    said = failing.stderr
    assert "failed its audit: min-rows 10 (8 rows written)" in said
    assert "max-change 25% (-60.0%: 20 -> 8 rows)" in said and "not-null amount (6 null(s))" in said
    assert "Traceback" not in said
    code, out, _ = run(zk_hosts, "--json", "read", "daily", "--limit", "100")
    assert code == 0 and len(json.loads(out)["rows"]) == 20  # the old rows, untouched

    sql = "SELECT sum(amount) = (SELECT sum(amount) FROM current) FROM staged"
    passing = process(
        zk_hosts, "--json", "push", "daily", "--input", str(good), "--format", "csv", "--audit-sql", sql,
        "--audit-min-rows", "20",
    )  # fmt: skip
    assert passing.returncode == 0, passing.stderr
    audited = json.loads(passing.stdout)["audit"]
    assert audited.startswith("passed: min-rows 20 (20 rows written); sql 'SELECT sum(amount) = ")
    code, out, _ = run(zk_hosts, "history", "daily", "--limit", "1")
    assert code == 0 and "audit passed: min-rows 20" in out
    code, out, _ = run(zk_hosts, "--json", "history", "daily", "--limit", "1")
    assert json.loads(out)[0]["audit"] == audited


def test_an_audit_that_cannot_pass_exits_2_and_writes_nothing(zk_hosts: str, tmp_path: Path) -> None:
    assert run(zk_hosts, "table", "create", "t", "--root", str(tmp_path / "t"))[0] == 0
    data = tmp_path / "in.csv"
    data.write_text("a,b\n1,x\n2,y\n")
    for args, said in (
        (["--audit-sql", "SELEC 1"], "the audit query cannot run: Parser Error"),
        (["--audit-sql", "SELECT c FROM staged"], "the audit query cannot run: Binder Error"),
        (["--audit-sql", ""], "the audit query is empty"),
        (["--audit-not-null", "c"], "--audit-not-null names column(s) the push does not write: c"),
        (["--audit-min-rows", "-1"], "minimum rows must be a whole number >= 0"),
        (["--audit-max-change", "nan"], "maximum change must be a percentage >= 0"),
        (["--audit-not-null", "a", "--audit-not-null", "a"], "names a not-null column twice"),
    ):
        code, _, err = run(zk_hosts, "push", "t", "--input", str(data), "--format", "csv", *args)
        assert code == 2 and said in err, (args, code, err)
    code, out, _ = run(zk_hosts, "--json", "history", "t")
    assert [r["operation"] for r in json.loads(out)] == ["CREATE_TABLE"]  # nothing started
    assert not list((tmp_path / "t").rglob("*.parquet"))


def test_stage_read_publish_and_revert_from_the_command_line(zk_hosts: str, tmp_path: Path) -> None:
    assert run(zk_hosts, "table", "create", "wap", "--root", str(tmp_path / "wap"))[0] == 0
    old, new = tmp_path / "old.csv", tmp_path / "new.csv"
    old.write_text("k,v\n" + "".join(f"old{i},{i}\n" for i in range(3)))
    new.write_text("k,v\n" + "".join(f"new{i},{i}\n" for i in range(5)))
    assert process(zk_hosts, "push", "wap", "--input", str(old), "--format", "csv").returncode == 0

    staged = process(
        zk_hosts, "--json", "push", "wap", "--input", str(new), "--format", "csv", "--stage", "--hold", "2h",
        "--audit-min-rows", "5",
    )  # fmt: skip
    assert staged.returncode == 0, staged.stderr
    out = json.loads(staged.stdout)
    entry = out["entry"][:8]
    assert out["staged_until"] and out["audit"].startswith("passed: min-rows 5")

    def read(*args: str) -> list[str]:
        code, text, err = run(zk_hosts, "--json", "read", "wap", "--limit", "100", *args)
        assert code == 0, err
        return sorted(r["k"] for r in json.loads(text)["rows"])

    assert read() == ["old0", "old1", "old2"]
    assert read("--entry", entry) == [f"new{i}" for i in range(5)]
    code, text, _ = run(zk_hosts, "entries", "wap")
    assert code == 0 and "STAGED" in text

    published = process(zk_hosts, "publish", "wap", entry, "--reason", "looked fine")
    assert published.returncode == 0, published.stderr
    assert "published the staged push to wap" in published.stdout
    assert "audit passed: min-rows 5" in published.stderr  # its checks ran again
    assert read() == [f"new{i}" for i in range(5)]
    again = process(zk_hosts, "publish", "wap", entry)
    assert again.returncode == 1 and "is not a staged push: it is COMPLETED" in again.stderr

    dropped = process(zk_hosts, "--json", "push", "wap", "--input", str(old), "--format", "csv", "--stage")
    second = json.loads(dropped.stdout)["entry"][:8]
    code, _, err = run(zk_hosts, "revert", "wap", second)
    assert code == 0, err
    assert read() == [f"new{i}" for i in range(5)]
    code, _, err = run(zk_hosts, "read", "wap", "--entry", second)
    assert code == 1 and "REVERTED" in err
    for args, said in (
        (["--hold", "1h"], "--hold goes only with --stage"),
        (["--stage", "--job-id", "j1"], "--stage does not go with --job-id"),
        (["--stage", "--hold", "later"], "invalid --hold 'later'"),
    ):
        code, _, err = run(zk_hosts, "push", "wap", "--input", str(new), "--format", "csv", *args)
        assert code == 2 and said in err, (args, err)
    code, _, err = run(zk_hosts, "read", "wap", "--entry", second, "--as-of", "1")
    assert code == 2 and "--entry goes without --as-of" in err


@pytest.mark.parametrize(
    ("sent", "code", "name"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "SIGINT")]
)
def test_a_signal_during_the_audit_query_stops_it_at_once_and_reverts(
    zk_hosts: str, tmp_path: Path, sent: signal.Signals, code: int, name: str
) -> None:
    """The query runs for hours; the signal stops it within seconds, and the
    push ends as an interrupted push does (its entry reverted, one line)."""
    table = f"slow{code}"
    assert run(zk_hosts, "table", "create", table, "--root", str(tmp_path / table))[0] == 0
    data = tmp_path / "in.csv"
    data.write_text("a,b\n1,x\n2,y\n")
    command = [
        sys.executable, "-m", "segment_lineage", "--zk", zk_hosts, "push", table, "--input", str(data),
        "--format", "csv", "--audit-sql", "SELECT count(*) > 0 FROM staged, range(100000000000)",
    ]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    head = []
    try:
        assert proc.stderr is not None
        for _ in range(10):  # until the rows are written: the audit runs next
            line = proc.stderr.readline()
            head.append(line)
            if not line or line.startswith("wrote "):
                break
        time.sleep(1.0)  # into the query
        proc.send_signal(sent)
        sent_at = time.monotonic()
        _, rest = proc.communicate(timeout=60)
        took = time.monotonic() - sent_at
        err = "".join(head) + rest
    finally:
        proc.kill()
    assert proc.returncode == code, err
    said = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(said) == 1 and f"interrupted by {name}" in said[0] and "reverted" in said[0], err
    assert "Traceback" not in err and took < 20, (took, err)
    _, out, _ = run(zk_hosts, "entries", table, "--json")
    assert [e["state"] for e in json.loads(out)] == ["REVERTED"]
