"""Turning a table's mirror on and off, and dropping a table: each holds
the table's mirror (:func:`~segment_lineage.mirror.publisher.held`) while it
changes the table and its log, so a publish under way finishes first, and
none starts until the change is done.

A drop removes the log under the table's root (whether or not its mirror is
on: a log an earlier mirror left goes too) once the drop can no longer be
refused and before the table's root is free again: a refused drop leaves
the log as it was, and no table created at the root afterwards can have
written a log of its own that a late removal would take. A disable removes
the log and then turns the mirror off, so one cut short (a crash, a refused
change) leaves a mirrored table without a log, whose next publish begins a
new one, never a log under a table without a mirror; if its hold lapsed
meanwhile, it removes the log once more after the change.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from segment_lineage.lineage.core.errors import LineageError, TableNotFoundError
from segment_lineage.lineage.core.model import MirrorFormat, SettingsChange
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.manager.commit import Committed
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.mirror.errors import MirrorRefusedError
from segment_lineage.mirror.publisher import SyncReport, check_root, held, sync_holding


@dataclass(frozen=True)
class Enabled:
    done: Committed  # the settings change (``applied`` False when the mirror was on already)
    report: SyncReport  # the publish that followed


def enable(
    manager: LineageManager, table: str, retention: str | None = None, reason: str | None = None
) -> Enabled:
    """Turn the mirror on and publish the current version as its first.
    Refused over a log an earlier mirror left. When nothing can be
    published, the table goes back to no mirror (if this call turned it on)
    and a log it began is removed."""
    from segment_lineage.mirror.delta import DeltaLog

    with held(manager, table):
        config = manager.table(table).config
        check_root(config.root)
        if config.mirror is None and DeltaLog.open(config.root).exists():
            raise MirrorRefusedError(
                f"a Delta log from an earlier mirror remains under the root of table {table!r}",
                table=table,
                remedy=f"remove it with: lineage mirror disable {table}",
            )
        change = SettingsChange(mirror=MirrorFormat.DELTA.value, mirror_retention=retention)
        done = manager.alter_table(table, change, reason)
        try:
            report = sync_holding(manager, table)
        except LineageError:
            if config.mirror is None and done.applied:  # the log this call began, then off again
                DeltaLog(config.root).remove()
                manager.alter_table(table, SettingsChange(mirror="none"), "mirror enable failed")
            raise
    return Enabled(done, report)


def disable(manager: LineageManager, table: str, reason: str | None = None) -> bool:
    """Turn the mirror off and remove its log (engines then find no table
    there, rather than a stale one); whether there was a log. The segments'
    files stay."""
    from segment_lineage.mirror.delta import DeltaLog

    with held(manager, table):
        config = manager.table(table).config
        removed = DeltaLog(config.root).remove()
        if config.mirror is not None:
            manager.alter_table(table, SettingsChange(mirror="none"), reason)
            if not manager.store.holds_mirror(table):  # lapsed: a publish may have begun a log since
                DeltaLog(config.root).remove()
        return removed


@dataclass(frozen=True)
class Dropped:
    log_removed: bool  # a Delta log was under the table's root, and is gone
    problem: str | None = None  # why a log under its root may remain


def drop_table(
    manager: LineageManager, table: str, *, force: bool = False, reason: str | None = None
) -> Dropped:
    """Drop a table (:meth:`LineageManager.drop_table`) and the Delta log
    under its root, holding its mirror. A table whose mirror is off may
    still have a log there (an earlier mirror's): it goes too; one that
    cannot be removed is then only reported. A mirrored table's log that
    cannot be removed leaves the drop to be run again."""
    removed: list[bool] = []
    problems: list[str] = []
    mirrored = False

    def remove_log(root: str | None) -> None:
        if root is None:
            problems.append("its root is not known: a Delta log under it, if any, remains")
            return
        try:
            removed.append(DeepStore.for_root(root).remove_mirror_log())
        except LineageError as exc:
            if mirrored:
                raise
            problems.append(f"the Delta log under {root!r} could not be removed: {exc.message}")

    with contextlib.ExitStack() as stack:
        with contextlib.suppress(TableNotFoundError):  # (an interrupted drop: finished below)
            stack.enter_context(held(manager, table))
            with contextlib.suppress(LineageError):
                mirrored = manager.table(table).config.mirror is not None
        manager.drop_table(table, force=force, reason=reason, on_marked=remove_log)
    return Dropped(any(removed), problems[0] if problems else None)
