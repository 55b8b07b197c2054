"""Push sets: several tables pushed as one commit, rolled back as one, read
as one cut; a failure anywhere reverts every table; on both stores."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from segment_lineage.ingest.arrow_push import prepare_arrow, push_arrow
from segment_lineage.ingest.audit import Audit, AuditFailedError
from segment_lineage.ingest.errors import PushRefusedError
from segment_lineage.ingest.push_set import push_set
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import (
    ClaimLostError,
    InvalidInputError,
    LineageError,
    RefusedError,
    StoreUnavailableError,
)
from segment_lineage.lineage.core.model import Audit as Audit_
from segment_lineage.lineage.core.model import EntryState, Operation, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.manager.together import Together

TABLES = ("facts", "dims")
E1, E2 = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"


def rows(n: int, label: str) -> pa.Table:
    return pa.table({"label": [label] * n, "id": list(range(n))})


def labels(m: LineageManager, table: str) -> list[str]:
    with SnapshotReader(m, table) as reader:
        data = reader.to_arrow()
    return sorted(set(data.column("label").to_pylist())) if data.num_rows else []


@pytest.fixture
def tables(manager: LineageManager, tmp_path: Path) -> tuple[str, ...]:
    for name in TABLES:
        manager.create_table(TableConfig.build(name, str(tmp_path / name)))
        push_arrow(manager, name, [rows(3, "old")])
    return TABLES


def prepared(m: LineageManager, label: str, n: int = 4, **kw: object) -> list:  # type: ignore[type-arg]
    return [prepare_arrow(m, t, [rows(n, label)], **kw) for t in TABLES]  # type: ignore[arg-type]


def test_a_set_lands_in_every_table_in_one_commit(manager: LineageManager, tables: tuple[str, ...]) -> None:
    done = push_set(manager, prepared(manager, "new"), reason="nightly", job_id="night-1")
    assert [p.table for p in done.pushes] == list(TABLES)
    assert all(p.rows == 4 and p.replaced == 1 for p in done.pushes)
    for table in TABLES:
        assert labels(manager, table) == ["new"]
        record = manager.history(table, 1)[0]
        assert record.operation is Operation.END_REPLACE and record.set_id == done.set_id
        assert record.job_id == "night-1" and record.reason == "nightly"
    commits = {manager.history(t, 1)[0].commit_id for t in TABLES}
    assert len(commits) == 1  # one commit, one id in every table

    again = push_set(manager, prepared(manager, "again"), job_id="night-1")
    assert again.repeated and labels(manager, "facts") == ["new"]
    assert again.set_id == done.set_id  # the set the job did, the one its records carry
    assert push_set(manager, prepared(manager, "x"), dry_run=True).set_id is None  # no id until a push
    looked = push_set(manager, prepared(manager, "x"), job_id="night-1", dry_run=True)
    assert looked.repeated and looked.dry_run and looked.set_id == done.set_id
    planned = push_set(manager, prepared(manager, "x"), job_id="night-2", dry_run=True)
    assert planned.dry_run and [p.job_id for p in planned.pushes] == ["night-2"] * len(TABLES)


def test_a_failure_in_one_table_reverts_every_table(manager: LineageManager, tables: tuple[str, ...]) -> None:
    parts = prepared(manager, "new")
    parts[1] = prepare_arrow(manager, "dims", [rows(2, "new")], audit=Audit(min_rows=10))
    with pytest.raises(AuditFailedError, match=r"push set [\w-]+ failed: .*'dims'.*min-rows 10") as failed:
        push_set(manager, parts)
    assert "other entries (facts) were reverted" in failed.value.message
    for table in TABLES:
        assert labels(manager, table) == ["old"]
        states = [e.state for e in manager.table(table).entries.values()]
        assert states.count(EntryState.IN_PROGRESS) == 0 and EntryState.REVERTED in states


def test_a_failed_set_tells_which_entries_were_reverted_and_which_were_left(
    manager: LineageManager, tables: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No one table failed (ZooKeeper stopped answering at the commit): every
    entry is told of, none as "other"; one whose cleanup failed too is told
    as left for the next push, not as reverted."""
    from segment_lineage.ingest import push_failure

    real = push_failure.abandon

    def abandon(m: LineageManager, table: str, *args: object) -> str:
        return "left" if table == "dims" else real(m, table, *args)  # type: ignore[arg-type]

    def unavailable(*_: object, **__: object) -> None:
        raise StoreUnavailableError("ZooKeeper did not answer")

    monkeypatch.setattr(push_failure, "abandon", abandon)
    monkeypatch.setattr(manager, "commit_together", unavailable)
    with pytest.raises(LineageError) as failed:
        push_set(manager, prepared(manager, "new"))
    message = failed.value.message
    assert "the set's entries (facts) were reverted with it" in message
    assert "the set's entries in dims could not be cleaned up" in message
    assert "other entries" not in message
    states = {t: [e.state for e in manager.table(t).entries.values()] for t in TABLES}
    assert EntryState.IN_PROGRESS not in states["facts"] and EntryState.IN_PROGRESS in states["dims"]


