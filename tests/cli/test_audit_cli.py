"""``lineage push --audit-*`` as a user types it, on real ZooKeeper: a push
that passes shows its checks in its output and in ``lineage history``; one
that fails exits 1 naming the check, and readers keep the old rows; an audit
that cannot pass whatever the data exits 2 before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

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
