"""What a table's mirror shows, read only: where it stands against the
table (``status``), and its commits mapped to lineage versions."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from segment_lineage.lineage.core.periods import format_period
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.mirror.delta import DeltaLog
from segment_lineage.mirror.errors import MirrorError
from segment_lineage.mirror.log_files import Commit
from segment_lineage.mirror.publisher import not_the_tables, sync
from segment_lineage.mirror.publishing import records_of


@dataclass(frozen=True)
class Status:
    table: str
    mirror: str | None
    retention: str
    head: int
    delta_version: int | None
    lineage_version: int  # the newest lineage version published
    behind: tuple[tuple[int, int], ...]  # versions to publish, with their commit times
    lag_ms: int  # since the oldest version still to publish was committed; 0 when none
    foreign: Commit | None
    log_left: bool  # a log remains although the mirror is disabled
    problem: str | None = None
    waiting: bool = False  # the problem only says it waits (no columns yet): nothing is wrong


def status(manager: LineageManager, table: str, *, check_files: bool = False) -> Status:
    """Where a table's mirror stands: what it publishes, how far behind it is;
    with ``check_files``, also whether every file its newest version
    references exists (a VACUUM that wrote no commit of its own shows here)."""
    state = manager.table(table)
    config = state.config
    retention = format_period(config.mirror_window_ms)
    try:
        log = DeltaLog.open(config.root)
    except MirrorError as exc:
        return Status(table, None if config.mirror is None else config.mirror.value, retention,
                      state.version, None, 0, (), 0, None, False, exc.message)  # fmt: skip
    if config.mirror is None:
        return Status(table, None, retention, state.version, log.shown.version, log.shown.lineage_version,
                      (), 0, None, log.exists() and not_the_tables(manager, state, log) is None)  # fmt: skip
    behind, problem, waiting = _behind(manager, table, log)
    if problem is None and behind and not log.exists():
        # Versions to publish and no log (deleted, or the first publish failed): engines find no
        # table there until a sync. A new table with nothing to publish yet has none either.
        problem = (
            f"no Delta log under the root: engines find no table there; 'lineage mirror sync {table}' "
            "publishes the current version as a new log (its Delta versions start at 0)"
        )
    now = manager.now_ms()
    lag = max(0, now - behind[0][1]) if behind else 0
    if check_files:
        problem = _missing_files(config.root, log) or problem
    return Status(
        table,
        config.mirror.value,
        retention,
        state.version,
        log.shown.version,
        log.shown.lineage_version,
        behind,
        lag,
        log.foreign(),
        False,
        problem,
        problem is not None and problem == waiting,
    )


def _behind(
    manager: LineageManager, table: str, log: DeltaLog
) -> tuple[tuple[tuple[int, int], ...], str | None, str | None]:
    """The versions still to publish, with their commit times; what keeps
    them from the mirror (None: nothing); and the same again when it only
    says the mirror waits (a dry run of the sync says both)."""
    try:
        report = sync(manager, table, dry_run=True)
    except MirrorError as exc:
        # Nothing can be published: every version after the last published one is behind.
        later = [v for v in manager.versions(table) if v > log.shown.lineage_version]
        records = records_of(manager, table, later)
        return tuple((v, records[v].at_ms if v in records else 0) for v in later), exc.message, None
    return report.pending, report.waiting, report.waiting


def _missing_files(root: str, log: DeltaLog) -> str | None:
    """The problem of files the mirror's newest version references that are
    missing (a VACUUM that wrote no commit of its own); None: none is."""
    if not log.shown.files:
        return None
    sizes = DeepStore.for_root(root).file_sizes(sorted(log.shown.files))
    missing = sorted(loc for loc, size in sizes.items() if size is None)
    if not missing:
        return None
    return (
        f"{len(missing)} file(s) the mirror's Delta version {log.shown.version} references are "
        f"missing (first: {missing[0]}): engines reading it fail. Files were deleted outside "
        "retention (a VACUUM?); what the table still shows of them is lost to every reader"
    )


def mirror_commits(manager: LineageManager, table: str) -> list[Commit]:
    """The commits of a table's mirror log, oldest first (none without a log).
    Each names the lineage version it shows; None for another writer's, and
    for another table's (a log this table took over with ``repair``: the
    commit it names is not the one its history has at that version)."""
    state = manager.table(table)
    log = DeltaLog.open(state.config.root)
    commits = sorted(log.history(), key=lambda c: c.delta_version)
    named = {c.lineage_version for c in commits if c.lineage_version and c.commit_id is not None}
    records = records_of(manager, table, sorted(v for v in named if v <= state.version))

    def ours(commit: Commit) -> Commit:
        version = commit.lineage_version or 0
        record = records.get(version)
        if commit.commit_id is None or version == 0:
            return commit
        if version <= state.version and (record is None or record.commit_id == commit.commit_id):
            return commit  # (a record no longer kept cannot tell: taken as ours)
        return dataclasses.replace(
            commit, lineage_version=None, operation=f"{commit.operation} (another table's)"
        )

    return [ours(c) for c in commits]


def published_as(commits: list[Commit]) -> dict[int, int]:
    """Lineage version -> the Delta version that published its files. A
    version that changed nothing the mirror shows has none of its own."""
    return {
        c.lineage_version: c.delta_version
        for c in commits
        if c.lineage_version is not None and not c.columns_only
    }


MAX_CHECKED = 50  # the newest versions whose files are looked at


def readable(manager: LineageManager, table: str, commits: list[Commit]) -> dict[int, str]:
    """Delta version -> whether engines can read it, for the newest
    MAX_CHECKED versions: "yes" while every file it shows is there, else how
    many are gone ("no: 3 file(s) reclaimed": retention after the mirror's
    retention passed, or another writer's VACUUM), or "no: log cleaned" when
    the version no longer loads; older ones "not checked"."""
    if not commits:
        return {}
    config = manager.table(table).config
    log = DeltaLog.open(config.root)
    versions = sorted(c.delta_version for c in commits)
    checked = versions[-MAX_CHECKED:]
    found = {v: "not checked" for v in versions[: len(versions) - len(checked)]}
    deep = DeepStore.for_root(config.root)
    for version in checked:
        files = log.files_at(version)
        if files is None:
            found[version] = "no: log cleaned"
            continue
        gone = sum(1 for size in deep.file_sizes(sorted(files)).values() if size is None)
        found[version] = f"no: {gone} file(s) reclaimed" if gone else "yes"
    return found
