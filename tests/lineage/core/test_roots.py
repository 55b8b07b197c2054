"""Table roots: canonical, never dangerous, never overlapping, and an orphan
scan that never leaves its own table (real ZooKeeper, real files)."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.ingest.segments import write_segment
from segment_lineage.lineage import codec
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import InvalidInputError, RefusedError
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.core.roots import canonical_root, check_no_overlap, overlaps
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
from segment_lineage.lineage.storage.claims import CLAIM_FILE
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.lineage.storage.dirs import prune_dirs
from segment_lineage.lineage.store.memory import MemoryStore
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.server import ZkServer
from segment_lineage.lineage.zk.store import ZkStore
from segment_lineage.retention.executor import PassOptions, run_table
from tests.conftest import fast_retry

ORPHANS_NOW = PassOptions(force=True, min_grace_ms=0, orphan_grace_ms=0)


def part(label: str) -> pa.Table:
    return pa.table({"label": [label] * 3, "i": [0, 1, 2]})


def config(name: str, root: str | Path) -> TableConfig:
    return TableConfig.build(
        name, str(root), replaced_segments_retention="0s", lineage_entry_cleanup_retention="0s"
    )


def age(root: Path, days: float = 3) -> None:
    """Every file under ``root`` looks ``days`` old to the orphan scan."""
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            then = path.stat().st_mtime - days * 86_400
            os.utime(path, (then, then))


# ---- the pure rules ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("/lake/a/", "/lake/a"),
        ("/lake//a/./b/../c", "/lake/a/c"),
        ("//lake/a", "/lake/a"),
        ("file:///lake/a/", "/lake/a"),
        (
            "file:///lake/f%20pct/%C3%BC",
            "/lake/f pct/ü",
        ),  # a URI's escapes read (a folder named 'f%20pct' was made)
        ("S3://Lake/a//b/", "s3://lake/a/b"),
        ("gcs://bucket/x", "gs://bucket/x"),
        ("s3://bucket", "s3://bucket"),
    ],
)
def test_roots_have_one_spelling(given: str, canonical: str) -> None:
    assert canonical_root(given) == canonical


@pytest.mark.parametrize(
    "bad",
    ["lake", ".", "./lake", "~/lake", "../x", "/", "/..", "//", "file://host/x", "ftp://x/y", "s3:///x"],
)
def test_relative_and_dangerous_roots_are_refused_with_the_reason(bad: str) -> None:
    with pytest.raises(InvalidInputError):
        canonical_root(bad)


def test_overlap_is_a_path_prefix_on_part_boundaries_without_case() -> None:
    assert overlaps("/lake/a", "/lake/a/inner") and overlaps("/lake/a/inner", "/lake/a")
    assert overlaps("/lake/a", "/LAKE/A") and overlaps("s3://b/x", "s3://b/x")
    assert not overlaps("/lake/a", "/lake/ab") and not overlaps("/lake/a", "s3://lake/a")
    with pytest.raises(RefusedError, match="holds the root of table 'inner'"):
        check_no_overlap("outer", "/lake/a", {"inner": "/lake/a/inner"})
    with pytest.raises(RefusedError, match="lies inside the root of table 'outer'"):
        check_no_overlap("inner", "/lake/a/inner", {"outer": "/lake/a"})
    check_no_overlap("t2", "/lake/t2", {"t": "/lake/t"})


def test_home_and_state_directories_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lineage_home: Path
) -> None:
    m = LineageManager(MemoryStore())
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    (tmp_path / "me").mkdir()
    for bad in (tmp_path / "me", tmp_path, lineage_home):
        with pytest.raises(InvalidInputError):
            m.create_table(config("t", bad))
    assert m.list_tables() == []
    m.create_table(config("t", tmp_path / "me" / "lake"))  # inside a home is fine
    m.create_table(config("u", lineage_home / "deep-store" / "u"))  # so is inside the state directory


# ---- real ZooKeeper ----------------------------------------------------------------


@pytest.mark.parametrize("first", ["outer", "inner", "same"])
def test_nested_or_shared_roots_are_refused_at_create(
    zk_manager: LineageManager, tmp_path: Path, first: str
) -> None:
    roots = {"outer": tmp_path / "lake", "inner": tmp_path / "lake" / "inner", "same": tmp_path / "lake"}
    zk_manager.create_table(config(first, roots[first]))
    for name, root in roots.items():
        if name == first:
            continue
        with pytest.raises(RefusedError, match="root"):
            zk_manager.create_table(config(name, root))
        with pytest.raises(RefusedError):  # another spelling of the same place
            zk_manager.create_table(config(name, str(root).upper() + "/./"))
    assert zk_manager.list_tables() == [first]
    zk_manager.create_table(config("beside", tmp_path / "lake-2"))  # a sibling is not inside


def test_a_root_reached_through_a_link_is_the_same_root(zk_manager: LineageManager, tmp_path: Path) -> None:
    (tmp_path / "lake").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "lake")
    zk_manager.create_table(config("t", tmp_path / "lake" / "t"))
    with pytest.raises(RefusedError):
        zk_manager.create_table(config("u", tmp_path / "alias" / "t" / "u"))
    state = zk_manager.create_table(config("v", tmp_path / "alias" / "v"))
    assert state.config.root == str((tmp_path / "lake" / "v").resolve())


def test_two_creates_of_overlapping_roots_at_once_never_both_land(
    zk_manager: LineageManager, other: LineageManager, tmp_path: Path
) -> None:
    for round_ in range(6):
        outer, inner = tmp_path / f"r{round_}", tmp_path / f"r{round_}" / "in"
        results: dict[str, object] = {}

        def create(m: LineageManager, name: str, root: Path, results: dict[str, object] = results) -> None:
            try:
                m.create_table(config(name, root))
                results[name] = "created"
            except RefusedError as exc:
                results[name] = exc

        threads = [
            threading.Thread(target=create, args=(zk_manager, f"o{round_}", outer)),
            threading.Thread(target=create, args=(other, f"i{round_}", inner)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(str(v) == "created" for v in results.values()) == [False, True], results


def test_a_dropped_table_frees_its_root(zk_manager: LineageManager, tmp_path: Path) -> None:
    zk_manager.create_table(config("t", tmp_path / "lake"))
    zk_manager.drop_table("t")
    zk_manager.create_table(config("u", tmp_path / "lake" / "u"))
    assert zk_manager.store.roots() == {"u": str(tmp_path / "lake" / "u")}


def test_relative_roots_are_refused_through_the_cli(zk_hosts: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from segment_lineage.cli import app

    runner = CliRunner()
    for bad in ("lake", ".", "/"):
        result = runner.invoke(app, ["--zk", zk_hosts, "table", "create", "t", "--root", bad])
        assert result.exit_code == 2, result.output
        assert "deep-store root" in result.output
    listed = runner.invoke(app, ["--zk", zk_hosts, "--json", "table", "list"])
    assert listed.exit_code == 0 and listed.output.strip() == "[]"


def test_an_orphan_scan_never_enters_a_nested_legacy_table(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    """Two tables whose roots nest, as created before roots were checked: the
    outer table's orphan scan leaves the inner table's files alone."""
    store = zk_manager.store
    assert isinstance(store, ZkStore)
    zk_manager.create_table(config("outer", tmp_path / "lake"))
    # As if created before roots were registered and claimed: neither the
    # registry nor a marker stops the inner table; the outer is claimed after.
    store.tables.forget_root("outer")
    marker = (tmp_path / "lake" / CLAIM_FILE).read_bytes()
    (tmp_path / "lake" / CLAIM_FILE).unlink()
    zk_manager.create_table(config("inner", tmp_path / "lake" / "inner"))
    (tmp_path / "lake" / CLAIM_FILE).write_bytes(marker)
    push_arrow(zk_manager, "inner", [part("inner")])
    push_arrow(zk_manager, "outer", [part("outer")])
    inner_files = {s.location for s in zk_manager.visible_segments("inner")}
    age(tmp_path / "lake")
    for _ in range(2):
        report = run_table(zk_manager, "outer", ORPHANS_NOW)
        assert report.orphans == 0, report
    root = tmp_path / "lake" / "inner"
    assert all((root / loc).exists() for loc in inner_files)


def test_a_link_inside_the_root_is_neither_an_orphan_nor_a_way_to_delete_live_files(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    zk_manager.create_table(config("t", tmp_path / "t"))
    push_arrow(zk_manager, "t", [part("v1")])
    live = zk_manager.visible_segments("t")[0].location
    root = tmp_path / "t"
    (root / "current").symlink_to(root / live.split("/")[0])  # current -> push_...
    (root / "latest.parquet").symlink_to(root / live)
    age(root)
    for _ in range(2):
        report = run_table(zk_manager, "t", ORPHANS_NOW)
        assert report.orphans == 0 and report.files_deleted == 0, report
    assert (root / live).exists()
    # A path through the link that was queued by hand resolves to the live file: kept.
    through = "current/" + live.split("/", 1)[1]
    zk_manager.commit(
        "t",
        lambda s, now: transitions.queue_files(s, [through], now, None),
    )
    report = run_table(zk_manager, "t", PassOptions(force=True, min_grace_ms=0, orphans=False))
    assert report.files_deleted == 0 and (root / live).exists()
    assert DeepStore.for_root(str(root)).real_location(through) == live
    assert [(k.what, "through a link" in k.why) for k in report.kept_items] == [(through, True)], (
        report.kept_items
    )


def test_pruning_many_emptied_directories_keeps_the_ones_still_used_and_links(tmp_path: Path) -> None:
    root = tmp_path / "t"
    deleted = [f"push_{i:02d}/part/seg_{i}.parquet" for i in range(40)]  # 40 at each depth: the pool
    for location in deleted:
        (root / location).parent.mkdir(parents=True)
    (root / "push_07" / "part" / "kept.parquet").write_bytes(b"live")
    outside = tmp_path / "elsewhere"
    (outside / "part").mkdir(parents=True)
    (root / "push_41").symlink_to(outside)
    removed = prune_dirs(DeepStore.for_root(str(root)), [*deleted, "push_41/part/x.parquet"])
    assert removed == 2 * 40 - 2
    assert sorted(p.name for p in root.iterdir()) == ["push_07", "push_41"]
    assert (root / "push_07" / "part" / "kept.parquet").exists() and (outside / "part").is_dir()


# ---- claims: whose a root is, written where the root lives ---------------------


def claims_manager(hosts: str) -> LineageManager:
    return LineageManager(
        ZkStore(connect(ZkSettings(hosts=hosts))), retry=fast_retry(), claims=RootClaimFiles()
    )


def test_create_claims_the_root_and_another_store_cannot_take_it(
    zk_manager: LineageManager, zk_server: ZkServer, tmp_path: Path
) -> None:
    zk_manager.create_table(config("t", tmp_path / "t"))
    marker = tmp_path / "t" / CLAIM_FILE
    assert codec.decode_claim(marker.read_bytes(), str(marker)) == (zk_manager.store.store_id(), "t")
    # A second lineage store (another chroot, as an embedded server started by mistake would be).
    stray = claims_manager(f"{zk_server.hosts}/stray{uuid.uuid4().hex[:8]}")
    try:
        assert stray.store.store_id() != zk_manager.store.store_id()
        with pytest.raises(RefusedError, match="another lineage store"):
            stray.create_table(config("t", tmp_path / "t"))
        assert stray.list_tables() == []
        # Nor may it delete anything there, even with a table of its own made past the check.
        stray.store.create_table(config("t", str(tmp_path / "t")), stray.audit(), "x")
        with pytest.raises(RefusedError, match="another lineage store"):
            run_table(stray, "t", ORPHANS_NOW)
    finally:
        stray.store.close()


def test_a_root_whose_table_was_dropped_can_be_claimed_again(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    zk_manager.create_table(config("old", tmp_path / "lake"))
    zk_manager.drop_table("old")
    zk_manager.create_table(config("new", tmp_path / "lake"))
    marker = tmp_path / "lake" / CLAIM_FILE
    assert codec.decode_claim(marker.read_bytes(), str(marker))[1] == "new"


def test_retention_deletes_nothing_under_an_unclaimed_root_until_it_is_claimed(
    zk_hosts: str, zk_manager: LineageManager, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from segment_lineage.cli import app

    zk_manager.create_table(config("t", tmp_path / "t"))
    push_arrow(zk_manager, "t", [part("v1")])
    push_arrow(zk_manager, "t", [part("v2")])
    (tmp_path / "t" / CLAIM_FILE).unlink()  # as for a table created before roots were claimed
    before = sorted((tmp_path / "t").rglob("*.parquet"))
    with pytest.raises(RefusedError, match="carries no claim marker") as refused:
        run_table(zk_manager, "t", ORPHANS_NOW)
    assert "lineage table claim t" in (refused.value.remedy or "")
    runner = CliRunner()
    result = runner.invoke(app, ["--zk", zk_hosts, "retention", "run", "--force", "--min-grace", "0s"])
    assert result.exit_code == 1 and "claim" in result.output
    assert sorted((tmp_path / "t").rglob("*.parquet")) == before
    result = runner.invoke(app, ["--zk", zk_hosts, "table", "claim", "--all"])
    assert result.exit_code == 0 and "claimed" in result.output, result.output
    assert run_table(zk_manager, "t", ORPHANS_NOW).files_deleted == 1


def test_a_marker_naming_another_table_of_the_same_store_is_refused(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    zk_manager.create_table(config("a", tmp_path / "a"))
    zk_manager.create_table(config("b", tmp_path / "b"))
    (tmp_path / "b" / CLAIM_FILE).write_bytes((tmp_path / "a" / CLAIM_FILE).read_bytes())  # copied by hand
    with pytest.raises(RefusedError, match="claimed by table 'a'"):
        run_table(zk_manager, "b", ORPHANS_NOW)
    zk_manager.claim_root("b")  # a's claim on b's root is stale (a lives elsewhere): repaired
    assert run_table(zk_manager, "b", ORPHANS_NOW).errors == []
    zk_manager.create_table(config("c", tmp_path / "c"))
    (tmp_path / "c" / CLAIM_FILE).write_bytes((tmp_path / "a" / CLAIM_FILE).read_bytes())
    (tmp_path / "a" / CLAIM_FILE).unlink()
    zk_manager.drop_table("a")  # no table claims c's root but c now
    zk_manager.claim_root("c")


# ---- found by an outside review of the above ---------------------------------------


def test_a_root_above_or_below_another_stores_claimed_root_is_refused(
    zk_manager: LineageManager, zk_server: ZkServer, tmp_path: Path
) -> None:
    """Each store's registry knows only its own tables: the markers in deep
    storage speak for the others."""
    zk_manager.create_table(config("a", tmp_path / "lake" / "a"))
    other = claims_manager(f"{zk_server.hosts}/other{uuid.uuid4().hex[:8]}")
    try:
        with pytest.raises(RefusedError, match="lies inside"):
            other.create_table(config("b", tmp_path / "lake" / "a" / "b"))
        with pytest.raises(RefusedError, match="holds"):
            other.create_table(config("c", tmp_path / "lake"))
        assert other.list_tables() == []
        assert not (tmp_path / "lake" / CLAIM_FILE).exists()
    finally:
        other.store.close()


def test_a_root_whose_parent_moved_behind_a_link_is_still_seen_inside(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    zk_manager.create_table(config("a", tmp_path / "p" / "a"))
    push_arrow(zk_manager, "a", [part("a")])
    (tmp_path / "p").rename(tmp_path / "q")
    (tmp_path / "p").symlink_to(tmp_path / "q")  # the storage moved; its old path is a link now
    with pytest.raises(RefusedError):
        zk_manager.create_table(config("b", tmp_path / "p" / "a" / "b"))
    # Made past the checks (as two old versions could): a's scans never enter b's claimed root.
    inner = tmp_path / "q" / "a" / "b"
    store = zk_manager.store
    b = config("b", inner)
    store.create_table(b, zk_manager.audit(), "x")
    RootClaimFiles().write_claim(str(inner), codec.encode_claim(store.store_id(), "b"))
    push_arrow(zk_manager, "b", [part("b")])
    live = [inner / s.location for s in zk_manager.visible_segments("b")]
    age(tmp_path / "q")
    for _ in range(2):
        assert run_table(zk_manager, "a", ORPHANS_NOW).files_deleted == 0
    assert all(p.exists() for p in live)


def test_a_segment_registered_through_a_link_keeps_its_file(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    zk_manager.create_table(config("t", tmp_path / "t"))
    root = tmp_path / "t"
    store = DeepStore.for_root(str(root))
    written = write_segment(store, part("x"), "v1/x.parquet", None)
    (root / "current").symlink_to(root / "v1")
    zk_manager.register_segments("t", [Segment("x", "current/x.parquet", written.rows, written.size_bytes)])
    age(root)
    for _ in range(3):
        run_table(zk_manager, "t", ORPHANS_NOW)
    assert (root / "v1" / "x.parquet").exists()
    assert SnapshotReader(zk_manager, "t").to_arrow().num_rows == 3


@pytest.mark.parametrize("sealed", ["zookeeper", "zookeeper/data", "/etc/lake", "/usr", "/var", "/tmp"])
def test_the_embedded_zookeepers_data_and_the_systems_folders_are_never_roots(
    lineage_home: Path, sealed: str
) -> None:
    m = LineageManager(MemoryStore())
    root = sealed if sealed.startswith("/") else str(lineage_home / sealed)
    with pytest.raises(InvalidInputError):
        m.create_table(config("t", root))


def test_two_stores_claiming_one_root_at_once_never_both_keep_it(
    zk_manager: LineageManager, zk_server: ZkServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second store's create runs between the first's check and its
    write: the marker is created only if absent, so the first finds it."""
    other = claims_manager(f"{zk_server.hosts}/other{uuid.uuid4().hex[:8]}")
    root = tmp_path / "shared"
    real_exclusive_write = RootClaimFiles.write_claim
    raced: list[bool] = []

    def write_claim(self: RootClaimFiles, where: str, data: bytes, *, exclusive: bool = False) -> bool:
        if not raced:
            raced.append(True)
            other.create_table(config("b", root))  # lands first
        return real_exclusive_write(self, where, data, exclusive=exclusive)

    try:
        monkeypatch.setattr(RootClaimFiles, "write_claim", write_claim)
        with pytest.raises(RefusedError, match="another lineage store"):
            zk_manager.create_table(config("a", root))
        monkeypatch.undo()
        assert zk_manager.list_tables() == [] and other.list_tables() == ["b"]
        marker = root / CLAIM_FILE
        assert codec.decode_claim(marker.read_bytes(), str(marker)) == (other.store.store_id(), "b")
    finally:
        other.store.close()