def test_a_set_whose_entry_another_process_reverted_names_that_table(
    manager: LineageManager, tmp_path: Path
) -> None:
    """Another process force-reverts one table's entry between the set's
    writes and its commit: the set fails naming that table (even one whose
    name the message holds anyway: 'entry'), the other table's entry is
    reverted with it, and no table shows the set."""
    from segment_lineage.lineage.core import failpoints

    for name in ("entry", "other"):
        manager.create_table(TableConfig.build(name, str(tmp_path / name)))
        push_arrow(manager, name, [rows(2, "old")])

    def revert_entry() -> None:
        running = [e for e in manager.table("entry").entries.values() if e.state is EntryState.IN_PROGRESS]
        manager.revert_replace("entry", running[0].entry_id, force=True)

    failpoints.set_hook("set.after-write", revert_entry)
    try:
        with pytest.raises(LineageError) as failed:
            push_set(manager, [prepare_arrow(manager, t, [rows(2, "new")]) for t in ("entry", "other")])
    finally:
        failpoints.set_hook("set.after-write", None)
    message = failed.value.message
    assert "failed: table 'entry': entry " in message and "was reverted" in message, message
    assert "the set's other entries (other) were reverted with it" in message, message
    assert labels(manager, "entry") == labels(manager, "other") == ["old"]


def test_a_set_is_refused_before_anything_starts(manager: LineageManager, tables: tuple[str, ...]) -> None:
    with pytest.raises(InvalidInputError, match="named twice"):
        push_set(manager, [prepare_arrow(manager, "facts", [rows(1, "x")])] * 2)
    with pytest.raises(InvalidInputError, match="at least one table"):
        push_set(manager, [])
    versions = {t: manager.table(t).version for t in TABLES}
    parts = prepared(manager, "new")
    parts[1] = prepare_arrow(manager, "dims", [rows(2, "new")], mode="append")  # a REFRESH table
    with pytest.raises(PushRefusedError, match="dims"):
        push_set(manager, parts)
    assert {t: manager.table(t).version for t in TABLES} == versions  # nothing started anywhere
    assert all(labels(manager, t) == ["old"] for t in TABLES)


def test_a_set_whose_job_completed_in_some_tables_only_is_refused(
    manager: LineageManager, tables: tuple[str, ...]
) -> None:
    push_arrow(manager, "facts", [rows(1, "alone")], job_id="j")
    with pytest.raises(PushRefusedError, match="completed in facts but not in dims"):
        push_set(manager, prepared(manager, "new"), job_id="j")
    assert labels(manager, "dims") == ["old"]


def test_a_set_rolls_back_in_one_commit(manager: LineageManager, tables: tuple[str, ...]) -> None:
    done = push_set(manager, prepared(manager, "new"))
    plan = manager.rollback_set(done.set_id, dry_run=True)
    assert plan.committed is None and set(plan.targets) == set(TABLES)
    undone = manager.rollback_set(done.set_id)
    assert undone.committed is not None and set(undone.committed) == set(TABLES)
    for table in TABLES:
        assert labels(manager, table) == ["old"]
        record = manager.history(table, 1)[0]
        assert record.operation is Operation.ROLLBACK and record.set_id == undone.rollback_set
    again = manager.rollback_set(done.set_id)  # every table already there: nothing written, no new set
    assert again.committed == {} and again.rollback_set is None
    assert manager.history("facts", 1)[0].set_id == undone.rollback_set


