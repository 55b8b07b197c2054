"""A push's dry run: what it would do now, refused as the push would be,
with nothing written or committed (``lineage push --dry-run``)."""

from __future__ import annotations

from segment_lineage.ingest.audit import Audit, Figures, failed, judge_rows, record_text
from segment_lineage.ingest.push_plan import PushMode, PushResult, check_mode, plan_from
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.model import TableState, TableType
from segment_lineage.lineage.core.schema import Schema, SchemaPolicy, resolve
from segment_lineage.lineage.core.visibility import visible_segments
from segment_lineage.lineage.manager import LineageManager


def plan_push(
    manager: LineageManager,
    table: str,
    *,
    partitions: int,
    rows: int,
    mode: PushMode | str | None = None,
    interval: tuple[int, int] | None = None,
    schema: Schema | None = None,
    schema_policy: SchemaPolicy | str = SchemaPolicy.ENFORCE,
    audit: Audit | None = None,
    reason: str | None = None,
) -> PushResult:
    """What a push of ``rows`` rows in ``partitions`` segments would do now
    (a dry run): the segments it would replace, what it would do to the
    schema; refused as the push would be (an ``audit`` that cannot pass
    whatever the data, too; a ``reason`` the commit would refuse). Nothing
    is written or committed."""
    manager.audit(reason)  # what the push's commits record: checked as they would be
    began = manager.env.monotonic()
    state = manager.table(table)
    refused = transitions.purging_refusal(state.config, "a push")
    if refused is not None:
        raise refused
    mode = PushMode.of(mode, state.config)
    check_mode(state, mode, interval)
    note = None
    if schema is not None:
        _, note = resolve(
            state.config.schema,
            schema,
            SchemaPolicy.parse(schema_policy),
            table,
            full_refresh=mode is PushMode.REFRESH,
        )
    replaced = plan_from(state, mode, interval)
    # Its start, on this state, with nothing committed: refused as the push
    # would be by a running push or a held entry (a staged push) in its way.
    owners = manager.live_owners(table)
    transitions.start_replace(
        state, replaced, (f"{table}_dry_run_probe",), entry_id=manager.env.text_id(), audit=manager.audit(),
        now_ms=manager.now_ms(), force_cleanup=True, interval=interval, live_owners=owners,
        whole=mode is PushMode.REFRESH,
    )  # fmt: skip
    replaced_rows = sum(state.segments[n].rows for n in replaced)
    would = _would_pass(audit, table, state, schema, rows, replaced_rows) if audit else None
    return PushResult(
        table=table,
        entry_id="",
        mode=mode,
        segments=partitions,
        rows=rows,
        size_bytes=0,
        replaced=len(replaced),
        seconds=manager.env.monotonic() - began,
        dry_run=True,
        replaced_rows=replaced_rows,
        schema_note=note,
        audited=would,
        hides_appended=mode is PushMode.REFRESH and state.config.table_type is TableType.APPEND,
    )


def _would_pass(
    audit: Audit, table: str, state: TableState, schema: Schema | None, rows: int, replaced_rows: int
) -> str | None:
    """The row checks the push would pass, on the rows it would write (the
    data checks need the files); the audit's error when it would fail."""
    audit.check_before(schema, state.config.schema)
    before = sum(s.rows for s in visible_segments(state))
    verdicts = judge_rows(audit, Figures(staged=rows, before=before, replaced=replaced_rows))
    error = failed(table, verdicts, remedy="a dry run: nothing was written")
    if error is not None:
        raise error
    return "would pass " + record_text(verdicts).removeprefix("passed: ") if verdicts else None