def test_a_claim_by_a_table_that_moved_elsewhere_no_longer_holds(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    zk_manager.create_table(config("b", tmp_path / "old"))
    zk_manager.drop_table("b")
    zk_manager.create_table(config("b", tmp_path / "new"))  # b lives elsewhere now
    zk_manager.create_table(config("c", tmp_path / "old"))  # b's stale claim does not hold


def test_a_create_refused_by_the_store_leaves_no_claim_behind(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    from segment_lineage.lineage.core.errors import TableExistsError

    zk_manager.create_table(config("t", tmp_path / "one"))
    with pytest.raises(TableExistsError):
        zk_manager.create_table(config("T", tmp_path / "two"))  # a case twin of an existing name
    assert not (tmp_path / "two" / CLAIM_FILE).exists()
    zk_manager.create_table(config("u", tmp_path / "two"))  # the root is free


def test_a_root_inside_a_bucket_claimed_at_its_top_is_refused(
    zk_manager: LineageManager, zk_server: ZkServer, s3: str
) -> None:
    zk_manager.create_table(config("whole", "s3://lake"))
    other = claims_manager(f"{zk_server.hosts}/other{uuid.uuid4().hex[:8]}")
    try:
        with pytest.raises(RefusedError, match="lies inside"):
            other.create_table(config("part", "s3://lake/push1"))
        assert other.list_tables() == []
    finally:
        other.store.close()


def test_a_twin_create_of_the_same_table_keeps_the_marker(
    zk_manager: LineageManager, other: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two jobs of one store create the same table at once: the one that
    loses with TableExistsError must not take away the marker the winner
    trusted."""
    root = tmp_path / "t"
    store = zk_manager.store
    assert isinstance(store, ZkStore)
    real_create = store.create_table
    raced: list[bool] = []

    def create(*args: Any, **kwargs: Any) -> Any:
        if not raced:
            raced.append(True)
            other.create_table(config("t", root))  # the twin finds this job's marker and lands first
        return real_create(*args, **kwargs)

    monkeypatch.setattr(store, "create_table", create)
    from segment_lineage.lineage.core.errors import TableExistsError

    with pytest.raises(TableExistsError):
        zk_manager.create_table(config("t", root))
    monkeypatch.undo()
    marker = root / CLAIM_FILE
    assert codec.decode_claim(marker.read_bytes(), str(marker)) == (zk_manager.store.store_id(), "t")


def test_claiming_a_legacy_table_with_a_dangerous_root_is_refused(
    zk_manager: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    store = zk_manager.store
    store.create_table(config("legacy", str(home)), zk_manager.audit(), "x")  # as an old version allowed
    with pytest.raises(InvalidInputError, match="home"):
        zk_manager.claim_root("legacy")
    assert not (home / CLAIM_FILE).exists()
    with pytest.raises(InvalidInputError, match="home"):
        run_table(zk_manager, "legacy", ORPHANS_NOW)  # never scanned, marker or not
    (home / CLAIM_FILE).write_bytes(codec.encode_claim(zk_manager.store.store_id(), "legacy"))
    with pytest.raises(InvalidInputError, match="home"):
        run_table(zk_manager, "legacy", ORPHANS_NOW)


def test_a_drop_takes_its_claim_away(zk_manager: LineageManager, zk_server: ZkServer, tmp_path: Path) -> None:
    zk_manager.create_table(config("t", tmp_path / "t"))
    zk_manager.drop_table("t")
    assert not (tmp_path / "t" / CLAIM_FILE).exists()
    other = claims_manager(f"{zk_server.hosts}/other{uuid.uuid4().hex[:8]}")  # the right store, after all
    try:
        other.create_table(config("t", tmp_path / "t"))
    finally:
        other.store.close()
