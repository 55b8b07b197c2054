"""Bucket maps: a table's segments and pending deletions load a bucket at a
time, when a key of it is first wanted. They must behave exactly as the dict
they stand for, and comparing two versions must look only at the buckets
whose ids differ (what keeps a cold rollback flat in the table's size)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segment_lineage import LineageManager, Segment, TableConfig
from segment_lineage.lineage.core.bucket_maps import BucketMap, bucket_of, changed_keys, editable
from segment_lineage.lineage.core.errors import CorruptRecordError, LineageError, VersionGoneError
from segment_lineage.lineage.core.model import TableState
from segment_lineage.lineage.core.visibility import visibility_delta, visible_names
from segment_lineage.lineage.store.contract import ReadAgainError
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.store import ZkStore
from segment_lineage.lineage.zk.store.blobs import BlobGone, BlobStore


def laid_out(
    records: Mapping[str, int], count: int, loads: list[Sequence[int]] | None = None
) -> BucketMap[int]:
    """``records`` as a bucket map of ``count`` buckets, ids naming each bucket's content."""
    buckets: list[list[tuple[str, int]]] = [[] for _ in range(count)]
    for key, value in records.items():
        buckets[bucket_of(key, count)].append((key, value))
    ids = [repr(sorted(b)) for b in buckets]

    def load(indexes: Sequence[int]) -> dict[int, Sequence[tuple[str, int]]]:
        if loads is not None:
            loads.append(list(indexes))
        return {i: buckets[i] for i in indexes}

    return BucketMap(ids, load)


keys = st.text(min_size=1, max_size=6)
maps = st.dictionaries(keys, st.integers(0, 3), max_size=40)


@settings(max_examples=200, deadline=None)
@given(maps, st.sampled_from([1, 2, 4, 8]), st.lists(keys, max_size=10))
def test_a_bucket_map_is_the_dict_it_stands_for(
    records: dict[str, int], count: int, probes: list[str]
) -> None:
    lazy = laid_out(records, count)
    for key in probes:
        assert (key in lazy) == (key in records)
        assert lazy.get(key) == records.get(key)
        assert lazy.get(key, -1) == records.get(key, -1)
        if key in records:
            assert lazy[key] == records[key]
        else:
            with pytest.raises(KeyError):
                lazy[key]
    assert len(lazy) == len(records)
    assert dict(lazy) == records and lazy == records
    assert sorted(lazy) == sorted(records)
    assert 7 not in lazy  # type: ignore[comparison-overlap]  # not a key at all


@settings(max_examples=200, deadline=None)
@given(maps, maps, st.sampled_from([1, 2, 4, 8]))
def test_changed_keys_are_the_keys_in_one_map_only(a: dict[str, int], b: dict[str, int], count: int) -> None:
    want = set(a) ^ set(b)
    assert changed_keys(laid_out(a, count), laid_out(b, count)) == want
    assert changed_keys(laid_out(a, count), b) == want  # a plain dict on one side
    assert changed_keys(laid_out(a, count), laid_out(b, count * 2)) == want  # another layout


def test_a_lookup_loads_one_bucket_and_a_diff_only_the_buckets_that_differ() -> None:
    base = {f"s{i}": i for i in range(1000)}
    changed = dict(base, new_one=1)
    del changed["s7"]
    loads_a: list[Sequence[int]] = []
    loads_b: list[Sequence[int]] = []
    a, b = laid_out(base, 64, loads_a), laid_out(changed, 64, loads_b)
    assert a["s5"] == 5 and a.get("s5") == 5 and "s5" in a
    assert loads_a == [[bucket_of("s5", 64)]]  # one bucket, loaded once
    assert changed_keys(a, b) == {"new_one", "s7"}
    differ = sorted({bucket_of("new_one", 64), bucket_of("s7", 64)})
    assert sorted(i for call in loads_b for i in call) == differ
    assert sorted(i for call in loads_a[1:] for i in call) == [i for i in differ if i != bucket_of("s5", 64)]
    list(b)
    assert len(loads_b) == 2  # the rest of the buckets, in one call


