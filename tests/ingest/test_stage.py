"""Staged pushes: written and audited, shown only by a publish, dropped by a
revert, readable before either, kept by their hold (and only by it)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.audit import Audit, AuditFailedError, AuditView
from segment_lineage.ingest.errors import PushInputError, PushRefusedError
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.ingest.stage import publish
from segment_lineage.lineage.core.errors import ConflictError
from segment_lineage.lineage.core.model import EntryState, Operation, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.retention.executor import PassOptions, run_pass


def rows(n: int, label: str, extra: bool = False) -> pa.Table:
    data = {"label": [label] * n, "id": list(range(n))}
    if extra:
        data["note"] = ["x"] * n
    return pa.table(data)


def labels(m: LineageManager, table: str, entry: str | None = None) -> list[str]:
    with SnapshotReader(m, table, entry=entry) as reader:
        data = reader.to_arrow()
    return sorted(data.column("label").to_pylist()) if data.num_rows else []


@pytest.fixture
def table(manager: LineageManager, tmp_path: Path) -> str:
    manager.create_table(TableConfig.build("snap", str(tmp_path / "snap")))
    push_arrow(manager, "snap", [rows(4, "old")])
    return "snap"


def test_a_staged_push_shows_only_once_published(manager: LineageManager, table: str) -> None:
    audit = Audit(min_rows=3, max_change_pct=100, sql="SELECT count(*) = 6 FROM staged")
    staged = push_arrow(manager, table, [rows(6, "new")], audit=audit, stage=True, hold="2h")
    assert staged.staged and staged.staged_until_ms is not None
    assert "readers see none of it until 'lineage publish snap" in staged.summary()
    assert labels(manager, table) == ["old"] * 4  # readers: the old snapshot
    assert labels(manager, table, staged.entry_id[:8]) == ["new"] * 6  # what the publish would show
    entry = manager.table(table).entries[staged.entry_id]
    assert entry.state is EntryState.IN_PROGRESS and entry.staged is not None
    hold = entry.held_until_ms
    assert hold is not None and hold - manager.now_ms() > 3_600_000
    record = manager.history(table, 1)[0]
    assert record.operation is Operation.REGISTER and record.detail is not None
    assert (record.detail.audit or "").startswith("passed: min-rows 3 (6 rows written)")

    done = publish(manager, table, staged.entry_id[:8], reason="checked by hand")
    assert done.published and (done.rows, done.replaced, done.replaced_rows) == (6, 1, 4)
    assert labels(manager, table) == ["new"] * 6
    record = manager.history(table, 1)[0]
    assert record.operation is Operation.END_REPLACE and record.reason == "checked by hand"
    assert record.actor == "tester@host" and record.detail is not None
    assert (record.detail.audit or "").startswith("passed: min-rows 3 (6 rows written); max-change 100%")
    with pytest.raises(PushRefusedError, match="is not a staged push: it is COMPLETED"):
        publish(manager, table, staged.entry_id)


def test_a_staged_push_records_its_new_columns_at_its_publish(manager: LineageManager, table: str) -> None:
    staged = push_arrow(manager, table, [rows(2, "wide", extra=True)], schema_policy="evolve", stage=True)
    assert [f.name for f in manager.table(table).config.schema or ()] == ["label", "id"]
    publish(manager, table, staged.entry_id)
    assert [f.name for f in manager.table(table).config.schema or ()] == ["label", "id", "note"]


def test_the_audit_runs_again_at_publish_and_a_failure_leaves_it_staged(
    manager: LineageManager, table: str
) -> None:
    staged = push_arrow(manager, table, [rows(4, "new")], audit=Audit(max_change_pct=10), stage=True)

    def never(view: AuditView) -> bool:
        return view.staged_rows > 100

    with pytest.raises(AuditFailedError, match=r"check never \(returned False, not True\)") as caught:
        publish(manager, table, staged.entry_id, checks=(never,))
    assert "it stays staged" in (caught.value.remedy or "")
    assert manager.table(table).entries[staged.entry_id].state is EntryState.IN_PROGRESS
    assert labels(manager, table) == ["old"] * 4
    publish(manager, table, staged.entry_id)
    assert labels(manager, table) == ["new"] * 4


def test_a_staged_push_fails_at_publish_when_the_table_moved_past_its_audit(
    manager: LineageManager, tmp_path: Path
) -> None:
    """The row checks are judged on the table as it is at the publish: rows
    rolled back since make the staged push a larger change than allowed."""
    manager.create_table(TableConfig.build("log", str(tmp_path / "log"), "APPEND"))
    push_arrow(manager, "log", [rows(10, "old")])
    first = manager.table("log").version
    push_arrow(manager, "log", [rows(10, "more")])
    staged = push_arrow(manager, "log", [rows(5, "new")], audit=Audit(max_change_pct=40), stage=True)
    assert "+25.0%: 20 -> 25 rows" in (staged.audited or "")
    manager.rollback("log", first)
    with pytest.raises(AuditFailedError, match=r"max-change 40% \(\+50.0%: 10 -> 15 rows\)"):
        publish(manager, "log", staged.entry_id)
    assert labels(manager, "log") == ["old"] * 10


def test_revert_drops_a_staged_push(manager: LineageManager, table: str, tmp_path: Path) -> None:
    staged = push_arrow(manager, table, [rows(3, "new")], stage=True)
    files = list((tmp_path / "snap").rglob("*.parquet"))
    assert len(files) == 2
    manager.revert_replace(table, staged.entry_id)  # no force: its push is done
    assert labels(manager, table) == ["old"] * 4
    with pytest.raises(PushRefusedError, match="REVERTED"):
        publish(manager, table, staged.entry_id)
    with pytest.raises(PushRefusedError, match="is not a staged push"):
        SnapshotReader(manager, table, entry=staged.entry_id)
    assert manager.table(table).entries[staged.entry_id].state is EntryState.REVERTED


def test_a_staged_push_is_kept_from_other_pushes_and_retention_while_held(
    manager: LineageManager, table: str, tmp_path: Path
) -> None:
    staged = push_arrow(manager, table, [rows(3, "new")], stage=True, hold="1h")
    with pytest.raises(ConflictError, match="is a staged push") as caught:
        push_arrow(manager, table, [rows(1, "other")], owner_wait_s=0)
    assert f"lineage publish snap {staged.entry_id}" in (caught.value.remedy or "")
    reports = run_pass(manager, [table], PassOptions(min_grace_ms=0, orphan_grace_ms=0, force=True))
    assert reports[0].files_deleted == 0
    assert labels(manager, table, staged.entry_id) == ["new"] * 3  # its file is there
    publish(manager, table, staged.entry_id)
    assert labels(manager, table) == ["new"] * 3


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"hold": "1h"}, "--hold goes only with --stage"),
        ({"stage": True, "hold": "soon"}, "invalid --hold 'soon'"),
        ({"stage": True, "hold": "0s"}, "held for some time"),
        ({"stage": True, "job_id": "nightly"}, "--stage does not go with --job-id"),
    ],
)
def test_bad_staging_is_refused_before_anything_is_written(
    manager: LineageManager, table: str, kwargs: dict[str, object], said: str
) -> None:
    version = manager.table(table).version
    with pytest.raises(PushInputError, match=said):
        push_arrow(manager, table, [rows(1, "x")], **kwargs)  # type: ignore[arg-type]
    assert manager.table(table).version == version


def test_a_staged_push_whose_hold_ended_is_cleaned_up_by_the_next_push(
    manager: LineageManager, table: str
) -> None:
    import time

    staged = push_arrow(manager, table, [rows(3, "new")], stage=True, hold="1s")
    time.sleep(1.2)
    later = push_arrow(manager, table, [rows(2, "later")])
    assert later.cleaned == (staged.entry_id,)
    assert labels(manager, table) == ["later"] * 2
    with pytest.raises(PushRefusedError, match="REVERTED"):
        publish(manager, table, staged.entry_id)


def test_a_staged_record_reads_back_as_written_and_a_bad_one_fails_closed() -> None:
    from segment_lineage.lineage.codec.buckets import staged_from_dict, staged_to_dict
    from segment_lineage.lineage.codec.envelope import _Bad
    from segment_lineage.lineage.core.schema import DataType, Field
    from segment_lineage.lineage.core.staged import Staged

    staged = Staged("append", "evolve", (Field("k", DataType("string")),), "ms", '{"sql": "SELECT true"}')
    assert staged_from_dict(staged_to_dict(staged)) == staged
    bare = Staged(None, "enforce", None, None, None)
    assert staged_to_dict(bare) == {"policy": "enforce"} and staged_from_dict({"policy": "enforce"}) == bare
    for bad in (
        {"policy": "loose"},
        {"policy": "enforce", "time_unit": "days"},
        {"policy": "enforce", "audit": 3},
    ):
        with pytest.raises(_Bad):
            staged_from_dict(bad)


def test_a_staged_refresh_is_not_published_over_rows_appended_since(
    manager: LineageManager, tmp_path: Path
) -> None:
    """A staged refresh hides what the table held when it was staged: rows
    appended since would stay visible beside it, so its publish (and its
    read) is refused, naming them; a revert and a new push is the way."""
    manager.create_table(TableConfig.build("ap", str(tmp_path / "ap"), "APPEND"))
    push_arrow(manager, "ap", [rows(10, "old")])
    staged = push_arrow(manager, "ap", [rows(3, "new")], mode="refresh", stage=True)
    push_arrow(manager, "ap", [rows(5, "appended")])
    with pytest.raises(PushRefusedError, match="would leave 1 segment\\(s\\) pushed since it was staged"):
        publish(manager, "ap", staged.entry_id)
    with pytest.raises(PushRefusedError, match="pushed since it was staged"):
        labels(manager, "ap", staged.entry_id)
    assert labels(manager, "ap") == sorted(["old"] * 10 + ["appended"] * 5)
    manager.revert_replace("ap", staged.entry_id)


def test_a_dry_run_is_refused_as_the_push_would_be_by_a_staged_push(
    manager: LineageManager, table: str
) -> None:
    push_arrow(manager, table, [rows(3, "new")], stage=True)
    with pytest.raises(ConflictError, match="is a staged push"):
        push_arrow(manager, table, [rows(1, "other")], dry_run=True)


def test_publish_names_a_missing_entry_and_a_missing_file(
    manager: LineageManager, table: str, tmp_path: Path
) -> None:
    from segment_lineage.ingest.errors import StorageError
    from segment_lineage.lineage.core.errors import NotFoundError

    with pytest.raises(NotFoundError, match="does not exist"):
        publish(manager, table, "ae68f79b-658a-4441-b634-eba5a1407b25")
    staged = push_arrow(manager, table, [rows(3, "new")], stage=True, audit=Audit(not_null=("id",)))
    for path in (tmp_path / "snap").rglob("push_*/*.parquet"):
        path.unlink()
    with pytest.raises(StorageError, match="cannot read its files"):
        publish(manager, table, staged.entry_id)
    assert manager.table(table).entries[staged.entry_id].state is EntryState.IN_PROGRESS


def test_a_rollback_over_a_staged_push_says_it_is_staged_and_how_to_end_it(
    manager: LineageManager, table: str
) -> None:
    """A staged push never ends by itself: a rollback it stands in the way
    of says so, with its hold, and names publish and revert (it said "is
    IN_PROGRESS ... wait for the push to finish")."""
    from segment_lineage.lineage.core.errors import RefusedError

    created = min(manager.store.versions(table))  # the oldest kept: before the first push
    staged = push_arrow(manager, table, [rows(3, "new")], stage=True)
    with pytest.raises(RefusedError, match=f"a staged push, {staged.entry_id}, held until") as refused:
        manager.rollback(table, created)
    remedy = refused.value.remedy or ""
    assert f"lineage publish {table} {staged.entry_id}" in remedy, remedy
    assert f"lineage revert {table} {staged.entry_id}" in remedy and "wait" not in remedy, remedy
