"""The fault harness's scenarios, one run each (the CI subset of
``python -m faults --quick``), on a 3-node ensemble behind loopback proxies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from faults.__main__ import TESTED, write_report
from faults.checker import Checks, one_complete_snapshot
from faults.cluster import Cluster
from faults.proxy import TcpProxy
from faults.scenarios import SCENARIOS, Context, Outcome, Scenario, run
from tests.helpers.paths import REPO


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("faults") / "zk")
    c.start()
    yield c
    c.close()


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[f"s{s.number}" for s in SCENARIOS])
def test_scenario_holds(cluster: Cluster, tmp_path: Path, scenario: Scenario) -> None:
    outcome = run(scenario, Context(cluster, tmp_path, quick=True), 1)
    if outcome.skipped:  # a program the scenario needs is missing (.ci/run installs them)
        pytest.skip(outcome.skipped)
    assert outcome.result == "held", "\n".join(outcome.violations)
    assert outcome.checked and outcome.injected


def test_every_matrix_scenario_is_covered() -> None:
    covered = {s.number for s in SCENARIOS} | {t.number for t in TESTED}
    assert covered >= set(range(1, 21))  # and the project's own rows past the matrix (31: the mirror)
    nodes = {node.split("::")[0] for t in TESTED for node in t.nodes}
    for node in nodes:
        assert (REPO / node).exists(), node


def test_the_snapshot_check_catches_a_mix_and_a_part() -> None:
    read = {"kind": "read", "version": 3}
    mixed = [{**read, "labels": {"a": 5, "b": 5}}]
    partial = [{**read, "labels": {"a": 5}}]
    unknown = [{**read, "labels": {"z": 10}}]
    whole = [{**read, "labels": {"a": 10}}]
    assert one_complete_snapshot(mixed, {"a", "b"}, 10)
    assert one_complete_snapshot(partial, {"a"}, 10)
    assert one_complete_snapshot(unknown, {"a"}, 10)
    assert not one_complete_snapshot(whole, {"a"}, 10)


def test_the_report_lists_each_scenario_and_its_violations(tmp_path: Path) -> None:
    checks = Checks()
    checks.add("no file deleted twice", ["x.parquet deleted 2 times"])
    outcomes = [
        Outcome(3, "crash", 1, "SIGKILL", ["one complete snapshot per read"]),
        Outcome(5, "expiry", 2, "stall", sorted(checks.results), checks.violations()),
        Outcome(12, "clocks", 0, "", [], skipped="faketime is not installed"),
    ]
    md = write_report(outcomes, tmp_path, quick=True).read_text()
    assert "| 3 | crash | harness | 1 | SIGKILL |" in md and "| held |" in md
    assert "BROKEN" in md and "x.parquet deleted 2 times" in md and "skipped: faketime" in md
    rows = json.loads((tmp_path / "faults.json").read_text())
    assert [r["result"] for r in rows] == ["held", "BROKEN", "skipped"]


def test_the_proxy_passes_stalls_and_cuts() -> None:
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(1024):
                conn.sendall(data)

    threading.Thread(target=echo, daemon=True).start()
    proxy = TcpProxy(port)
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
        client.sendall(b"ping")
        assert client.recv(16) == b"ping"
        proxy.set("stall")
        client.sendall(b"held")
        client.settimeout(0.5)
        with pytest.raises(TimeoutError):
            client.recv(16)
        proxy.set("pass")
        client.settimeout(2)
        assert client.recv(16) == b"held"
        proxy.set("cut")
        assert client.recv(16) == b""  # closed by the proxy
    finally:
        proxy.close()
        server.close()
