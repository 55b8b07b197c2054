"""Behaviour specific to the ZooKeeper store, on a real server."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from segment_lineage.lineage import codec
from segment_lineage.lineage.core import buckets
from segment_lineage.lineage.core.errors import (
    AuthError,
    CorruptRecordError,
    StoreUnavailableError,
    TableNotFoundError,
    TooLargeError,
)
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.store.memory import MemoryStore
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.store import ROOT, ZkStore
from segment_lineage.lineage.zk.store import blobs as zk_blobs
from segment_lineage.lineage.zk.store import commit as zk_commit
from segment_lineage.lineage.zk.store.blobs import BlobStore
from segment_lineage.lineage.zk.store.gc import MetadataGc
from tests.conftest import fast_retry
from tests.helpers.zk import walk

T = "events"


def seg(name: str) -> Segment:
    return Segment(name, f"{name}.parquet", rows=1)


@pytest.fixture
def m(zk_store: ZkStore) -> LineageManager:
    manager = LineageManager(zk_store, actor="t@h", retry=fast_retry())
    manager.create_table(TableConfig.build(T, "/d"))
    manager.register_segments(T, [seg("s1"), seg("s2")])
    return manager


def largest_znode(client: KazooClient) -> tuple[int, int]:
    sizes = [len(client.get(p)[0]) for p in walk(client)]
    return len(sizes), max(sizes)


@pytest.mark.slow
@pytest.mark.e2e
def test_100k_segments_and_a_100k_replace_stay_under_512kb(zk_store: ZkStore, zk_hosts: str) -> None:
    m = LineageManager(zk_store, retry=fast_retry())
    m.create_table(TableConfig.build("big", "/d"))
    n = 100_000
    old = [f"big_segment_2026_11_22_{i:06d}" for i in range(n)]
    m.register_segments("big", [Segment(s, s + ".parquet", rows=1000, checksum="0" * 16) for s in old])
    new = [f"big_segment_2026_11_23_{i:06d}" for i in range(n)]
    entry = m.start_replace("big", old, new)
    m.register_segments("big", [Segment(s, s + ".parquet", rows=1000) for s in new])
    m.end_replace("big", entry)
    visible = m.visible_segments("big")
    assert len(visible) == n and visible[0].name == new[0]
    count, largest = largest_znode(zk_store.client)
    assert largest < 512 * 1024, largest
    assert count > 100  # spread over many znodes, not one record
    # A fresh client, with a cold cache, reads the same single version.
    other = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        cold = other.read("big").state
        assert cold.version == m.table("big").version and len(cold.segments) == 2 * n
    finally:
        other.close()


def test_an_oversized_change_is_refused_up_front_and_not_retried(
    m: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(buckets, "BLOB_LIMIT", 2048)
    monkeypatch.setattr(buckets, "MAX_BUCKETS", 2)
    before = m.table(T)
    calls = {"n": 0}
    real = m.store.write

    def counting(*args: object, **kw: object) -> object:
        calls["n"] += 1
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(m.store, "write", counting)
    with pytest.raises(TooLargeError, match="exceeds 2 buckets"):
        m.register_segments(T, [seg(f"x{i:04d}") for i in range(200)])
    assert calls["n"] == 1
    assert m.table(T) == before


def _rewrite_head(store: ZkStore, mutate: object) -> None:
    path = store.paths.head(T)
    raw, stat = store.client.get(path)
    doc = json.loads(raw)
    mutated = mutate(doc)  # type: ignore[operator]
    data = mutated if isinstance(mutated, bytes) else json.dumps(doc).encode()
    store.client.set(path, data, version=stat.version)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: b"{not json", "not valid JSON"),
        (lambda d: d.update(v=99), "unknown format version 99"),
        (lambda d: d.update(format="other"), "expected format"),
        (lambda d: d["table"].update(type="WEIRD"), "unknown table type"),
        (lambda d: d.update(version="7"), "field 'version' must be int"),
        (lambda d: d["buckets"].update(segments=["a", "b", "c"]), "not a power of two"),
        (lambda d: d["buckets"].update(segments=["missing"]), "missing"),
    ],
)
def test_corrupted_heads_fail_closed(m: LineageManager, mutate: object, message: str) -> None:
    store = m.store
    assert isinstance(store, ZkStore)
    _rewrite_head(store, mutate)
    fresh = ZkStore(store.client, owns_client=False)  # no cached blobs
    with pytest.raises(CorruptRecordError, match=message):
        dict(fresh.read(T).state.segments)  # a bucket is loaded when first wanted
    with pytest.raises(CorruptRecordError):
        LineageManager(fresh).register_segments(T, [seg("z")])


def test_corrupted_buckets_fail_closed(m: LineageManager) -> None:
    store = m.store
    assert isinstance(store, ZkStore)
    entry = m.start_replace(T, ["s1"], ["n1"])
    head = codec.decode_head(store.client.get(store.paths.head(T))[0], "head")
    blob = head.buckets["entries"][0]
    path = store.paths.blob(T, blob)
    doc = json.loads(store.client.get(path)[0])
    doc["records"][0]["state"] = "HALF_DONE"
    store.client.set(path, json.dumps(doc).encode())
    with pytest.raises(CorruptRecordError, match="unknown entry state 'HALF_DONE'"):
        ZkStore(store.client, owns_client=False).read(T)
    doc["records"][0]["state"] = "IN_PROGRESS"
    doc["records"].append(dict(doc["records"][0]))
    store.client.set(path, json.dumps(doc).encode())
    with pytest.raises(CorruptRecordError, match=f"duplicate entries key '{entry}'"):
        ZkStore(store.client, owns_client=False).read(T)


def test_a_segment_bucket_with_a_twin_or_a_stranger_fails_closed(m: LineageManager) -> None:
    store = m.store
    assert isinstance(store, ZkStore)
    m.register_segments(T, [seg(f"many{i:04d}") for i in range(400)])
    head = codec.decode_head(store.client.get(store.paths.head(T))[0], "head")
    first, second = (store.paths.blob(T, blob) for blob in head.buckets["segments"][:2])

    def records(path: str) -> list[dict[str, object]]:
        stored = codec.decode_bucket(store.client.get(path)[0], "segments", path)
        assert isinstance(stored, codec.Columns)  # written in columns
        return stored.rows()

    mine, other = records(first), records(second)[0]

    def read_with(rows: list[dict[str, object]], columns: bool = True) -> None:
        raw = (
            codec.encode_bucket("segments", rows)
            if columns
            else codec.dumps({"format": codec.BUCKET, "v": 1, "kind": "segments", "records": rows})
        )
        store.client.set(first, raw)
        dict(ZkStore(store.client, owns_client=False).read(T).state.segments)

    twin = mine[0]
    for columns in (True, False):  # as written now, and as written before columns
        with pytest.raises(CorruptRecordError, match=f"duplicate segments key '{twin['name']}'"):
            read_with([*mine, dict(twin)], columns)
        with pytest.raises(CorruptRecordError, match=f"'{other['name']}' in the wrong bucket"):
            read_with([*mine, other], columns)
        read_with(mine, columns)  # as it was: reads


def test_entries_written_before_holds_existed_still_read_and_a_bad_hold_fails_closed(
    m: LineageManager,
) -> None:
    store = m.store
    assert isinstance(store, ZkStore)
    entry = m.start_replace(T, ["s1"], ["n1"])
    head = codec.decode_head(store.client.get(store.paths.head(T))[0], "head")
    path = store.paths.blob(T, head.buckets["entries"][0])
    doc = json.loads(store.client.get(path)[0])
    assert isinstance(doc["records"][0]["held"], int)
    del doc["records"][0]["held"]  # as written by an older build
    store.client.set(path, json.dumps(doc).encode())
    assert ZkStore(store.client, owns_client=False).read(T).state.entries[entry].held_until_ms is None
    doc["records"][0]["held"] = "tomorrow"
    store.client.set(path, json.dumps(doc).encode())
    with pytest.raises(CorruptRecordError, match="'held' must be int"):
        ZkStore(store.client, owns_client=False).read(T)
    record = codec.history_to_dict(m.history(T, limit=1)[0])
    assert "cleaned" not in record and codec.history_from_dict(record).cleaned == ()
    record["cleaned"] = ["not-an-id"]
    with pytest.raises(CorruptRecordError):
        codec.decode_history(
            codec.dumps({"format": codec.HISTORY, "v": 1, "prev": None, "records": [record]}), "h"
        )


def test_a_lost_reply_is_recognised_as_our_own_write(
    m: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = m.store
    assert isinstance(store, ZkStore)
    real_commit = store.zk.commit
    lost = {"n": 0}

    def commit_then_lose_reply(txn: object) -> list[object]:
        result = real_commit(txn)
        if lost["n"] == 0:
            lost["n"] += 1
            raise ConnectionLoss()
        return result

    monkeypatch.setattr(store.zk, "commit", commit_then_lose_reply)
    before = m.table(T).version
    done = m.register_segments(T, [seg("once")])
    assert lost["n"] == 1 and done.applied
    after = m.table(T)
    assert after.version == before + 1  # applied exactly once
    assert [h.commit_id for h in m.history(T, 1)] == [done.commit_id]


def test_a_lost_request_is_retried(m: LineageManager, monkeypatch: pytest.MonkeyPatch) -> None:
    store = m.store
    assert isinstance(store, ZkStore)
    real_commit = store.zk.commit
    lost = {"n": 0}

    def lose_request(txn: object) -> list[object]:
        if lost["n"] < 2:
            lost["n"] += 1
            raise ConnectionLoss()
        return real_commit(txn)

    monkeypatch.setattr(store.zk, "commit", lose_request)
    before = m.table(T).version
    m.register_segments(T, [seg("retried")])
    assert lost["n"] == 2 and m.table(T).version == before + 1


def test_memory_store_unknown_outcomes_are_resolved() -> None:
    store = MemoryStore()
    m = LineageManager(store, retry=fast_retry())
    m.create_table(TableConfig.build(T, "/d"))
    store.inject_unknown(landed=True)
    m.register_segments(T, [seg("a")])
    store.inject_unknown(landed=False, times=2)
    m.register_segments(T, [seg("b")])
    assert [h.version for h in m.history(T)] == [3, 2, 1]


def test_metadata_garbage_is_marked_then_swept_after_its_grace(
    m: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    import segment_lineage.lineage.zk.store.versions

    monkeypatch.setattr(
        segment_lineage.lineage.zk.store.versions, "MAX_VERSIONS", 1
    )  # only the head's blobs are referenced
    store = m.store
    assert isinstance(store, ZkStore)
    for i in range(5):
        m.register_segments(T, [seg(f"g{i}")])
    blobs = f"{store.paths.head(T)}/blobs"
    before = len(store.client.get_children(blobs))
    assert store.collect_garbage(T, grace_ms=0) == 0  # the first pass only marks
    assert store.collect_garbage(T, grace_ms=3_600_000) == 0  # marked, but not for long enough
    removed = store.collect_garbage(T, grace_ms=0)
    assert removed > 0 and len(store.client.get_children(blobs)) == before - removed
    assert store.gc.referenced(T)[0] == set(store.client.get_children(blobs))
    fresh = ZkStore(store.client, owns_client=False)
    assert sorted(fresh.read(T).state.segments) == sorted(["s1", "s2", *(f"g{i}" for i in range(5))])


def test_a_commit_that_seals_history_hands_the_garbage_pass_off_and_does_not_wait(
    m: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer does not pay for metadata collection: a commit that seals
    its history tail returns while the pass it asked for is still running,
    and the store's close waits for that pass."""
    store = m.store
    assert isinstance(store, ZkStore)
    started, release = threading.Event(), threading.Event()
    real = MetadataGc.collect

    def slow(self: MetadataGc, table: str, grace_ms: int = 600_000) -> int:
        started.set()
        assert release.wait(30)
        return real(self, table, grace_ms)

    monkeypatch.setattr(MetadataGc, "collect", slow)
    for i in range(zk_commit.HISTORY_TAIL + 2):  # at least one commit seals the tail
        m.register_segments(T, [seg(f"h{i}")])
    assert started.wait(30)  # a pass was asked for, and is running (blocked) ...
    assert store.sweeper.passes == 0  # ... while every commit has returned
    assert not store.sweeper.drain(0.2)
    release.set()
    assert store.sweeper.drain(30) and store.sweeper.passes >= 1
    marks = store.client.exists(store.paths.gc(T))
    assert marks is not None  # the pass ran to the end: it wrote its marks


