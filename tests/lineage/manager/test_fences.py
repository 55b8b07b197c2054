"""Fences: a commit a process decided under a claim lands only while the
claim stands, checked in the same ZooKeeper multi as the head's swap.

The reproduction runs the way it was found: the command line, a real
ZooKeeper, a push SIGSTOPped past its session while a rerun of its job lands.
"""

from __future__ import annotations

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

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import ClaimLostError, ConflictError
from segment_lineage.lineage.core.model import (
    DeletionReason,
    EntryState,
    Operation,
    Segment,
    TableConfig,
    TableState,
    TableType,
)
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.store.contract import Store
from segment_lineage.lineage.store.memory import MemoryStore
from tests.conftest import fast_retry
from tests.helpers.run import ROOT, wait_for

pytestmark = pytest.mark.zk

E1 = "00000000-0000-4000-8000-000000000001"


def _input(path: Path, rows: int, start: int) -> Path:
    ts = pa.array([1_700_000_000_000 + 1000 * (start + i) for i in range(rows)], pa.timestamp("ms", tz="UTC"))
    pq.write_table(pa.table({"ts": ts, "v": pa.array(range(start, start + rows), pa.int64())}), path)
    return path


def _env(zk: str, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGE_")}
    env.update(LINEAGE_ZK=zk, LINEAGE_HOME=str(home), LINEAGE_ZK_SESSION_TIMEOUT="2", **extra)
    return env


def _lineage(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "segment_lineage", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("job", "kind"),
    [("nightly-1", "APPEND"), (None, "APPEND"), (None, "REFRESH")],
    ids=["job", "append", "refresh"],
)
def test_a_push_paused_past_its_session_never_lands_after_its_rerun(
    zk_hosts: str, zk_manager: LineageManager, tmp_path: Path, job: str | None, kind: str
) -> None:
    """The issue's reproduction: an APPEND push with --job-id is SIGSTOPped
    after writing its file, past its ZooKeeper session; a rerun of the job
    lands; the first attempt resumes. It must commit nothing, say so in one
    line, and leave its files to retention: the job's rows land once. Without
    a job id the rerun is just another push: the late one lands nothing either.
    A REFRESH rerun force-cleans the late one's entry: it still says it lost
    its claim, not only that its entry was reverted."""
    root = tmp_path / "events"
    zk_manager.create_table(TableConfig.build("events", str(root), table_type=kind, time_column="ts"))
    data = _input(tmp_path / "day.parquet", 50, 0)
    env = _env(zk_hosts, tmp_path / "home")
    args: tuple[str, ...] = ("push", "events", "--input", str(data), "--mode", kind.lower())
    if job is not None:
        args += ("--job-id", job)

    first = _lineage(*args, env={**env, "LINEAGE_FAILPOINT": "push.after-write:sleep=12"})
    try:

        def written() -> bool:
            running = [
                e for e in zk_manager.table("events").entries.values() if e.state is EntryState.IN_PROGRESS
            ]
            return bool(running) and any(root.rglob("*.parquet"))

        wait_for("the first attempt to write its file", written, timeout=60)
        time.sleep(1.0)  # its file closed; it sleeps at push.after-write
        os.kill(first.pid, signal.SIGSTOP)
        wait_for(
            "the paused attempt's claim to lapse", lambda: not zk_manager.store.holds("owner").live("events")
        )

        rerun = _lineage(*args, env=env)
        out, err = rerun.communicate(timeout=120)
        assert rerun.returncode == 0, err
    finally:
        os.kill(first.pid, signal.SIGCONT)
    out, err = first.communicate(timeout=120)
    assert first.returncode != 0, out
    said = [line for line in err.splitlines() if "lost its claim" in line]
    assert len(said) == 1, err
    assert "committed nothing" in said[0] and "queued for retention" in said[0], said[0]

    state = zk_manager.table("events")
    assert sum(s.rows for s in zk_manager.visible_segments("events")) == 50  # once, not twice
    assert len([r for r in zk_manager.history("events") if r.operation is Operation.END_REPLACE]) == 1
    late = [e for e in state.entries.values() if e.state is not EntryState.COMPLETED]
    assert [e.state for e in late] == [EntryState.REVERTED]
    queued = {p.location for p in state.pending.values()}
    assert queued, "the late attempt's files go to retention"


def _mirrored(zk_hosts: str, root: Path, tmp_path: Path) -> None:
    """Mirrored APPEND table ``m`` at ``root``, its first push (v 0, 1, 2) made and published."""
    from tests.helpers.run import cli

    code, _, err = cli(
        zk_hosts, "table", "create", "m", "--root", str(root), "--type", "APPEND", "--time-column", "ts",
        "--mirror", "delta",
    )  # fmt: skip
    assert code == 0, err
    code, _, err = cli(
        zk_hosts, "push", "m", "--input", str(_input(tmp_path / "in.parquet", 3, 0)), "--mode", "append"
    )
    assert code == 0, err


def _segment(name: str, _root: str = "") -> Segment:
    return Segment(name=name, location=f"uploads/{name}.parquet", rows=1, size_bytes=1)


def _claimed_entry(store: Store, tmp_path: Path) -> LineageManager:
    """APPEND table ``t`` on ``store`` with entry E1 opened under its owner claim, held."""
    m = LineageManager(store, retry=fast_retry())
    m.create_table(TableConfig.build("t", str(tmp_path / "t"), table_type=TableType.APPEND))
    store.holds("owner").hold("t", E1)
    m.commit(
        "t",
        lambda s, now: transitions.start_replace(s, [], ["a"], entry_id=E1, audit=m.audit(), now_ms=now),
        owner=E1,
    )
    return m


@pytest.mark.parametrize("backend", ["memory", "zookeeper"])
def test_a_commit_for_an_entry_lands_only_while_its_owner_claim_stands(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The store's fence: write(owner=E) is refused, whole, once E's owner
    claim is gone, and lands while it stands."""
    store: Store = MemoryStore() if backend == "memory" else request.getfixturevalue("zk_store")
    m = _claimed_entry(store, tmp_path)
    store.holds("owner").release("t", E1)  # what the session's end does
    before = m.table("t").version
    with pytest.raises(ClaimLostError) as lost:
        m.complete_replace("t", E1, [_segment("a", str(tmp_path / "t"))], owned=True)
    assert "committed nothing" in lost.value.message
    assert m.table("t").version == before
    assert m.table("t").entries[E1].state is EntryState.IN_PROGRESS

    store.holds("owner").hold("t", E1)
    done = m.complete_replace("t", E1, [_segment("a", str(tmp_path / "t"))], owned=True)
    assert done.applied and done.state.entries[E1].state is EntryState.COMPLETED


@pytest.mark.parametrize("backend", ["memory", "zookeeper"])
@pytest.mark.parametrize("late", [False, True], ids=["never-sent", "landed-late"])
@pytest.mark.parametrize("together", [False, True], ids=["one", "set"])
def test_an_unknown_outcome_then_a_lost_claim_is_settled_by_one_look(
    backend: str, late: bool, together: bool, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A push's end whose answer was lost (its process paused, its session
    ended meanwhile), then refused for its lost claim: every attempt checked
    the claim in its own request, so the first landed before the claim went
    or never will. One look says which: the commit it made, or "committed
    nothing" (outside trial F5: it said "outcome unknown" though nothing had
    landed). ``late``: the first attempt lands after the second attempt's
    read, before the claim goes."""
    from segment_lineage.lineage.manager.together import Together
    from segment_lineage.lineage.store.contract import WriteOutcomeUnknown

    store: Store = MemoryStore() if backend == "memory" else request.getfixturevalue("zk_store")
    m = _claimed_entry(store, tmp_path)
    name = "write_together" if together else "write"
    real = getattr(store, name)
    held: list[tuple[Any, ...]] = []

    def lost_answer(*args: Any, **kwargs: Any) -> Any:
        if not held:  # the first attempt: sent, no answer
            held.append((args, kwargs))
            raise WriteOutcomeUnknown("ConnectionLoss")
        if late and len(held) == 1:
            held.append(((), {}))
            real(*held[0][0], **held[0][1])  # it lands now, after this attempt's read
        store.holds("owner").release("t", E1)  # the session ends
        return real(*args, **kwargs)

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(store, name, lost_answer)
    before = m.table("t").version
    end = transitions.complete_replace
    segments = [_segment("a", str(tmp_path / "t"))]

    def complete(s: TableState, now: int) -> Any:
        return end(s, E1, segments, now_ms=now)

    try:
        if late:
            if together:
                done = m.commit_together([Together("t", complete, owner=E1)])[0]
            else:
                done = m.commit("t", complete, owner=E1)
            assert done.applied and done.state.entries[E1].state is EntryState.COMPLETED
            assert m.table("t").version == before + 1
        else:
            with pytest.raises(ClaimLostError) as lost:
                if together:
                    m.commit_together([Together("t", complete, owner=E1)])
                else:
                    m.commit("t", complete, owner=E1)
            assert "committed nothing" in lost.value.message
            assert m.table("t").version == before
            assert m.table("t").entries[E1].state is EntryState.IN_PROGRESS
    finally:
        monkeypatch.undo()


def test_a_job_ends_once_whichever_attempt_ends_first(tmp_path: Path) -> None:
    """The job-id rule inside the final commit: another attempt of the job
    that completed while this one wrote (its owner alive, so not waited on
    as a dead one) refuses this one's end; its entry is reverted."""
    from segment_lineage.lineage.core import failpoints

    m = LineageManager(MemoryStore(), retry=fast_retry())
    m.create_table(TableConfig.build("t", str(tmp_path / "t"), table_type=TableType.APPEND))
    other = m.for_job("nightly-1")

    def the_other_attempt_lands() -> None:
        entry = other.start_replace("t", [], ["b"])
        other.complete_replace("t", entry, [_segment("b")])

    failpoints.set_hook("push.after-write", the_other_attempt_lands)
    try:
        with pytest.raises(ConflictError) as refused:
            push_arrow(
                m, "t", [pa.table({"v": pa.array([1], pa.int64())})], mode="append", job_id="nightly-1"
            )
    finally:
        failpoints.set_hook("push.after-write", None)
    assert "already completed" in refused.value.message
    assert [s.name for s in m.visible_segments("t")] == ["b"]
    ends = [r for r in m.history("t") if r.operation is Operation.END_REPLACE and r.job_id == "nightly-1"]
    assert len(ends) == 1


def test_a_push_whose_claim_lapsed_before_its_end_reports_it_in_one_line(tmp_path: Path) -> None:
    """push_arrow, with the claim taken away right before the last commit:
    ClaimLostError, the entry reverted, its file queued for retention."""
    from segment_lineage.lineage.core import failpoints

    store = MemoryStore()
    m = LineageManager(store, retry=fast_retry())
    m.create_table(TableConfig.build("t", str(tmp_path / "t"), table_type=TableType.APPEND))
    table = pa.table({"v": pa.array([1, 2, 3], pa.int64())})

    def lapse() -> None:
        for entry in store.holds("owner").live("t"):
            store.holds("owner").release("t", entry)

    failpoints.set_hook("push.after-write", lapse)
    try:
        with pytest.raises(ClaimLostError) as lost:
            push_arrow(m, "t", [table], mode="append", job_id="j")
    finally:
        failpoints.set_hook("push.after-write", None)
    assert "queued for retention" in lost.value.message
    state = m.table("t")
    assert not m.visible_segments("t")
    assert [e.state for e in state.entries.values()] == [EntryState.REVERTED]
    assert state.pending
    again = push_arrow(m, "t", [table], mode="append", job_id="j")  # the rerun pushes it, once
    assert again.rows == 3 and not again.repeated


def test_a_late_push_queues_its_files_with_their_sizes_even_once_seen_as_orphans(tmp_path: Path) -> None:
    """A push paused past its claim while its rerun cleaned its entry up and
    landed, and a retention pass saw its file unreferenced: its end is
    refused, and its file is queued for retention now (not left to the
    orphan grace), with its size, so the pass that deletes it counts it."""
    from segment_lineage.lineage.core import failpoints
    from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
    from segment_lineage.retention.executor import PassOptions, run_pass

    store = MemoryStore()
    m = LineageManager(store, retry=fast_retry(), claims=RootClaimFiles())  # roots claimed: retention runs
    m.create_table(TableConfig.build("t", str(tmp_path / "t")))  # REFRESH: the rerun replaces the late one
    table = pa.table({"v": pa.array([1, 2, 3], pa.int64())})

    def overtaken() -> None:
        failpoints.set_hook("push.after-write", None)
        for entry in store.holds("owner").live("t"):  # the late push's session ends
            store.holds("owner").release("t", entry)
        push_arrow(m, "t", [table])  # its rerun cleans its entry up and lands
        run_pass(m, ["t"], PassOptions())
        seen = [p for p in m.table("t").pending.values() if p.reason is DeletionReason.ORPHAN_SEEN]
        assert seen, "the pass saw the late push's file unreferenced"

    failpoints.set_hook("push.after-write", overtaken)
    try:
        with pytest.raises(ClaimLostError) as lost:
            push_arrow(m, "t", [table])
    finally:
        failpoints.set_hook("push.after-write", None)
    assert "queued for retention" in lost.value.message
    state = m.table("t")
    late = [p for p in state.pending.values() if p.entry_id == lost.value.entry_id]
    assert late and all(p.reason is DeletionReason.STRAY for p in late)
    assert all(p.size_bytes == (tmp_path / "t" / p.location).stat().st_size > 0 for p in late)
    (report,) = run_pass(m, ["t"], PassOptions(min_grace_ms=0))
    assert report.files_deleted == len(late) and report.bytes_deleted == sum(p.size_bytes for p in late)


def _month(month: int) -> pa.Table:
    ts = pa.array([1_704_067_200_000 + month * 2_678_400_000], pa.timestamp("ms", tz="UTC"))
    return pa.table({"ts": ts, "v": pa.array([month], pa.int64())})


def test_delta_version_numbers_hold_while_a_publish_lands(zk_manager: LineageManager, tmp_path: Path) -> None:
    """A log read before another publish landed numbers its commits as they
    are (by their files' names), not counting down from the version it read:
    the version map and retention's window agree with a fresh read."""
    from segment_lineage.mirror.delta import DeltaLog
    from segment_lineage.mirror.publisher import sync
    from segment_lineage.mirror.views import mirror_commits

    root = str(tmp_path / "m")
    zk_manager.create_table(TableConfig.build("m", root, "APPEND", time_column="ts", mirror="delta"))
    for month in range(3):
        push_arrow(zk_manager, "m", [_month(month)], mode="append")
        sync(zk_manager, "m")
    read_before = DeltaLog.open(root)
    push_arrow(zk_manager, "m", [_month(3)], mode="append")
    sync(zk_manager, "m")  # lands after the read
    fresh = DeltaLog.open(root)
    assert fresh.shown.version == read_before.shown.version + 1

    def numbered(log: DeltaLog) -> dict[int, int | None]:
        return {c.delta_version: c.lineage_version for c in log.history()}

    before = numbered(read_before)
    assert before == {v: n for v, n in numbered(fresh).items() if v <= read_before.shown.version}
    assert min(before) >= 0
    assert read_before.referenced_since(0) <= fresh.referenced_since(0)  # no version -1 read
    shown = {c.delta_version: c.lineage_version for c in mirror_commits(zk_manager, "m")}
    assert shown == numbered(fresh)


@pytest.mark.slow
def test_retention_never_deletes_a_live_zookeepers_data_under_a_root(
    zk_manager: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ZooKeeper server whose data lies under a table's root (its home set
    there by mistake) keeps every file through passes run under another
    LINEAGE_HOME, forced, with no orphan grace: its data directory is marked
    on disk, and the pass is refused. A table cannot be made over it either."""
    from segment_lineage.lineage.core.errors import InvalidInputError, RefusedError
    from segment_lineage.lineage.zk.server import ZkServer, free_port
    from segment_lineage.retention.executor import PassOptions, run_table

    root = tmp_path / "lake" / "t"
    zk_manager.create_table(TableConfig.build("t", str(root), table_type=TableType.APPEND))
    push_arrow(zk_manager, "t", [pa.table({"v": pa.array([1], pa.int64())})], mode="append")
    server = ZkServer(root / "home" / "zookeeper", free_port())
    server.start()
    try:
        from kazoo.client import KazooClient

        client = KazooClient(hosts=server.hosts)
        client.start(timeout=30)
        client.create("/live", b"data")  # a transaction log to lose
        client.stop()
        kept = sorted(p for p in (root / "home").rglob("*") if p.is_file())
        assert any("version-2" in str(p) for p in kept) and any(p.name.endswith(".pid") for p in kept), kept
        monkeypatch.setenv("LINEAGE_HOME", str(tmp_path / "elsewhere"))
        options = PassOptions(force=True, min_grace_ms=0, orphan_grace_ms=0)
        for _ in range(2):  # an orphan goes at its second sighting
            with pytest.raises(RefusedError) as refused:
                run_table(zk_manager, "t", options)
            assert "data directory" in refused.value.message
        assert all(p.exists() for p in kept)
        assert server.is_serving()
        for bad in (root / "home" / "zookeeper" / "inside", tmp_path / "lake"):
            with pytest.raises(InvalidInputError, match="data directory"):
                zk_manager.create_table(TableConfig.build("u", str(bad)))
    finally:
        server.stop()


@pytest.mark.slow
def test_a_floor_hog_delays_a_push_by_the_floor_budget_at_most(
    zk_hosts: str, zk_manager: LineageManager, tmp_path: Path
) -> None:
    """A client that re-takes the table's floor again and again under new
    holder ids (what a pusher identity may do) never holds a writer past the
    floor budget: the push lands long before its deadline."""
    import threading
    import uuid

    from segment_lineage.lineage.core.retry import RetryPolicy
    from segment_lineage.lineage.manager.floor import FLOOR_BUDGET_S, FLOOR_MS
    from segment_lineage.lineage.zk.client import ZkSettings, connect
    from segment_lineage.lineage.zk.store import ZkStore

    zk_manager.create_table(TableConfig.build("t", str(tmp_path / "t"), table_type=TableType.APPEND))
    push_arrow(zk_manager, "t", [pa.table({"v": pa.array([0], pa.int64())})], mode="append")
    hog = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    stop = threading.Event()
    taken: list[str] = []

    def hogging() -> None:
        while not stop.is_set() and len(taken) < 400:
            holder = uuid.uuid4().hex
            if hog.floors.take("t", hog.read("t").floor, holder, hog.now_ms() + FLOOR_MS):
                taken.append(holder)
            stop.wait(0.2)

    thread = threading.Thread(target=hogging)
    thread.start()
    try:
        wait_for("the hog to hold the floor", lambda: len(taken) >= 2)
        writer = LineageManager(
            zk_manager.store, retry=RetryPolicy(max_attempts=50, deadline_s=4 * FLOOR_BUDGET_S)
        )
        result = push_arrow(writer, "t", [pa.table({"v": pa.array([1], pa.int64())})], mode="append")
        assert result.rows == 1
        assert len(taken) > 2  # the hog kept at it while the push waited, and went past it
    finally:
        stop.set()
        thread.join(timeout=30)
        hog.close()


@pytest.mark.parametrize("char", ["[", "]", "|", "^", "\\"])
def test_a_mirrored_table_at_a_root_deltalake_cannot_write_is_refused(
    zk_hosts: str, tmp_path: Path, char: str
) -> None:
    """deltalake panics or fails writing a log under such a path: refused at
    create, naming the character, and nothing is created."""
    from tests.helpers.run import cli

    root = tmp_path / f"a{char}b"
    code, _, err = cli(zk_hosts, "table", "create", "t", "--root", str(root), "--mirror", "delta")
    assert code != 0 and "deltalake cannot write" in err and repr(char) in err, err
    code, out, _ = cli(zk_hosts, "table", "list")
    assert "t" not in out.split()
    assert not (root / "_delta_log").exists()


def test_repair_publishes_the_tables_columns_over_a_foreign_append_that_added_one(
    zk_hosts: str, tmp_path: Path
) -> None:
    """Another writer appended rows with a new column to the mirror's log:
    `mirror repair` publishes the table's columns and files over it, its
    version numbers going on (no disable and enable), and every engine then
    reads the table's rows only."""
    from deltalake import DeltaTable, write_deltalake

    from tests.helpers.delta_reads import read_delta
    from tests.helpers.run import cli

    root = tmp_path / "m"
    _mirrored(zk_hosts, root, tmp_path)
    ts = pa.array([1_800_000_000_000_000], pa.timestamp("us", tz="UTC"))
    foreign = pa.table({"ts": ts, "v": pa.array([99], pa.int64()), "extra": pa.array(["x"])})
    write_deltalake(str(root), foreign, mode="append", schema_mode="merge")
    before = DeltaTable(str(root)).version()
    files = sorted(p.name for p in root.rglob("*"))

    code, out, err = cli(zk_hosts, "mirror", "repair", "m", "--dry-run")  # says what, writes nothing
    assert code == 0, err
    assert f"would publish version 3 over another writer's WRITE (Delta version {before})" in out
    assert "nothing was written" in out
    assert DeltaTable(str(root)).version() == before and sorted(p.name for p in root.rglob("*")) == files

    code, out, err = cli(zk_hosts, "mirror", "repair", "m")
    assert code == 0, err
    code, out, err = cli(zk_hosts, "mirror", "repair", "m", "--dry-run")
    assert code == 0 and "needs no repair" in out, (out, err)
    log = DeltaTable(str(root))
    assert log.version() > before  # numbers go on
    assert [f.name for f in log.schema().fields] == ["ts", "v"]
    assert sorted(read_delta(str(root)).column("v").to_pylist()) == [0, 1, 2]
    code, out, err = cli(zk_hosts, "--json", "mirror", "status", "m")
    assert code == 0 and '"problem": null' in out, (out, err)
    code, _, err = cli(
        zk_hosts, "push", "m", "--input", str(_input(tmp_path / "in2.parquet", 2, 10)), "--mode", "append"
    )
    assert code == 0, err
    assert sorted(read_delta(str(root)).column("v").to_pylist()) == [0, 1, 2, 10, 11]


@pytest.mark.slow
def test_the_mirror_never_removes_a_zookeepers_data_inside_its_log(zk_hosts: str, tmp_path: Path) -> None:
    """A ZooKeeper server started with its home inside a mirrored table's
    _delta_log: mirror disable and table drop refuse to remove the log (its
    data stays, the server serves), naming the marked folder."""
    from segment_lineage.lineage.zk.server import ZkServer, free_port
    from tests.helpers.run import cli

    root = tmp_path / "m"
    _mirrored(zk_hosts, root, tmp_path)
    server = ZkServer(root / "_delta_log" / "zookeeper", free_port())
    server.start()
    try:
        kept = sorted(p for p in (root / "_delta_log" / "zookeeper").rglob("*") if p.is_file())
        for words in (["mirror", "disable", "m"], ["table", "drop", "m", "--force"]):
            code, _, err = cli(zk_hosts, *words)
            assert code != 0 and "data directory" in err, (words, err)
            assert all(p.exists() for p in kept), words
        assert server.is_serving()
    finally:
        server.stop()


def test_a_record_no_reader_could_decode_is_never_written(zk_manager: LineageManager, tmp_path: Path) -> None:
    """A hand-made change queuing a location that leads out of the root is
    refused when written (it once left the table unreadable, even to admins)."""
    from segment_lineage.lineage.core.errors import InvalidInputError
    from segment_lineage.lineage.core.model import Change, DeletionReason, PendingDeletion

    zk_manager.create_table(TableConfig.build("t", str(tmp_path / "t"), table_type=TableType.APPEND))
    push_arrow(zk_manager, "t", [pa.table({"v": pa.array([1], pa.int64())})], mode="append")
    before = zk_manager.table("t").version

    def planted(state: TableState, now: int) -> Change:
        bad = PendingDeletion("../elsewhere/x.parquet", "file", DeletionReason.STRAY, now, None)
        return Change(
            state=state.replace(pending={**state.pending, bad.location: bad}), operation=Operation.QUEUE_FILES
        )

    with pytest.raises(InvalidInputError, match="invalid segment location"):
        zk_manager.commit("t", planted)
    assert zk_manager.table("t").version == before
    assert [s.rows for s in zk_manager.visible_segments("t")] == [1]


def test_a_repair_that_cannot_publish_writes_nothing(zk_hosts: str, tmp_path: Path) -> None:
    """Another writer replaced the log's columns and vacuumed the table's
    files away: the repair fails naming the missing file, and commits no
    empty version first; status still reports the problem."""
    from deltalake import DeltaTable, write_deltalake

    from tests.helpers.run import cli

    root = tmp_path / "m"
    _mirrored(zk_hosts, root, tmp_path)
    write_deltalake(str(root), pa.table({"x": pa.array([1, 2])}), mode="overwrite", schema_mode="overwrite")
    DeltaTable(str(root)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    before = DeltaTable(str(root)).version()
    code, _, err = cli(zk_hosts, "mirror", "repair", "m")
    assert code != 0 and "missing" in err, err
    assert DeltaTable(str(root)).version() == before
    code, out, err = cli(zk_hosts, "--json", "mirror", "status", "m")
    assert '"problem": null' not in out, out


def test_a_rollback_past_the_versions_kept_names_the_setting_that_keeps_more(
    zk_hosts: str, tmp_path: Path
) -> None:
    """A busy table outruns its kept versions fast (an outside trial's
    `rollback --set` 15 s after the set, at the default 64): the refusal
    says how to keep more, typed as a user types it."""
    from tests.helpers.run import cli

    code, _, err = cli(
        zk_hosts, "table", "create", "kept", "--root", str(tmp_path / "kept"), "--versions-kept", "2"
    )
    assert code == 0, err
    for days in ("1d", "2d", "3d", "4d"):  # settings changes: each a version
        code, _, err = cli(zk_hosts, "table", "alter", "kept", "--replaced-retention", days)
        assert code == 0, err
    code, _, err = cli(zk_hosts, "retention", "run", "--table", "kept", "--yes")  # its metadata pass prunes
    assert code == 0, err
    code, _, err = cli(zk_hosts, "rollback", "kept", "--to-version", "1")
    assert code != 0 and "snapshot too old" in err, err
    assert "lineage table alter kept --versions-kept N" in err, err


def test_a_store_away_after_an_unknown_outcome_is_looked_at_again_not_told_unknown(tmp_path: Path) -> None:
    """A push's end whose answer was lost, then the store away for a moment
    (its session expired, the client connecting again), then the claim
    gone: the next read comes, and the refusal is settled by one look as
    "committed nothing" (an outside attack found "whether it committed is
    unknown" when the read after the lost answer failed once)."""
    from segment_lineage.lineage.core.errors import StoreUnavailableError
    from segment_lineage.lineage.store.contract import WriteOutcomeUnknown

    store = MemoryStore()
    m = _claimed_entry(store, tmp_path)
    real_write, real_read_now = store.write, store.read_now
    sent: list[int] = []

    def lost_answer(*args: Any, **kwargs: Any) -> Any:
        sent.append(1)
        if len(sent) == 1:
            raise WriteOutcomeUnknown("ConnectionLoss")
        store.holds("owner").release("t", E1)  # the session ended meanwhile
        return real_write(*args, **kwargs)

    def away_once(table: str) -> Any:
        if len(sent) == 1 and not away:  # the read right after the lost answer
            away.append(1)
            raise StoreUnavailableError("reading table 't': ZooKeeper is not answering (connecting again)")
        return real_read_now(table)

    away: list[int] = []
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(store, "write", lost_answer)
    monkeypatch.setattr(store, "read_now", away_once)
    before = m.table("t").version
    segments = [_segment("a", str(tmp_path / "t"))]
    try:
        with pytest.raises(ClaimLostError, match="committed nothing"):
            m.commit("t", lambda s, now: transitions.complete_replace(s, E1, segments, now_ms=now), owner=E1)
    finally:
        monkeypatch.undo()
    assert away and m.table("t").version == before
