"""The visible set as file URIs: the locations of exactly the segments
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
    assert manager.visible_files(T) == [Path(root.path(s.location)).as_uri() for s in shown]


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


def test_uris_join_the_root_for_every_scheme() -> None:
    locations = ["a/x.parquet", "y.parquet"]
    assert DeepStore.for_root("s3://bucket/tables/t/").uris(locations) == [
        "s3://bucket/tables/t/a/x.parquet",
        "s3://bucket/tables/t/y.parquet",
    ]
    assert DeepStore.for_root("gs://b").uris(locations)[1] == "gs://b/y.parquet"
    assert DeepStore.for_root("/").uris(locations)[0] == "file:///a/x.parquet"
