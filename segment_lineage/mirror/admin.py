"""Turning a table's mirror on and off, and dropping a table (or purging
it: its files reclaimed by retention, which then drops it): each holds
the table's mirror (:func:`~segment_lineage.mirror.publisher.held`) while it
changes the table and its log, so a publish under way finishes first, and
none starts until the change is done.

A drop removes the log under the table's root (whether or not its mirror is
on: a log an earlier mirror of it left goes too; one that is not the
table's, :func:`~segment_lineage.mirror.publisher.not_the_tables`, stays and
is reported) once the drop can no longer be refused and before the table's
root is free again: a refused drop leaves
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

from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import LineageError, TableNotFoundError
from segment_lineage.lineage.core.model import MirrorFormat, TableConfig
from segment_lineage.lineage.core.settings import SettingsChange
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.manager.commit import Committed
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.mirror.delta import DeltaLog
from segment_lineage.mirror.errors import DamagedLogError, MirrorError, MirrorRefusedError
from segment_lineage.mirror.location import location
from segment_lineage.mirror.log_files import LogFiles, commit_from, commit_name
from segment_lineage.mirror.publisher import check_root, held, not_the_tables, sync_holding
from segment_lineage.mirror.publishing import SyncReport


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
    and a log it began is removed. An admin's (a settings change)."""
    manager.require_role(doing="turning a table's mirror on")
    with held(manager, table):
        state = manager.table(table)
        config = state.config
        check_root(config.root)
        log = DeltaLog.open(config.root)
        if config.mirror is None and log.exists():
            why = not_the_tables(manager, state, log)
            if why is None:
                raise MirrorRefusedError(
                    f"a Delta log from an earlier mirror remains under the root of table {table!r}",
                    table=table,
                    remedy=f"remove it with: lineage mirror disable {table}",
                )
            raise MirrorRefusedError(
                f"a Delta log that is not this table's mirror is under the root of table {table!r}: {why}",
                table=table,
                remedy=f"a mirror cannot live there; if that log is not needed, remove "
                f"{config.root.rstrip('/')}/_delta_log/ by hand",
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


def rebuild(manager: LineageManager, table: str) -> SyncReport:
    """Publish the table's current version as the first version of a new
    log, in place of a log no engine can read (:class:`DamagedLogError`: a
    commit file missing or damaged). The mirror is derived from the table,
    so nothing of the table is lost; the Delta version numbers start again
    at 0. Refused over a log that reads (``repair`` publishes over that) and
    over one whose readable commits are none of them this project's
    (another writer's)."""
    manager.require_role(doing="rebuilding a table's mirror")
    with held(manager, table):
        config = manager.table(table).config
        if config.mirror is None:
            enable = f"lineage mirror enable {table}"
            raise MirrorRefusedError(f"table {table!r} has no mirror to rebuild", table=table, remedy=enable)
        check_root(config.root)
        try:
            DeltaLog.open(config.root)
        except DamagedLogError:
            pass
        else:
            raise MirrorRefusedError(
                f"the Delta log of table {table!r} reads: nothing to rebuild",
                table=table,
                remedy=f"publish over another writer's commit with: lineage mirror repair {table}",
            )
        files = LogFiles.of(config.root)
        if not _ours(files):
            raise MirrorRefusedError(
                f"none of the readable commits of the Delta log under the root of table {table!r} is "
                "this project's: it is not the table's mirror, and it stays",
                table=table,
                remedy=f"if that log is not needed, remove {config.root.rstrip('/')}/_delta_log/ by hand",
            )
        files.remove()
        return sync_holding(manager, table)


def _ours(files: LogFiles) -> bool:
    """Whether a commit file of the log that parses is the publisher's, or
    none parses: a log no commit of which reads holds nothing of another
    writer's that anyone can read (a mirror of one commit, damaged, right
    after an enable or a rebuild)."""
    readable = False
    for version in files.commit_versions():
        raw = files.read(commit_name(version))
        if raw is None or not raw.strip():
            continue  # gone, or empty: a commit of no action says nothing
        with contextlib.suppress(ValueError):  # a damaged commit file says nothing
            commit = commit_from(raw, version)
            readable = True
            if commit.lineage_version is not None or commit.reset:
                return True
    return not readable


@dataclass(frozen=True)
class Removal:
    removed: bool  # a Delta log of the table was under its root, and is gone
    problem: str | None = None  # why a log under its root remains


def disable(manager: LineageManager, table: str, reason: str | None = None) -> Removal:
    """Turn the mirror off and remove its log (engines then find no table
    there, rather than a stale one). A log that is not the table's mirror
    (:func:`not_the_tables`) stays. The segments' files stay. An admin's:
    engines lose the versions they read."""
    manager.require_role(doing="turning a table's mirror off")
    with held(manager, table):
        state = manager.table(table)
        root = state.config.root
        log = DeltaLog.open(root)
        there = log.exists()
        why = not_the_tables(manager, state, log) if there else None
        if why is None:
            log.remove()
        if state.config.mirror is not None:
            manager.alter_table(table, SettingsChange(mirror="none"), reason)
            if why is None and not manager.mirror_hold(table).held():
                DeltaLog(root).remove()  # lapsed: a publish may have begun a log since
    problem = f"the Delta log under {root!r} stays: {why}" if why else None
    return Removal(there and why is None, problem)


def purge(manager: LineageManager, table: str, reason: str | None = None) -> tuple[Committed, Removal]:
    """Drop ``table`` with its files (:meth:`LineageManager.purge_table`):
    every file queued for retention, which drops the table once none is
    left. The Delta log goes now, as a disable's would (engines lose the
    table at once, as its readers do); the files it shows are then only
    the table's, reclaimed with the rest. An admin's."""
    manager.require_role(doing="purging a table")
    with held(manager, table):
        state = manager.table(table)
        transitions.purge_table(state, manager.now_ms())  # refused (a push runs): the log stays
        root = state.config.root
        log = DeltaLog.open(root)
        there = log.exists()
        why = not_the_tables(manager, state, log) if there else None
        # As a disable: the log goes first, so a purge cut short leaves a
        # mirrored table without a log (its next publish begins one), never
        # a log under a table without a mirror.
        if there and why is None:
            log.remove()
        done = manager.purge_table(table, reason)
        if there and why is None and not manager.mirror_hold(table).held():
            DeltaLog(root).remove()  # lapsed: a publish may have begun a log since
    problem = f"the Delta log under {root!r} stays: {why}" if why else None
    return done, Removal(there and why is None, problem)


def drop_table(
    manager: LineageManager, table: str, *, force: bool = False, reason: str | None = None
) -> Removal:
    """Drop a table (:meth:`LineageManager.drop_table`) and the Delta log
    under its root, holding its mirror. The log goes once the table is
    marked dropping (the store calls back), if the hold still stands and
    the log is the table's (:func:`not_the_tables`): a log an earlier
    mirror left goes too. A mirrored table's log that cannot be
    removed (deep storage unreachable) leaves the drop to be run again;
    otherwise what remains is only reported."""
    removed: list[bool] = []
    problems: list[str] = []
    whys: list[str | None] = []  # why the log is not the table's, as read before the drop
    holding = False

    def remove_log(root: str | None, config: TableConfig | None) -> None:
        if root is None:
            problems.append("the table's root is not known: a Delta log under it, if any, remains")
            return
        mirrored = config is not None and config.mirror is not None
        try:
            store = DeepStore.for_root(root)
            location(store)  # MirrorRefusedError: a root no mirror can live under
            if not LogFiles(store).names():
                return
            try:
                log = DeltaLog.open(root)
            except MirrorError:
                log = None
            if log is None or not log.exists():  # what a removal cut short left: no engine reads it
                removed.append(LogFiles(store).remove())
                return
            why = whys[0] if whys else not_the_tables(manager, None, log)
            if why is None and holding and not manager.mirror_hold(table).held():
                if mirrored:  # it stays to be run again, with a hold of its own
                    raise MirrorError(f"the hold on the Delta mirror of table {table!r} lapsed")
                why = "the hold on the table's mirror lapsed (its ZooKeeper session ended)"
            if why is not None:
                problems.append(f"the Delta log under {root!r} stays: {why}")
                return
            removed.append(log.remove())
        except MirrorRefusedError:
            return  # a root no mirror can live under
        except (LineageError, OSError) as exc:
            if not mirrored:
                problems.append(f"the Delta log under {root!r}, if any, remains: {exc}")
                return
            text = exc.message if isinstance(exc, LineageError) else str(exc)
            raise MirrorError(
                f"the drop of table {table!r} did not finish: removing the Delta log under {root!r} "
                f"failed: {text}",
                remedy=f"run it again once that is mended: lineage table drop {table} --force",
            ) from None

    with contextlib.ExitStack() as stack:
        with contextlib.suppress(TableNotFoundError):  # (an interrupted drop: finished below)
            # ZooKeeper's own words name the mirror's lock, which a table without a mirror has too.
            refused = f"dropping table {table!r} was refused: not authorised (only an admin drops tables)"
            stack.enter_context(held(manager, table, refused=refused))
            holding = True
            with contextlib.suppress(LineageError, OSError):  # else judged when it goes
                state = manager.table(table)
                log = DeltaLog.open(state.config.root)
                whys.append(not_the_tables(manager, state, log) if log.exists() else None)
        manager.drop_table(table, force=force, reason=reason, on_marked=remove_log)
    return Removal(any(removed), problems[0] if problems else None)
