"""Turning a table's mirror on and off, and dropping a mirrored table: each
holds the table's mirror (:func:`~segment_lineage.mirror.publisher.held`)
while it changes the table and its log, so a publish under way finishes
first, and none starts until the change is done.

A drop removes the log before the table: once the table is gone, nothing
would stop a table created at the same root from writing a log of its own,
which a late removal would take. A drop refused (segments left, without
``force``) is refused before the log is touched. A disable removes the log
before it turns the mirror off, so a table without a mirror never has one
(a disable cut short leaves a mirrored table without a log: its next
publish begins a new one).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from segment_lineage.lineage.core.errors import LineageError, TableNotFoundError
from segment_lineage.lineage.core.model import MirrorFormat, SettingsChange, TableState
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.manager.commit import Committed
from segment_lineage.lineage.manager.tables import drop_refusal
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
            if config.mirror is None and done.applied:  # the log first: no mirror means no log
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
        removed = DeltaLog(config.root).remove()  # first: a table without a mirror has no log
        if config.mirror is not None:
            manager.alter_table(table, SettingsChange(mirror="none"), reason)
        return removed


def drop_table(
    manager: LineageManager, table: str, *, force: bool = False, reason: str | None = None
) -> bool:
    """Drop a table (:meth:`LineageManager.drop_table`) and, first, its
    mirror's log; whether a log was removed. A table whose metadata cannot
    be read is dropped all the same, its mirror's log (if any) left."""
    from segment_lineage.mirror.delta import DeltaLog

    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(held(manager, table))
        except TableNotFoundError:
            manager.drop_table(table, force=force, reason=reason)  # finishes an interrupted drop
            return False
        try:
            state: TableState | None = manager.table(table)
        except LineageError:
            state = None
        removed = False
        if state is not None:
            if not force and (refused := drop_refusal(state)) is not None:
                raise refused
            if state.config.mirror is not None:
                removed = DeltaLog(state.config.root).remove()
        manager.drop_table(table, force=force, reason=reason)
        return removed
