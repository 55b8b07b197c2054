"""The cycle collector runs less often while a step builds many objects,
and its thresholds come back when the last such step ends."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import segment_lineage.retention.executor as executor
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.manager.collector import GEN0, fewer_collections
from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
from segment_lineage.lineage.store.memory import MemoryStore
from segment_lineage.retention.executor import PassOptions, run_table


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[tuple[int, int, int]]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*saved)


def test_inside_the_youngest_generation_waits_longer_and_comes_back(thresholds: tuple[int, int, int]) -> None:
    with fewer_collections():
        assert gc.get_threshold() == (GEN0, 10, 10)
    assert gc.get_threshold() == thresholds


def test_steps_on_two_threads_share_it_and_the_last_one_out_restores(
    thresholds: tuple[int, int, int],
) -> None:
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with fewer_collections():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    assert inside.wait(10)
    with fewer_collections():
        pass
    assert gc.get_threshold()[0] == GEN0  # the other step is still inside
    leave.set()
    thread.join(10)
    assert gc.get_threshold() == thresholds


def test_a_collector_turned_off_stays_off() -> None:
    gc.set_threshold(0)
    with fewer_collections():
        assert gc.get_threshold()[0] == 0
    assert gc.get_threshold()[0] == 0


def test_a_retention_pass_runs_with_it_and_gives_it_back(
    thresholds: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clock = {"now": 10**12}
    m = LineageManager(MemoryStore(clock=lambda: clock["now"]), claims=RootClaimFiles())
    m.create_table(TableConfig.build("t", str(tmp_path / "t"), replaced_segments_retention="0s"))
    (tmp_path / "t" / "a.parquet").write_bytes(b"a")
    m.register_segments("t", [Segment("a", "a.parquet", rows=1)])
    entry = m.start_replace("t", ["a"], ["b"])
    m.register_segments("t", [Segment("b", "b.parquet", rows=1)])
    m.end_replace("t", entry)
    clock["now"] += 1_000
    seen: dict[str, int] = {}
    real = executor.failpoint

    def look(name: str) -> None:
        seen[name] = gc.get_threshold()[0]
        real(name)

    monkeypatch.setattr(executor, "failpoint", look)
    report = run_table(m, "t", PassOptions(min_grace_ms=0, force=True))
    assert report.condemned == 1 and report.files_deleted == 1, report.line()
    assert seen == {"retention.after-mark": GEN0, "retention.before-clear": GEN0}
    assert gc.get_threshold() == thresholds


def test_a_whole_table_is_read_with_it(
    thresholds: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    m = LineageManager(MemoryStore())
    m.create_table(TableConfig.build("t", "/d/t"))
    m.register_segments("t", [Segment("a", "a.parquet", rows=1)])
    version = m.table("t").version
    seen: list[int] = []
    real = m.store.read

    def read(*args: object, **kwargs: object) -> object:
        seen.append(gc.get_threshold()[0])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(m.store, "read", read)
    assert [s.name for s in m.visible_segments("t")] == ["a"]
    assert m.table_as_of("t", version).version == version
    assert seen and set(seen) == {GEN0}
    assert gc.get_threshold() == thresholds


def test_thresholds_someone_set_meanwhile_are_theirs_to_keep() -> None:
    with fewer_collections():
        gc.set_threshold(0)  # a caller (or another thread) turns the collector off meanwhile
    assert gc.get_threshold()[0] == 0
