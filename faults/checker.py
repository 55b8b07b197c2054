"""The promises of the fault matrix, checked on what the workers said and on
what ZooKeeper and the deep store hold afterwards.

Each check returns a list of violations (empty: it held) so a scenario can
report every broken promise, not just the first.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from segment_lineage.lineage.core.model import EntryState, Operation
from segment_lineage.lineage.core.visibility import visible_segments
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.deep import DeepStore


def load_events(paths: Iterable[Path]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in paths:
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    out.append(json.loads(line))  # a SIGKILL mid-line cannot happen: one write per line
    return out


@dataclass
class Checks:
    """What a scenario verified: each check's name and its violations."""

    results: dict[str, list[str]] = field(default_factory=dict)

    def add(self, name: str, violations: list[str]) -> None:
        self.results.setdefault(name, []).extend(violations)

    def violations(self) -> list[str]:
        return [f"{name}: {v}" for name, found in self.results.items() for v in found]


def one_complete_snapshot(events: list[dict[str, Any]], labels: set[str], rows: int) -> list[str]:
    """Promise 1: every read saw all of one push, never a mix or a part."""
    bad = []
    for event in events:
        if event["kind"] != "read":
            continue
        seen: dict[str, int] = event["labels"]
        if len(seen) != 1 or next(iter(seen.values())) != rows or next(iter(seen)) not in labels:
            bad.append(f"version {event['version']} read as {seen}")
    return bad


def reads_happened(events: list[dict[str, Any]]) -> list[str]:
    return [] if any(e["kind"] == "read" for e in events) else ["no reader read anything"]


def no_missing_file(events: list[dict[str, Any]]) -> list[str]:
    """Promise 2, as readers feel it: no pinned snapshot lost a file."""
    return [
        f"{e['error']}: {e['message']}"
        for e in events
        if e["kind"] == "error" and e["error"] in ("SnapshotTooOldError", "StorageError", "VersionGoneError")
    ]


def deleted_once(events: list[dict[str, Any]]) -> list[str]:
    counts = Counter(e["location"] for e in events if e["kind"] == "deleted")
    return [f"{location} deleted {n} times" for location, n in counts.items() if n > 1]


def nothing_referenced_deleted(m: LineageManager, table: str, events: list[dict[str, Any]]) -> list[str]:
    """Promise 2, afterwards: no deleted file is still registered, and every
    file of the live snapshot and of every pinned one exists."""
    state = m.table(table)
    deleted = {e["location"] for e in events if e["kind"] == "deleted"}
    bad = [
        f"{s.location} deleted but still registered" for s in state.segments.values() if s.location in deleted
    ]
    root = Path(DeepStore.for_root(state.config.root).base)
    states = [state, *m.store.pins.pinned_states(table)]
    for version in states:
        for seg in visible_segments(version):
            if not (root / seg.location).exists():
                bad.append(f"version {version.version} shows {seg.location}, which is missing")
    return bad


def acknowledged_kept(m: LineageManager, table: str, acks: Iterable[str]) -> list[str]:
    """Promise 3: every acknowledged push completed, once, and the versions
    form one unbroken chain."""
    history = m.history(table)
    ends = Counter(r.entry_id for r in history if r.operation is Operation.END_REPLACE)
    bad = [f"acknowledged entry {e} has {ends[e]} END records" for e in acks if ends[e] != 1]
    versions = [r.version for r in history]
    gaps = [f"{a} -> {b}" for a, b in itertools.pairwise(versions) if a - b != 1]
    if gaps:
        bad.append(f"history versions skip: {', '.join(gaps[:5])}")
    return bad


def converged(m: LineageManager, table: str) -> list[str]:
    """Promise 5: after a clean push and a retention pass, no entry is left
    IN_PROGRESS and no file lies on disk that nothing references."""
    state = m.table(table)
    bad = [
        f"entry {e.entry_id} still IN_PROGRESS"
        for e in state.entries.values()
        if e.state is EntryState.IN_PROGRESS
    ]
    root = Path(DeepStore.for_root(state.config.root).base)
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*.parquet")}
    known = {s.location for s in state.segments.values()} | set(state.pending)
    bad += [f"leftover file {path}" for path in sorted(on_disk - known)]
    return bad
