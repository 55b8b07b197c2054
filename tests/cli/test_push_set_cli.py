"""``lineage push-set``, ``lineage cut`` and ``lineage rollback --set`` as a
user types them, on real ZooKeeper: a set lands in every table or none; a
mistyped spec exits 2 naming the block and key, changing nothing; a table
that fails fails the set, naming it, and every table keeps its rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.cli.test_cli import process, run


def labels(zk: str, table: str) -> set[str]:
    code, out, _ = run(zk, "--json", "read", table, "--limit", "1000")
    assert code == 0, out
    return {r["label"] for r in json.loads(out)["rows"]}


def test_a_push_set_from_the_command_line(zk_hosts: str, tmp_path: Path) -> None:
    for table in ("facts", "dims"):
        assert run(zk_hosts, "table", "create", table, "--root", str(tmp_path / table))[0] == 0
    inputs = tmp_path / "in"
    inputs.mkdir()
    for name, label, n in (("facts", "v1", 50), ("dims", "v1", 5), ("narrow", "v2", 4)):
        pq.write_table(pa.table({"label": [label] * n, "id": list(range(n))}), inputs / f"{name}.parquet")
    pq.write_table(pa.table({"other": [1]}), inputs / "wrong.parquet")
    spec = tmp_path / "nightly.toml"  # inputs relative to the spec's folder, run from elsewhere
    spec.write_text(
        '[[push]]\ntable = "facts"\ninput = "in/facts.parquet"\naudit_min_rows = 10\n\n'
        '[[push]]\ntable = "dims"\ninput = "in/dims.parquet"\n'
    )
    done = process(zk_hosts, "--json", "push-set", str(spec), "--job-id", "night-1", "--reason", "nightly")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    set_id = body["set"]
    assert [t["table"] for t in body["tables"]] == ["facts", "dims"] and body["tables"][0]["rows"] == 50
    assert body["tables"][0]["audit"].startswith("passed: min-rows 10")
    assert labels(zk_hosts, "facts") == labels(zk_hosts, "dims") == {"v1"}
    code, out, _ = run(zk_hosts, "history", "dims", "--limit", "1")
    assert f"set {set_id}" in out and "reason: nightly" in out
    again = process(zk_hosts, "push-set", str(spec), "--job-id", "night-1")
    assert again.returncode == 0 and "nothing pushed again" in again.stdout, again.stderr
    assert (
        f"as set {set_id}:" in again.stdout and f"rollback --set {set_id}" in again.stdout
    )  # the set it did

    # A table whose rows fail its audit fails the set: both keep their rows.
    spec.write_text(
        '[[push]]\ntable = "facts"\ninput = "in/narrow.parquet"\n\n'
        '[[push]]\ntable = "dims"\ninput = "in/narrow.parquet"\naudit_min_rows = 10\n'
    )
    failed = process(zk_hosts, "push-set", str(spec))
    assert failed.returncode == 1, failed.stderr
    assert (
        "push set " in failed.stderr
        and "'dims' failed its audit: min-rows 10 (4 rows written)" in failed.stderr
    )
    assert "other entries (facts) were reverted" in failed.stderr and "Traceback" not in failed.stderr
    assert labels(zk_hosts, "facts") == labels(zk_hosts, "dims") == {"v1"}

    # Bad input: exit 2, naming what is wrong; nothing written.
    versions = {
        t: json.loads(run(zk_hosts, "--json", "history", t)[1])[0]["version"] for t in ("facts", "dims")
    }
    for text, said in (
        ('[[push]]\ntable = "facts"\ninput = "in/facts.parquet"\nmodee = "append"\n', "unknown key 'modee'"),
        ('[[push]]\ntable = "facts"\n', "[[push]] block 1 needs 'input'"),
        ('[[push]]\ntable = "facts"\ninput = " "\n', "'input' is empty"),
        # An empty job id would push without the guard against a job pushing twice:
        ('[[push]]\ntable = "facts"\ninput = "in/facts.parquet"\njob_id = ""\n', "invalid job id ''"),
        ('[[push]]\ntable = "facts"\ninput = "in/facts.parquet"\njob_id = " j1"\n', "invalid job id"),
        ("table = 'facts'\n", "unknown key 'table'"),
        ('[[push]]\ntable = "facts"\ninput = "in/facts.parquet"\n' * 2, "named twice"),
        (
            '[[push]]\ntable = "Facts"\ninput = "in/facts.parquet"\n\n'
            '[[push]]\ntable = "facts"\ninput = "in/facts.parquet"\n',
            "'Facts' and 'facts' differ only in case",
        ),
        ('[[push]]\ntable = "facts"\ninput = "in/nowhere"\n', "does not exist"),
        ('[[push]]\ntable = "fäcts"\ninput = "in/facts.parquet"\n', "invalid table name"),
        ('[[push\ntable = "facts"', "not valid TOML"),
        (
            '[[push]]\ntable = "facts"\ninput = "in/facts.parquet"\n\n'
            '[[push]]\ntable = "dims"\ninput = "in/facts.parquet"\nmode = "sideways"\n',
            "sideways",
        ),
    ):
        spec.write_text(text)
        code, _, err = run(zk_hosts, "push-set", str(spec))
        assert code == 2 and said in err and "engine" not in err, (
            text,
            err,
        )  # refused before any input is read
    spec.write_text('[[push]]\ntable = "dims"\ninput = "in/wrong.parquet"\n')
    code, _, err = run(zk_hosts, "push-set", str(spec))
    assert code == 1 and "does not fit table 'dims'" in err, err
    code, _, err = run(zk_hosts, "push-set", str(tmp_path / "missing.toml"))
    assert code == 2 and "does not exist" in err
    after = {t: json.loads(run(zk_hosts, "--json", "history", t)[1])[0]["version"] for t in ("facts", "dims")}
    assert after == versions

    # A cut, a set's rollback (a dry run first), and what they refuse.
    code, out, _ = run(zk_hosts, "cut", "facts", "dims")
    assert code == 0 and out.count(set_id) == 2, out
    code, out, _ = run(zk_hosts, "rollback", "--set", set_id, "--dry-run")
    assert code == 0 and "facts back to version" in out and labels(zk_hosts, "facts") == {"v1"}
    code, out, _ = run(zk_hosts, "--json", "rollback", "--set", set_id)
    assert code == 0 and set(json.loads(out)["committed"]) == {"facts", "dims"}, out
    code, out, _ = run(zk_hosts, "--json", "read", "facts")
    assert code == 0 and json.loads(out)["rows"] == []
    versions = {
        t: json.loads(run(zk_hosts, "--json", "history", t)[1])[0]["version"] for t in ("facts", "dims")
    }
    code, out, _ = run(zk_hosts, "rollback", "--set", set_id)  # again: nothing left to undo, nothing written
    assert code == 0 and "nothing to do" in out and out.count("already there") == 2, out
    code, out, _ = run(zk_hosts, "rollback", "--set", set_id, "--dry-run")  # the dry run agrees
    assert code == 0 and "nothing to do" in out and out.count("already there") == 2, out
    assert {
        t: json.loads(run(zk_hosts, "--json", "history", t)[1])[0]["version"] for t in ("facts", "dims")
    } == (versions)
    assert run(zk_hosts, "rollback", "--set", "no-such-set")[0] == 3
    assert run(zk_hosts, "rollback", "facts", "--set", set_id)[0] == 2
    assert run(zk_hosts, "rollback")[0] == 2
    assert run(zk_hosts, "cut", "facts", "facts")[0] == 2
    assert run(zk_hosts, "cut", "facts", "nope")[0] == 3

    # A staged set: nothing shows until 'publish --set', which shows every table at once.
    spec.write_text(
        "".join(f'[[push]]\ntable = "{t}"\ninput = "in/narrow.parquet"\n' for t in ("facts", "dims"))
    )
    code, out, err = run(zk_hosts, "--json", "push-set", str(spec), "--stage", "--hold", "1h")
    assert code == 0, err
    staged = json.loads(out)
    assert all(t["staged_until"] for t in staged["tables"])
    assert labels(zk_hosts, "dims") == set() and labels(zk_hosts, "facts") == set()  # rolled back above
    entry = staged["tables"][0]["entry"]
    code, _, err = run(zk_hosts, "publish", "facts", entry)
    assert code == 1 and f"lineage publish --set {staged['set']}" in err, err
    code, out, err = run(zk_hosts, "publish", "--set", staged["set"][:8])  # its first digits, as an entry's
    assert code == 0 and f"published set {staged['set']}" in out, err
    assert labels(zk_hosts, "facts") == labels(zk_hosts, "dims") == {"v2"}
    assert run(zk_hosts, "push-set", str(spec), "--stage", "--job-id", "j")[0] == 2
    assert run(zk_hosts, "publish", "--set", "nope")[0] == 3
    assert run(zk_hosts, "publish", "facts")[0] == 2


def test_a_repeated_set_job_rolled_back_since_offers_no_undo(zk_hosts: str, tmp_path: Path) -> None:
    """The set's job run again after its set was rolled back: nothing is
    pushed, and the last line says how to push it again, not how to undo
    what is no longer shown."""
    for table in ("ra", "rb"):
        assert run(zk_hosts, "table", "create", table, "--root", str(tmp_path / table))[0] == 0
    pq.write_table(pa.table({"label": ["x"] * 3, "id": [0, 1, 2]}), tmp_path / "x.parquet")
    spec = tmp_path / "set.toml"
    spec.write_text("".join(f'[[push]]\ntable = "{t}"\ninput = "x.parquet"\n\n' for t in ("ra", "rb")))
    first = process(zk_hosts, "--json", "push-set", str(spec), "--job-id", "j-1")
    assert first.returncode == 0, first.stderr
    set_id = json.loads(first.stdout)["set"]
    again = process(zk_hosts, "push-set", str(spec), "--job-id", "j-1")
    assert f"undo it with: lineage rollback --set {set_id}" in again.stdout, again.stdout
    code, out, err = run(zk_hosts, "rollback", "--set", set_id[:8].upper())  # its first digits, as pasted
    assert code == 0 and f"rolled back set {set_id} in one commit" in out, err
    after = process(zk_hosts, "push-set", str(spec), "--job-id", "j-1")
    assert after.returncode == 0 and "nothing pushed again" in after.stdout, after.stderr
    assert "undo it with" not in after.stdout, after.stdout
    last = after.stdout.strip().splitlines()[-1]
    assert last.startswith("it was rolled back (or reverted) since: push the set"), after.stdout


def test_an_input_path_too_long_for_the_file_system_is_bad_input(zk_hosts: str, tmp_path: Path) -> None:
    assert run(zk_hosts, "table", "create", "longs", "--root", str(tmp_path / "longs"))[0] == 0
    spec = tmp_path / "long.toml"
    spec.write_text(f'[[push]]\ntable = "longs"\ninput = "{"y" * 5000}.parquet"\n')
    code, _, err = run(zk_hosts, "push-set", str(spec), "--engine", "arrow")
    assert code == 2 and "cannot be used: File name too long" in err, err


def test_the_set_id_stands_alone_in_what_push_set_prints(zk_hosts: str, tmp_path: Path) -> None:
    """A script cuts the set's id out of the first line ('awk {print $3}')
    or the last: no punctuation is glued to it, pushed, staged or published."""
    for table in ("facts", "dims"):
        assert run(zk_hosts, "table", "create", table, "--root", str(tmp_path / table))[0] == 0
    pq.write_table(pa.table({"label": ["v1"] * 3, "id": [1, 2, 3]}), tmp_path / "rows.parquet")
    spec = tmp_path / "set.toml"
    spec.write_text("".join(f'[[push]]\ntable = "{t}"\ninput = "rows.parquet"\n' for t in ("facts", "dims")))

    def newest_set() -> str:
        return str(json.loads(run(zk_hosts, "--json", "history", "dims", "--limit", "1")[1])[0]["set"])

    code, out, err = run(zk_hosts, "push-set", str(spec))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["pushed", "set", newest_set()], out
    assert lines[-1].split()[-1] == newest_set(), out
    code, out, err = run(zk_hosts, "push-set", str(spec), "--stage")
    assert code == 0, err
    lines = out.splitlines()
    staged = lines[0].split()[2]
    assert (
        lines[0].split()[:2] == ["staged", "set"]
        and lines[-1] == f"publish it with: lineage publish --set {staged}"
    )
    tables = [line for line in lines if ": staged " in line]
    assert tables and all("until its set is published" in line for line in tables), out
    assert "lineage publish " not in out.replace(f"lineage publish --set {staged}", ""), out  # no table alone
    code, out, err = run(zk_hosts, "publish", "--set", staged)
    assert code == 0, err
    assert out.splitlines()[0].split()[:3] == ["published", "set", staged], out
    assert staged == newest_set()


def test_a_set_rollback_that_would_split_a_later_set_is_refused_from_the_command_line(
    zk_hosts: str, tmp_path: Path
) -> None:
    """Set X over u1 and u2, set Y over u2 and u3: 'rollback --set X' (and its
    dry run) is refused naming Y, exit 1, nothing changed; after
    'rollback --set Y' it goes through, and 'lineage cut' shows one state."""
    for table in ("u1", "u2", "u3"):
        assert run(zk_hosts, "table", "create", table, "--root", str(tmp_path / table))[0] == 0
    ids = {}
    for name, tables in (("x", ("u1", "u2")), ("y", ("u2", "u3"))):
        pq.write_table(pa.table({"label": [name] * 2, "id": [1, 2]}), tmp_path / f"{name}.parquet")
        spec = tmp_path / f"{name}.toml"
        spec.write_text("".join(f'[[push]]\ntable = "{t}"\ninput = "{name}.parquet"\n' for t in tables))
        code, out, err = run(zk_hosts, "push-set", str(spec))
        assert code == 0, err
        ids[name] = out.split()[2]
    for dry in (["--dry-run"], []):
        code, out, err = run(zk_hosts, "rollback", "--set", ids["x"], *dry)
        assert code == 1, (out, err)
        assert f"would undo set {ids['y']} in u2 but not in u3" in err and f"rollback --set {ids['y']}" in err
    assert labels(zk_hosts, "u2") == labels(zk_hosts, "u3") == {"y"}
    assert run(zk_hosts, "rollback", "--set", ids["y"])[0] == 0
    code, out, err = run(zk_hosts, "rollback", "--set", ids["x"])
    assert code == 0, err
    assert labels(zk_hosts, "u1") == labels(zk_hosts, "u2") == labels(zk_hosts, "u3") == set()


def test_a_tables_rollback_that_would_split_a_set_is_refused_unless_told_from_the_command_line(
    zk_hosts: str, tmp_path: Path
) -> None:
    """'lineage rollback t1' (no target: undo the newest push, here a set's)
    is refused, exit 1, naming the set and both ways out; with --split-sets
    it rolls t1 back alone and says which set it split. --split-sets with
    --set is a usage error."""
    spec = _set_of(zk_hosts, tmp_path, ("t1", "t2"))
    code, out, err = run(zk_hosts, "push-set", str(spec))
    assert code == 0, err
    set_id = out.split()[2]
    for dry in (["--dry-run"], []):
        code, out, err = run(zk_hosts, "rollback", "t1", *dry)
        assert code == 1, (out, err)
        assert f"would undo set {set_id} in t1 but not in t2" in err, err
        assert f"rollback --set {set_id}" in err and "--split-sets" in err
    assert labels(zk_hosts, "t1") == labels(zk_hosts, "t2") == {"x"}
    code, out, _ = run(zk_hosts, "--json", "history", "t2", "--limit", "1")
    entry = json.loads(out)[0]["entry"]
    for dry in (["--dry-run"], []):  # one table's revert of the set's push: refused too
        code, out, err = run(zk_hosts, "revert", "t2", entry, *dry)
        assert code == 1 and f"would undo set {set_id} in t2 but not in t1" in err, err
        assert "--split-sets" in err
    code, out, err = run(zk_hosts, "rollback", "t1", "--split-sets", "--dry-run")
    assert code == 0 and f"splits push set(s) {set_id}: t1 now disagrees" in out, (out, err)
    code, out, err = run(zk_hosts, "--json", "rollback", "t1", "--split-sets")
    assert code == 0, err
    assert json.loads(out)["split_sets"] == [set_id]
    assert labels(zk_hosts, "t1") == set() and labels(zk_hosts, "t2") == {"x"}
    code, out, err = run(zk_hosts, "rollback", "--set", set_id, "--split-sets")
    assert code == 2 and "--split-sets is for one table's rollback" in err, (out, err)


def _set_of(zk: str, tmp_path: Path, tables: tuple[str, ...]) -> Path:
    """New tables, and a push-set spec pushing one small input to each."""
    for table in tables:
        assert run(zk, "table", "create", table, "--root", str(tmp_path / table))[0] == 0
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"label": ["x", "x"]}), source)
    spec = tmp_path / "set.toml"
    spec.write_text("".join(f'[[push]]\ntable = "{t}"\ninput = "{source}"\n\n' for t in tables))
    return spec


@pytest.mark.parametrize(("sent", "name"), [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")])
def test_a_push_set_stopped_by_a_signal_says_the_set_stopped_and_reverts_every_table(
    zk_hosts: str, tmp_path: Path, sent: int, name: str
) -> None:
    """A signal while the set is between its writes and its commit: one
    line naming the set (not its last table alone) and every table's
    entry reverted; no table shows the set."""
    tables = (f"s{sent}a", f"s{sent}b")
    spec = _set_of(zk_hosts, tmp_path, tables)
    command = [sys.executable, "-m", "segment_lineage", "--zk", zk_hosts, "push-set", str(spec)]
    env = dict(os.environ, LINEAGE_FAILPOINT="set.after-write:sleep")
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )  # fmt: skip
    head: list[str] = []
    try:
        assert proc.stderr is not None
        for _ in range(20):  # until both tables are written: then it sleeps before the commit
            line = proc.stderr.readline()
            head.append(line)
            if not line or sum("wrote" in h for h in head) == len(tables):
                break
        time.sleep(0.5)
        proc.send_signal(sent)
        _, rest = proc.communicate(timeout=60)
        err = "".join(head) + rest
    finally:
        proc.kill()
    assert proc.returncode == 128 + sent, err
    said = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(said) == 1 and said[0].startswith("error: push set "), err
    assert f"interrupted by {name}: entries reverted in {', '.join(tables)}" in said[0], err
    assert "Traceback" not in err
    for table in tables:
        _, out, _ = run(zk_hosts, "entries", table, "--json")
        assert [e["state"] for e in json.loads(out)] == ["REVERTED"]


def test_a_push_set_stopped_by_a_signal_with_json_says_so_in_one_json_object(
    zk_hosts: str, tmp_path: Path
) -> None:
    """With --json the interrupt is told as every error is: one JSON object
    on stderr (no progress lines before it), kind PushSetInterrupted, code
    128 + the signal."""
    tables = ("ja", "jb")
    spec = _set_of(zk_hosts, tmp_path, tables)
    command = [sys.executable, "-m", "segment_lineage", "--zk", zk_hosts, "--json", "push-set", str(spec)]
    env = dict(os.environ, LINEAGE_FAILPOINT="set.after-write:sleep")
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):  # until both tables' entries started (no progress lines to wait on)
            started = [json.loads(run(zk_hosts, "entries", t, "--json")[1]) for t in tables]
            if all(s and s[-1]["state"] == "IN_PROGRESS" for s in started):
                break
            time.sleep(0.1)
        time.sleep(1.0)  # into the sleep before the commit
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    report = json.loads(err)
    assert report["kind"] == "PushSetInterrupted" and report["code"] == 128 + signal.SIGTERM, report
    assert report["error"].startswith("push set ") and "entries reverted in ja, jb" in report["error"], report
    assert out == ""


def test_a_set_rollback_names_the_later_changes_it_undoes(
    zk_hosts: str, zk_manager: Any, tmp_path: Path
) -> None:
    from segment_lineage.ingest.arrow_push import prepare_arrow, push_arrow
    from segment_lineage.ingest.push_set import push_set
    from segment_lineage.lineage.core.model import TableConfig

    data = pa.table({"label": ["x"], "id": [0]})
    for name in ("s1", "s2"):
        zk_manager.create_table(TableConfig.build(name, str(tmp_path / name)))
    set_id = push_set(zk_manager, [prepare_arrow(zk_manager, t, [data]) for t in ("s1", "s2")]).set_id
    after = zk_manager.table("s1").version
    push_arrow(zk_manager, "s1", [data])  # a start and an end, after the set
    code, out, err = run(zk_hosts, "rollback", "--set", set_id, "--dry-run")
    assert code == 0, err
    later = f"(also undoing versions {after + 1}-{after + 2}, made after the set)"
    assert f"s1 back to version {after - 1} {later}" in out, out
    assert f"s2 back to version {zk_manager.table('s2').version - 1}\n" in out + "\n", out