def test_a_writer_whose_new_blobs_were_collected_does_not_commit_them(
    m: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = m.store
    assert isinstance(store, ZkStore)
    monkeypatch.setattr(zk_commit, "INLINE_MULTI_BYTES", 0)  # blobs written before the multi
    real = store.blobs.write
    paused = {"n": 0}

    def write_then_pause_past_the_grace(table: str, blobs: dict[str, bytes]) -> None:
        real(table, blobs)
        if paused["n"] == 0:
            paused["n"] += 1
            store.collect_garbage(T, grace_ms=0)
            store.collect_garbage(T, grace_ms=0)  # the new blobs are swept
            for blob in blobs:
                assert store.client.exists(store.paths.blob(T, blob)) is None

    monkeypatch.setattr(store.blobs, "write", write_then_pause_past_the_grace)
    m.register_segments(T, [seg("after-pause")])
    assert paused["n"] == 1
    fresh = ZkStore(store.client, owns_client=False)
    assert "after-pause" in fresh.read(T).state.segments


def test_history_is_chained_and_the_head_stays_small(m: LineageManager) -> None:
    store = m.store
    assert isinstance(store, ZkStore)
    for i in range(zk_commit.HISTORY_TAIL * 3):
        m.register_segments(T, [seg(f"h{i:04d}")])
    head_size = len(store.client.get(store.paths.head(T))[0])
    history = m.history(T)
    assert [h.version for h in history] == list(range(m.table(T).version, 0, -1))
    assert head_size < 64 * 1024
    oldest = history[-2]  # the first register, sealed long ago
    assert store.find_commit(T, oldest.commit_id, 0) == oldest


def test_every_reason_validation_accepts_commits_whatever_its_script(m: LineageManager) -> None:
    """A reason is limited in UTF-8 bytes, stored as UTF-8, and the head's
    history tail is sealed by size: the longest reasons in any script never
    stop commits (they once did after about 37 commits)."""
    from segment_lineage.lineage.core.errors import InvalidInputError
    from segment_lineage.lineage.core.model import MAX_REASON_BYTES

    store = m.store
    assert isinstance(store, ZkStore)
    reasons = ["\U0001f600" * (MAX_REASON_BYTES // 4), "é" * (MAX_REASON_BYTES // 2), '"\\' * 1000]
    for i in range(zk_commit.HISTORY_TAIL * 2):
        m.register_segments(T, [seg(f"r{i:04d}")], reason=reasons[i % 3])
        assert len(store.client.get(store.paths.head(T))[0]) < zk_commit.HEAD_LIMIT // 2
    history = m.history(T)
    assert len(history) == zk_commit.HISTORY_TAIL * 2 + 2
    assert history[0].reason == reasons[(zk_commit.HISTORY_TAIL * 2 - 1) % 3]
    assert {h.reason for h in history[: zk_commit.HISTORY_TAIL * 2]} == set(reasons)
    assert "é".encode() in store.client.get(store.paths.head(T))[0]  # stored as UTF-8, not escaped
    too_long = "é" * (MAX_REASON_BYTES // 2) + "e"
    with pytest.raises(InvalidInputError, match=f"reason is {MAX_REASON_BYTES + 1} bytes in UTF-8"):
        m.register_segments(T, [seg("x")], reason=too_long)


def blob_sizes(store: ZkStore, table: str) -> dict[str, int]:
    folder = f"{store.paths.head(table)}/blobs"
    return {b: len(store.client.get(f"{folder}/{b}")[0]) for b in store.client.get_children(folder)}


def test_a_small_commit_on_a_large_table_writes_little(m: LineageManager) -> None:
    """Buckets stay small, so a one-segment commit rewrites a few kilobytes,
    not the table's metadata (a 3,000-segment table once rewrote 215 KB)."""
    store = m.store
    assert isinstance(store, ZkStore)
    m.register_segments(T, [seg(f"big-{i:05d}") for i in range(3_000)])
    before = blob_sizes(store, T)
    m.register_segments(T, [seg("one-more")])
    head = len(store.client.get(store.paths.head(T))[0])
    written = {b: n for b, n in blob_sizes(store, T).items() if b not in before}
    assert sum(written.values()) + head < 40 * 1024, (sorted(written.values()), head)
    assert max(before.values()) <= buckets.SPLIT_BYTES


def test_a_commit_that_lost_the_race_leaves_no_blobs_behind(
    m: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = m.store
    assert isinstance(store, ZkStore)
    other = LineageManager(ZkStore(store.client, owns_client=False), retry=fast_retry())
    monkeypatch.setattr(zk_commit, "INLINE_MULTI_BYTES", 0)  # blobs written before the multi
    real = BlobStore.write
    raced = []

    def race(self: BlobStore, table: str, blobs: dict[str, bytes]) -> None:
        real(self, table, blobs)
        if self is store.blobs and not raced:  # another writer commits between our blobs and our swap
            raced.append(set(blobs))
            other.register_segments(T, [seg("meanwhile")])

    monkeypatch.setattr(BlobStore, "write", race)
    m.register_segments(T, [seg(f"n{i:04d}") for i in range(500)])
    assert raced and m.table(T).version == 4  # create, s1+s2, meanwhile, ours
    left = set(store.client.get_children(f"{store.paths.head(T)}/blobs"))
    assert not raced[0] & left  # the lost attempt's blobs are gone already


def test_a_small_commit_creates_its_blobs_in_its_multi(
    m: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One round trip for the blobs and the swap; a lost race leaves nothing to discard."""
    store = m.store
    assert isinstance(store, ZkStore)
    other = LineageManager(ZkStore(store.client, owns_client=False), retry=fast_retry())

    def no_separate_write(self: BlobStore, table: str, blobs: dict[str, bytes]) -> None:
        raise AssertionError(f"{len(blobs)} blob(s) written before the multi")

    def no_discard(self: BlobStore, table: str, blobs: object) -> None:
        raise AssertionError("nothing to discard: the lost multi created nothing")

    real_commit = store.zk.commit
    raced: list[int] = []

    def lose_once(txn: object) -> list[object]:
        if not raced:  # another writer swaps the head between our read and our multi
            raced.append(1)
            other.register_segments(T, [seg("meanwhile")])
        return real_commit(txn)

    monkeypatch.setattr(store.zk, "commit", lose_once)
    monkeypatch.setattr(BlobStore, "write", no_separate_write)
    monkeypatch.setattr(BlobStore, "discard", no_discard)
    m.register_segments(T, [seg(f"n{i:03d}") for i in range(50)])
    assert raced
    fresh = ZkStore(store.client, owns_client=False)
    assert {"meanwhile", "n000", "n049"} <= set(fresh.read(T).state.loaded().segments)
    blobs = set(store.client.get_children(f"{store.paths.head(T)}/blobs"))
    assert fresh.read(T).token.head.bucket_blobs() <= blobs  # type: ignore[attr-defined]


def test_an_interrupted_drop_is_finished_by_running_it_again(
    m: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = m.store
    assert isinstance(store, ZkStore)
    real_delete = store.zk.delete

    def cut_at_head_delete(path: str, **kw: object) -> None:
        if path == store.paths.head(T):
            raise ConnectionLoss()
        real_delete(path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(store.zk, "delete", cut_at_head_delete)
    with pytest.raises(StoreUnavailableError, match="was interrupted") as exc:
        m.drop_table(T, force=True)
    assert exc.value.remedy is not None and "run the drop again" in exc.value.remedy
    monkeypatch.setattr(store.zk, "delete", real_delete)
    with pytest.raises(TableNotFoundError):
        m.table(T)  # already hidden from readers and writers
    m.drop_table(T)
    assert store.client.exists(store.paths.head(T)) is None
    m.create_table(TableConfig.build(T, "/again"))
    assert m.table(T).config.root == "/again"


def test_a_guard_left_by_a_crashed_drop_does_not_block_create(m: LineageManager) -> None:
    store = m.store
    assert isinstance(store, ZkStore)
    m.drop_table(T, force=True)
    store.client.create(f"{store.root}/names/{T}", T.encode())  # as if the drop died last step
    m.create_table(TableConfig.build(T, "/again"))
    assert m.table(T).version == 1


def test_digest_auth_owns_every_znode_and_refuses_others(zk_hosts: str) -> None:
    owner = ZkStore(
        connect(ZkSettings(hosts=zk_hosts, auth="pusher:s3cret")), acl=zk_store_acl("pusher", "s3cret")
    )
    try:
        LineageManager(owner).create_table(TableConfig.build(T, "/d"))
        for path in walk(owner.client, ROOT):
            acls, _ = owner.client.get_acls(path)
            assert all(a.id.scheme == "digest" for a in acls), (path, acls)
        servers = zk_hosts.partition("/")[0]
        for auth in ("intruder:guess", None):
            # Through the owner's chroot: refused at connect.
            with pytest.raises(AuthError, match="refused this identity"):
                connect(ZkSettings(hosts=zk_hosts, auth=auth))
            # Through the bare ensemble, pointed at the same nodes: refused at read and write.
            chroot = "/" + zk_hosts.partition("/")[2]
            other = ZkStore(connect(ZkSettings(hosts=servers, auth=auth)), root=chroot + ROOT)
            try:
                with pytest.raises(AuthError, match="not authorised"):
                    other.read(T)
                with pytest.raises(AuthError):
                    LineageManager(other).register_segments(T, [seg("x")])
            finally:
                other.close()
        assert LineageManager(owner).table(T).segments == {}
    finally:
        owner.close()


def zk_store_acl(user: str, password: str) -> list[object]:
    from segment_lineage.lineage.zk.client import acl_for

    acl = acl_for((user, password))
    assert acl is not None
    return list(acl)


def test_readers_see_one_version_while_a_writer_swaps(m: LineageManager, zk_hosts: str) -> None:
    snapshots = {("s1", "s2"), ("n1", "s2")}
    errors: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        store = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
        try:
            while not stop.is_set():
                names = tuple(s.name for s in LineageManager(store).visible_segments(T))
                if names not in snapshots:
                    errors.append(str(names))
        finally:
            store.close()

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(10):
            entry = m.start_replace(T, ["s1"], ["n1"], force_cleanup=True)
            m.register_segments(T, [Segment("n1", f"n1-{i}.parquet")])
            m.end_replace(T, entry)
            m.revert_replace(T, entry)
    finally:
        stop.set()
        thread.join()
    assert errors == []


def test_entry_ids_are_uuid(m: LineageManager) -> None:
    entry = m.start_replace(T, ["s1"], ["n1"])
    assert str(uuid.UUID(entry)) == entry


def test_owners_and_leases_die_with_their_session(m: LineageManager, zk_hosts: str) -> None:
    other = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    entry = m.start_replace(T, ["s1"], ["n1"])
    other.holds("owner").hold(T, entry)
    lease = other.pins.pin(T)
    assert m.store.holds("owner").live(T) == frozenset({entry})
    assert [i.lease_id for i in m.store.pins.leases(T)] == [lease.lease_id]
    other.close()  # the process went away: its session ends
    assert m.store.holds("owner").live(T) == frozenset()
    assert m.store.pins.leases(T) == []


def test_garbage_collection_keeps_the_blobs_of_a_pinned_version(
    m: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    import segment_lineage.lineage.zk.store.versions

    monkeypatch.setattr(
        segment_lineage.lineage.zk.store.versions, "MAX_VERSIONS", 1
    )  # the lease alone keeps the old version
    store = m.store
    assert isinstance(store, ZkStore)
    store.collect_garbage(T, grace_ms=0)  # older version records go
    lease = store.pins.pin(T)
    pinned = store.gc.referenced(T)[0]
    for i in range(3):
        m.register_segments(T, [seg(f"p{i}")])
    store.collect_garbage(T, grace_ms=0)
    store.collect_garbage(T, grace_ms=0)
    blobs = set(store.client.get_children(f"{store.paths.head(T)}/blobs"))
    assert pinned <= blobs
    store.pins.release(lease)
    store.collect_garbage(T, grace_ms=0)
    store.collect_garbage(T, grace_ms=0)
    assert not pinned <= set(store.client.get_children(f"{store.paths.head(T)}/blobs"))


def test_retained_versions_keep_their_blobs_and_old_ones_are_pruned(
    m: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    import segment_lineage.lineage.zk.store.versions
    from segment_lineage.lineage.core.errors import VersionGoneError

    store = m.store
    assert isinstance(store, ZkStore)
    monkeypatch.setattr(segment_lineage.lineage.zk.store.versions, "MAX_VERSIONS", 4)
    start = m.table(T).version
    for i in range(6):
        m.register_segments(T, [seg(f"v{i}")])
    for _ in range(2):
        store.collect_garbage(T, grace_ms=0)
    newest = start + 6
    assert store.versions(T) == list(range(newest - 3, newest + 1))
    fresh = ZkStore(store.client, owns_client=False)
    for version in store.versions(T):
        names = set(fresh.read_version(T, version).segments)
        assert {f"v{i}" for i in range(version - start)} <= names
        assert f"v{version - start}" not in names
    with pytest.raises(VersionGoneError, match=f"oldest readable version is {newest - 3}"):
        fresh.read_version(T, newest - 4)
    with pytest.raises(VersionGoneError, match="no version"):
        fresh.read_version(T, newest + 1)


def test_history_stays_bounded(m: LineageManager, monkeypatch: pytest.MonkeyPatch) -> None:
    import segment_lineage.lineage.zk.store.history

    monkeypatch.setattr(
        segment_lineage.lineage.zk.store.history, "MAX_HISTORY", 128
    )  # two sealed chunks of 64
    store = m.store
    assert isinstance(store, ZkStore)
    for i in range(200):
        m.register_segments(T, [seg(f"h{i:03d}")])
    newest = m.table(T).version
    records = m.history(T)
    assert [r.version for r in records] == list(range(newest, newest - len(records), -1))
    assert 128 <= len(records) < 128 + 64 and records[-1].version > 1
    for _ in range(2):
        store.collect_garbage(T, grace_ms=0)
    assert store.gc.referenced(T)[0] == set(store.client.get_children(f"{store.paths.head(T)}/blobs"))
    assert len(ZkStore(store.client, owns_client=False).history(T)) == len(records)


def test_a_writer_reads_its_own_buckets_without_decoding_them(
    m: LineageManager, zk_hosts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    m.register_segments("events", [Segment(f"s{i:04d}", f"s{i:04d}.parquet", rows=i) for i in range(3000)])
    entry = m.start_replace("events", [f"s{i:04d}" for i in range(10)], ["n"])
    m.register_segments("events", [Segment("n", "n.parquet", rows=5)], entry_id=entry)
    decoded: list[str] = []
    decode = codec.decode_bucket

    def counted(raw: bytes, kind: str, where: str) -> object:
        decoded.append(kind)
        return decode(raw, kind, where)

    monkeypatch.setattr(codec, "decode_bucket", counted)
    m.end_replace("events", entry)
    m.register_segments("events", [Segment("late", "late.parquet", rows=1)])
    own = m.table("events")
    assert "segments" not in decoded  # the writer kept what it wrote
    fresh = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        assert fresh.read("events").state == own
    finally:
        fresh.close()
    assert "segments" in decoded  # a new client decodes them, and finds the same state


def test_the_blob_cache_stays_bounded_while_a_table_keeps_changing(m: LineageManager, zk_hosts: str) -> None:
    m.register_segments("events", [Segment(f"s{i:05d}", f"s{i:05d}.parquet", rows=1) for i in range(4000)])
    reader = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        size = len(reader.read("events").state.segments)
        for i in range(40):  # each commit supersedes the segments bucket the reader decoded
            m.register_segments("events", [seg(f"late{i}")])
            assert len(reader.read("events").state.segments) == size + i + 1
        limit = zk_blobs.CACHE_RECORDS + 2 * (size + 40 + 2)
        assert reader.blobs.cached_records <= limit
        assert reader.blobs.cached_records >= size  # the current version stays cached
    finally:
        reader.close()


def test_the_sweep_deletes_nothing_a_commit_landed_with_after_it_looked(
    m: LineageManager, zk_hosts: str
) -> None:
    """A writer paused between writing its blobs and swapping the head: a
    first pass marks its blobs, a second decides to delete them, and the
    writer commits right then. The deletes check the head did not move, so
    the table stays readable (it once lost the committed blobs)."""
    import threading

    from segment_lineage.lineage.core import failpoints

    store = m.store
    assert isinstance(store, ZkStore)
    writer_store = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    writer = LineageManager(writer_store, retry=fast_retry())
    at_swap, go = threading.Event(), threading.Event()

    def pause() -> None:
        if threading.current_thread().name == "writer":
            at_swap.set()
            assert go.wait(30)

    done: list[object] = []
    failpoints.set_hook("store.before-head-swap", pause)
    thread = threading.Thread(
        target=lambda: done.append(writer.register_segments(T, [seg(f"w{i}") for i in range(50)])),
        name="writer",
    )
    try:
        thread.start()
        assert at_swap.wait(30)
        store.collect_garbage(T, grace_ms=0)  # marks the paused writer's blobs
        real = MetadataGc.referenced

        def writer_commits_meanwhile(self: MetadataGc, table: str) -> tuple[set[str], int]:
            looked = real(self, table)
            go.set()
            thread.join(30)
            return looked

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(MetadataGc, "referenced", writer_commits_meanwhile)
            store.collect_garbage(T, grace_ms=0)
    finally:
        go.set()
        failpoints.set_hook("store.before-head-swap", None)
        thread.join(30)
        writer_store.close()
    assert done, "the writer did not commit"
    fresh = ZkStore(store.client, owns_client=False)
    assert {f"w{i}" for i in range(50)} <= set(fresh.read(T).state.segments)
    store.collect_garbage(T, grace_ms=0)
    store.collect_garbage(T, grace_ms=0)
    assert {f"w{i}" for i in range(50)} <= set(
        ZkStore(store.client, owns_client=False).read(T).state.segments
    )


@pytest.mark.parametrize("data", [b"", b"garbage{"], ids=["bare", "garbage"])
def test_a_floor_made_as_a_bare_folder_reads_as_free(m: LineageManager, data: bytes) -> None:
    """``lineage acl apply`` on a table made before floors existed creates the
    missing folders; a floor with no record, or one that does not decode
    (pushers may write it), reads as free: it never stops readers or writers."""
    store = m.store
    assert isinstance(store, ZkStore)
    path = f"{store.paths.head(T)}/floor"
    store.client.delete(path)
    store.client.create(path, data)
    floor = store.read(T).floor
    assert floor is not None and floor.holder is None
    m.register_segments(T, [seg("after")])


def test_an_entry_owned_by_another_push_is_refused_by_name(m: LineageManager, zk_hosts: str) -> None:
    from segment_lineage.lineage.core.errors import RefusedError

    store = m.store
    assert isinstance(store, ZkStore)
    entry = str(uuid.uuid4())
    store.holds("owner").hold(T, entry)
    store.holds("owner").hold(T, entry)  # the same session again: fine (a retried request)
    other = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        with pytest.raises(RefusedError, match=f"entry {entry} is already owned by another push"):
            other.holds("owner").hold(T, entry)
    finally:
        other.close()
    assert store.holds("owner").live(T) == frozenset({entry})


def test_a_commit_attempt_reads_the_clock_with_the_head_even_after_the_clock_was_deleted(
    m: LineageManager,
) -> None:
    store = m.store
    assert isinstance(store, ZkStore)
    store.client.delete(f"{ROOT}/clock")  # anyone may have deleted it (it holds nothing)
    snap, now = store.read_now(T)
    assert snap.state.version == m.table(T).version and now > 1_700_000_000_000  # ZooKeeper's time
    assert store.client.exists(f"{ROOT}/clock") is not None  # made again
    m.register_segments(T, [seg("after-clock")])
    assert "after-clock" in m.table(T).segments


def test_a_table_made_before_commit_queues_gets_its_queue_folder_on_first_use(m: LineageManager) -> None:
    store = m.store
    assert isinstance(store, ZkStore)
    folder = f"{store.paths.head(T)}/queue"
    assert store.client.exists(folder) is not None  # made with the table
    store.client.delete(folder)
    assert store.read_now(T)[0].queue == ()  # no folder: nobody queued
    ticket = store.queues.join(T, "c1")
    assert ticket is not None and store.client.get_children(folder) == [ticket]
    store.queues.leave(T, ticket)


def test_a_ticket_whose_create_answer_was_lost_is_found_and_left(
    m: LineageManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The create lands but its answer is lost (the session lives on): the
    join finds its ticket by the commit id in its name, and leaving removes
    it, so no ticket stands in the queue for the rest of the session."""
    store = m.store
    assert isinstance(store, ZkStore)
    real = store.zk.create

    def lands_then_loses_the_answer(*args: object, **kwargs: object) -> str:
        real(*args, **kwargs)  # type: ignore[arg-type]
        raise ConnectionLoss()

    monkeypatch.setattr(store.zk, "create", lands_then_loses_the_answer)
    ticket = store.queues.join(T, "c0ffee")
    monkeypatch.setattr(store.zk, "create", real)
    folder = f"{store.paths.head(T)}/queue"
    assert ticket is not None and store.client.get_children(folder) == [ticket]
    store.queues.leave(T, ticket)
    assert store.client.get_children(folder) == []


def test_waiting_on_a_ticket_again_and_again_keeps_one_watch(m: LineageManager, zk_hosts: str) -> None:
    store = m.store
    assert isinstance(store, ZkStore)
    other = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        stuck = other.queues.join(T, "stuck")
        assert stuck is not None
        for _ in range(50):
            assert store.queues.await_turn(T, stuck, 0.0) is False
        watchers = store.client._data_watchers  # kazoo keeps a set of callbacks per path
        assert sum(len(v) for k, v in watchers.items() if k.endswith(stuck)) == 1
        other.queues.leave(T, stuck)
        assert store.queues.await_turn(T, stuck, 5.0) is True
    finally:
        other.close()


def test_a_blob_create_refused_inside_the_commit_is_an_auth_error(m: LineageManager) -> None:
    from kazoo.security import make_acl

    store = m.store
    assert isinstance(store, ZkStore)
    blobs = f"{store.paths.head(T)}/blobs"
    store.client.set_acls(
        blobs, [make_acl("world", "anyone", read=True, write=True, delete=True, admin=True)]
    )
    with pytest.raises(AuthError, match="not authorised"):
        m.register_segments(T, [seg("refused")])


def test_tickets_planted_or_left_by_dead_writers_cost_the_patience_once(
    m: LineageManager, zk_hosts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nodes a pusher planted under the queue with odd names are not
    tickets; real tickets that stand still (here: of a live session that
    never commits) start their clocks together, so a writer behind ten of
    them waits the patience once, not ten times, and commits."""
    from segment_lineage.lineage.manager import floor

    monkeypatch.setattr(floor, "QUEUE_PATIENCE_S", 0.5)
    store = m.store
    assert isinstance(store, ZkStore)
    folder = f"{store.paths.head(T)}/queue"
    for odd in ("t-", "t--", "t- -", "t-x-00000000000000000000", "other"):
        store.client.create(f"{folder}/{odd}")
    assert store.read_now(T)[0].queue == ()
    holder = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        stuck = [holder.queues.join(T, f"dead{i}") for i in range(10)]
        assert len(store.read_now(T)[0].queue) == 10 and None not in stuck
        writer = LineageManager(ZkStore(connect(ZkSettings(hosts=zk_hosts))), retry=fast_retry())
        real = writer.store.write
        lost: list[int] = []

        def lose_once(*args: object, **kwargs: object) -> object:
            if not lost:  # one lost race: the writer queues behind the ten
                lost.append(1)
                from segment_lineage.lineage.store.contract import VersionConflict

                raise VersionConflict("simulated: another writer won")
            return real(*args, **kwargs)  # type: ignore[arg-type]

        writer.store.write = lose_once  # type: ignore[method-assign]
        began = time.monotonic()
        writer.register_segments(T, [seg("behind-ten")])
        assert time.monotonic() - began < 3.0  # 0.5 s once, not 5 s in turn
        writer.store.close()
    finally:
        holder.close()


def test_a_store_makes_the_shared_nodes_it_finds_missing_in_order(zk_hosts: str) -> None:
    store = ZkStore(connect(ZkSettings(hosts=f"{zk_hosts}/partial-{uuid.uuid4().hex}")))
    try:
        store.client.create(f"{ROOT}/tables", makepath=True)  # an older store's start, say
        assert store.now_ms() > 0
        for node in ("", "/tables", "/names", "/clock"):
            assert store.client.exists(f"{ROOT}{node}") is not None, node
        LineageManager(store).create_table(TableConfig.build("t", "/d/t"))
        assert [t for t in store.list_tables()] == ["t"]
    finally:
        store.close()


def test_sixteen_clients_creating_tables_at_once_all_land(zk_hosts: str, tmp_path: Path) -> None:
    """Every create swaps the one root registry, so creates made at the same
    moment race on it: each loser backs off and tries again, and every one
    of them lands (one gave up after five quick attempts out of seven
    processes in an outside trial)."""
    ZkStore(connect(ZkSettings(hosts=zk_hosts))).close()  # the shared nodes, made once
    stores = [ZkStore(connect(ZkSettings(hosts=zk_hosts))) for _ in range(16)]
    start = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def create(i: int) -> None:
        manager = LineageManager(stores[i])
        start.wait(timeout=30)
        try:
            manager.create_table(TableConfig.build(f"at_once_{i}", str(tmp_path / f"t{i}")))
        except BaseException as exc:  # every failure is reported below
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(len(stores))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert sorted(stores[0].table_listing().readable) == sorted(f"at_once_{i}" for i in range(16))
    finally:
        for s in stores:
            s.close()
