"""A ZooKeeper outage, timed: a push fails within the documented bound
(about one operation timeout, 10 s by default: docs/operations.md), however
far it got, whether the server is stopped (connections close) or frozen
(SIGSTOP: nothing answers, nothing closes), and the store works again once
ZooKeeper is back."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import segment_lineage.ingest.push
from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.lineage.core.errors import LineageError, StoreUnavailableError
from segment_lineage.lineage.core.model import TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
from segment_lineage.lineage.zk.client import ZkSettings
from segment_lineage.lineage.zk.connect import store_for
from segment_lineage.lineage.zk.server import ZkServer, free_port
from tests.helpers.paths import REPO

pytestmark = [pytest.mark.zk, pytest.mark.slow]

OP_TIMEOUT_S = 10.0  # ZkStore's default, as every command uses it
BOUND_S = OP_TIMEOUT_S + 2.5  # "about 10 s": one bounded wait, and a little for the rest


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ZkServer]:
    zk = ZkServer(tmp_path / "zk", free_port())  # its own server: this test stops it
    zk.start()
    yield zk
    zk.stop()


def part(label: str) -> pa.Table:
    return pa.table({"label": [label] * 3, "i": [0, 1, 2]})


@pytest.mark.parametrize(
    ("how", "stop_at"),
    [
        ("stopped", "push.before-start"),
        ("stopped", "push.after-start"),
        ("stopped", "push.after-write"),
        ("frozen", "push.before-start"),
        ("frozen", "push.after-start"),
        ("frozen", "push.after-write"),
    ],
)
def test_a_push_fails_within_the_bound_when_zookeeper_goes_away(
    server: ZkServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, stop_at: str
) -> None:
    store = store_for(ZkSettings(hosts=f"{server.hosts}/outage"))  # as the command line opens it
    assert store.op_timeout_s == OP_TIMEOUT_S
    try:
        m = LineageManager(store, claims=RootClaimFiles())
        m.create_table(TableConfig.build("t", str(tmp_path / "t")))
        push_arrow(m, "t", [part("v1")])
        visible = m.visible_segments("t")

        stopped: list[float] = []
        real = segment_lineage.ingest.push.failpoint
        pid = server.pid()
        assert pid is not None

        def stop_zookeeper_at(name: str) -> None:
            if name == stop_at:
                if how == "stopped":
                    server.stop()
                else:
                    os.kill(pid, signal.SIGSTOP)
                stopped.append(time.monotonic())
            real(name)

        monkeypatch.setattr(segment_lineage.ingest.push, "failpoint", stop_zookeeper_at)
        with pytest.raises(LineageError) as failed:
            push_arrow(m, "t", [part("v2")])
        took = time.monotonic() - stopped[0]
        assert isinstance(failed.value, StoreUnavailableError), failed.value
        assert took < BOUND_S, f"the push took {took:.1f}s to fail"

        monkeypatch.setattr(segment_lineage.ingest.push, "failpoint", real)
        if how == "stopped":
            server.start()
        else:
            os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while not store.session.connected() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert m.visible_segments("t") == visible  # nothing of the failed push shows
    finally:
        frozen = server.pid() if how == "frozen" else None
        if frozen is not None:
            os.kill(frozen, signal.SIGCONT)
        store.close()


def test_a_push_cut_off_from_zookeeper_says_what_it_left_and_the_next_push_cleans_it_up(
    server: ZkServer, tmp_path: Path
) -> None:
    """`lineage push` on an APPEND table, ZooKeeper stopped after the files
    are written: the last line says the push did not commit, names the entry
    and the files left, and that pushing again is safe; once ZooKeeper is
    back and the dead push's claim has lapsed, the next append cleans the
    abandoned entry up (it shares no segment with it)."""
    import json
    import subprocess
    import sys

    import pyarrow.parquet as pq

    root = REPO
    env = {**os.environ, "LINEAGE_ZK": f"{server.hosts}/cut", "LINEAGE_ZK_SESSION_TIMEOUT": "4"}
    env.pop("LINEAGE_FAILPOINT", None)

    def lineage(*args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "segment_lineage", *args],
            cwd=root, env={**env, **(extra or {})}, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(part("x"), source / "part-0.parquet")
    assert (
        lineage("table", "create", "ap", "--root", str(tmp_path / "ap"), "--type", "APPEND").returncode == 0
    )
    assert lineage("push", "ap", "--input", str(source)).returncode == 0
    written = len(list((tmp_path / "ap").rglob("*.parquet")))
    push = subprocess.Popen(
        [sys.executable, "-m", "segment_lineage", "push", "ap", "--input", str(source)],
        cwd=root,
        env={**env, "LINEAGE_FAILPOINT": "push.after-write:sleep=6"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60  # a busy machine starts the process slowly: wait for its file
    while len(list((tmp_path / "ap").rglob("*.parquet"))) == written and time.monotonic() < deadline:
        assert push.poll() is None, push.communicate()
        time.sleep(0.1)
    server.stop()  # the file is written; the push sleeps 6 s before its commit
    out, err = push.communicate(timeout=60)
    assert push.returncode == 1, out + err
    last = [line for line in err.splitlines() if line.startswith("error:")][-1]
    entry = re.search(r"entry ([0-9a-f-]{36}) \(IN_PROGRESS", last)
    assert entry and "did not commit" in last and "pushing again is safe" in last, err
    assert "1 file(s) under" in last and "retention" in last, last
    assert "RetryFailedError" not in last.split("(", 1)[0]

    server.start()
    time.sleep(6)  # the dead push's session (4 s) expires once the server is back
    again = lineage("push", "ap", "--input", str(source))
    assert again.returncode == 0, again.stderr
    assert f"cleaned up stale entry {entry.group(1)}" in again.stdout + again.stderr
    entries = json.loads(lineage("--json", "entries", "ap").stdout)
    states = {e["id"]: e["state"] for e in entries}
    assert states[entry.group(1)] == "REVERTED" and list(states.values()).count("COMPLETED") == 2