def test_a_set_rollback_never_splits_a_later_set(manager: LineageManager, tmp_path: Path) -> None:
    """Set X over u1 and u2, then set Y over u2 and u3: rolling back X alone
    would undo Y in u2 and keep it in u3. Refused (the dry run too), nothing
    changed; once Y is rolled back, X rolls back (Y's own rollback is no
    set to split), and so it does once Y is brought back in every table."""
    for name in ("u1", "u2", "u3"):
        manager.create_table(TableConfig.build(name, str(tmp_path / name), max_snapshots=10))
        push_arrow(manager, name, [rows(2, "old")])
    x = push_set(manager, [prepare_arrow(manager, t, [rows(2, "x")]) for t in ("u1", "u2")])
    y = push_set(manager, [prepare_arrow(manager, t, [rows(2, "y")]) for t in ("u2", "u3")])
    versions = {t: manager.table(t).version for t in ("u1", "u2", "u3")}
    for dry_run in (True, False):
        with pytest.raises(RefusedError, match=rf"would undo set {y.set_id} in u2 but not in u3") as refused:
            manager.rollback_set(x.set_id, dry_run=dry_run)
        assert f"lineage rollback --set {y.set_id}" in (refused.value.remedy or "")
    assert {t: manager.table(t).version for t in versions} == versions  # nothing changed
    assert labels(manager, "u2") == ["y"] and labels(manager, "u3") == ["y"]

    undone_y = manager.rollback_set(y.set_id)
    assert labels(manager, "u2") == ["x"] and labels(manager, "u3") == ["old"]
    again = manager.rollback_set(undone_y.rollback_set or "")  # Y back in u2 and u3 at once
    assert again.committed is not None and set(again.committed) == {"u2", "u3"}
    assert labels(manager, "u2") == ["y"] and labels(manager, "u3") == ["y"]
    manager.rollback_set(y.set_id)
    undone_x = manager.rollback_set(x.set_id)  # Y is undone everywhere: nothing left to split
    assert undone_x.committed is not None and set(undone_x.committed) == {"u1", "u2"}
    assert [labels(manager, t) for t in ("u1", "u2", "u3")] == [["old"], ["old"], ["old"]]


