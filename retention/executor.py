"""Running a retention pass: plan, record the intent, delete files, clear.

1. Plan against the current state (pure), and record the intent with one
   compare-and-set: condemned segments move into ``pending`` and finished
   entries go, before any file is touched.
2. Re-read the readers' pins (a reader that pinned meanwhile keeps its files),
   then delete the files, checking the fence before each one: a process that
   lost its session (or its leadership) deletes nothing more.
3. Clear the deleted files from ``pending`` with a second compare-and-set.

A crash anywhere is finished by the next pass: ``pending`` is the intent log
and deleting a file is idempotent. After an unknown outcome of a metadata
write, the pass stops for that table and deletes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ingest.storage import DeepStore
from lineage import transitions
from lineage.errors import LineageError, OutcomeUnknownError
from lineage.failpoints import failpoint
from lineage.manager import LineageManager
from lineage.model import Change, TableState
from retention.errors import FencedError
from retention.planner import DEFAULT_MIN_GRACE_MS, Plan, Policy, plan


@dataclass
class TableReport:
    table: str
    dry_run: bool
    condemned: int = 0
    files_deleted: int = 0
    bytes_deleted: int = 0
    entries_removed: int = 0
    pending_left: int = 0
    kept: int = 0
    errors: list[str] = field(default_factory=list)
    planned: list[dict[str, object]] = field(default_factory=list)

    def line(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        files = len(self.planned) if self.dry_run else self.files_deleted
        text = (
            f"{self.table}: {verb} {files} file(s) ({self.bytes_deleted} bytes), "
            f"{self.condemned} segment(s) condemned, {self.entries_removed} entr(ies) removed, "
            f"{self.kept} kept, {self.pending_left} pending"
        )
        return text + (f", {len(self.errors)} error(s)" if self.errors else "")


Fence = Callable[[], None]


def no_fence() -> None:
    return None


def run_table(
    manager: LineageManager,
    table: str,
    *,
    dry_run: bool = False,
    force: bool = False,
    min_grace_ms: int = DEFAULT_MIN_GRACE_MS,
    fence: Fence = no_fence,
) -> TableReport:
    """One pass over one table. Raises OutcomeUnknownError (nothing deleted)
    and FencedError (the process may no longer delete); other per-file
    failures are reported and retried by the next pass."""
    store = manager.store
    report = TableReport(table, dry_run)
    pinned = store.pinned_states(table)
    owners = store.live_owners(table)
    computed: list[Plan] = []

    def mark(state: TableState, now: int) -> Change:
        current = plan(state, Policy(now, min_grace_ms, force), pinned, owners)
        computed.append(current)
        return transitions.retention_mark(state, current.condemn, current.remove_entries, now)

    if dry_run:
        now = store.now_ms()
        preview = plan(manager.table(table), Policy(now, min_grace_ms, force), pinned, owners)
        _fill(report, preview)
        return report

    fence()
    marked = manager.commit(table, mark, reason="retention")
    failpoint("retention.after-mark")
    current = computed[-1]
    _fill(report, current)

    # Readers that pinned while we planned keep their files.
    pinned_now = {seg.location for version in store.pinned_states(table) for seg in version.segments.values()}
    root = DeepStore.for_root(marked.state.config.root)
    deleted: list[str] = []
    for deletion in current.deletions:
        if deletion.location in pinned_now:
            report.kept += 1
            continue
        fence()
        try:
            root.delete(deletion.location)
        except LineageError as exc:
            report.errors.append(f"{deletion.location}: {exc.message}")
            continue
        deleted.append(deletion.location)
        report.bytes_deleted += deletion.size_bytes
        failpoint("retention.mid-delete")
    report.files_deleted = len(deleted)
    final = marked.state
    if deleted:
        fence()
        final = manager.commit(
            table,
            lambda s, now: transitions.clear_pending(s, deleted, report.bytes_deleted),
            reason="retention",
        ).state
    report.pending_left = len(final.pending)
    return report


def _fill(report: TableReport, current: Plan) -> None:
    report.condemned = len(current.condemn)
    report.entries_removed = len(current.remove_entries)
    report.kept = len(current.kept)
    report.planned = [
        {"location": d.location, "segment": d.segment, "reason": d.reason.value, "bytes": d.size_bytes}
        for d in current.deletions
    ]
    if report.dry_run:
        report.bytes_deleted = sum(d.size_bytes for d in current.deletions)


def run_pass(
    manager: LineageManager,
    tables: Sequence[str] | None = None,
    **options: object,
) -> list[TableReport]:
    """One pass over ``tables`` (all when None). A table that fails is
    reported and skipped; an unknown outcome or a lost fence stops the pass."""
    reports = []
    for table in tables if tables is not None else manager.list_tables():
        try:
            reports.append(run_table(manager, table, **options))  # type: ignore[arg-type]
        except (OutcomeUnknownError, FencedError):
            raise
        except LineageError as exc:
            failed = TableReport(table, bool(options.get("dry_run")))
            failed.errors.append(exc.message)
            reports.append(failed)
    return reports
