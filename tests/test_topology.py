"""The deployment's topology as plain processes on loopback: a 3-node
ZooKeeper ensemble with ACL roles, an S3 endpoint (moto), a Spark standalone
cluster, two retention daemons and push jobs, all reading one config file,
as docker/compose.yml runs them in containers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from segment_lineage.lineage.zk.server import ZkEnsemble, free_port
from tests.helpers.run import IDENTITIES, ident, lineage_process, wait_for
from tests.helpers.spark_cluster import SparkCluster

ROOT = Path(__file__).parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.ensemble]


def lineage(env: dict[str, str], *args: str, role: str) -> subprocess.CompletedProcess[str]:
    return lineage_process(*args, env={**env, "LINEAGE_ZK_AUTH": IDENTITIES[role]})


def health(port: int) -> dict[str, object] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            data: dict[str, object] = json.loads(answer.read())
            return data
    except (OSError, ValueError):
        return None


@pytest.fixture
def cluster(s3: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    # After the S3 endpoint: the executors write to it with the same credentials,
    # as the compose file gives every container the same AWS_* settings.
    group = SparkCluster(tmp_path_factory.mktemp("spark"))
    group.start()
    yield group
    group.stop()


def test_the_compose_topology_as_processes(
    ensemble: ZkEnsemble, cluster: SparkCluster, s3: str, tmp_path: Path
) -> None:
    config = tmp_path / "lineage.toml"
    config.write_text(
        f'[zookeeper]\nhosts = "{ensemble.hosts}/topology"\nsession_timeout = 3\n'
        f'[storage]\ns3_endpoint = "{s3}"\n'
        f'[spark]\nmaster = "{cluster.master_url}"\n'
        '[retention]\ninterval = "2s"\nmin_grace = "0s"\n'
    )
    env = {**os.environ, "LINEAGE_CONFIG": str(config)}
    env.pop("LINEAGE_ZK", None)
    # The admin job: the role policy, then the table.
    roles = ["--pusher", ident("pusher"), "--retention", ident("retention"), "--reader", ident("reader")]
    applied = lineage(env, "acl", "apply", *roles, role="admin")
    assert applied.returncode == 0, applied.stderr
    created = lineage(
        env,
        "table",
        "create",
        "events",
        "--root",
        "s3://lake/events",
        "--replaced-retention",
        "0s",
        role="admin",
    )
    assert created.returncode == 0, created.stderr

    ports = [free_port(), free_port()]
    daemons = [
        subprocess.Popen(
            [sys.executable, "-m", "segment_lineage", "retention", "daemon", "--metrics-port", str(port)],
            cwd=ROOT,
            env={**env, "LINEAGE_ZK_AUTH": IDENTITIES["retention"]},
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / f"daemon{i}.log").open("wb"),
            start_new_session=True,
        )
        for i, port in enumerate(ports)
    ]
    s3_client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")

    def files() -> set[str]:
        listing = s3_client.list_objects_v2(Bucket="lake", Prefix="events/")
        return {item["Key"] for item in listing.get("Contents", []) if item["Key"].endswith(".parquet")}

    def push(label: str) -> set[str]:
        before = files()
        source = tmp_path / f"in-{label}"
        sample = subprocess.run(
            [sys.executable, "-m", "segment_lineage.sample", str(source), "--rows", "300", "--label", label],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert sample.returncode == 0, sample.stderr
        pushed = lineage(env, "push", "events", "--input", str(source), "--segments", "2", role="pusher")
        assert pushed.returncode == 0, pushed.stderr
        return files() - before

    try:
        wait_for("both daemons up", lambda: all(health(p) for p in ports), timeout=60)
        wait_for(
            "one leader", lambda: sum(bool((health(p) or {}).get("leader")) for p in ports) == 1, timeout=60
        )
        first = push("first")
        second = push("second")
        assert first and second
        # The leader reclaims the replaced snapshot; the new one stays.
        wait_for("the first push's files reclaimed", lambda: files() == second, timeout=60)
        read = lineage(env, "--json", "read", "events", "--limit", "1000", role="reader")
        assert read.returncode == 0, read.stderr
        labels = [row["label"] for row in json.loads(read.stdout)["rows"]]
        assert labels == ["second"] * 300

        # The leader stops; the standby takes over and reclaims the next replaced snapshot.
        leader = next(i for i, p in enumerate(ports) if (health(p) or {}).get("leader"))
        os.killpg(daemons[leader].pid, signal.SIGTERM)
        assert daemons[leader].wait(timeout=60) == 0
        standby = ports[1 - leader]
        wait_for("the standby leads", lambda: bool((health(standby) or {}).get("leader")), timeout=60)
        third = push("third")
        wait_for("the second push's files reclaimed", lambda: files() == third, timeout=60)
        # Roles hold: the reader cannot push, the pusher cannot drop the table.
        refused = lineage(env, "table", "drop", "events", "--force", role="pusher")
        assert refused.returncode == 1 and "not authorised" in refused.stderr
    finally:
        for proc in daemons:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=60)
