"""The promises, held after every step of a run.

(a) No file is deleted while it is visible in its table's current version
    (time retention of data that really expired aside), visible in a version
    a live lease pins, part of a running push (an IN_PROGRESS entry whose
    owner is alive: registered, queued, or under its directory), or while no
    table had it queued for deletion; none is deleted from under another
    table's root; and every such protected file exists.
(b) Every completed read returned the version it asked for, and exactly that
    version's visible segments' rows, or a clear error (snapshot too old,
    version gone).
(c) Every commit an actor was told landed is in the history, at its
    version, and the versions form an unbroken chain. An audited push's end
    changed the table's visible rows no more than its audit allows, judged
    on the version before it.
(d) After the run, with faults off, quiescent passes and pushes converge: no
    IN_PROGRESS entry whose owner is gone, nothing left pending.
(e) A mirrored table's Delta log (its retention outlasts the run) keeps every
    file any of its versions references (a protected file, as in (a)), and
    its newest version shows exactly the files the lineage version it names
    shows. Every commit of it publishes a commit of this table's own history
    (never a dropped table's, at the same root), and a table without a
    mirror has no log.

Deletions are seen on the file system (a file there before a step and gone
after it) and judged by the state before that step; retention's
``on_deleted`` callback names the location a pass meant.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from segment_lineage.ingest.errors import SnapshotTooOldError, StorageError
from segment_lineage.lineage.core.errors import AuthError, ContentionError, LineageError, VersionGoneError
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import EntryState, Operation, Segment, TableState, TableType
from segment_lineage.lineage.core.names import push_dir_owner, push_tag
from segment_lineage.lineage.core.visibility import visible_segments
from segment_lineage.lineage.manager.floor import FLOOR_BUDGET_S, FLOOR_POLL_S
from segment_lineage.lineage.storage.claims import CLAIM_FILE
from segment_lineage.lineage.store.election import owner_role
from segment_lineage.retention.report import TableReport
from simulation.queue_checks import QueueWatch
from simulation.set_checks import check_sets
from simulation.world import AUDIT, CROWD, CROWD_DEADLINE_S, World

# Each violation's likely hole (the outside tester's list, fault-matrix 21-30).
HOLES = {
    1: "a root nested in or equal to another table's root",
    2: "a relative root",
    3: "a directory symlink inside a root",
    4: "two retention passes over one table at once (re-added location)",
    5: "owners read once before the commit loop (a new push judged stale)",
    6: "integer seconds read as milliseconds by time retention",
    7: "orphan ages compared across two clocks",
    9: "a reader accepted while its version's files are queued for deletion",
    10: "a current reader's pin not re-checked",
    11: "as_of(V) answered with V+1",
    12: "a push paused past its session commits late (after its rerun, or its cleanup)",
    13: "a client re-taking the floor under new holder ids stalls every writer",
    14: "retention under another LINEAGE_HOME deletes a live ZooKeeper's data under a root",
    15: "writers deep in a moving commit queue take the tickets ahead for stopped ones and race",
}


# The key the simulated other engine writes into its Delta commits' info.
FOREIGN_MARK = "simulation.foreign"

QUEUED_AT_ACCEPT = " accepted while its files were queued"
RECLAIMED_AT_ACCEPT = " accepted after its files were reclaimed"


@dataclass(frozen=True)
class MirrorCommit:
    """One commit of a mirror's Delta log, as the checker reads it."""

    lineage_version: int | None  # the lineage version it names; None: not the publisher's
    adds: tuple[str, ...]
    removes: tuple[str, ...]
    overwrite: bool
    commit_id: str | None = None  # the lineage commit it publishes (None: columns only)
    by: str = "publisher"  # "publisher", "reset" (a repair's columns), "foreigner" (the simulation's), or "?"

    @staticmethod
    def of(actions: list[dict[str, Any]]) -> MirrorCommit:
        info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        named = info.get("segment_lineage.version")
        mode = (info.get("operationParameters") or {}).get("mode")
        commit = info.get("segment_lineage.commit")
        if info.get(FOREIGN_MARK):
            by = "foreigner"
        elif info.get("segment_lineage.kind") == "reset":
            by = "reset"
        else:
            by = "publisher" if named is not None else "?"
        return MirrorCommit(
            int(named) if isinstance(named, str) and named.isdigit() else None,
            tuple(unquote(a["add"]["path"]) for a in actions if "add" in a),
            tuple(unquote(a["remove"]["path"]) for a in actions if "remove" in a),
            mode == "Overwrite",
            commit if isinstance(commit, str) and commit else None,
            by,
        )


