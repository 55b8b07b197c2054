"""The processes a scenario runs: pushers, readers and retention passes.

    python -m faults.worker push HOSTS TABLE EVENTS LABEL [MODE]
    python -m faults.worker read HOSTS TABLE EVENTS SECONDS [HOLD_S]
    python -m faults.worker retain HOSTS TABLE EVENTS PASSES [PAUSE_S [defaults]]
    python -m faults.worker publish HOSTS TABLE EVENTS

Each appends one JSON line per event to EVENTS (its own file), flushed at
once, so a SIGKILL loses nothing already said: ``ack`` (a push returned),
``read`` (a whole snapshot read: its version and rows per label),
``deleted`` (a file retention deleted), ``before-commit`` and ``published``
(a mirror publish about to commit, and done), and ``error`` (what failed, by
class).
The failpoints (``LINEAGE_FAILPOINT``) and the session timeout
(``LINEAGE_ZK_SESSION_TIMEOUT``) come from the environment.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.core.retry import RetryPolicy
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
from segment_lineage.lineage.store.election import SessionCheck
from segment_lineage.lineage.zk.connect import open_store
from segment_lineage.lineage.zk.store import ZkStore
from segment_lineage.retention.deletes import session_fence
from segment_lineage.retention.executor import PassOptions, run_pass

PARTS = 2
ROWS = 5  # per part
ROWS_PER_PUSH = PARTS * ROWS  # a whole snapshot: this many rows of one label


class Events:
    def __init__(self, path: str) -> None:
        self.path = path
        self._out: TextIO = Path(path).open("a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def say(self, kind: str, **fields: Any) -> None:
        self._out.write(json.dumps({"kind": kind, "at": time.time(), **fields}) + "\n")
        self._out.flush()

    def error(self, exc: BaseException, **fields: Any) -> None:
        message = exc.message if isinstance(exc, LineageError) else str(exc)
        self.say("error", error=type(exc).__name__, message=message[:500], **fields)

    def close(self) -> None:
        self._out.close()


def open_manager(hosts: str) -> LineageManager:
    return LineageManager(open_store(hosts), retry=RetryPolicy(), claims=RootClaimFiles())


def push(hosts: str, table: str, events: Events, label: str, mode: str) -> int:
    m = open_manager(hosts)
    parts = [pa.table({"label": [label] * ROWS, "i": list(range(ROWS))}) for _ in range(PARTS)]
    try:
        result = push_arrow(m, table, parts, mode=mode, owner_wait_s=30)
    except (LineageError, OSError) as exc:
        events.error(exc, label=label)
        return 1
    events.say("ack", label=label, entry=result.entry_id)
    m.store.close()
    return 0


def read(hosts: str, table: str, events: Events, seconds: float, hold_s: float) -> int:
    m = open_manager(hosts)
    deadline = time.monotonic() + seconds
    stop = Path(f"{events.path}.stop")  # the harness says when to finish
    while time.monotonic() < deadline and not stop.exists():
        try:
            with SnapshotReader(m, table) as reader:
                time.sleep(hold_s)  # pinned, files not yet opened: retention must wait for us
                data = reader.to_arrow()
                labels = Counter(data.column("label").to_pylist()) if data.num_rows else Counter()
                events.say("read", version=reader.version, labels=dict(labels), rows=data.num_rows)
        except LineageError as exc:
            events.error(exc)
            time.sleep(0.2)
    m.store.close()
    return 0


def retain(hosts: str, table: str, events: Events, passes: int, pause_s: float, defaults: bool) -> int:
    """Retention passes: with ``defaults``, the CLI's grace periods; else the
    harshest settings (no grace at all), to press on the promises."""
    m = open_manager(hosts)
    store = m.store
    assert isinstance(store, ZkStore)
    failed = 0
    for _ in range(passes):
        fence = session_fence(
            SessionCheck(store), "the ZooKeeper session was suspended or lost during the pass"
        )
        options = PassOptions(
            fence=fence, on_deleted=lambda location: events.say("deleted", location=location)
        )
        if not defaults:
            options = dataclasses.replace(options, force=True, min_grace_ms=0, orphan_grace_ms=0)
        try:
            for report in run_pass(m, [table], options):
                events.say("pass", deleted=report.files_deleted, errors=report.errors)
        except LineageError as exc:
            events.error(exc)
            failed += 1
        time.sleep(pause_s)
    store.close()
    return 1 if failed == passes else 0


def publish(hosts: str, table: str, events: Events) -> int:
    """One ``lineage mirror sync``: it says when it is about to commit to the
    Delta log (the harness may stop it there) and what it published."""
    from segment_lineage.lineage.core import failpoints
    from segment_lineage.mirror.publisher import sync

    failpoints.set_hook("mirror.before-commit", lambda: events.say("before-commit"))
    m = open_manager(hosts)
    try:
        report = sync(m, table)
    except LineageError as exc:
        events.error(exc)
        return 1
    events.say("published", versions=[list(p) for p in report.published])
    m.store.close()
    return 0


def main(argv: list[str]) -> int:
    role, hosts, table, path = argv[0], argv[1], argv[2], argv[3]
    events = Events(path)
    try:
        if role == "push":
            return push(hosts, table, events, argv[4], argv[5] if len(argv) > 5 else "REFRESH")
        if role == "read":
            return read(hosts, table, events, float(argv[4]), float(argv[5]) if len(argv) > 5 else 0.0)
        if role == "retain":
            pause = float(argv[5]) if len(argv) > 5 else 0.0
            return retain(hosts, table, events, int(argv[4]), pause, argv[6:7] == ["defaults"])
        if role == "publish":
            return publish(hosts, table, events)
        raise SystemExit(f"unknown role {role!r}")
    finally:
        events.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
