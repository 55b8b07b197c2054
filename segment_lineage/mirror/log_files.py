"""The Delta log's files, read as they are (JSON lines under ``_delta_log/``)
through deep storage's side-folder operations: the commits' numbers and
metadata, the files each commit adds, and the log's own cleanup. The
mirror's naming of the log lives here; deep storage knows only folders.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from segment_lineage.lineage.core.names import MIRROR_LOG_DIR
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.mirror.errors import MirrorError
from segment_lineage.mirror.plan import lineage_of, published_ms_of

RESET_OPERATION = "MIRROR REPAIR (no files)"


@dataclass(frozen=True)
class Commit:
    """One commit of the log, as ``lineage mirror versions`` and history show it."""

    delta_version: int
    lineage_version: int | None  # None: not the publisher's (another writer's, or vacuum's)
    at_ms: int  # when it was published: ZooKeeper's time where recorded, else the writer's clock
    operation: str
    columns_only: bool = False  # columns added, no file changed (it shows the version before)
    commit_id: str | None = None  # the lineage commit it publishes
    reset: bool = False  # a repair's first commit: the table's columns, no file (it shows nothing)


def commit_name(version: int) -> str:
    """The file name of commit ``version`` in the log."""
    return f"{version:020d}.json"


def commit_from(raw: bytes, version: int) -> Commit:
    """Commit ``version`` as its file's bytes ``raw`` say (ValueError: they do not parse)."""
    info: dict[str, Any] = {}
    for line in raw.splitlines():
        if line.strip():
            action = json.loads(line)
            if isinstance(action, dict) and isinstance(action.get("commitInfo"), dict):
                info = action["commitInfo"]
                break
    return commit_of(info, version)


def commit_of(info: dict[str, Any], version: int) -> Commit:
    """A commit as its ``commitInfo`` action describes it."""
    at_ms = published_ms_of(info) or int(info.get("timestamp", 0))
    if info.get("segment_lineage.kind") == "reset":
        return Commit(version, None, at_ms, RESET_OPERATION, reset=True)
    return Commit(
        delta_version=version,
        lineage_version=lineage_of(info),
        at_ms=at_ms,
        operation=str(info.get("operation", "")),
        columns_only=info.get("segment_lineage.kind") == "columns",
        commit_id=str(info.get("segment_lineage.commit") or "") or None,
    )


def commit_version(name: str) -> int | None:
    """The version of a commit file's name (``00000000000000000007.json``)."""
    stem, dot, ext = name.partition(".")
    return int(stem) if dot and ext == "json" and len(stem) == 20 and stem.isdigit() else None


def _version_prefix(name: str) -> int | None:
    """The version a log file (commit or checkpoint) belongs to."""
    head = name[:20]
    return int(head) if len(name) > 20 and head.isdigit() and name[20] == "." else None


def window_start(commits: Sequence[Commit], horizon_ms: int) -> int:
    """The version current at ``horizon_ms``: the newest committed at or
    before it (the oldest there is, when none was). Times as published, made
    monotonic: a commit stamped earlier than one before it (another
    publisher's clock) counts as late as that one, so a clock behind never
    moves the start of the window forward."""
    ordered = sorted(commits, key=lambda c: c.delta_version)
    start = ordered[0].delta_version if ordered else 0
    latest = 0
    for commit in ordered:
        latest = max(latest, commit.at_ms)
        if latest <= horizon_ms:
            start = commit.delta_version
    return start


@dataclass(frozen=True)
class LogFiles:
    """The files of one table's Delta log, under its root."""

    store: DeepStore

    @staticmethod
    def of(root: str) -> LogFiles:
        return LogFiles(DeepStore.for_root(root))

    def names(self) -> list[str]:
        return self.store.list_side(MIRROR_LOG_DIR)

    def read(self, name: str) -> bytes | None:
        return self.store.read_side(MIRROR_LOG_DIR, name)

    def delete(self, name: str) -> None:
        self.store.delete_side(MIRROR_LOG_DIR, name)

    def remove(self) -> bool:
        """Delete the whole log; False when there was none."""
        return self.store.remove_side(MIRROR_LOG_DIR)

    def check_unmarked(self, *, walk: bool) -> None:
        """RefusedError when the log's folder lies inside or (``walk``) holds
        a ZooKeeper server's data directory."""
        self.store.check_side_unmarked(MIRROR_LOG_DIR, walk=walk)

    def mark(self, version: int) -> tuple[tuple[int, int] | None, ...]:
        """Commit ``version``'s file as it is (size, time) and whether the next
        version's is there: equal marks mean the log did not move between them."""
        return self.store.stat_side(MIRROR_LOG_DIR, [commit_name(version), commit_name(version + 1)])

    def commit_versions(self) -> list[int]:
        """The versions whose commit files are there, newest first."""
        return sorted((v for n in self.names() if (v := commit_version(n)) is not None), reverse=True)

    def commit_at(self, version: int) -> Commit | None:
        """Commit ``version`` as its file says (None: no such file)."""
        raw = self.read(commit_name(version))
        return None if raw is None else commit_from(raw, version)

    def added(self, version: int) -> Iterable[str]:
        """The files commit ``version`` adds."""
        raw = self.read(commit_name(version))
        if raw is None:
            raise MirrorError(f"commit {version} of the Delta log under {self.store.root!r} is missing")
        for line in raw.splitlines():
            if line.strip():
                action = json.loads(line)
                add = action.get("add")
                if isinstance(add, dict) and isinstance(add.get("path"), str):
                    yield unquote(add["path"])

    def clean_before(self, start: int) -> int:
        """Delete the commits and checkpoints older than the newest checkpoint
        at or before version ``start`` (how many files): every version from
        there on still loads."""
        names = self.names()
        checkpoints = [
            v for n in names if ".checkpoint." in n and (v := _version_prefix(n)) is not None and v <= start
        ]
        if not checkpoints:
            return 0
        keep_from = max(checkpoints)
        old = [n for n in names if (v := _version_prefix(n)) is not None and v < keep_from]
        for name in old:
            self.delete(name)
        return len(old)