def test_a_set_rollback_is_refused_when_a_table_of_the_set_no_longer_keeps_its_record(
    manager: LineageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each record of a set counts the tables its commit changed. A table
    that pushed past the history it keeps has lost the set's record: a
    rollback of the tables still keeping it would leave the set in that
    one. Refused, naming the count, and nothing changed."""
    import segment_lineage.lineage.store.memory
    import segment_lineage.lineage.zk.store.history

    for module in (segment_lineage.lineage.store.memory, segment_lineage.lineage.zk.store.history):
        monkeypatch.setattr(module, "MAX_HISTORY", 6)
    for name in ("u1", "u2"):
        manager.create_table(TableConfig.build(name, str(tmp_path / name), max_snapshots=10))
        push_arrow(manager, name, [rows(2, "old")])
    x = push_set(manager, [prepare_arrow(manager, t, [rows(2, "x")]) for t in ("u1", "u2")])
    assert [manager.history(t, 1)[0].set_size for t in ("u1", "u2")] == [2, 2]
    for i in range(200):  # until u2's record of X is compacted away (ZooKeeper seals the tail in chunks)
        if all(r.set_id != x.set_id for r in manager.history("u2")):
            break
        push_arrow(manager, "u2", [rows(1, f"later{i}")])
    assert all(r.set_id != x.set_id for r in manager.history("u2"))
    versions = {t: manager.table(t).version for t in ("u1", "u2")}
    for dry_run in (True, False):
        with pytest.raises(RefusedError, match=r"changed 2 tables, but only 1 \(u1\) still keep its record"):
            manager.rollback_set(x.set_id, dry_run=dry_run)
    assert {t: manager.table(t).version for t in versions} == versions
    assert labels(manager, "u1") == ["x"]


def test_a_set_rollback_fails_when_a_table_it_judged_moves_before_it_lands(
    manager: LineageManager, tmp_path: Path
) -> None:
    """Y over u2 and u3 was undone in u3 alone, so rolling back X (u1, u2)
    splits nothing. If u3 is rolled forward (Y whole again) between the
    plan and the commit, the commit's own request finds u3 moved: planned
    again and refused, and Y stays whole."""
    from segment_lineage.lineage.core import failpoints

    for name in ("u1", "u2", "u3"):
        manager.create_table(TableConfig.build(name, str(tmp_path / name), max_snapshots=10))
        push_arrow(manager, name, [rows(2, "old")])
    x = push_set(manager, [prepare_arrow(manager, t, [rows(2, "x")]) for t in ("u1", "u2")])
    push_set(manager, [prepare_arrow(manager, t, [rows(2, "y")]) for t in ("u2", "u3")])
    with_y = manager.table("u3").version
    manager.rollback("u3", with_y - 1, split_sets=True)
    meanwhile: list[int] = []

    def forward() -> None:
        if not meanwhile:  # once (the roll forward is fenced on u2 by a commit of its own)
            meanwhile.append(0)
            meanwhile[0] = manager.rollback("u3", with_y).committed_version or 0

    failpoints.set_hook("set.before-commit", forward)
    try:
        with pytest.raises(RefusedError, match=r"would undo set .* in u2 but not in u3"):
            manager.rollback_set(x.set_id)
    finally:
        failpoints.set_hook("set.before-commit", None)
    assert meanwhile[0] > with_y and labels(manager, "u2") == labels(manager, "u3") == ["y"]
    assert labels(manager, "u1") == ["x"]


def test_a_set_rollback_with_an_unreadable_table_is_refused(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    """A table whose head cannot be read is left out of the listing; a set
    over it would be judged, and rolled back, without it. Refused, naming
    it; once it reads again the rollback goes through whole."""
    manager, store = zk_manager, zk_manager.store
    for name in ("b3", "q3"):
        manager.create_table(TableConfig.build(name, str(tmp_path / name)))
        push_arrow(manager, name, [rows(2, "old")])
    x = push_set(manager, [prepare_arrow(manager, t, [rows(2, "x")]) for t in ("b3", "q3")])
    head = store.paths.head("q3")  # type: ignore[attr-defined]
    raw, _ = store.client.get(head)  # type: ignore[attr-defined]
    store.client.set(head, b"{truncated")  # type: ignore[attr-defined]
    try:
        with pytest.raises(RefusedError, match=r"table\(s\) q3 cannot be read"):
            manager.rollback_set(x.set_id)
    finally:
        store.client.set(head, raw)  # type: ignore[attr-defined]
    assert labels(manager, "b3") == labels(manager, "q3") == ["x"]
    done = manager.rollback_set(x.set_id)
    assert done.committed is not None and set(done.committed) == {"b3", "q3"}


def test_a_cut_sees_a_set_in_all_its_tables_or_none(manager: LineageManager, tables: tuple[str, ...]) -> None:
    done = push_set(manager, prepared(manager, "new"))
    with SnapshotReader.together(manager, list(TABLES)) as cut:
        assert cut.sets() == {t: done.set_id for t in TABLES}
        push_set(manager, prepared(manager, "newer"))  # lands after the cut: not seen through it
        assert {t: sorted(set(cut[t].to_arrow().column("label").to_pylist())) for t in TABLES} == {
            t: ["new"] for t in TABLES
        }
    assert all(labels(manager, t) == ["newer"] for t in TABLES)


def _open(entry: str):  # type: ignore[no-untyped-def]
    """An update that opens a replacement (a change any table accepts)."""

    def update(state, now):  # type: ignore[no-untyped-def]
        return transitions.start_replace(
            state, [], [f"seg_{entry[:4]}"], entry_id=entry, audit=Audit_(actor="t"), now_ms=now
        )

    return update


def test_a_late_set_commit_is_fenced_by_every_claim(manager: LineageManager, tables: tuple[str, ...]) -> None:
    """A part whose claim is gone (its session ended while the set was
    paused) refuses the whole request: no table is changed."""
    before = {t: manager.table(t).version for t in TABLES}
    with pytest.raises(ClaimLostError, match="dims"):
        manager.commit_together([Together("facts", _open(E1)), Together("dims", _open(E2), owner=E2)])
    assert {t: manager.table(t).version for t in TABLES} == before
    done = manager.commit_together([Together("facts", _open(E1)), Together("dims", _open(E2))])
    assert [c.state.version for c in done] == [before[t] + 1 for t in TABLES]


def test_too_many_tables_are_refused(manager: LineageManager) -> None:
    with pytest.raises(InvalidInputError, match="at most 100 tables"):
        manager.commit_together([Together(f"t{i}", _open(E1)) for i in range(101)])


@pytest.mark.zk
def test_a_set_over_the_request_size_is_refused_whole(zk_manager: LineageManager, tmp_path: Path) -> None:
    """Wide tables whose heads together exceed one request: refused before
    anything is sent, and no table changes."""
    import dataclasses

    from segment_lineage.lineage.core.errors import TooLargeError
    from segment_lineage.lineage.core.schema import DataType, Field

    wide = tuple(Field(f"column_with_a_long_name_{i:04d}", DataType("double")) for i in range(1500))
    names = [f"wide{i}" for i in range(12)]
    for name in names:
        zk_manager.create_table(
            dataclasses.replace(TableConfig.build(name, str(tmp_path / name)), schema=wide)
        )
    before = {t: zk_manager.table(t).version for t in names}
    with pytest.raises(
        TooLargeError, match=r"12 tables together would send \d+ bytes .* nothing was committed"
    ):
        zk_manager.commit_together([Together(t, _open(E1)) for t in names])
    assert {t: zk_manager.table(t).version for t in names} == before
    done = zk_manager.commit_together([Together(t, _open(E1)) for t in names[:3]])  # a smaller set fits
    assert all(c.applied for c in done)


@pytest.mark.zk
def test_a_reader_of_the_mirrors_picks_a_sets_cut_as_engines_md_says(
    zk_manager: LineageManager, tmp_path: Path
) -> None:
    """docs/engines.md's recipe, with delta-rs: each table at the Delta
    version of the newest set every log has, whatever came after in one table."""
    from deltalake import DeltaTable

    from segment_lineage.mirror.hook import publish_after

    m = zk_manager
    m.after_commit = publish_after(lambda _text: None)
    for name in TABLES:
        m.create_table(TableConfig.build(name, str(tmp_path / name), mirror="delta"))
    push_set(m, prepared(m, "first"))
    second = push_set(m, prepared(m, "second"))
    push_arrow(m, "facts", [rows(2, "later")])  # after the set, in one table only

    def set_versions(table: DeltaTable) -> dict[str, int]:
        return {c["segment_lineage.set"]: c["version"] for c in table.history() if "segment_lineage.set" in c}

    tables = {name: DeltaTable(str(tmp_path / name)) for name in TABLES}
    found = {name: set_versions(t) for name, t in tables.items()}
    common = set.intersection(*(set(v) for v in found.values()))
    newest = max(common, key=lambda s: found["facts"][s])
    assert newest == second.set_id
    for name, table in tables.items():
        table.load_as_version(found[name][newest])
        assert set(table.to_pyarrow_table().column("label").to_pylist()) == {"second"}


def test_a_staged_set_is_published_whole(manager: LineageManager, tables: tuple[str, ...]) -> None:
    from segment_lineage.ingest.push_set import publish_set
    from segment_lineage.ingest.stage import publish

    staged = push_set(manager, prepared(manager, "new", audit=Audit(min_rows=2)), stage=True, hold="2h")
    assert all(p.staged for p in staged.pushes)
    assert all(labels(manager, t) == ["old"] for t in TABLES)  # staged: readers see none of it
    entry = staged.pushes[0].entry_id
    with pytest.raises(PushRefusedError, match=f"part of push set {staged.set_id}"):
        publish(manager, "facts", entry)
    with pytest.raises(RefusedError, match=f"push set {staged.set_id}'s staged push .*published whole"):
        manager.end_replace("facts", entry)  # Pinot's endReplace on one table's part: refused too
    assert all(labels(manager, t) == ["old"] for t in TABLES)
    done = publish_set(manager, staged.set_id, reason="checked")
    assert all(p.published and p.rows == 4 for p in done.pushes)
    assert all(p.audited and p.audited.startswith("passed: min-rows 2") for p in done.pushes)
    for table in TABLES:
        assert labels(manager, table) == ["new"]
        record = manager.history(table, 1)[0]
        assert record.operation is Operation.END_REPLACE and record.set_id == staged.set_id
    assert len({manager.history(t, 1)[0].commit_id for t in TABLES}) == 1  # one commit

    again = push_set(manager, prepared(manager, "newer"), stage=True)
    for dry_run in (True, False):  # back to before it would undo what came since, and leave it staged
        with pytest.raises(RefusedError, match=f"set {again.set_id} is staged, not published") as refused:
            manager.rollback_set(again.set_id[:8].upper(), dry_run=dry_run)
        assert f"lineage revert dims {again.pushes[1].entry_id}" in (refused.value.remedy or "")
    assert all(labels(manager, t) == ["new"] for t in TABLES)
    manager.revert_replace("dims", again.pushes[1].entry_id)  # one table's staged push dropped
    with pytest.raises(PushRefusedError, match="no longer whole: its staged push in dims"):
        publish_set(manager, again.set_id)
    assert all(labels(manager, t) == ["new"] for t in TABLES)
    with pytest.raises(InvalidInputError, match="--stage does not go with --job-id"):
        push_set(manager, prepared(manager, "x"), stage=True, job_id="j")


@pytest.mark.zk
def test_two_sets_of_the_same_tables_queue_behind_each_other(zk_hosts: str, tmp_path: Path) -> None:
    """Two processes push sets of the same tables, named in opposite orders:
    each starts its entries in the tables' name order, so the second waits
    behind the first instead of each holding a table the other needs."""
    import dataclasses
    import threading
    import time

    from segment_lineage.lineage.zk.client import ZkSettings, connect
    from segment_lineage.lineage.zk.store import ZkStore

    managers = [LineageManager(ZkStore(connect(ZkSettings(hosts=zk_hosts)))) for _ in range(2)]
    for name in TABLES:
        managers[0].create_table(TableConfig.build(name, str(tmp_path / name)))

    def slow(p):  # type: ignore[no-untyped-def]
        def write(target):  # type: ignore[no-untyped-def]
            time.sleep(1.0)
            return p.write(target)

        return dataclasses.replace(p, write=write)

    done: dict[str, object] = {}

    def run(i: int, order: tuple[str, ...]) -> None:
        m = managers[i]
        try:
            done[str(i)] = push_set(m, [slow(prepare_arrow(m, t, [rows(2, f"set{i}")])) for t in order])
        except Exception as exc:
            done[str(i)] = exc

    from segment_lineage.lineage.core import failpoints

    failpoints.set_hook("start.after-commit", lambda: time.sleep(0.8))  # each start takes a while
    first = threading.Thread(target=run, args=(0, TABLES))
    second = threading.Thread(target=run, args=(1, tuple(reversed(TABLES))))
    try:
        first.start()
        time.sleep(0.3)
        second.start()
        first.join(60)
        second.join(60)
    finally:
        failpoints.set_hook("start.after-commit", None)
    assert not [v for v in done.values() if isinstance(v, Exception)], done
    assert labels(managers[0], "facts") == labels(managers[0], "dims") == ["set1"]
    for m in managers:
        m.store.close()


def test_a_push_over_a_set_staged_part_says_publish_the_set(
    manager: LineageManager, tables: tuple[str, ...]
) -> None:
    """The hint for a push that overlaps one table's part of a staged set
    names the set's publish ('lineage publish TABLE ENTRY' is refused for a
    set's part)."""
    from segment_lineage.ingest.arrow_push import push_arrow
    from segment_lineage.lineage.core.errors import ConflictError

    staged = push_set(manager, prepared(manager, "new"), stage=True, hold="2h")
    with pytest.raises(ConflictError) as refused:
        push_arrow(manager, "facts", [pa.table({"label": ["other"]})])
    assert f"lineage publish --set {staged.set_id}" in (refused.value.remedy or ""), refused.value.remedy