@dataclass(frozen=True)
class Violation:
    step: int
    kind: str
    detail: str
    hole: int | None = None

    def line(self) -> str:
        hole = f" [hole {self.hole}: {HOLES[self.hole]}]" if self.hole in HOLES else ""
        return f"step {self.step}: {self.kind}: {self.detail}{hole}"


@dataclass(frozen=True)
class Queued:
    table: str
    reason: str


class Checker:
    def __init__(self, world: World) -> None:
        self.world = world
        self.violations: list[Violation] = []
        self.queue = QueueWatch()  # the crowd's commit queue (:mod:`simulation.queue_checks`)
        self.files: set[str] = set()  # the file system after the last scan
        self.protected: dict[str, str] = {}  # path -> why, as of the end of the last step
        self.queued: dict[str, list[Queued]] = {}
        self.visible: dict[str, dict[int, tuple[Segment, ...]]] = {}  # table -> version -> visible
        self.last_version: dict[str, int] = {}
        self.tokens: dict[str, tuple[str, int | None]] = {}  # path -> (token, true max time)
        self.owner: dict[str, str] = {}  # path -> the table that registered it
        self.missing: set[str] = set()  # reported once
        self.deleted: dict[str, str] = {}  # path -> how it went
        self.protected_now: dict[str, str] = {}
        self.accepted_how: dict[tuple[str, str], str] = {}  # (table, lease) -> what the head showed then
        self.mirror_logs: dict[str, list[MirrorCommit]] = {}  # a root -> its Delta log's commits read
        self.mirror_firsts: dict[str, bytes] = {}  # a root -> its log's first commit, as read

    # ---- reporting ------------------------------------------------------------------

    def flag(self, kind: str, detail: str, hole: int | None = None) -> None:
        self.violations.append(Violation(self.world.step, kind, detail, hole))

    # ---- the file system ------------------------------------------------------------

    def scan(self) -> set[str]:
        found: set[str] = set()
        for top, _dirs, names in os.walk(self.world.base):  # symlinks are not followed
            for name in names:
                path = os.path.join(top, name)
                if not os.path.islink(path):
                    found.add(path)
        return found

    def stamp(self, paths: set[str]) -> None:
        """New files get the file system's clock (which may run behind)."""
        ns = self.world.clock.fs_ms() * 1_000_000
        for path in paths:
            if any(path.startswith(d + os.sep) for d in self.world.state_dirs):
                continue  # a ZooKeeper server's data, written long ago
            try:
                os.utime(path, ns=(ns, ns))
            except FileNotFoundError:
                continue

    # ---- one step ---------------------------------------------------------------------

    def after_step(self, actor: str, touched_files: bool) -> None:
        if touched_files:
            now = self.scan()
            for path in sorted(self.files - now):
                self._judge_deletion(path, actor)
            self.stamp(now - self.files)
            self.files = now
        self._observe()
        check_sets(self.world, self.flag)
        self.queue.observe(self.world, self.flag)
        errors, self.world.daemon_errors[:] = list(self.world.daemon_errors), []
        for error in errors:
            self.flag("actor-raised", f"a daemon logged an unexpected failure: {error}")

    def _judge_deletion(self, path: str, actor: str) -> None:
        if actor.endswith(":swapper"):
            return  # moving a folder aside and back
        for moved, was in self.world.moved.items():
            if path.startswith(moved + os.sep):  # reached in the folder a pass opened before the move
                path = was + path[len(moved) :]
                break
        rel = self.world.rel(path)
        why = self.protected.get(path)
        queued = self.queued.get(path, [])
        reasons = {q.reason for q in queued}
        owner = self.owner.get(path)
        self.deleted[path] = f"step {self.world.step} by {actor} ({', '.join(sorted(reasons)) or 'unqueued'})"
        if actor.endswith(":zkhome"):
            return  # moving its own ZooKeeper home away
        if any(path.startswith(d + os.sep) for d in self.world.state_dirs):
            self.flag("deleted-state-dir", f"{rel} of a ZooKeeper server's data deleted by {actor}", 14)
            return
        if "/_delta_log/" in path or os.path.basename(path) == CLAIM_FILE:
            # A mirror's log, a root's claim: only a drop (or a disable) removes them in a run,
            # and a purge (its log at once, its claim when retention drops the table).
            purged = any(
                path.startswith(self.world.tables[t].path.rstrip("/") + "/")
                for t in self.world.purging
                if t in self.world.tables
            )
            if not actor.endswith(":remirror") and not purged:
                self.flag("deleted-metadata", f"{rel} deleted by {actor}")
            return
        if why is not None:
            self.flag(
                "deleted-protected", f"{rel} deleted by {actor} while {why}", self._hole(path, why, queued)
            )
        elif not queued:
            self.flag(
                "deleted-unqueued", f"{rel} deleted by {actor}; no table had it queued", self._hole(path)
            )
        elif owner is not None and owner not in {q.table for q in queued}:
            self.flag(
                "deleted-foreign",
                f"{rel} (a file of table {owner}) deleted by {actor} for {sorted(q.table for q in queued)}",
                1,
            )
        else:
            inner = self._deepest_root(path)
            if inner is not None and inner not in {q.table for q in queued}:
                roots = {self.world.tables[q.table].path for q in queued if q.table in self.world.tables}
                if self.world.tables[inner].path not in roots:
                    self.flag("deleted-foreign", f"{rel} under table {inner}'s root deleted by {actor}", 1)

    def forget(self, table: str) -> None:
        """``table`` was dropped: the files it registered are no table's now."""
        for path in [p for p, owner in self.owner.items() if owner == table]:
            del self.owner[path]

    def _deepest_root(self, path: str) -> str | None:
        best: tuple[int, str] | None = None
        for name, info in self.world.tables.items():
            if name in self.world.dropped:
                continue
            if path.startswith(info.path.rstrip("/") + "/") and (best is None or len(info.path) > best[0]):
                best = (len(info.path), name)
        return best[1] if best else None

    def _hole(self, path: str, why: str = "", queued: list[Queued] | None = None) -> int | None:
        reasons = {q.reason for q in queued or []}
        table = self._deepest_root(path)
        info = self.world.tables.get(table or "")
        if path.startswith(str(self.world.home)) or (info is not None and info.flags & {"relative", "dot"}):
            return 2
        if info is not None and "symlink" in info.flags and not reasons:
            return 3
        if path in self.world.readded:
            return 4
        if why.startswith("pinned"):
            return self._pin_hole(why)
        if "STALE_PUSH" in reasons:
            return 5
        if "ORPHAN" in reasons:
            owner = self.owner.get(path)
            if owner is not None and queued and owner not in {q.table for q in queued}:
                return 1
            return 7
        if "EXPIRED" in reasons:
            return 6
        return None

    def _one_refresh_shown(self, table: str, state: TableState) -> None:
        """A REFRESH table shows one push's snapshot: the visible segments a
        push wrote all come from one entry (segments registered by hand,
        outside any entry, aside). Two refreshes both shown double the rows."""
        if state.config.table_type is not TableType.REFRESH:
            return
        shown = sorted({seg.entry_id for seg in visible_segments(state) if seg.entry_id is not None})
        if len(shown) > 1:
            entries = ", ".join(e[:8] for e in shown)
            self.flag("two-refreshes-shown", f"{table} v{state.version} shows the pushes of {entries}")

    def _one_file_per_segment(self, table: str, state: TableState) -> None:
        """No two registered segments share a location, ignoring case (a
        register refuses a case twin: on a store that folds case they are
        one file, and the table's look-ups fold them together)."""
        seen: dict[str, str] = {}
        for seg in state.segments.values():
            other = seen.setdefault(seg.location.casefold(), seg.name)
            if other != seg.name:
                self.flag(
                    "location-twins",
                    f"{table} v{state.version}: segments {other} and {seg.name} share location "
                    f"{seg.location!r} ignoring case",
                )

    def _observe(self) -> None:
        store = self.world.store
        protected: dict[str, str] = {}
        queued: dict[str, list[Queued]] = {}
        now = self.world.clock.zk_ms()
        for table in store.list_tables():
            info = self.world.tables.get(table)
            if info is None:
                continue
            try:
                state = store.read(table).state
                live = {lease.lease_id for lease in store.pins.leases(table)}
                pinned = [
                    (lease_id, held)
                    for (name, lease_id), held in self.world.accepted.items()
                    if name == table and lease_id in live
                ]
                owners = store.holds("owner").live(table)
            except LineageError as exc:
                self.flag("unreadable", f"table {table}: {exc.message}")
                continue
            if state.version not in self.visible.get(table, {}):  # judged once per version
                self._one_file_per_segment(table, state)
            self._note_version(table, state)
            self._one_refresh_shown(table, state)
            join = info.path.rstrip("/") + "/"
            for seg in state.segments.values():
                path = join + seg.location
                self.owner.setdefault(path, table)
                if path not in self.tokens and os.path.exists(path):
                    self._learn(table, path)
            for seg in visible_segments(state):
                if not self._expired(table, join + seg.location, now):
                    protected[join + seg.location] = f"visible in {table} v{state.version}"
            for lease_id, held in pinned:
                for seg in visible_segments(held):
                    reader = self.world.sessions.pins.get((table, held.version), "?")
                    how = self.accepted_how.get((table, lease_id), "")
                    protected[join + seg.location] = (
                        f"pinned by a {reader} reader{how}: {table} v{held.version} "
                        f"(current v{state.version})"
                    )
            running = {
                e.entry_id
                for e in state.entries.values()
                if e.state is EntryState.IN_PROGRESS and e.entry_id in owners
            }
            staged = {  # a staged push's files, kept by its hold until a publish or revert
                e.entry_id
                for e in state.entries.values()
                if e.state is EntryState.IN_PROGRESS and e.held(now)
            }
            for seg in state.segments.values():
                if seg.entry_id in running or seg.entry_id in staged:
                    what = "running" if seg.entry_id in running else "held staged"
                    protected[join + seg.location] = (
                        f"registered to {what} push {seg.entry_id[:8]} of {table}"
                    )
            for location, pend in state.pending.items():
                path = join + location
                queued.setdefault(path, []).append(Queued(table, pend.reason.value))
                if pend.entry_id in running:
                    protected[path] = (
                        f"queued, of running push {pend.entry_id[:8]} of {table} ({pend.reason.value})"
                    )
            if state.config.mirror is not None:
                self._mirror(table, info.path, state, protected)
            else:
                self._no_mirror(table, info.path)
            tags = {push_tag(e) for e in running}
            if tags:
                for path in self.files:
                    if path.startswith(join):
                        top = path[len(join) :].split("/", 1)[0]
                        if push_dir_owner(top) in tags:
                            protected.setdefault(path, f"under a running push's directory in {table}")
        # A table being dropped still holds its root (its drop removes the log, then the table),
        # and the files it queued: a pass that marked them before the drop may delete them until
        # the drop has removed its hold (the pass checks it before each delete).
        listed = set(store.list_tables())
        for path, was in self.queued.items():
            for q in was:
                if q.table not in listed and q.table in store.roots() and q.table not in self.world.dropped:
                    queued.setdefault(path, []).append(q)
        live = {self.world.tables[t].path for t in store.roots() if t in self.world.tables}
        for gone in sorted(self.world.dropped):
            root = self.world.tables[gone].path
            if root not in live:
                self._no_mirror(gone, root, "was dropped")
        self.protected_now = protected
        for path, why in protected.items():
            if path not in self.missing and not os.path.exists(path):
                self.missing.add(path)
                gone = self.deleted.get(path, "never seen deleted")
                self.flag(
                    "missing",
                    f"{self.world.rel(path)} is {why} but missing ({gone})",
                    self._missing_hole(path),
                )
        self.protected = protected
        self.queued = queued

    def _mirror(self, table: str, root: str, state: TableState, protected: dict[str, str]) -> None:
        """(e): read the log's new commits (plain JSON, independent of the
        publisher's code); protect what each references; check the newest."""
        folder = os.path.join(root, "_delta_log")
        try:
            with open(os.path.join(folder, f"{0:020d}.json"), "rb") as handle:
                first = handle.read()
        except FileNotFoundError:
            first = b""
        if self.mirror_firsts.get(root) != first:  # removed, or written again: a new log
            self.mirror_firsts[root] = first
            self.mirror_logs[root] = []
        commits = self.mirror_logs.setdefault(root, [])
        checked = len(commits)
        while True:
            path = os.path.join(folder, f"{len(commits):020d}.json")
            try:
                with open(path, encoding="utf-8") as handle:
                    lines = [json.loads(line) for line in handle if line.strip()]
            except FileNotFoundError:
                break
            commits.append(MirrorCommit.of(lines))
        for number in range(checked, len(commits)):
            self._mirror_owned(table, number, commits[number])
        try:
            numbered = [n[:20] for n in os.listdir(folder) if n.endswith(".json") and n[:20].isdigit()]
        except FileNotFoundError:
            numbered = []
        strays = sorted(int(n) for n in numbered if int(n) >= len(commits))
        if strays:  # a commit past a gap: no reader's log, a stale publisher's
            key = f"mirror-gap:{root}:{strays[0]}"
            if key not in self.missing:
                self.missing.add(key)
                self.flag("mirror-stranger", f"{table}'s Delta log has commit {strays[0]} after a gap")
        join = root.rstrip("/") + "/"
        shown: set[str] = set()
        for number, commit in enumerate(commits):
            if commit.by == "?":  # neither ours nor the simulated other engine's
                self.flag("mirror-foreign", f"commit {number} of {table}'s Delta log is not the publisher's")
            for location in commit.adds:
                protected[join + location] = f"referenced by Delta version {number} of {table}'s mirror"
            if commit.overwrite:
                shown = set()
            shown = (shown - set(commit.removes)) | set(commit.adds)
        if not commits or commits[-1].lineage_version is None:
            return
        named = commits[-1].lineage_version
        try:
            then = state if named == state.version else self.world.store.read_version(table, named)
        except LineageError:
            return  # no longer retained: nothing to compare with
        expected = {seg.location for seg in visible_segments(then)}
        if shown != expected:
            extra, lacking = sorted(shown - expected)[:3], sorted(expected - shown)[:3]
            self.flag(
                "mirror-wrong",
                f"Delta version {len(commits) - 1} of {table} names lineage v{named} but shows "
                f"{len(shown)} file(s), v{named} {len(expected)}: extra {extra}, lacking {lacking}",
            )

    def _mirror_owned(self, table: str, number: int, commit: MirrorCommit) -> None:
        """A commit of ``table``'s log publishes a commit of its own history."""
        if commit.commit_id is None or commit.lineage_version is None:
            return
        try:
            found = self.world.store.find_commit(table, commit.commit_id, commit.lineage_version - 1)
        except LineageError:
            return
        if found is None or found.version != commit.lineage_version:
            self.flag(
                "mirror-stranger",
                f"Delta version {number} of {table}'s log publishes commit {commit.commit_id[:8]} as "
                f"v{commit.lineage_version}, which is not in {table}'s history (a dropped table's?)",
            )

    def _no_mirror(self, table: str, root: str, why: str = "has no mirror") -> None:
        """A table without a mirror (or dropped) leaves engines no log to read."""
        folder = os.path.join(root, "_delta_log")
        try:
            names = [n for n in os.listdir(folder) if n.endswith(".json")]
        except (FileNotFoundError, NotADirectoryError):
            return
        if names:
            key = f"mirror-left:{root}:{min(names)}"
            if key not in self.missing:  # reported once per log
                self.missing.add(key)
                found = min(names)
                self.flag("mirror-left", f"{table} {why}, but a Delta log is under its root: {found}")

    def _missing_hole(self, path: str) -> int | None:
        table = self._deepest_root(path)
        info = self.world.tables.get(table or "")
        if info is not None and info.flags & {"relative", "dot"}:
            return 2
        gone = self.deleted.get(path, "")
        why = self.protected_now.get(path, "")
        if why.startswith("pinned"):
            return self._pin_hole(why)
        if "ORPHAN" in gone:
            return 7
        if path in self.world.readded:
            return 4
        if info is not None and "symlink" in info.flags and "unqueued" in gone:
            return 3
        if "STALE_PUSH" in gone:
            return 5
        return None

    @staticmethod
    def _pin_hole(why: str) -> int:
        """A current reader's files gone: 10 (its pin not re-checked, or
        re-checked too leniently); an as-of reader's: 9 (accepted while its
        version's files were queued). The message says what the head showed
        when the reader was accepted."""
        return 10 if why.startswith("pinned by a current") else 9

    def accept(self, table: str, lease_id: str, held: TableState) -> None:
        """A reader was accepted on ``held``: note what the head showed then."""
        try:
            current = self.world.store.read(table).state
        except LineageError:
            return
        shown = visible_segments(held)
        if any(seg.name not in current.segments and seg.location not in current.pending for seg in shown):
            self.accepted_how[(table, lease_id)] = RECLAIMED_AT_ACCEPT
        elif any(seg.location in current.pending for seg in shown):
            self.accepted_how[(table, lease_id)] = QUEUED_AT_ACCEPT

    def _learn(self, table: str, path: str) -> None:
        try:
            data = pq.read_table(path)
        except (OSError, pa.ArrowInvalid):
            return
        token = data.column("token")[0].as_py() if data.num_rows else ""
        top = self.world.true_max_ms(table, data.column("ts")) if "ts" in data.column_names else None
        self.tokens[path] = (str(token), top)

    def _expired(self, table: str, path: str, now: int) -> bool:
        """Time retention may take visible data that really ended before its horizon."""
        info = self.world.tables[table]
        top = self.tokens.get(path, ("", None))[1]
        return info.data != "plain" and top is not None and top < now - self._time_retention(table)

    def _time_retention(self, table: str) -> int:
        from simulation.world import TIME_RETENTION_MS

        return TIME_RETENTION_MS if self.world.tables[table].data != "plain" else 0

    def _note_version(self, table: str, state: TableState) -> None:
        seen = self.visible.setdefault(table, {})
        if state.version in seen:
            return
        seen[state.version] = tuple(visible_segments(state))
        last = self.last_version.get(table)
        self.last_version[table] = state.version
        if last is None or state.version != last + 1:
            return
        record = self.world.store.history(table, 1)[0]
        if record.operation is not Operation.RETENTION_MARK:
            return
        info = self.world.tables[table]
        now_names = {s.name for s in seen[state.version]}
        for seg in seen[last]:
            if seg.name in now_names:
                continue
            path = info.path.rstrip("/") + "/" + seg.location
            top = self.tokens.get(path, ("", None))[1]
            if top is None or top >= record.at_ms - self._time_retention(table):
                self.flag(
                    "retention-took-live-data",
                    f"retention mark v{state.version} of {table} removed visible {seg.name} "
                    f"(data up to {top}, horizon {record.at_ms - self._time_retention(table)})",
                    6,
                )

    def pending_in(self, table: str) -> bool:
        """Whether the table had files queued at the last step (actors aim with it)."""
        info = self.world.tables.get(table)
        join = info.path.rstrip("/") + "/" if info else None
        return join is not None and any(
            path.startswith(join) and any(q.table == table for q in queued)
            for path, queued in self.queued.items()
        )

    # ---- reads ----------------------------------------------------------------------------

    def check_error(self, actor: str, error: BaseException) -> None:
        """The code's own guard tripped: a store answered another version
        than the one asked (the manager refuses it rather than hand it on)."""
        text = str(error)
        if "the store answered version" in text or ("pinned version" in text and "instead of" in text):
            self.flag("store-wrong-version", f"{actor}: {text}", 11)
        if isinstance(error, AuthError):  # only the intruder's admin work is refused, and it catches that
            self.flag("role-refused", f"{actor}: its own role's work refused: {text}")
        if isinstance(error, ContentionError) and error.floor_wait_s > FLOOR_BUDGET_S + FLOOR_POLL_S:
            # The floors one commit meets hold it a few seconds at most: a writer
            # never spends its deadline waiting on floors (a hog's, say).
            self.flag("floor-starved", f"{actor}: waited {error.floor_wait_s:.1f}s on floors: {text}", 13)
        if (
            isinstance(error, ContentionError)
            and actor.endswith(f":{CROWD}")
            and error.seconds < CROWD_DEADLINE_S
        ):
            # Nothing stops a crowd writer, and only the crowd writes its
            # table: its queue always moves, and is waited on until the
            # deadline. Out of attempts before it, a writer raced the others.
            self.flag("queue-collapse", f"{actor}: gave up racing after {error.seconds:.1f}s: {text}", 15)

    def check_pass_counted(self, actor: str, reports: Sequence[TableReport], deleted: Sequence[str]) -> None:
        """A pass reports the files it deleted, every one, even when its
        fence stopped it halfway (the operator's count, and the daemon's metrics)."""
        counted = sum(r.files_deleted for r in reports)
        if counted != len(deleted):
            self.flag("pass-miscounted", f"{actor}: deleted {len(deleted)} file(s), reported {counted}")

    def check_metadata(self, actor: str, table: str, asked: int, state: TableState) -> None:
        """A look at a past version's metadata: that version, showing what it showed."""
        if state.version != asked:
            self.flag(
                "read-wrong-version",
                f"{actor} asked {table}'s metadata as of v{asked}, got v{state.version}",
                11,
            )
            return
        seen = self.visible.get(table, {}).get(asked)
        if seen is not None and {s.name for s in seen} != {s.name for s in visible_segments(state)}:
            self.flag("read-wrong-version", f"{actor} asked {table} as of v{asked}: other segments shown", 11)

    def check_read(
        self,
        actor: str,
        table: str,
        asked: int | None,
        got: int | None,
        data: pa.Table | None,
        error: BaseException | None,
    ) -> None:
        info = self.world.tables.get(table)
        relative = info is not None and bool(info.flags & {"relative", "dot"})
        if error is not None:
            self.check_error(actor, error)
            if isinstance(error, SnapshotTooOldError | VersionGoneError):
                return
            if got is None and isinstance(error, LineageError) and not isinstance(error, StorageError):
                return  # an open refused with a clear error (a table not found, a conflict)
            self.flag(
                "read-error",
                f"{actor} reading {table} (as of {asked}) got {type(error).__name__}: {error}",
                2 if relative else (10 if asked is None else 9),
            )
            return
        assert got is not None and data is not None
        if asked is not None and got != asked:
            self.flag("read-wrong-version", f"{actor} asked {table} as of v{asked} and got v{got}", 11)
        expected = self.visible_at(table, got)
        if expected is None:
            return
        join = (info.path.rstrip("/") + "/") if info else ""
        want: Counter[str] = Counter()
        rows = 0
        for seg in expected:
            rows += seg.rows
            token = self.tokens.get(join + seg.location)
            if token is not None:
                want[token[0]] += seg.rows
        have: Counter[str] = Counter(data.column("token").to_pylist()) if data.num_rows else Counter()
        if data.num_rows != rows or (len(want) == len(expected) and have != want):
            self.flag(
                "read-partial",
                f"{actor} read {table} v{got}: {data.num_rows} rows of {sorted(have)}, "
                f"expected {rows} of {sorted(want)}",
                2 if relative else None,
            )

    def check_rollback(self, actor: str, table: str, target: int, committed: int) -> None:
        """A rollback that committed shows exactly its target's visible set."""
        record = next((r for r in self.world.store.iter_history(table) if r.version <= committed), None)
        if record is None or record.version != committed or record.operation is not Operation.ROLLBACK:
            return  # acknowledged after a lost answer: the version read back may be a later one
        want, got = self.visible_at(table, target), self.visible_at(table, committed)
        if want is None or got is None:
            return
        if {s.name for s in want} != {s.name for s in got}:
            self.flag(
                "rollback-missed-target",
                f"{actor} rolled {table} back to v{target}; v{committed} shows {len(got)} segment(s), "
                f"v{target} showed {len(want)}",
                11,
            )

    def visible_at(self, table: str, version: int) -> tuple[Segment, ...] | None:
        seen = self.visible.get(table, {})
        if version not in seen:
            try:
                seen[version] = tuple(visible_segments(self.world.store.read_version(table, version)))
            except LineageError:
                return None
        return seen[version]

    # ---- the history -----------------------------------------------------------------------

    def check_history(self) -> None:
        store = self.world.store
        for table in store.list_tables():
            try:
                records = store.history(table)
                current = store.read(table).state.version
            except LineageError as exc:
                self.flag("unreadable", f"history of {table}: {exc.message}")
                continue
            versions = sorted(r.version for r in records)
            if versions and (versions[-1] != current or versions != list(range(versions[0], current + 1))):
                self.flag(
                    "broken-chain", f"{table}: history versions {versions[:3]}..{versions[-3:]} at v{current}"
                )
            purged = min((r.version for r in records if r.operation.value == "PURGE_TABLE"), default=None)
            late = [
                r
                for r in records
                if purged is not None
                and r.version > purged
                and r.operation.value not in ("RETENTION_MARK", "RETENTION_CLEAR", "QUEUE_FILES")
            ]
            if late:
                self.flag(
                    "purge-unfenced",
                    f"{table}: {late[0].operation.value} by {late[0].actor} landed at v{late[0].version}, "
                    f"after the purge at v{purged}",
                )
            self._audits_held(table, records)
            ends = Counter(r.job_id for r in records if r.operation is Operation.END_REPLACE and r.job_id)
            for job, count in sorted(ends.items()):
                if count > 1:
                    self.flag("job-twice", f"{table}: job {job} completed {count} pushes (landed twice)", 12)
            by_version = {r.version: r.commit_id for r in records}
            for ack in self.world.acks:
                if ack.table != table or ack.version < (versions[0] if versions else 0):
                    continue
                if by_version.get(ack.version) != ack.commit_id:
                    self.flag(
                        "lost-ack",
                        f"{ack.actor}'s commit {ack.commit_id[:8]} acknowledged at v{ack.version} of {table} "
                        "is not in the history",
                    )

    def _audits_held(self, table: str, records: Sequence[HistoryRecord]) -> None:
        """An audited push's end (its record says what its audit passed) made
        visible what the audit allows, judged on the version before it and
        its own: a row check judged on an older version lets a push land that
        changes the table more than its audit allows."""
        for record in records:
            said = record.detail.audit if record.detail is not None else None
            if record.operation is not Operation.END_REPLACE or not said:
                continue
            before, after = self.visible_at(table, record.version - 1), self.visible_at(table, record.version)
            if before is None or after is None:
                continue
            rows_before, rows_after = sum(s.rows for s in before), sum(s.rows for s in after)
            limit = AUDIT.max_change_pct or 0.0
            grew = abs(rows_after - rows_before) * 100 > limit * rows_before
            if (rows_before and grew) or record.rows < (AUDIT.min_rows or 0):
                self.flag(
                    "audit-unfenced",
                    f"{table}: v{record.version} by {record.actor} passed its audit "
                    f"({said}) but took the table from {rows_before} to {rows_after} "
                    f"visible rows, {record.rows} written",
                )

    def check_election(self) -> None:
        """At most one retention daemon owns a table in a live session of its own."""
        owners: dict[str, list[str]] = {}
        for aid, (ownership, proxy) in sorted(self.world.candidates.items()):
            session = proxy.sim_session
            if not session.alive or proxy.dead:
                continue
            for table, candidacy in ownership.candidacies().items():
                if candidacy.leading and candidacy.session == session.number:
                    owners.setdefault(table, []).append(f"a{aid}")
        for table, found in sorted(owners.items()):
            if len(found) > 1:
                self.flag("two-leaders", f"daemons {', '.join(found)} both own {table} in a live term")

    def check_owned(self, aid: int) -> None:
        """Right after daemon ``aid`` checked its elections: every table it
        stands for has a candidate in that table's own election, so someone
        owns it by the next check (daemons given different tables each clean
        theirs; one leader for every daemon's tables would leave the others'
        alone)."""
        ownership, proxy = self.world.candidates[aid]
        candidacies = ownership.candidacies()
        for table, owner in sorted(ownership.owners().items()):
            # Tested: an owner seen (None: its check found none, as when its join was
            # lost) by a check in the daemon's current session (a session that
            # expired since, during a pass, took its members with it).
            candidacy = candidacies.get(table)
            current = candidacy is not None and candidacy.session == proxy.sim_session.number
            if owner is not None and current and not self.world.store.elections.members(owner_role(table)):
                self.flag("unowned-table", f"{table}: no candidate in its election after a daemon's check")

    def check_converged(self) -> None:
        store = self.world.store
        if self.world.daemons:
            left = [m for t in store.list_tables() for m in store.elections.members(owner_role(t))]
            if left:
                self.flag("not-converged", f"election members left after every daemon stopped: {left}")
        for table in store.list_tables():
            info = self.world.tables.get(table)
            if info is None:
                continue
            if any(d.startswith(info.path.rstrip("/") + "/") for d in self.world.state_dirs):
                continue  # a ZooKeeper server's home left under its root: retention refuses it, rightly
            state = store.read(table).state
            if state.config.purging_ms is not None and not any(
                p.reason.value == "ORPHAN_SEEN" for p in state.pending.values()
            ):
                self.flag(
                    "not-converged",
                    f"{table}: purged, still there after quiescent passes "
                    f"({len(state.segments)} segment(s), {len(state.pending)} file(s) queued)",
                )
            owners = store.holds("owner").live(table)
            # An unowned entry goes in two passes: the first that finds its hold ended (and its
            # cleanup retention due) condemns the segments it registered, the next removes it.
            # So only one already ended when the second-to-last pass began must be gone: on a
            # real clock a staged push's hold may end between the last two passes, or after.
            began = self.world.passed_ms.get(table, [])
            passed = began[-2] if len(began) >= 2 else self.world.clock.zk_ms()
            due = state.config.lineage_entry_cleanup_retention_ms
            stale = [
                e.entry_id[:8]
                for e in state.entries.values()
                if e.state is EntryState.IN_PROGRESS
                and e.entry_id not in owners
                and not e.held(passed)
                and e.timestamp_ms + due <= passed
            ]
            if stale:
                self.flag(
                    "not-converged",
                    f"{table}: IN_PROGRESS entries with no owner after quiescent passes: {stale}",
                )
            # A file a mirror version references waits while engines may read
            # it: the run's mirrors keep every version for longer than the run.
            mirrored = {a for c in self.mirror_logs.get(info.path, []) for a in c.adds}
            # On a real ZooKeeper the clock is the server's: the janitor's wait
            # cannot make an orphan an hour old, so a file seen unreferenced stays.
            real_clock = self.world.clock.real is not None
            pending = [
                p
                for p in state.pending.values()
                if p.location not in mirrored and not (real_clock and p.reason.value == "ORPHAN_SEEN")
            ]
            if pending:
                self.flag(
                    "not-converged",
                    f"{table}: {len(pending)} file(s) still pending after quiescent passes: "
                    + ", ".join(
                        f"{p.location} ({p.reason.value}, entry {(p.entry_id or '-')[:8]}, "
                        f"registered: {any(s.location == p.location for s in state.segments.values())}, "
                        f"exists: {os.path.exists(info.path.rstrip('/') + '/' + p.location)})"
                        for p in pending[:3]
                    ),
                )
