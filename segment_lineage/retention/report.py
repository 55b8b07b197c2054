"""What a retention pass did to one table, as a line and as JSON."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields

from segment_lineage.lineage.core.views import human_size
from segment_lineage.retention.planner import Deletion, Kept


@dataclass
class TableReport:
    """What one pass did to one table: counts, what it planned and kept (and
    why), errors, and a note for a table dropped before or by the pass."""

    table: str
    dry_run: bool
    condemned: int = 0
    orphans: int = 0
    files_deleted: int = 0
    files_already_gone: int = 0
    bytes_deleted: int = 0
    entries_removed: int = 0
    pending_left: int = 0
    oldest_pending_ms: int | None = None  # when the oldest file still pending was queued
    kept: int = 0  # len(kept_items)
    stray_bytes: int = 0  # unreferenced files under the root: seen, waiting or deleted now
    metadata_reclaimed: int = 0
    dirs_removed: int = 0
    errors: list[str] = field(default_factory=list)
    leases_ignored: list[str] = field(default_factory=list)  # malformed leases skipped, and why
    unreadable: bool = False  # skipped: its metadata cannot be decoded (fails closed, deletes nothing)
    planned: tuple[Deletion, ...] = ()  # as planned: kept as the plan's own objects, shaped on output
    kept_items: tuple[Kept, ...] = ()  # what the pass keeps, and why
    note: str | None = None  # what became of a table dropped (with --purge) before or by this pass

    def keep(self, items: Iterable[Kept]) -> None:
        self.kept_items = (*self.kept_items, *items)
        self.kept = len(self.kept_items)

    def line(self) -> str:
        if self.unreadable:
            return f"{self.table}: skipped, metadata unreadable (nothing deleted), 1 error(s)"
        stray = f" ({human_size(self.stray_bytes)} unreferenced in all)" if self.stray_bytes else ""
        text = self._would_do(stray) if self.dry_run else self._did(stray)
        text += f", {len(self.leases_ignored)} malformed lease(s) ignored" if self.leases_ignored else ""
        text += f"; {self.note}" if self.note else ""
        return text + (f", {len(self.errors)} error(s)" if self.errors else "")

    def _would_do(self, stray: str) -> str:
        """What a dry run would do, in words."""
        return (
            f"{self.table}: would delete {len(self.planned)} file(s) ({human_size(self.bytes_deleted)}), "
            f"condemn {self.condemned} segment(s), see {self.orphans} orphan(s){stray}, remove "
            f"{self.entries_removed} entr(ies); {self.kept} kept, {self.pending_left} pending"
        )

    def _did(self, stray: str) -> str:
        """What a pass did, in words."""
        gone = f" and found {self.files_already_gone} already gone" if self.files_already_gone else ""
        return (
            f"{self.table}: deleted {self.files_deleted} file(s) ({human_size(self.bytes_deleted)}){gone}, "
            f"{self.condemned} segment(s) condemned, {self.orphans} orphan(s){stray}, "
            f"{self.entries_removed} entr(ies) removed, {self.kept} kept, {self.pending_left} pending"
        )

    def as_dict(self) -> dict[str, object]:
        out = {item.name: getattr(self, item.name) for item in fields(self)}
        out["errors"] = list(self.errors)
        out["leases_ignored"] = list(self.leases_ignored)
        out["planned"] = [
            {"location": d.location, "segment": d.segment, "reason": d.reason.value, "bytes": d.size_bytes}
            for d in self.planned
        ]
        out["kept_items"] = [{"what": k.what, "why": k.why} for k in self.kept_items]
        return out


@dataclass(frozen=True)
class PassSummary:
    """A daemon's pass over the tables it owns, summed from their reports."""

    tables: int
    files: int
    bytes: int
    condemned: int
    orphans: int
    entries: int
    pending: int
    oldest_pending_ms: int | None
    unreadable: int
    failed_tables: int
    errors: tuple[str, ...]
    notes: tuple[str, ...]  # "table: note" (a purge finished, a table dropped before its turn)

    @staticmethod
    def of(reports: Iterable[TableReport]) -> PassSummary:
        done = list(reports)
        return PassSummary(
            tables=len(done),
            files=sum(r.files_deleted for r in done),
            bytes=sum(r.bytes_deleted for r in done),
            condemned=sum(r.condemned for r in done),
            orphans=sum(r.orphans for r in done),
            entries=sum(r.entries_removed for r in done),
            pending=sum(r.pending_left for r in done),
            oldest_pending_ms=min(
                (r.oldest_pending_ms for r in done if r.oldest_pending_ms is not None), default=None
            ),
            unreadable=sum(1 for r in done if r.unreadable),
            failed_tables=sum(1 for r in done if r.errors),
            errors=tuple(f"{r.table}: {e}" for r in done for e in r.errors),
            notes=tuple(f"{r.table}: {r.note}" for r in done if r.note),
        )

    def oldest_age_s(self, now_ms: int | None) -> float:
        """How long the oldest pending file has waited (0 when none, or the time is unknown)."""
        if self.oldest_pending_ms is None or now_ms is None:
            return 0.0
        return max(0.0, (now_ms - self.oldest_pending_ms) / 1000)

    def line(self, age_s: float, seconds: float) -> str:
        return (
            f"pass done: {self.tables} table(s) owned, deleted {self.files} file(s) ({self.bytes} bytes), "
            f"{self.condemned} segment(s) condemned, "
            f"{self.orphans} orphan(s), {self.entries} entr(ies) removed, "
            f"{self.pending} pending (oldest {age_s:.0f}s), {self.unreadable} table(s) unreadable, "
            f"{len(self.errors)} error(s), "
            f"{seconds:.1f}s"
        )
