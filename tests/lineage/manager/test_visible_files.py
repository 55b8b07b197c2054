"""The visible set as files engines open: the locations of exactly the segments
``visible_segments`` shows, in its order, read from the stored names and
locations alone (a fresh ZooKeeper client builds no segment for it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from segment_lineage.lineage.codec import segments as segment_codec
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.core.visibility import visible_locations, visible_segments
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.store import ZkStore

T = "events"


def seg(name: str, folder: str = "old") -> Segment:
    return Segment(name, f"{folder}/{name}.parquet", rows=1)


def some_of_each(m: LineageManager, root: str) -> None:
    """Segments shown, hidden by a completed push (its from), by a running
    one (its to) and by a reverted one (its to), across several buckets."""
    m.create_table(TableConfig.build(T, root))
    m.register_segments(T, [seg(f"s{i:04d}") for i in range(600)])
    done = m.start_replace(T, [f"s{i:04d}" for i in range(100)], ["new0"])
    m.register_segments(T, [seg("new0", "new")], entry_id=done)
    m.end_replace(T, done)
    running = m.start_replace(T, [f"s{i:04d}" for i in range(100, 110)], ["run0"])
    m.register_segments(T, [seg("run0", "run")], entry_id=running)
    undone = m.start_replace(T, [f"s{i:04d}" for i in range(200, 205)], ["rev0"])
    m.register_segments(T, [seg("rev0", "rev")], entry_id=undone)
    m.revert_replace(T, undone, force=True)


def test_the_files_are_the_visible_segments_locations_in_their_order(
    manager: LineageManager, tmp_path: Path
) -> None:
    some_of_each(manager, str(tmp_path / "root"))
    state = manager.table(T)
    shown = visible_segments(state)
    assert "new0" in {s.name for s in shown} and "s0000" not in {s.name for s in shown}
    assert "run0" not in {s.name for s in shown} and "rev0" not in {s.name for s in shown}
    assert visible_locations(state) == [s.location for s in shown]
    root = DeepStore.for_root(str(tmp_path / "root"))
    assert manager.visible_files(T) == [root.path(s.location) for s in shown]


def test_a_fresh_client_lists_the_files_without_building_a_segment(
    zk_manager: LineageManager, zk_hosts: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    some_of_each(zk_manager, str(tmp_path / "root"))
    expected = zk_manager.visible_files(T)
    own = zk_manager.table(T)

    def refused(*_: object) -> list[Segment]:
        raise AssertionError("a segment was built")

    fresh = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        monkeypatch.setattr(segment_codec, "_built", refused)
        assert LineageManager(fresh).visible_files(T) == expected
        with pytest.raises(AssertionError, match="a segment was built"):  # what the files did not need
            LineageManager(fresh).visible_segments(T)
        monkeypatch.undo()
        assert fresh.read(T).state == own  # built when wanted: the same version
    finally:
        fresh.close()


def test_every_scheme_names_its_files_as_engines_open_them() -> None:
    locations = ["a/x.parquet", "y.parquet"]
    assert DeepStore.for_root("s3://bucket/tables/t/").locators(locations) == [
        "s3://bucket/tables/t/a/x.parquet",
        "s3://bucket/tables/t/y.parquet",
    ]
    assert DeepStore.for_root("gs://b").locators(locations)[1] == "gs://b/y.parquet"
    hdfs = DeepStore.for_root("hdfs://namenode:8020/data/t")
    assert hdfs.locators(locations)[0] == "hdfs://namenode:8020/data/t/a/x.parquet"
    assert hdfs.uri("a/x.parquet") == "hdfs://namenode:8020/data/t/a/x.parquet"  # its namenode named
    assert DeepStore.for_root("/").locators(locations)[0] == "/a/x.parquet"


@pytest.mark.parametrize("folder", ["with space/ü ñ", "p%20c#h?q", "plain"])
def test_every_engine_opens_the_files_whatever_the_roots_characters(
    manager: LineageManager, tmp_path: Path, folder: str
) -> None:
    """A root with spaces, non-ASCII letters, a percent sign, ``#`` or ``?``:
    pyarrow, DuckDB and Polars each open every file listed (an outside
    trial found file URIs that pyarrow refused or read elsewhere)."""
    import duckdb
    import polars as pl
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / folder
    manager.create_table(TableConfig.build(T, str(root)))
    for name in ("p0", "p1"):
        (root / "d").mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"v": [1, 2]}), root / "d" / f"{name}_x.parquet")
    manager.register_segments(T, [Segment(n, f"d/{n}_x.parquet", rows=2) for n in ("p0", "p1")])
    files = manager.visible_files(T)
    assert files == [str(root / "d" / f"{n}_x.parquet") for n in ("p0", "p1")]
    assert pq.read_table(files).num_rows == 4
    assert duckdb.sql("select count(*) from read_parquet($files)", params={"files": files}).fetchone() == (4,)
    assert pl.read_parquet(files).height == 4
