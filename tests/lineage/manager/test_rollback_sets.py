"""A table's rollback never splits a push set unless told to: a set shows
in every table or in none. On both stores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from segment_lineage.ingest.arrow_push import prepare_arrow, push_arrow
from segment_lineage.ingest.push_set import push_set
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage.core import failpoints
from segment_lineage.lineage.core.errors import ConflictError, ContentionError, LineageError, RefusedError
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.manager import LineageManager

U = ("u1", "u2", "u3")


def labels(m: LineageManager, table: str) -> list[str]:
    with SnapshotReader(m, table) as reader:
        data = reader.to_arrow()
    return sorted(set(data.column("label").to_pylist())) if data.num_rows else []


def pushed(m: LineageManager, tables: tuple[str, ...], label: str) -> str:
    """A push set of ``tables``, two rows each labelled ``label``; its id."""
    table = pa.table({"label": [label] * 2, "id": [0, 1]})
    done = push_set(m, [prepare_arrow(m, t, [table]) for t in tables])
    assert done.set_id is not None
    return done.set_id


@pytest.fixture
def tables(manager: LineageManager, tmp_path: Path) -> tuple[str, ...]:
    for name in U:
        config = TableConfig.build(name, str(tmp_path / name), max_snapshots=10, versions_kept=200)
        manager.create_table(config)
        push_arrow(manager, name, [pa.table({"label": ["old"] * 2, "id": [0, 1]})])
    return U


def heads(m: LineageManager) -> dict[str, int]:
    return {t: m.table(t).version for t in U}


def test_undoing_a_set_in_one_table_only_is_refused_unless_told(
    manager: LineageManager, tables: tuple[str, ...]
) -> None:
    x = pushed(manager, ("u1", "u2"), "x")
    before_x = manager.table("u1").version - 1
    versions = heads(manager)
    for dry_run in (True, False):
        said = rf"rolling back u1 to version {before_x} would undo set {x} in u1 but not in u2"
        with pytest.raises(RefusedError, match=said) as refused:
            manager.rollback("u1", before_x, dry_run=dry_run)
        remedy = refused.value.remedy or ""
        assert f"lineage rollback --set {x}" in remedy and "--split-sets" in remedy
    assert heads(manager) == versions and labels(manager, "u1") == ["x"]  # nothing changed

    looked = manager.rollback("u1", before_x, dry_run=True, split_sets=True)
    assert looked.split_sets == (x,) and heads(manager) == versions
    done = manager.rollback("u1", before_x, split_sets=True)
    assert done.split_sets == (x,) and done.committed_version == versions["u1"] + 1
    assert labels(manager, "u1") == ["old"] and labels(manager, "u2") == ["x"]  # split, as asked


def test_bringing_a_set_back_in_one_table_only_is_refused_and_rejoining_it_is_not(
    manager: LineageManager, tables: tuple[str, ...]
) -> None:
    """Set X rolled back in both its tables; rolling u1 alone forward to X
    would show X in u1 only: refused. Once X is split (told to), rolling
    the other table to agree again is no split at all."""
    x = pushed(manager, ("u1", "u2"), "x")
    with_x = manager.table("u1").version
    undone = manager.rollback_set(x).rollback_set
    with pytest.raises(RefusedError, match=rf"would bring back set {x} in u1 but not in u2") as refused:
        manager.rollback("u1", with_x)
    remedy = refused.value.remedy or ""
    assert f"undoing set rollback {undone} ('lineage rollback --set {undone}')" in remedy
    assert labels(manager, "u1") == ["old"]
    manager.rollback_set(undone or "")  # the remedy as written: X back in both at once
    assert labels(manager, "u1") == labels(manager, "u2") == ["x"]
    manager.rollback_set(x)

    manager.rollback("u1", with_x, split_sets=True)
    assert labels(manager, "u1") == ["x"] and labels(manager, "u2") == ["old"]
    u2_with_x = max(r.version for r in manager.history("u2") if r.set_id == x)
    rejoined = manager.rollback("u2", u2_with_x)  # X in both again: no flag needed
    assert rejoined.split_sets == () and labels(manager, "u2") == ["x"]


def test_tables_outside_every_set_roll_back_as_before(
    manager: LineageManager, tables: tuple[str, ...]
) -> None:
    pushed(manager, ("u1", "u2"), "x")
    first = manager.table("u3").version
    push_arrow(manager, "u3", [pa.table({"label": ["new"] * 2, "id": [0, 1]})])
    done = manager.rollback("u3", first)
    assert done.committed_version is not None and done.split_sets == () and labels(manager, "u3") == ["old"]
    later = pushed(manager, ("u1", "u2"), "y")  # a later set, then a rollback of u1 to after it: no set moves
    push_arrow(manager, "u1", [pa.table({"label": ["z"] * 2, "id": [0, 1]})])
    assert manager.rollback("u1", manager.table("u1").version - 1).committed_version is not None
    assert labels(manager, "u1") == labels(manager, "u2") == ["y"] and later


def test_a_rollback_judged_on_another_table_fails_when_that_table_moves_before_it_lands(
    manager: LineageManager, tables: tuple[str, ...]
) -> None:
    """X was undone in u2 alone (told to), so undoing it in u1 too makes X
    whole again: allowed, judged on u2. If u2 is rolled forward meanwhile
    (X whole and applied again), the rollback's own request finds u2 moved:
    nothing changes, and X stays whole."""
    x = pushed(manager, ("u1", "u2"), "x")
    with_x = {t: manager.table(t).version for t in ("u1", "u2")}
    manager.rollback("u2", with_x["u2"] - 1, split_sets=True)
    meanwhile: list[int] = []

    def forward() -> None:
        if not meanwhile:  # once: the roll forward commits through the same failpoint
            meanwhile.append(0)
            meanwhile[0] = manager.rollback("u2", with_x["u2"]).committed_version or 0

    failpoints.set_hook("set.before-commit", forward)
    try:
        with pytest.raises(ConflictError, match=r"u2 changed while the rollback of 'u1' was judged on them"):
            manager.rollback("u1", with_x["u1"] - 1)
    finally:
        failpoints.set_hook("set.before-commit", None)
    assert meanwhile[0] > with_x["u2"] and labels(manager, "u1") == labels(manager, "u2") == ["x"]
    with pytest.raises(RefusedError, match=rf"would undo set {x} in u1 but not in u2"):
        manager.rollback("u1", with_x["u1"] - 1)  # judged again: now it would split X


def test_a_rollback_judged_on_another_table_lands_when_nothing_moved(
    manager: LineageManager, tables: tuple[str, ...]
) -> None:
    x = pushed(manager, ("u1", "u2"), "x")
    with_x = {t: manager.table(t).version for t in ("u1", "u2")}
    manager.rollback("u2", with_x["u2"] - 1, split_sets=True)
    done = manager.rollback("u1", with_x["u1"] - 1)  # X in none of its tables now: whole
    assert done.committed_version is not None and done.split_sets == ()
    assert labels(manager, "u1") == labels(manager, "u2") == ["old"]
    record = manager.history("u1", 1)[0]
    assert record.set_id is None and record.set_size == 0, x  # one table's rollback is no set


def test_a_set_older_than_the_history_a_read_brings_is_judged_too(
    manager: LineageManager, tables: tuple[str, ...]
) -> None:
    """80 commits after set X: more history records than a read of the head
    brings (ZooKeeper's head keeps at most 64). Rolling u1 back before X is
    refused all the same; rolling it back among the later commits is not."""
    x = pushed(manager, ("u1", "u2"), "x")
    before_x = manager.table("u1").version - 1
    for i in range(40):
        entry = manager.start_replace("u1", [], [f"n{i}"])
        manager.complete_replace("u1", entry, [Segment(f"n{i}", f"n{i}.parquet", rows=1, size_bytes=10)])
    versions = heads(manager)
    with pytest.raises(RefusedError, match=rf"would undo set {x} in u1 but not in u2"):
        manager.rollback("u1", before_x)
    assert heads(manager) == versions
    done = manager.rollback("u1", versions["u1"] - 10)  # five pushes undone, X kept
    assert done.committed_version == versions["u1"] + 1 and len(done.disappear) == 5


def test_a_set_reverted_in_every_table_comes_back_one_table_at_a_time_knowingly(
    manager: LineageManager, tables: tuple[str, ...]
) -> None:
    """Set X's pushes reverted table by table (no set rollback to undo):
    rolling u1 back to X alone is refused, and the remedy, followed as
    written, brings X back whole: u1 with --split-sets, then u2 the same way."""
    x = pushed(manager, ("u1", "u2"), "x")
    with_x = {t: manager.table(t).version for t in ("u1", "u2")}
    for table in ("u1", "u2"):  # the first splits X (told to), the second makes it whole again
        manager.revert_replace(table, manager.history(table, 1)[0].entry_id or "", split_sets=table == "u1")
    with pytest.raises(RefusedError, match=rf"would bring back set {x} in u1 but not in u2") as refused:
        manager.rollback("u1", with_x["u1"])
    remedy = refused.value.remedy or ""
    assert f"'lineage rollback u1 --to-version {with_x['u1']} --split-sets', then roll u2 forward" in remedy
    manager.rollback("u1", with_x["u1"], split_sets=True)
    assert manager.rollback("u2", with_x["u2"], split_sets=True).split_sets == ()  # whole again: no split
    assert labels(manager, "u1") == labels(manager, "u2") == ["x"]


def test_reverting_one_tables_push_of_a_set_is_refused_unless_told(
    manager: LineageManager, tables: tuple[str, ...]
) -> None:
    """Reverting X's push in u1 alone would leave X shown in u2 only:
    refused (its dry run too), naming X, changing nothing. Told to split,
    it lands; reverting X's push in u2 then makes X whole again: allowed."""
    x = pushed(manager, ("u1", "u2"), "x")
    ends = {t: manager.history(t, 1)[0].entry_id or "" for t in ("u1", "u2")}
    versions = heads(manager)
    said = rf"reverting entry {ends['u1']} of u1 would undo set {x} in u1 but not in u2"
    for judge in (manager.judge_revert, manager.revert_replace):
        with pytest.raises(RefusedError, match=said) as refused:
            judge("u1", ends["u1"])
        assert f"lineage rollback --set {x}" in (refused.value.remedy or "")
    assert heads(manager) == versions and labels(manager, "u1") == ["x"]
    manager.revert_replace("u1", ends["u1"], split_sets=True)
    assert labels(manager, "u1") == ["old"] and labels(manager, "u2") == ["x"]
    manager.judge_revert("u2", ends["u2"])  # whole again after it: nothing to refuse
    for unknown in ("0123456789abcdef0123456789abcdef", ends["u2"].upper()):  # judged as the revert would be
        with pytest.raises(LineageError, match=r"does not exist|entry id"):
            manager.judge_revert("u2", unknown)
    manager.revert_replace("u2", ends["u2"])
    assert labels(manager, "u1") == labels(manager, "u2") == ["old"]


def test_a_revert_judged_on_another_table_is_judged_again_when_that_table_moves_before_it_lands(
    manager: LineageManager, tables: tuple[str, ...]
) -> None:
    """X's push reverted in u2 (told to split), so reverting it in u1 makes
    X whole again: allowed, judged on u2. u2 rolled forward meanwhile (X
    shown there again): the revert's own request finds u2 moved, and it is
    judged again on what u2 shows now: refused, naming X, nothing changed."""
    x = pushed(manager, ("u1", "u2"), "x")
    ends = {t: manager.history(t, 1)[0].entry_id or "" for t in ("u1", "u2")}
    with_x = manager.table("u2").version
    manager.revert_replace("u2", ends["u2"], split_sets=True)
    meanwhile: list[int] = []

    def forward() -> None:
        if not meanwhile:  # once: the roll forward commits through the same failpoint
            meanwhile.append(0)
            meanwhile[0] = manager.rollback("u2", with_x).committed_version or 0

    before = manager.table("u1").version
    failpoints.set_hook("set.before-commit", forward)
    try:
        with pytest.raises(RefusedError, match=rf"would undo set {x} in u1 but not in u2"):
            manager.revert_replace("u1", ends["u1"])
    finally:
        failpoints.set_hook("set.before-commit", None)
    assert meanwhile[0] > with_x and labels(manager, "u1") == labels(manager, "u2") == ["x"]
    assert manager.table("u1").version == before


def _moving(manager: LineageManager, order: list[str]) -> Callable[[], None]:
    """A hook that, each time a set commit is about to be sent, moves the
    next table of ``order`` (a push started there: nothing shown changes);
    with ``order`` used up, none."""
    busy: list[bool] = []

    def move() -> None:
        if busy or not order:
            return
        busy.append(True)
        try:
            table = order.pop(0)
            manager.start_replace(table, [], [f"busy-{len(order)}"])
        finally:
            busy.clear()

    return move


@pytest.mark.parametrize("moves", [["u2"], ["u1"], ["u2", "u1", "u2"]])
def test_a_revert_judged_on_busy_tables_is_judged_again_and_lands(
    manager: LineageManager, tables: tuple[str, ...], moves: list[str]
) -> None:
    """The revert that makes X whole again, while u2 (a table it was judged
    on) or u1 (its own) take other commits between its judgement and its
    commit: judged again each time, it lands (it undoes one entry, whatever
    else landed). Once, it gave way at the first move: a table committed to
    faster than every table's history is read could never be reverted."""
    pushed(manager, ("u1", "u2"), "x")
    ends = {t: manager.history(t, 1)[0].entry_id or "" for t in ("u1", "u2")}
    manager.revert_replace("u2", ends["u2"], split_sets=True)
    order = list(moves)
    failpoints.set_hook("set.before-commit", _moving(manager, order))
    try:
        manager.revert_replace("u1", ends["u1"])
    finally:
        failpoints.set_hook("set.before-commit", None)
    assert not order and labels(manager, "u1") == labels(manager, "u2") == ["old"]


def test_a_revert_is_judged_again_when_a_table_moves_while_the_histories_are_read(
    manager: LineageManager, tables: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """u2 takes a commit after every table's history was read for the
    judgement and before u2 is read again for the commit's checks: judged
    again, the revert lands. It gave way at once (outside trial: a revert
    on a busy table failed after the first judgement, 'bb2 changed since
    the commit was decided on them')."""
    from segment_lineage.lineage.core.history import HistoryRecord
    from segment_lineage.lineage.manager.set_rollback import SetRollbackOps

    pushed(manager, ("u1", "u2"), "x")
    ends = {t: manager.history(t, 1)[0].entry_id or "" for t in ("u1", "u2")}
    manager.revert_replace("u2", ends["u2"], split_sets=True)
    read = SetRollbackOps._histories
    order, moved = ["u2", "u2"], []

    def then_u2_moves(self: SetRollbackOps, doing: str) -> dict[str, list[HistoryRecord]]:
        histories = read(self, doing)
        if order:
            manager.start_replace(order.pop(0), [], [f"busy-{len(order)}-{len(moved)}"])
            moved.append(True)
        return histories

    monkeypatch.setattr(SetRollbackOps, "_histories", then_u2_moves)
    manager.revert_plan("u1", ends["u1"])  # the dry run's judgement, alike
    order[:] = ["u2", "u2"]
    manager.revert_replace("u1", ends["u1"])
    assert not order and labels(manager, "u1") == labels(manager, "u2") == ["old"]


def test_a_revert_whose_tables_never_stop_moving_gives_up_changing_nothing(
    manager: LineageManager, tables: tuple[str, ...]
) -> None:
    """u2 moves before every attempt's commit: after five judgements the
    revert gives up with a contention error naming u2, and nothing changed."""
    pushed(manager, ("u1", "u2"), "x")
    ends = {t: manager.history(t, 1)[0].entry_id or "" for t in ("u1", "u2")}
    manager.revert_replace("u2", ends["u2"], split_sets=True)
    before = manager.table("u1").version
    order = ["u2"] * 50
    failpoints.set_hook("set.before-commit", _moving(manager, order))
    try:
        with pytest.raises(ContentionError, match=r"'u2' changed under us 5 times"):
            manager.revert_replace("u1", ends["u1"])
    finally:
        failpoints.set_hook("set.before-commit", None)
    assert len(order) == 45 and manager.table("u1").version == before
    assert labels(manager, "u1") == ["x"]


def test_reverting_a_push_outside_every_set_reads_no_other_table(
    manager: LineageManager, tables: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A push that ended in a commit of its own table alone, its end older
    than a read of the head brings (80 commits later): its revert, and the
    dry run's plan, find that end in the table's own history and read no
    other table. Once, every table was read: an unreadable table elsewhere
    refused the dry run, and a busy table failed the revert (outside trial)."""
    from segment_lineage.lineage.manager.set_rollback import SetRollbackOps

    pushed(manager, ("u1", "u2"), "x")  # sets exist: there is something to judge
    push_arrow(manager, "u1", [pa.table({"label": ["plain"] * 2, "id": [0, 1]})])
    entry = manager.history("u1", 1)[0].entry_id or ""
    for i in range(40):
        started = manager.start_replace("u1", [], [f"n{i}"])
        manager.complete_replace("u1", started, [Segment(f"n{i}", f"n{i}.parquet", rows=1, size_bytes=10)])

    def read_everything(*_: object) -> None:
        raise AssertionError("every table's history was read")

    monkeypatch.setattr(SetRollbackOps, "_histories", read_everything)
    assert manager.revert_plan("u1", entry).rows_disappearing == 2
    manager.revert_replace("u1", entry)
    plain = set(manager.table("u1").entries[entry].segments_to)
    assert plain and not plain & {s.name for s in manager.visible_segments("u1")}
    assert labels(manager, "u2") == ["x"]


def test_a_set_some_of_whose_tables_no_longer_keep_its_record_is_not_split_blind(
    manager: LineageManager, tables: tuple[str, ...]
) -> None:
    """Set X over u1 and u2; u2's record of it goes (here the table is
    dropped; on a busy table, its history compacted past 10,240 records).
    Undoing X in u1 alone, by a rollback or by reverting its push, is
    refused as a set rollback of u1 alone is: u2's part cannot follow, nor
    be judged (outside trial: both went through, splitting X)."""
    x = pushed(manager, ("u1", "u2"), "x")
    before_x = manager.table("u1").version - 1
    end = manager.history("u1", 1)[0].entry_id or ""
    manager.drop_table("u2", force=True)
    version = manager.table("u1").version
    unseen = r"but not in 1 more table\(s\) whose history no longer keeps its record"
    with pytest.raises(RefusedError, match=rf"would undo set {x} in u1 {unseen}"):
        manager.rollback("u1", before_x)
    with pytest.raises(RefusedError, match=rf"would undo set {x} in u1 {unseen}"):
        manager.revert_replace("u1", end)
    with pytest.raises(RefusedError, match=rf"would undo set {x} in u1 {unseen}"):
        manager.revert_plan("u1", end)
    assert manager.table("u1").version == version and labels(manager, "u1") == ["x"]
    assert manager.rollback("u1", before_x, split_sets=True).split_sets == (x,)  # knowingly
    assert labels(manager, "u1") == ["old"]


def test_a_set_rollback_says_which_later_changes_it_undoes_too(
    manager: LineageManager, tables: tuple[str, ...]
) -> None:
    """Rolling a set back takes away what came after it in its tables: the
    dry run names those versions, so the destructive part is said out loud."""
    x = pushed(manager, ("u1", "u2"), "x")
    set_version = manager.table("u1").version
    for label in ("y", "z"):
        push_arrow(manager, "u1", [pa.table({"label": [label] * 2, "id": [0, 1]})])
    looked = manager.rollback_set(x, dry_run=True)
    later = (set_version + 1, manager.table("u1").version)  # two pushes: a start and an end each
    assert looked.undone_after("u1") == later and later[1] == set_version + 4
    assert looked.undone_after("u2") is None  # the set's is u2's newest
    done = manager.rollback_set(x)
    assert done.undone_after("u1") == later and labels(manager, "u1") == ["old"]
