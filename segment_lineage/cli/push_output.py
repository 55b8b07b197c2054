"""What a push prints: its result as text, or as ``--json`` gives it
(``push``, ``publish`` and each table of ``push-set``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from segment_lineage.cli.context import emit
from segment_lineage.lineage.core.views import iso

if TYPE_CHECKING:
    from segment_lineage.ingest.push import PushResult


def emit_push(result: PushResult, engine: str | None) -> None:
    """Print a push's result (a repeated job's says so; it used no engine)."""
    emit(push_view(result, engine), result.summary())


def push_view(result: PushResult, engine: str | None) -> dict[str, object]:
    """A push's result, as ``--json`` prints it."""
    return {
        "engine": engine,
        "mode": result.mode.value,
        "entry": result.entry_id,
        "segments": result.segments,
        "rows": result.rows,
        "bytes": result.size_bytes,
        "replaced": result.replaced,
        "replaced_rows": result.replaced_rows,
        "hides_appended": result.hides_appended,
        "cleaned": list(result.cleaned),
        "job_id": result.job_id,
        "repeated": result.repeated,
        "undone": result.undone,
        "dry_run": result.dry_run,
        **({"schema": result.schema_note} if result.dry_run else {}),
        "audit": result.audited,
        "staged_until": None if result.staged_until_ms is None else iso(result.staged_until_ms),
        "published": result.published,
        "seconds": round(result.seconds, 3),
    }
