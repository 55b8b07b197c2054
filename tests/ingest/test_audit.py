"""Write-audit-publish: a push's checks on its staged rows, before they show.

Each check passes, fails (the push is reverted, readers never see its rows,
the message names the check and its figures), and what passed goes in the
version's history record. The row checks are judged again in the last
commit, on the version it applies to.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pyarrow as pa
import pytest

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.audit import (
    Audit,
    AuditFailedError,
    AuditView,
    Figures,
    judge_rows,
)
from segment_lineage.ingest.errors import PushInputError
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage.core import failpoints
from segment_lineage.lineage.core.model import EntryState, Operation, TableConfig
from segment_lineage.lineage.manager import LineageManager


def rows(n: int, label: str = "a", nulls: int = 0) -> pa.Table:
    ids: list[int | None] = [None] * nulls + list(range(n - nulls))
    return pa.table({"label": [label] * n, "id": pa.array(ids, pa.int64())})


@pytest.fixture
def table(manager: LineageManager, tmp_path: Path) -> str:
    manager.create_table(TableConfig.build("snap", str(tmp_path / "snap")))
    return "snap"


@pytest.fixture
def log(manager: LineageManager, tmp_path: Path) -> str:
    manager.create_table(TableConfig.build("log", str(tmp_path / "log"), "APPEND"))
    return "log"


def visible(m: LineageManager, table: str) -> list[str]:
    with SnapshotReader(m, table) as reader:
        data = reader.to_arrow()
    return sorted(data.column("label").to_pylist()) if data.num_rows else []


def last_audit(m: LineageManager, table: str) -> str | None:
    record = m.history(table, 1)[0]
    assert record.operation is Operation.END_REPLACE
    return None if record.detail is None else record.detail.audit


def reverted(m: LineageManager, table: str) -> int:
    return sum(e.state is EntryState.REVERTED for e in m.table(table).entries.values())


# ---- the pure half -----------------------------------------------------------------


def test_the_row_checks_judge_the_figures() -> None:
    audit = Audit(min_rows=10, max_change_pct=20)
    ok = judge_rows(audit, Figures(staged=110, before=100, replaced=100))
    assert [v.passed for v in ok] == [True, True]
    assert ok[1].figures == "+10.0%: 100 -> 110 rows"
    bad = judge_rows(audit, Figures(staged=5, before=100, replaced=100))
    assert [v.passed for v in bad] == [False, False]
    assert bad[0].text() == "min-rows 10 (5 rows written)"
    assert bad[1].figures == "-95.0%: 100 -> 5 rows"
    # an append: the table grows by what it writes
    assert not judge_rows(Audit(max_change_pct=50), Figures(staged=60, before=100, replaced=0))[0].passed
    # nothing before: nothing to compare with, said so
    first = judge_rows(Audit(max_change_pct=1), Figures(staged=7, before=0, replaced=0))[0]
    assert first.passed and "nothing to compare" in first.figures


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"min_rows": -1}, "minimum rows"),
        ({"min_rows": 1.5}, "minimum rows"),
        ({"max_change_pct": -3}, "maximum change"),
        ({"max_change_pct": math.nan}, "maximum change"),
        ({"max_change_pct": math.inf}, "maximum change"),
        ({"not_null": ("id", "id")}, "twice"),
        ({"not_null": ("",)}, "named"),
        ({"sql": "   "}, "empty"),
        ({"sql": "SELECT 1\x00"}, "control characters"),
        ({"sql": "SELECT " + "1" * 70_000}, "at most"),
    ],
)
def test_bad_audit_options_are_refused(kwargs: dict[str, object], said: str) -> None:
    with pytest.raises(PushInputError, match=said):
        Audit(**kwargs)  # type: ignore[arg-type]


# ---- through a push ------------------------------------------------------------------


def test_a_push_that_passes_records_its_checks(manager: LineageManager, table: str) -> None:
    push_arrow(manager, table, [rows(10, "old")])
    audit = Audit(
        min_rows=5,
        max_change_pct=50,
        not_null=("id",),
        sql="SELECT (SELECT count(*) FROM staged) >= (SELECT count(*) FROM current)",
    )
    result = push_arrow(manager, table, [rows(12, "new")], audit=audit)
    assert visible(manager, table) == ["new"] * 12
    said = last_audit(manager, table)
    assert said is not None and result.audited == said
    assert said.startswith("passed: ")
    for part in ("min-rows 5 (12 rows written)", "max-change 50% (+20.0%: 10 -> 12 rows)",
                 "not-null id (0 null(s))", "sql 'SELECT (SELECT count(*) FROM staged) >= "):  # fmt: skip
        assert part in said
    assert "audit passed" in result.summary()


def test_a_repeated_job_reports_the_audit_its_push_passed(manager: LineageManager, table: str) -> None:
    """A job run again reports its completed push as it was, audit included
    (from the push's history record), and pushes nothing."""
    done = push_arrow(manager, table, [rows(12, "new")], audit=Audit(min_rows=5), job_id="nightly")
    again = push_arrow(manager, table, [rows(3, "other")], audit=Audit(min_rows=5), job_id="nightly")
    assert again.repeated and again.entry_id == done.entry_id
    assert done.audited is not None and again.audited == done.audited
    assert f"audit {done.audited}; nothing pushed again" in again.summary()
    assert visible(manager, table) == ["new"] * 12


@pytest.mark.parametrize(
    ("audit", "said"),
    [
        (Audit(min_rows=100), "min-rows 100 (3 rows written)"),
        (Audit(max_change_pct=10), "max-change 10% (-70.0%: 10 -> 3 rows)"),
        (Audit(not_null=("id",)), "not-null id (2 null(s))"),
        (Audit(sql="SELECT count(*) = 10 FROM staged"), "returned False, not one true value"),
        (Audit(sql="SELECT true FROM staged"), "more than one row"),
        (Audit(sql="SELECT true WHERE false"), "no rows"),
        (Audit(sql="SELECT max(CAST(NULL AS BOOLEAN)) FROM staged"), "returned None"),
        (Audit(sql="SELECT CAST(label AS INTEGER) > 0 FROM staged LIMIT 1"), "the query failed: Conversion"),
    ],
)
def test_a_push_that_fails_its_audit_is_reverted(
    manager: LineageManager, table: str, audit: Audit, said: str
) -> None:
    push_arrow(manager, table, [rows(10, "old")])
    before = manager.table(table).version
    with pytest.raises(AuditFailedError, match="failed its audit") as caught:
        push_arrow(manager, table, [rows(3, "new", nulls=2)], audit=audit)
    assert said in caught.value.message
    assert visible(manager, table) == ["old"] * 10  # readers never saw the new rows
    assert reverted(manager, table) == 1
    state = manager.table(table)
    assert state.version > before
    assert len(state.pending) == 1  # its file waits for retention


def test_every_failing_check_is_named(manager: LineageManager, log: str) -> None:
    push_arrow(manager, log, [rows(4, "old")])
    audit = Audit(min_rows=10, not_null=("id",), sql="SELECT false")
    with pytest.raises(AuditFailedError) as caught:
        push_arrow(manager, log, [rows(3, "new", nulls=1)], audit=audit)
    message = caught.value.message
    for said in ("min-rows 10", "not-null id (1 null(s))", "sql 'SELECT false'"):
        assert said in message
    assert visible(manager, log) == ["old"] * 4


def test_an_append_is_judged_against_the_whole_table(manager: LineageManager, log: str) -> None:
    push_arrow(manager, log, [rows(10, "old")])
    push_arrow(manager, log, [rows(2, "new")], audit=Audit(max_change_pct=20))
    assert "+20.0%: 10 -> 12 rows" in (last_audit(manager, log) or "")
    with pytest.raises(AuditFailedError, match=r"\+25.0%: 12 -> 15 rows"):
        push_arrow(manager, log, [rows(3, "more")], audit=Audit(max_change_pct=20))


def test_an_audit_query_running_past_its_limit_is_stopped_and_fails_the_push(
    manager: LineageManager, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runaway query (here a count over a trillion generated rows) is
    stopped at the limit: the audit fails saying so, the push is reverted,
    and the table keeps its rows; well under the time the query would take."""
    from segment_lineage.ingest import audit_sql

    push_arrow(manager, table, [rows(10, "old")])
    monkeypatch.setattr(audit_sql, "SQL_TIMEOUT_S", 0.5)
    runaway = Audit(sql="SELECT (SELECT count(*) FROM range(1000000000000) r, staged) > 0")
    began = time.monotonic()
    with pytest.raises(AuditFailedError, match=r"ran past its limit of 0.5 s and was stopped"):
        push_arrow(manager, table, [rows(3, "new")], audit=runaway)
    assert time.monotonic() - began < 60
    assert visible(manager, table) == ["old"] * 10
    assert all(e.state is not EntryState.IN_PROGRESS for e in manager.table(table).entries.values())


def test_a_first_push_passes_max_change_and_says_why(manager: LineageManager, table: str) -> None:
    push_arrow(manager, table, [rows(5)], audit=Audit(max_change_pct=0))
    assert "no rows before, 5 after: nothing to compare" in (last_audit(manager, table) or "")


def test_the_row_checks_are_judged_again_on_the_version_the_commit_applies_to(
    manager: LineageManager, log: str
) -> None:
    """Another push lands between the audit and the last commit: the record
    gives the figures of the version the commit applied to."""
    push_arrow(manager, log, [rows(10, "old")])

    def meanwhile() -> None:
        failpoints.set_hook("push.after-audit", None)
        push_arrow(manager, log, [rows(10, "other")])

    failpoints.set_hook("push.after-audit", meanwhile)
    try:
        result = push_arrow(manager, log, [rows(3, "late")], audit=Audit(max_change_pct=30))
    finally:
        failpoints.set_hook("push.after-audit", None)
    assert last_audit(manager, log) == "passed: max-change 30% (+15.0%: 20 -> 23 rows)"
    assert result.audited == last_audit(manager, log)
    assert visible(manager, log) == sorted(["old"] * 10 + ["other"] * 10 + ["late"] * 3)


def test_the_row_checks_judged_in_the_commit_can_fail_there(manager: LineageManager, log: str) -> None:
    """Rows vanishing meanwhile (a rollback) make the push a larger change than
    its audit saw: refused in the commit, the push reverted."""
    push_arrow(manager, log, [rows(10, "old")])
    first = manager.table(log).version
    push_arrow(manager, log, [rows(10, "second")])

    def meanwhile() -> None:
        failpoints.set_hook("push.after-audit", None)
        manager.rollback(log, first)

    failpoints.set_hook("push.after-audit", meanwhile)
    try:
        with pytest.raises(AuditFailedError, match=r"max-change 40% \(\+50.0%: 10 -> 15 rows\)"):
            push_arrow(manager, log, [rows(5, "late")], audit=Audit(max_change_pct=40))
    finally:
        failpoints.set_hook("push.after-audit", None)
    assert visible(manager, log) == ["old"] * 10


def test_a_python_check_sees_the_staged_rows(manager: LineageManager, table: str) -> None:
    push_arrow(manager, table, [rows(4, "old")])
    seen: list[AuditView] = []

    def labels_are_new(view: AuditView) -> bool:
        seen.append(view)
        return set(view.staged.to_table().column("label").to_pylist()) == {"new"}

    push_arrow(manager, table, [rows(6, "new")], audit=Audit(checks=(labels_are_new,)))
    assert "check labels_are_new (true)" in (last_audit(manager, table) or "")
    view = seen[0]
    assert (view.staged_rows, view.rows_before, view.rows_after) == (6, 4, 6)
    assert view.current.to_table().num_rows == 4

    def boom(view: AuditView) -> bool:
        raise RuntimeError("no good")

    with pytest.raises(AuditFailedError, match="check boom \\(raised RuntimeError: no good\\)"):
        push_arrow(manager, table, [rows(1, "bad")], audit=Audit(checks=(boom,)))
    with pytest.raises(AuditFailedError, match="returned 1, not True"):
        push_arrow(manager, table, [rows(1, "bad")], audit=Audit(checks=(lambda v: 1,)))  # type: ignore[arg-type,return-value]
    assert visible(manager, table) == ["new"] * 6


@pytest.mark.parametrize(
    ("audit", "said"),
    [
        (Audit(not_null=("nope",)), "--audit-not-null names column(s) the push does not write: nope"),
        (Audit(sql="SELEC 1"), "the audit query cannot run: Parser Error"),
        (Audit(sql="SELECT nope FROM staged"), "the audit query cannot run: Binder Error"),
        (Audit(sql="SELECT true FROM elsewhere"), "the audit query cannot run: Catalog Error"),
        (Audit(sql="SELECT count(*) FROM staged"), "answers 1 column(s) of BIGINT: it must answer one true"),
        (Audit(sql="SELECT true, true"), "answers 2 column(s) of BOOLEAN, BOOLEAN"),
        (Audit(sql="SELECT false; SELECT true"), "holds 2 statements"),
        (Audit(sql="COPY staged TO '/tmp/audit-copy.csv'"), "is a COPY, not a SELECT"),
        (Audit(sql="PRAGMA version"), "answers 3 column(s)"),
        (Audit(sql="SET memory_limit = '1GB'"), "is a SET, not a SELECT"),
        (Audit(sql="SELECT count(*) > 0 FROM read_csv('/etc/passwd')"), "cannot run: Permission Error"),
    ],
)
def test_an_audit_that_cannot_pass_is_refused_before_anything_is_written(
    manager: LineageManager, table: str, audit: Audit, said: str
) -> None:
    push_arrow(manager, table, [rows(2, "old")])
    version = manager.table(table).version
    with pytest.raises(PushInputError) as caught:
        push_arrow(manager, table, [rows(3, "new")], audit=audit)
    assert said in caught.value.message
    assert manager.table(table).version == version  # no entry started
    with pytest.raises(PushInputError):
        push_arrow(manager, table, [rows(3, "new")], audit=audit, dry_run=True)


def test_a_query_reads_only_its_views_even_when_the_caller_vouches_for_the_columns(
    manager: LineageManager, table: str, tmp_path: Path
) -> None:
    """Without the push's columns (a writer that vouches for its files) the
    query is judged on the data: it still sees only the views, and a shape
    that cannot be one true value fails the check after writing."""
    from segment_lineage.ingest.audit_sql import run_query

    staged = pa.table({"x": [1, 2]})
    assert run_query("SELECT count(*) = 2 FROM staged", staged, staged) == (True, "true")
    passed, said = run_query(f"SELECT count(*) > 0 FROM read_csv('{tmp_path}/none.csv')", staged, staged)
    assert not passed and "Permission Error" in said
    passed, said = run_query("SELECT count(*) FROM staged", staged, staged)
    assert (passed, said) == (False, "returned 2, not one true value")
    passed, said = run_query("SELECT error(chr(27) || '[31mred')", staged, staged)
    assert not passed and "\\x1b[31mred" in said and "\x1b" not in said  # no raw escape reaches a terminal


def test_a_dry_run_judges_the_row_checks_on_the_rows_it_would_write(
    manager: LineageManager, table: str
) -> None:
    push_arrow(manager, table, [rows(10, "old")])
    version = manager.table(table).version
    with pytest.raises(AuditFailedError, match=r"min-rows 5 \(4 rows written\)") as caught:
        push_arrow(manager, table, [rows(4, "new")], audit=Audit(min_rows=5), dry_run=True)
    assert "a dry run" in (caught.value.remedy or "")
    would = push_arrow(
        manager, table, [rows(9, "new")], audit=Audit(min_rows=5, max_change_pct=20), dry_run=True
    )
    assert would.audited == "would pass min-rows 5 (9 rows written); max-change 20% (-10.0%: 10 -> 9 rows)"
    assert "audit: would pass min-rows 5" in would.summary()
    assert manager.table(table).version == version


def test_a_failed_audit_is_named_in_the_history(manager: LineageManager, table: str) -> None:
    with pytest.raises(AuditFailedError):
        push_arrow(manager, table, [rows(3, "new", nulls=1)], audit=Audit(not_null=("id",)))
    record = manager.history(table, 1)[0]
    assert record.operation is Operation.ABANDON_PUSH
    assert record.reason == "push to 'snap' failed its audit: not-null id (1 null(s))"


def test_small_changes_show_as_changes_and_minus_zero_is_zero() -> None:
    tiny = judge_rows(Audit(max_change_pct=0.01), Figures(staged=3001, before=3000, replaced=3000))[0]
    assert tiny.figures == "+0.033%: 3000 -> 3001 rows" and not tiny.passed
    assert Audit(max_change_pct=-0.0).max_change_pct == 0.0
    assert str(Audit(max_change_pct=-0.0).max_change_pct) == "0.0"
    with pytest.raises(PushInputError, match="printable"):
        Audit(not_null=("a\x1bb",))