def test_bucket_counts_must_be_powers_of_two() -> None:
    with pytest.raises(ValueError, match="power of two"):
        BucketMap(["a", "b", "c"], lambda _: {})
    with pytest.raises(ValueError, match="power of two"):
        BucketMap([], lambda _: {})


def _store(hosts: str) -> ZkStore:
    return ZkStore(connect(ZkSettings(hosts=hosts)))


def _blob_fetches(store: ZkStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    fetched: list[str] = []
    real = BlobStore._send

    def counting(self: BlobStore, table: str, blobs: object) -> dict[str, object]:
        wanted = list(blobs)  # type: ignore[call-overload]
        fetched.extend(wanted)
        return real(self, table, wanted)

    monkeypatch.setattr(BlobStore, "_send", counting)
    return fetched


def test_a_cold_rollback_on_a_big_table_fetches_only_what_changed(
    zk_hosts: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh client rolls back a push on a table of 20,000 segments in
    hundreds of buckets: it fetches the buckets the push changed (segments,
    entries) and none of the others, and the result is right."""
    setup = LineageManager(_store(zk_hosts))
    setup.create_table(TableConfig.build("big", str(tmp_path / "big")))
    for start in range(0, 20_000, 5_000):
        setup.register_segments(
            "big", [Segment(f"s{i:06d}", f"s{i:06d}.parquet", rows=1) for i in range(start, start + 5_000)]
        )
    before = setup.table("big").version
    entry = setup.start_replace("big", ["s000001"], ["n1"])
    setup.register_segments("big", [Segment("n1", "n1.parquet", rows=2)], entry_id=entry)
    setup.end_replace("big", entry)
    ids = setup.store.read("big").token.head.buckets["segments"]  # type: ignore[attr-defined]
    assert len(ids) >= 64
    setup.store.close()

    fresh = _store(zk_hosts)
    fetched = _blob_fetches(fresh, monkeypatch)
    plan = LineageManager(fresh).rollback("big", before)
    assert plan.appear == ("s000001",) and plan.disappear == ("n1",)
    segment_blobs = [b for b in fetched if b in ids]
    assert 1 <= len(segment_blobs) <= 4, f"{len(segment_blobs)} of {len(ids)} segment buckets fetched"
    assert visible_names(LineageManager(fresh).table("big")) == {f"s{i:06d}" for i in range(20_000)}
    fresh.close()


def test_a_state_handed_to_a_caller_needs_no_store_and_a_lazy_one_used_late_fails_cleanly(
    zk_hosts: str, tmp_path: Path
) -> None:
    m = LineageManager(_store(zk_hosts))
    m.create_table(TableConfig.build("handed", str(tmp_path / "handed")))
    m.register_segments("handed", [Segment(f"s{i}", f"s{i}.parquet", rows=1) for i in range(50)])
    m.store.close()
    reader, other = LineageManager(_store(zk_hosts)), _store(zk_hosts)
    given_state = reader.table("handed")
    lazy = other.read("handed").state
    reader.store.close()
    other.close()
    assert isinstance(lazy.segments, BucketMap)
    assert len(given_state.segments) == 50  # loaded before it was handed out
    with pytest.raises(LineageError) as caught:
        dict(lazy.segments)  # a store's own read, used after it closed
    assert not isinstance(caught.value, ReadAgainError)  # not a lost race: nothing to retry


def test_visibility_delta_over_bucket_maps_matches_full_sets() -> None:
    base = {f"s{i}": i for i in range(300)}
    other = {**{k: v for k, v in base.items() if k != "s3"}, "t1": 1}
    config = TableConfig.build("v", "/data/v")
    a = TableState(config, 1, laid_out(base, 16))  # type: ignore[arg-type]
    b = TableState(config, 2, laid_out(other, 16))  # type: ignore[arg-type]
    shown, hidden = visibility_delta(a, b)
    assert shown == visible_names(b) - visible_names(a) == {"t1"}
    assert hidden == visible_names(a) - visible_names(b) == {"s3"}


def test_a_commit_whose_bucket_was_collected_before_it_loaded_reads_again(
    zk_hosts: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The segments of the version a commit read load when its transition
    wants them. If another commit moved the head on and the old bucket was
    collected meanwhile, the commit reads the table again (as after a lost
    race) instead of failing."""
    m = LineageManager(_store(zk_hosts))
    m.create_table(TableConfig.build("late", str(tmp_path / "late")))
    m.register_segments("late", [Segment("a", "a.parquet", rows=1)])
    m.store.close()
    other = LineageManager(_store(zk_hosts))
    fresh = _store(zk_hosts)
    real = BlobStore._send
    moved: list[str] = []
    segment_ids = other.store.read("late").token.head.buckets["segments"]  # type: ignore[attr-defined]

    def collected_once(self: BlobStore, table: str, blobs: object) -> dict[str, object]:
        wanted = list(blobs)  # type: ignore[call-overload]
        if self is fresh.blobs and not moved and set(wanted) & set(segment_ids):
            moved.append("b")
            other.register_segments("late", [Segment("b", "b.parquet")])
            raise BlobGone(wanted[0])  # as if the sweep took it once the head moved on
        return real(self, table, wanted)

    monkeypatch.setattr(BlobStore, "_send", collected_once)
    done = LineageManager(fresh).register_segments("late", [Segment("c", "c.parquet")])
    assert moved and done.applied
    assert set(LineageManager(fresh).table("late").segments) == {"a", "b", "c"}
    fresh.close()
    other.store.close()


def _two_versions(zk_hosts: str, tmp_path: Path, table: str) -> tuple[int, set[str]]:
    """A table whose version ``old`` has segments and entries buckets the
    head no longer names; returns ``old`` and its segments buckets gone."""
    m = LineageManager(_store(zk_hosts))
    m.create_table(TableConfig.build(table, str(tmp_path / table)))
    m.register_segments(table, [Segment("a", "a.parquet", rows=1)])
    old = m.table(table).version
    old_ids = set(m.store.read(table).token.head.buckets["segments"])  # type: ignore[attr-defined]
    m.register_segments(table, [Segment("b", "b.parquet", rows=1)])
    m.start_replace(table, ["a"], ["c"])
    gone = old_ids - set(m.store.read(table).token.head.buckets["segments"])  # type: ignore[attr-defined]
    m.store.close()
    assert gone
    return old, gone


def test_a_rollback_whose_retained_target_lost_a_bucket_fails_at_once_naming_it(
    zk_hosts: str, tmp_path: Path
) -> None:
    """The target of a rollback is held by the change, not read again per
    attempt: a bucket of it gone while its version is still retained (here
    deleted by hand; the sweep keeps what a retained version names) is a
    loss, reported at once as such, with nothing written and no 'read the
    table again', which could not help."""
    target, gone = _two_versions(zk_hosts, tmp_path, "lost")
    fresh = _store(zk_hosts)
    for blob in gone:
        fresh.client.delete(f"{fresh.paths.head('lost')}/blobs/{blob}")
    writes: list[object] = []
    real = fresh.write
    fresh.write = lambda *a, **k: writes.append(a) or real(*a, **k)  # type: ignore[method-assign]
    for dry_run in (True, False):
        with pytest.raises(CorruptRecordError, match="though the version is retained") as caught:
            LineageManager(fresh).rollback("lost", target, dry_run=dry_run)
        assert f"version {target} of table 'lost'" in str(caught.value) and "read the table again" not in str(
            caught.value
        )
    assert writes == []
    fresh.close()


@pytest.fixture(params=["segments", "entries"])
def pruned_and_swept(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every past version read from now on is pruned and its old buckets of
    one kind swept right after its record was read, before they load (as a
    reader slower than the versions kept and the metadata grace meets it):
    its segments, which load when first wanted, or its entries, loaded with
    the version. What was deleted, by path."""
    from segment_lineage.lineage.zk.store.versions import Versions

    kind = request.param
    deleted: list[str] = []
    real = Versions.rebuild

    def racing(self: Versions, table: str, head: object, record: object, **kw: object) -> object:
        version = record.version  # type: ignore[attr-defined]
        if version != head.version:  # type: ignore[attr-defined]
            kept = set(head.buckets[kind])  # type: ignore[attr-defined]
            paths = [self.paths.version(table, version)]
            paths += [self.paths.blob(table, b) for b in record.buckets[kind] if b not in kept]  # type: ignore[attr-defined]
            assert len(paths) > 1, "the version shares its buckets with the head"
            for path in paths:
                if self.zk.client.exists(path) is not None:
                    self.zk.client.delete(path)
                    deleted.append(path)
        return real(self, table, head, record, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Versions, "rebuild", racing)
    return deleted


def test_a_past_version_pruned_and_swept_before_it_loaded_is_no_longer_readable(
    zk_hosts: str, tmp_path: Path, pruned_and_swept: list[str]
) -> None:
    """A past version asked for by number whose record was pruned and whose
    buckets were swept after it was read, before they loaded: reading the
    table again cannot bring it back, so every way of reading it says it is
    no longer retained (VersionGoneError: exit 3 on the command line), not
    'read the table again' nor a retained version's loss, naming the oldest
    version kept, with nothing written."""
    from typer.testing import CliRunner

    from segment_lineage.cli import app

    ways: list[tuple[str, Callable[[LineageManager, int], object]]] = [
        ("table_as_of", lambda m, v: m.table_as_of("t", v)),
        ("pin_readable", lambda m, v: m.pin_readable("t", v)),
        ("rollback dry run", lambda m, v: m.rollback("t", v, dry_run=True)),
        ("rollback", lambda m, v: m.rollback("t", v)),
    ]
    for i, (what, way) in enumerate(ways):
        chroot = f"{zk_hosts}-{i}"
        old, _ = _two_versions(chroot, tmp_path / str(i), "t")
        m = LineageManager(_store(chroot))
        newest = m.table("t").version
        pruned_and_swept.clear()
        with pytest.raises(VersionGoneError) as caught:
            way(m, old)
        assert pruned_and_swept, (what, "the race did not run")
        said = str(caught.value)
        assert f"snapshot too old: version {old} of table 't' is no longer retained" in said, (what, said)
        assert "(the oldest readable version is " in said, (what, said)
        assert m.table("t").version == newest, what  # nothing written
        m.store.close()
    for i, words in enumerate((["read", "t", "--as-of"], ["segments", "t", "--as-of"]), start=len(ways)):
        chroot = f"{zk_hosts}-{i}"
        old, _ = _two_versions(chroot, tmp_path / str(i), "t")
        pruned_and_swept.clear()
        result = CliRunner().invoke(app, ["--zk", chroot, *words, str(old)])
        assert pruned_and_swept, (words, "the race did not run")
        assert result.exit_code == 3, (words, result.stderr)
        assert f"error: snapshot too old: version {old} of table 't' is no longer retained" in result.stderr
        assert "read the table again" not in result.stderr


def test_what_a_commit_returns_needs_no_store_afterwards(zk_hosts: str, tmp_path: Path) -> None:
    """A revert leaves the segments alone, so its state would keep the
    store's lazy map: it comes loaded, usable after the store closed."""
    m = LineageManager(_store(zk_hosts))
    m.create_table(TableConfig.build("done", str(tmp_path / "done")))
    m.register_segments(
        "done", [Segment(f"s{i:05d}_" + "x" * 40, f"s{i}.parquet", rows=1) for i in range(3000)]
    )
    entry = m.start_replace("done", ["s00001_" + "x" * 40], ["new1"])
    m.store.close()
    fresh = LineageManager(_store(zk_hosts))
    reverted = fresh.revert_replace("done", entry, force=True)
    fresh.store.close()
    assert reverted.applied and len(reverted.state.segments) == 3000


def test_a_store_failing_while_a_result_loads_fails_a_commit_that_wrote_nothing(
    zk_hosts: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What commit() returns is loaded before the write: when ZooKeeper stops
    answering while the segments load, the revert reports the store
    unavailable and nothing was written (loading after the write reported a
    revert that had landed as failed)."""
    from segment_lineage.lineage.core.errors import StoreUnavailableError

    m = LineageManager(_store(zk_hosts))
    m.create_table(TableConfig.build("fails", str(tmp_path / "fails")))
    m.register_segments(
        "fails", [Segment(f"s{i:05d}_" + "x" * 40, f"s{i}.parquet", rows=1) for i in range(3000)]
    )
    entry = m.start_replace("fails", ["s00001_" + "x" * 40], ["new1"])
    segment_ids = set(m.store.read("fails").token.head.buckets["segments"])  # type: ignore[attr-defined]
    m.store.close()
    fresh = _store(zk_hosts)
    real = BlobStore._send

    def no_segments(self: BlobStore, table: str, blobs: object) -> dict[str, object]:
        wanted = list(blobs)  # type: ignore[call-overload]
        if self is fresh.blobs and set(wanted) & segment_ids:
            raise StoreUnavailableError("simulated: ZooKeeper stopped answering")
        return real(self, table, wanted)

    monkeypatch.setattr(BlobStore, "_send", no_segments)
    with pytest.raises(StoreUnavailableError):
        LineageManager(fresh).revert_replace("fails", entry, force=True)
    monkeypatch.setattr(BlobStore, "_send", real)
    assert LineageManager(fresh).table("fails").entries[entry].state.value == "IN_PROGRESS"  # nothing written
    fresh.close()


def test_an_editable_copy_changes_nothing_of_the_map_it_was_taken_from() -> None:
    records = {f"k{i}": i for i in range(50)}
    for warm in (False, True):
        original = laid_out(records, 4)
        if warm:
            original.flat()  # the whole-map dict built already: the copy must not be it
        edited = editable(original)
        edited["k0"] = -1
        del edited["k1"]
        edited["new"] = 7
        assert dict(original) == records and original["k0"] == 0 and "new" not in original
        assert edited == {**{k: v for k, v in records.items() if k != "k1"}, "k0": -1, "new": 7}
    assert editable({"a": 1}) == {"a": 1}


def test_only_a_part_of_the_version_asked_for_is_told_gone() -> None:
    """The distinction itself: a part gone of the past version asked for is
    that version no longer kept (reading again cannot help); a part gone of
    another version (the head as read, moved on since) is still 'read the
    table again' (reading again helps, and commits do it themselves)."""
    from segment_lineage.lineage.store.memory import MemoryStore

    m = LineageManager(MemoryStore())
    m.create_table(TableConfig.build("t", "/d/t"))
    config = m.table("t").config

    def lost(blob: str) -> BucketMap[Segment]:
        def load(_indexes: Sequence[int]) -> dict[int, Sequence[tuple[str, Segment]]]:
            raise ReadAgainError("... collected since (the table moved on); read the table again", blob=blob)

        return BucketMap([blob], load)

    asked = TableState(config, 7, lost("of-the-past"))  # type: ignore[arg-type]
    head = TableState(config, 9, lost("of-the-head"))  # type: ignore[arg-type]
    with pytest.raises(ReadAgainError, match="read the table again"), m._past(asked):
        dict(head.segments)
    with (
        pytest.raises(VersionGoneError, match="version 7 of table 't' is no longer retained"),
        m._past(asked),
    ):
        dict(asked.segments)
