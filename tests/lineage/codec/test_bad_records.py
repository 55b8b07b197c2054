"""Records in ZooKeeper that cannot be decoded, on a real server: each fails
closed for its own table, with an error naming the table and the node, and
every other table goes on (listing, retention passes, drops, creates)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from typer.testing import CliRunner

from segment_lineage.cli import app
from segment_lineage.lineage import codec
from segment_lineage.lineage.core.errors import CorruptRecordError
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.zk.store import ROOT, ZkStore
from segment_lineage.retention.daemon import Daemon
from segment_lineage.retention.executor import PassOptions, run_pass
from segment_lineage.retention.schedule import Schedule
from tests.conftest import fast_retry
from tests.helpers.files import parquet_file
from tests.helpers.owners import OwnsAll
from tests.helpers.zk import dump

runner = CliRunner()
DEEP = b"[" * 200_000 + b"]" * 200_000  # parses to nothing but a RecursionError


def cli(zk: str, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--zk", zk, *args])
    return result.exit_code, result.stdout, result.stderr


@dataclass
class Lake:
    hosts: str
    client: KazooClient
    tmp: Path

    def ok(self, *args: str) -> str:
        code, out, err = cli(self.hosts, *args)
        assert code == 0, err
        return out

    def table_with_a_queued_file(self, table: str) -> Path:
        """A table whose one segment was deleted: its file waits in pending."""
        root = self.tmp / table
        self.ok("table", "create", table, "--root", str(root))
        size = parquet_file(root / "a.parquet", 1)
        self.ok("segment", "add", table, "a", "--rows", "1", "--bytes", str(size))
        self.ok("segment", "delete", table, "a")
        return root / "a.parquet"

    def corrupt_head(self, table: str, data: bytes) -> None:
        self.client.set(f"{ROOT}/tables/{table}", data)


@pytest.fixture
def lake(zk_hosts: str, tmp_path: Path) -> Iterator[Lake]:
    client = KazooClient(hosts=zk_hosts)
    client.start()
    yield Lake(zk_hosts, client, tmp_path)
    client.stop()
    client.close()


def test_a_deeply_nested_head_fails_closed_for_its_table_and_the_others_go_on(lake: Lake) -> None:
    queued = lake.table_with_a_queued_file("good")
    lake.ok("table", "create", "bad", "--root", str(lake.tmp / "bad"))
    lake.corrupt_head("bad", DEEP)

    code, out, err = cli(lake.hosts, "table", "list")
    assert code == 0 and out.split() == ["good"]
    assert f"table 'bad' is unreadable: corrupt lineage record at {ROOT}/tables/bad" in err
    assert "nested too deeply" in err
    code, out, err = cli(lake.hosts, "--json", "table", "list")  # scripts: JSON on stderr too
    warned = [json.loads(line) for line in err.splitlines()]
    assert code == 0 and json.loads(out) == ["good"]
    assert len(warned) == 1 and warned[0]["warning"].startswith("table 'bad' is unreadable: "), err

    code, _, err = cli(lake.hosts, "table", "show", "bad")
    assert code == 1 and f"corrupt lineage record at {ROOT}/tables/bad" in err and "nested too deeply" in err

    code, out, err = cli(lake.hosts, "retention", "run", "--force")
    assert code == 1
    assert "good: deleted 1 file(s)" in out and not queued.exists()
    assert "bad: skipped, metadata unreadable" in out and "nested too deeply" in err

    code, out, err = cli(lake.hosts, "table", "drop", "bad", "--force")
    assert code == 0 and "dropped table bad" in out
    code, out, err = cli(lake.hosts, "table", "list")
    assert (code, out.split(), err) == (0, ["good"], "")
    for stream in (out, err):
        assert "Traceback" not in stream


def test_a_deeply_nested_blob_fails_closed(zk_store: ZkStore, lake: Lake) -> None:
    lake.ok("table", "create", "t", "--root", str(lake.tmp / "t"))
    lake.ok("segment", "add", "t", "a", "--no-check")
    head = codec.decode_head(lake.client.get(f"{ROOT}/tables/t")[0], "head")
    blob = head.buckets["segments"][0]
    lake.client.set(f"{ROOT}/tables/t/blobs/{blob}", DEEP)
    with pytest.raises(
        CorruptRecordError, match=f"/tables/t/blobs/{blob}: not valid JSON .nested too deeply"
    ):
        zk_store.read("t").state.loaded()  # segments load when first wanted


@pytest.mark.parametrize(
    ("guard", "message"),
    [
        (b"\xff\xfe\x00", "not UTF-8 text"),
        (b"other", "names table 'other', which is not a spelling of 'bin'"),
        (b"", "invalid table name ''"),
    ],
    ids=["binary", "another-table", "empty"],
)
def test_a_bad_name_record_fails_create_of_its_name_only(lake: Lake, guard: bytes, message: str) -> None:
    lake.ok("table", "create", "first", "--root", str(lake.tmp / "first"))
    lake.client.create(f"{ROOT}/names/bin", guard)
    before = sorted(lake.client.get_children(f"{ROOT}/tables"))
    code, out, err = cli(lake.hosts, "table", "create", "bin", "--root", str(lake.tmp / "bin"))
    assert code == 1 and "Traceback" not in out + err
    assert f"corrupt lineage record at {ROOT}/names/bin: {message}" in err
    assert sorted(lake.client.get_children(f"{ROOT}/tables")) == before  # nothing created
    assert lake.client.get(f"{ROOT}/names/bin")[0] == guard  # nor touched
    lake.ok("table", "create", "other_table", "--root", str(lake.tmp / "other"))


def metric(daemon: Daemon, name: str) -> float:
    value = daemon.metrics.registry.get_sample_value(name)
    assert value is not None, name
    return value


@pytest.mark.parametrize("data", [b'{"format": "segment-lineage.head", "v": 99}', DEEP], ids=["v99", "deep"])
def test_an_all_tables_pass_reports_an_unreadable_table_counts_it_and_fails(
    lake: Lake, zk_store: ZkStore, data: bytes
) -> None:
    queued = lake.table_with_a_queued_file("good")
    lake.ok("table", "create", "bad", "--root", str(lake.tmp / "bad"))
    lake.corrupt_head("bad", data)
    manager = LineageManager(zk_store, retry=fast_retry())

    reports = {r.table: r for r in run_pass(manager, None, PassOptions(dry_run=True))}
    assert set(reports) == {"good", "bad"}
    assert (
        reports["bad"].unreadable
        and f"skipped, its metadata is unreadable: corrupt lineage record at {ROOT}/tables/bad"
        in reports["bad"].errors[0]
    )
    assert not reports["good"].unreadable and reports["good"].errors == []

    daemon = Daemon(manager, OwnsAll(), Schedule(interval_ms=1000), PassOptions(min_grace_ms=0))
    daemon.tick()
    assert not queued.exists()  # the readable table was passed over as usual
    assert metric(daemon, "lineage_retention_unreadable_tables") == 1
    assert metric(daemon, "lineage_retention_table_failures_total") == 1
    assert metric(daemon, "lineage_retention_pass_failures_total") == 1
    healthy, status = daemon.health()
    assert not healthy and "bad: skipped, its metadata is unreadable" in str(status["last_error"])

    code, out, _ = cli(lake.hosts, "--json", "retention", "run", "--force")
    assert code == 1
    assert "skipped, its metadata is unreadable" in out and '"unreadable": true' in out


# ---- a hand-run pass is a dry run unless told otherwise ---------------------------


def snapshot(lake: Lake, root: Path) -> tuple[object, ...]:
    return dump(lake.client), sorted(str(p) for p in root.rglob("*"))


def test_a_hand_run_pass_deletes_only_with_yes_and_a_short_grace_needs_force(lake: Lake) -> None:
    queued = lake.table_with_a_queued_file("t")
    root = queued.parent
    before = snapshot(lake, root)

    code, out, err = cli(lake.hosts, "retention", "run", "--min-grace", "0s")  # a dry run may use any grace
    assert code == 0 and "t: would delete 1 file(s)" in out and "a.parquet" in out
    assert "dry run: nothing was deleted; run again with --yes to delete" in err
    assert snapshot(lake, root) == before
    code, out, err = cli(lake.hosts, "retention", "run", "--min-grace", "0s", "--summary")
    assert code == 0 and "t: would delete 1 file(s)" in out and "a.parquet" not in out  # no file lines
    assert out.splitlines()[-1].startswith("total: 1 table(s), would delete 1 file(s) ("), out

    for args in (["--yes", "--min-grace", "0s"], ["--yes", "--min-grace", "9m59s"]):
        code, out, err = cli(lake.hosts, "retention", "run", *args)
        assert code == 2 and f"--min-grace {args[-1]} is below the floor of 10m" in err, err
        assert "hint: add --force" in err
        assert snapshot(lake, root) == before

    from_env = runner.invoke(
        app, ["--zk", lake.hosts, "retention", "run", "--yes"], env={"LINEAGE_RETENTION_MIN_GRACE": "1m"}
    )
    assert (
        from_env.exit_code == 2
        and "LINEAGE_RETENTION_MIN_GRACE=1m (environment) is below the floor" in from_env.stderr
    )
    assert snapshot(lake, root) == before

    for args in (["--yes", "--orphan-grace", "0s"], ["--yes", "--orphan-grace", "9m"]):
        code, out, err = cli(lake.hosts, "retention", "run", *args)
        assert code == 2 and f"--orphan-grace {args[-1]} is below the floor of 10m" in err, err
        assert "hint: add --force" in err
        assert snapshot(lake, root) == before
    code, out, err = cli(lake.hosts, "retention", "run", "--yes", "--no-orphans", "--orphan-grace", "0s")
    assert code == 0, err  # no orphan scan: its grace does not matter

    code, out, err = cli(lake.hosts, "retention", "run", "--yes")  # the default grace keeps the young file
    assert code == 0 and "t: deleted 0 file(s)" in out and "dry run" not in err
    assert queued.exists()

    code, out, err = cli(lake.hosts, "retention", "run", "--yes", "--force", "--min-grace", "0s")
    assert code == 0 and "t: deleted 1 file(s)" in out and not queued.exists()
