"""A push set's process killed (SIGKILL) at each step, or paused past its
session: readers see the set in every table or in none, and a rerun
succeeds, cleaning up as after a single push."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage.core.failpoints import SET_POINTS
from segment_lineage.lineage.core.model import EntryState, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.store import ZkStore
from tests.conftest import fast_retry
from tests.helpers.paths import REPO

TABLES = ("facts", "dims", "days")
LANDED = {"set.after-commit", "set.after-end"}
STEPS = ["push.before-start", "start.after-commit", "push.mid-write", "store.before-head-swap", *SET_POINTS]


def child(hosts: str, label: str, failpoint: str | None) -> subprocess.Popen[str]:
    env = dict(os.environ, LINEAGE_ZK_SESSION_TIMEOUT="2")
    env.pop("LINEAGE_FAILPOINT", None)
    if failpoint:
        env["LINEAGE_FAILPOINT"] = failpoint
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.push_set_once", hosts, label, *TABLES],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def seen(m: LineageManager) -> dict[str, set[str]]:
    """Each table's labels, read through one cut (every table's whole snapshot)."""
    with SnapshotReader.together(m, list(TABLES)) as cut:
        out = {}
        for table in TABLES:
            data = cut[table].to_arrow()
            assert data.num_rows == 6
            out[table] = set(data.column("label").to_pylist())
    return out


@pytest.fixture
def m(zk_hosts: str, tmp_path: Path) -> LineageManager:
    manager = LineageManager(ZkStore(connect(ZkSettings(hosts=zk_hosts))), retry=fast_retry())
    for table in TABLES:
        manager.create_table(TableConfig.build(table, str(tmp_path / table)))
        push_arrow(manager, table, [pa.table({"label": ["old"] * 3, "i": [0, 1, 2]})] * 2)
    return manager


@pytest.mark.slow
def test_sigkill_at_every_step_of_a_set(zk_hosts: str, m: LineageManager) -> None:
    """One table set, killed at each step in turn (each kill's rerun is the
    next step's starting point): all three tables old or all new, never mixed."""
    last = "old"
    for step in STEPS:
        killed = child(zk_hosts, step, step)
        _, err = killed.communicate(timeout=120)
        assert killed.returncode == -signal.SIGKILL, (step, err)
        last = step if step in LANDED else last
        assert seen(m) == {t: {last} for t in TABLES}, step
    rerun = child(zk_hosts, "rerun", None)
    _, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    assert seen(m) == {t: {"rerun"} for t in TABLES}
    for table in TABLES:
        assert not [e for e in m.table(table).entries.values() if e.state is EntryState.IN_PROGRESS]
    m.store.close()


@pytest.mark.slow
def test_a_set_paused_past_its_session_never_lands(zk_hosts: str, m: LineageManager) -> None:
    """Frozen right before its one commit until its session ended: when it
    wakes, the claims checked in its own request refuse the commit, in every
    table, though nobody cleaned up meanwhile; a rerun then pushes the set."""
    paused = child(zk_hosts, "late", "set.before-commit:sleep=6")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every table's entry started (and its claim taken)
        if all(m.live_owners(t) for t in TABLES):
            break
        time.sleep(0.1)
    time.sleep(1.5)  # its files written: into the failpoint's sleep
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 30
        while any(m.live_owners(t) for t in TABLES) and time.monotonic() < deadline:
            time.sleep(0.2)  # its session lapses (2 s) and its claims with it
        assert not any(m.live_owners(t) for t in TABLES)
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    _, err = paused.communicate(timeout=120)
    assert paused.returncode != 0 and "claim" in err, err
    assert seen(m) == {t: {"old"} for t in TABLES}
    rerun = child(zk_hosts, "rerun", None)
    _, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    assert seen(m) == {t: {"rerun"} for t in TABLES}
    m.store.close()
