"""SIGKILL of the pushing process at each step: readers keep one complete
snapshot, and a rerun succeeds (cleaning up after the dead push)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage.core.model import EntryState, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.store import ZkStore
from tests.conftest import fast_retry
from tests.helpers.paths import REPO

ROOT = REPO
STEPS = [
    ("push.before-start", "old"),
    ("push.after-start", "old"),
    ("push.mid-write", "old"),
    ("push.after-write", "old"),
    ("push.after-audit", "old"),
    ("end.before-commit", "old"),
    ("end.after-commit", "new"),
    ("push.after-end", "new"),
]


def child(hosts: str, table: str, label: str, failpoint: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, LINEAGE_ZK_SESSION_TIMEOUT="2")
    env.pop("LINEAGE_FAILPOINT", None)
    if failpoint:
        env["LINEAGE_FAILPOINT"] = failpoint
    return subprocess.run(
        [sys.executable, "-m", "tests.helpers.push_once", hosts, table, label, "3"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def labels(m: LineageManager, table: str) -> set[str]:
    with SnapshotReader(m, table) as reader:
        data = reader.to_arrow()
        assert data.num_rows == 6  # always one whole snapshot: two segments of three rows
        return set(data.column("label").to_pylist())


@pytest.mark.slow
@pytest.mark.parametrize(("failpoint", "seen_after"), STEPS)
def test_sigkill_at_each_step(zk_hosts: str, tmp_path: Path, failpoint: str, seen_after: str) -> None:
    m = LineageManager(ZkStore(connect(ZkSettings(hosts=zk_hosts))), retry=fast_retry())
    m.create_table(TableConfig.build("crash", str(tmp_path / "crash")))
    parts = [pa.table({"label": ["old"] * 3, "i": [0, 1, 2]}) for _ in range(2)]
    push_arrow(m, "crash", parts)

    killed = child(zk_hosts, "crash", "new", failpoint)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert labels(m, "crash") == {seen_after}

    rerun = child(zk_hosts, "crash", "rerun", None)
    assert rerun.returncode == 0, rerun.stderr
    assert labels(m, "crash") == {"rerun"}
    state = m.table("crash")
    assert not [e for e in state.entries.values() if e.state is EntryState.IN_PROGRESS]
    m.store.close()


def test_sigterm_mid_push_reverts_the_entry(zk_hosts: str, tmp_path: Path) -> None:
    m = LineageManager(ZkStore(connect(ZkSettings(hosts=zk_hosts))), retry=fast_retry())
    m.create_table(TableConfig.build("term", str(tmp_path / "term")))
    push_arrow(m, "term", [pa.table({"label": ["old"] * 3, "i": [0, 1, 2]}) for _ in range(2)])
    env = dict(os.environ, LINEAGE_FAILPOINT="push.mid-write:sleep")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.push_once", zk_hosts, "term", "new", "3"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(e.state is EntryState.IN_PROGRESS for e in m.table("term").entries.values()):
            break
        time.sleep(0.1)
    time.sleep(0.5)  # into the writer's sleep
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    entries = list(m.table("term").entries.values())
    assert [e.state for e in entries] == [EntryState.COMPLETED, EntryState.REVERTED], err
    assert labels(m, "term") == {"old"}
    assert m.store.holds("owner").live("term") == frozenset()
    m.store.close()
