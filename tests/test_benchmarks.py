"""The benchmark command: its meter, its report, and a quick run of a real suite."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from benchmarks import report
from benchmarks.common import OURS, Suite
from benchmarks.measure import Meter, case, measure
from tests.helpers.run import python_module


def test_the_meter_sees_time_and_the_memory_an_operation_adds() -> None:
    meter = Meter()
    meter.start()
    block = b"x" * (96 << 20)  # touched, so resident
    time.sleep(0.05)
    del block
    seconds, peak = meter.stop()
    assert seconds >= 0.05
    assert peak >= 80 << 20
    meter.start()
    seconds, peak = meter.stop()
    assert seconds < 1
    assert peak < 40 << 20


def test_measure_times_only_the_operation_and_checks_each_result() -> None:
    calls: list[str] = []

    def prepare() -> object:
        time.sleep(0.05)  # set-up, untimed
        calls.append("prepare")
        return lambda: calls.append("run") or len(calls)

    times, peaks = measure(prepare, 3, check=lambda n: calls.append(f"checked {n}"))
    assert calls == [
        "prepare",
        "run",
        "checked 2",
        "prepare",
        "run",
        "checked 5",
        "prepare",
        "run",
        "checked 8",
    ]
    assert len(times) == len(peaks) == 3
    assert all(t < 0.05 for t in times)

    def wants_two(n: int) -> None:
        assert n == 2, "a wrong result fails the run"

    with pytest.raises(AssertionError, match="wrong result"):
        measure(lambda: lambda: 1, 1, check=wants_two)


def slow_then_fast() -> Suite:
    suite = Suite("rollback", "Rollback", "segments", "What is measured.")
    for size, ours_s, peer_s in ((1000, 0.004, 0.002), (10000, 0.004, 0.02)):
        suite.add(case("rollback", size, OURS, ([ours_s] * 5, [2 << 20] * 5)))
        suite.add(case("rollback", size, "deltalake", ([peer_s] * 5, [4 << 20] * 5)))
        suite.profile_if_slower("rollback", size, lambda: lambda: sum(range(10_000)))
    return suite


def test_ours_is_profiled_only_where_a_peer_was_faster() -> None:
    suite = slow_then_fast()
    assert [(p.operation, p.size) for p in suite.profiles] == [("rollback", 1000)]
    assert suite.profiles[0].top and suite.profiles[0].areas


def test_the_report_has_the_ratios_the_plots_and_the_json(tmp_path: Path) -> None:
    suite = slow_then_fast()
    written = report.write(tmp_path, {"date": "today"}, [suite])
    text = written.read_text()
    assert "| rollback rollback | 1,000 segments | 4.0 ms | deltalake: 2.0 ms | **2.00** |" in text
    assert "| rollback rollback | 10,000 segments | 4.0 ms | deltalake: 20.0 ms | **0.20** |" in text
    assert "![Rollback](rollback.png)" in text
    assert (tmp_path / "rollback.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "profiles" / "rollback-rollback-1000.txt").read_text()
    document = json.loads((tmp_path / "report.json").read_text())
    assert document["summary"][0]["time_ratio"] == pytest.approx(2.0)
    assert {c["system"] for c in document["suites"][0]["cases"]} == {OURS, "deltalake"}


def run_benchmarks(*args: str) -> subprocess.CompletedProcess[str]:
    return python_module("benchmarks", *args, timeout=900)


def test_an_unknown_suite_is_refused_by_name(tmp_path: Path) -> None:
    done = run_benchmarks("--only", "tables,nope", "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert "unknown suite nope" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One quick run of the tables and retention suites (one process, one
    ZooKeeper), read by the tests of each."""
    out = tmp_path_factory.mktemp("bench")
    done = run_benchmarks("--quick", "--only", "tables,retention", "--out", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return out


@pytest.mark.slow
@pytest.mark.e2e
def test_a_quick_run_compares_ours_with_both_peers(quick_run: Path) -> None:
    tmp_path = quick_run
    document = json.loads((tmp_path / "report.json").read_text())
    cases = {
        (s["name"], c["operation"], c["size"], c["system"]) for s in document["suites"] for c in s["cases"]
    }
    for suite, operation in (
        ("visible", "cold"),
        ("visible", "warm"),
        ("rollback", "rollback"),
        ("rollback", "cold"),
    ):
        for size in (300, 3000):
            for system in (OURS, "deltalake", "pyiceberg"):
                assert (suite, operation, size, system) in cases
    for size in (300, 3000):
        for system in (OURS, "deltalake"):  # the visible set as file URIs
            assert ("visible", "files", size, system) in cases
    assert (tmp_path / "visible.png").exists() and (tmp_path / "rollback.png").exists()
    assert "## Reading the visible set" in (tmp_path / "report.md").read_text()


@pytest.mark.zk
@pytest.mark.soak
def test_sustained_pushes_leave_a_small_server_alive() -> None:
    """Three pushers on a 3,000-segment table for a minute and a half against
    a server with the old default heap (256 MB): it once died after about 30 s
    (whole buckets rewritten by every commit, garbage kept 10 minutes). The
    heap is sampled; the run fails when the server dies."""
    done = python_module(
        "benchmarks.sustained", "--seconds", "90", "--heap", "256", "--pushers", "3", timeout=400
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert "server alive" in done.stdout and "peak used" in done.stdout, done.stdout


@pytest.mark.slow
@pytest.mark.e2e
def test_a_quick_retention_run_reclaims_beside_vacuum(quick_run: Path) -> None:
    tmp_path = quick_run
    document = json.loads((tmp_path / "report.json").read_text())
    cases = {
        (c["operation"], c["size"], c["system"])
        for s in document["suites"]
        if s["name"] == "retention"
        for c in s["cases"]
    }
    for size in (1_000, 4_000):  # each variant of ours on a root of its own
        for system in (OURS, "ours, with orphan scan", "deltalake"):
            assert ("reclaim", size, system) in cases
    assert "(failed)" not in (tmp_path / "report.md").read_text()


def test_a_delta_log_written_directly_is_one_deltalake_reads_and_vacuums(tmp_path: Path) -> None:
    """The million-file retention row builds the vacuum's table by writing
    its log: deltalake must see one live file, and its vacuum must delete
    exactly the files the log removed (in their thousand folders)."""
    from deltalake import DeltaTable

    from benchmarks.peers import overwritten_delta_log
    from benchmarks.retention import PAYLOAD, write_files

    names = [f"seg_{i:07d}" for i in range(2_500)]
    locations = write_files(tmp_path, names)
    overwritten_delta_log(tmp_path, locations, len(PAYLOAD))
    table = DeltaTable(str(tmp_path))
    assert table.version() == 1
    assert [Path(uri).name for uri in table.file_uris()] == ["new.parquet"]
    gone = table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert sorted(gone) == sorted(locations)
    assert not list(tmp_path.glob("push_old/*/*.parquet"))
    assert (tmp_path / "new.parquet").exists()
