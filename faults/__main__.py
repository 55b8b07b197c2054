"""Run the fault suite and write its report (Markdown and JSON).

    python -m faults [--quick] [--runs N] [--only 3,5,...] [--out DIR] [--no-tests]

The harness scenarios run against a 3-node ZooKeeper ensemble started here on
loopback; the matrix's other scenarios (and further runs of the harness ones)
are pytest tests, run by node id against real ZooKeeper. ``--quick`` is the
short subset: one run each, fewer crash points, no Spark (``make test`` runs
the same harness scenarios once, through tests/test_faults.py).
``--no-tests`` runs the harness scenarios only. Exits 1 when any promise broke.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path

from faults.cluster import Cluster
from faults.scenarios import ROOT, SCENARIOS, Context, Outcome, run

T = "tests/"


@dataclass(frozen=True)
class TestScenario:
    number: int
    title: str
    injected: str
    checked: str
    nodes: tuple[str, ...]
    quick: bool = True  # part of the quick subset


TESTED = (
    TestScenario(
        1,
        "concurrent writers, first write included",
        "16 processes committing; 2 racing the first write",
        "every acknowledged change present, one unbroken version chain",
        (f"{T}lineage/manager/test_concurrency.py",),
    ),
    TestScenario(
        2,
        "concurrent replaces with overlapping scope",
        "overlapping range intents, name conflicts",
        "exactly one wins; the others leave nothing behind",
        (
            f"{T}lineage/store/test_contract.py::test_overlapping_replace_range_intents_conflict_even_with_no_segments",
            f"{T}ingest/test_push.py::test_overlapping_range_pushes_conflict_on_intent",
            f"{T}lineage/store/test_contract.py::test_name_conflicts",
        ),
    ),
    TestScenario(
        3,
        "SIGKILL of the pusher at every step",
        "SIGKILL at 6 push steps, SIGTERM mid-push",
        "readers keep the old snapshot; a rerun succeeds",
        (f"{T}ingest/test_push_crash.py",),
    ),
    TestScenario(
        4,
        "connection cut after a write was sent",
        "a reply lost after the head swap (store level)",
        "the retry recognises its own write; errors after it say 'unknown'",
        (
            f"{T}lineage/store/test_contract.py::test_find_commit_recognises_only_its_own_write",
            f"{T}lineage/store/test_contract.py::test_errors_after_an_unknown_outcome_are_reported_as_unknown",
            f"{T}lineage/zk/test_zk_store.py::test_a_lost_request_is_retried",
        ),
    ),
    TestScenario(
        5,
        "session expiry in the middle of a retention run",
        "daemon sessions expired mid-pass, leader SIGKILLed",
        "no delete after the loss; the next term finishes",
        (
            f"{T}retention/test_retention_daemon.py::test_session_expiry_mid_pass_deletes_nothing_and_the_next_term_finishes",
            f"{T}retention/test_retention_daemon.py::test_killing_the_leader_mid_pass_lets_the_other_finish",
        ),
    ),
    TestScenario(
        6,
        "whole ensemble restarted",
        "ZooKeeper restarted under a running daemon, twice",
        "the daemon carries on",
        (f"{T}retention/test_retention_daemon.py::test_the_daemon_survives_a_zookeeper_restart",),
    ),
    TestScenario(
        7,
        "one, then two of three servers down",
        "servers stopped under a client",
        "work with a majority; clean failure without",
        (f"{T}lineage/zk/test_ensemble.py",),
    ),
    TestScenario(
        8,
        "retention paused past its session timeout",
        "SIGSTOP of the leading daemon past its session",
        "its stale plan deletes nothing",
        (
            f"{T}retention/test_retention_daemon.py::test_a_daemon_stopped_past_its_session_timeout_deletes_nothing_stale",
        ),
    ),
    TestScenario(
        9,
        "revert racing retention",
        "a revert and a retention pass at once",
        "exactly one wins; nothing visible points at a missing file",
        (
            f"{T}retention/test_retention.py::test_revert_racing_retention_leaves_nothing_visible_pointing_at_a_missing_file",
        ),
    ),
    TestScenario(
        10,
        "a segment registered after its entry was reverted",
        "late uploads",
        "refused",
        (
            f"{T}lineage/store/test_contract.py::test_segments_of_a_reverted_entry_cannot_be_registered",
            f"{T}lineage/store/test_contract.py::test_a_late_upload_of_a_name_left_out_at_end_is_refused",
            f"{T}lineage/store/test_contract.py::test_reverted_names_need_force_cleanup_to_be_reused",
        ),
    ),
    TestScenario(
        11,
        "readers pinned while retention runs at zero grace",
        "zero-grace passes under leases",
        "the reader's files stay until it is done",
        (
            f"{T}retention/test_retention.py::test_a_reader_lease_keeps_its_files_through_a_zero_grace_pass",
            f"{T}ingest/test_push.py::test_a_reader_keeps_its_snapshot_and_detects_reclaimed_files",
            f"{T}lineage/manager/test_rollback.py::test_as_of_reads_pin_old_files_and_refuse_reclaimed_ones",
        ),
    ),
    TestScenario(
        12,
        "clocks an hour off",
        "client and daemon clocks one hour ahead and behind",
        "nothing deleted early",
        (f"{T}retention/test_retention.py::test_clocks_off_by_an_hour_get_nothing_deleted_early",),
    ),
    TestScenario(
        13,
        "oversized input",
        "a 100,000-segment table and replace; an oversized change",
        "works within the size budget, or refused up front without retrying",
        (
            f"{T}lineage/zk/test_zk_store.py::test_100k_segments_and_a_100k_replace_stay_under_512kb",
            f"{T}lineage/zk/test_zk_store.py::test_an_oversized_change_is_refused_up_front_and_not_retried",
        ),
    ),
    TestScenario(
        14,
        "corrupted records",
        "bad JSON, unknown states and formats, duplicates, missing blobs",
        "readers and retention fail closed; nothing deleted",
        (
            f"{T}lineage/zk/test_zk_store.py::test_corrupted_heads_fail_closed",
            f"{T}lineage/zk/test_zk_store.py::test_corrupted_buckets_fail_closed",
            f"{T}retention/test_retention.py::test_a_pass_on_a_corrupted_table_fails_closed_and_deletes_nothing",
        ),
    ),
    TestScenario(
        15,
        "bad names",
        "every bad name and location of the matrix, CLI misuse",
        "refused before any ZooKeeper or file call; nothing changed",
        (
            f"{T}lineage/core/test_names.py",
            f"{T}cli/test_bad_input.py",
            f"{T}lineage/store/test_contract.py::test_bad_input_changes_nothing",
        ),
    ),
    TestScenario(
        16,
        "deep-storage traversal",
        "locations outside the root, ../, symlinks out, sibling tables",
        "the delete is refused; files outside survive",
        (
            f"{T}retention/test_retention.py::test_a_location_escaping_the_root_is_refused_and_the_outside_file_survives",
            f"{T}retention/test_retention.py::test_traversal_attempts_are_refused_and_sentinels_outside_survive",
        ),
    ),
    TestScenario(
        17,
        "rollback and revert misuse",
        "unknown ids, twice, IN_PROGRESS without force, chained, concurrent",
        "exactly one succeeds; failed calls change nothing",
        (
            f"{T}lineage/store/test_contract.py::test_revert_rules",
            f"{T}lineage/store/test_contract.py::test_refused_revert_of_a_chained_entry",
            f"{T}lineage/store/test_contract.py::test_revert_of_a_completed_entry_whose_replaced_segments_are_gone",
            f"{T}lineage/manager/test_rollback.py",
        ),
    ),
    TestScenario(
        18,
        "Spark task retries and speculation",
        "failing tasks, a native writer retried, speculation",
        "only successful attempts become segments; the rest are reaped",
        (
            f"{T}ingest/test_spark_push.py::test_a_task_failing_once_leaves_no_duplicates",
            f"{T}ingest/test_spark_push.py::test_native_writer_task_retried_once_leaves_no_duplicates",
            f"{T}ingest/test_spark_push.py::test_push_on_a_standalone_cluster_with_speculation",
        ),
        quick=False,
    ),
    TestScenario(
        19,
        "wrong or missing credentials",
        "other digest identities, no identity, malformed auth; each role beyond its rights; "
        "untrusted or misnamed TLS certificates",
        "refused; nothing changed; no secret in output",
        (
            f"{T}lineage/zk/test_zk_store.py::test_digest_auth_owns_every_znode_and_refuses_others",
            f"{T}cli/test_cli.py::test_bad_auth_format_is_refused",
            f"{T}lineage/zk/test_security.py::test_each_role_does_its_work_and_nothing_else",
            f"{T}lineage/zk/test_security.py::test_no_secret_in_logs_errors_or_verbose_tracebacks",
            f"{T}lineage/zk/test_tls.py::test_a_certificate_for_another_name_is_refused",
            f"{T}lineage/zk/test_tls.py::test_a_server_signed_by_an_untrusted_ca_is_refused",
        ),
    ),
    TestScenario(
        20,
        "deep-store delete failing halfway",
        "deletes failing partway through a pass",
        "a later pass converges",
        (f"{T}retention/test_retention.py::test_a_delete_failing_halfway_converges_on_the_next_pass",),
    ),
)


def run_tests(scenario: TestScenario, out: Path) -> Outcome:
    junit = out / f"junit-{scenario.number}.xml"
    began = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={junit}",
            *scenario.nodes,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    runs, failures = 0, []
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            if case.find("skipped") is not None:
                continue
            runs += 1
            if case.find("failure") is not None or case.find("error") is not None:
                failures.append(f"{case.get('name')} failed")
    if proc.returncode not in (0, 1) and not failures:
        failures.append(f"pytest exited {proc.returncode}: {proc.stdout[-300:]}")
    return Outcome(
        scenario.number,
        scenario.title,
        runs,
        scenario.injected,
        [scenario.checked],
        failures,
        seconds=time.monotonic() - began,
        kind="tests",
    )


def write_report(outcomes: list[Outcome], out: Path, quick: bool) -> Path:
    rows = sorted(outcomes, key=lambda o: (o.scenario, o.kind))
    (out / "faults.json").write_text(json.dumps([asdict(o) | {"result": o.result} for o in rows], indent=2))
    lines = [
        "# Fault suite report",
        "",
        f"Mode: {'quick' if quick else 'full'}. Harness rows ran on a 3-node ZooKeeper",
        "ensemble on loopback with real pushes, readers and retention; test rows ran the named",
        "pytest tests on real ZooKeeper.",
        "",
        "| # | scenario | kind | runs | injected | checked | result | s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for o in rows:
        checked = "; ".join(o.checked) if o.checked else "-"
        result = o.result if not o.skipped else f"skipped: {o.skipped}"
        cells = (o.scenario, o.title, o.kind, o.runs, o.injected, checked, result, f"{o.seconds:.0f}")
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    broken = [o for o in rows if o.violations]
    if broken:
        lines += ["", "## Violations", ""]
        for o in broken:
            lines += [f"- scenario {o.scenario} ({o.title}): {v}" for v in o.violations[:20]]
    path = out / "faults.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m faults", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the short subset: one run each, no Spark")
    parser.add_argument(
        "--runs", type=int, default=None, help="runs per harness scenario (default 1 quick, 3 full)"
    )
    parser.add_argument("--only", default="", help="comma-separated scenario numbers")
    parser.add_argument("--out", default="reports/faults", help="where faults.md and faults.json go")
    parser.add_argument("--no-tests", action="store_true", help="only the harness scenarios")
    args = parser.parse_args()
    only = {int(n) for n in args.only.split(",") if n.strip()}
    runs = args.runs or (1 if args.quick else 3)
    if runs < 1:
        parser.error("--runs must be at least 1")
    out = (ROOT / args.out) if not Path(args.out).is_absolute() else Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    outcomes: list[Outcome] = []
    selected = [s for s in SCENARIOS if not only or s.number in only]
    if selected:  # the ensemble only when a harness scenario runs
        with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
            cluster = Cluster(Path(tmp) / "zk")
            cluster.start()
            try:
                ctx = Context(cluster, Path(tmp), args.quick)
                for scenario in selected:
                    print(f"scenario {scenario.number}: {scenario.title} ...", flush=True)
                    outcome = run(scenario, ctx, runs)
                    print(f"  {outcome.result} ({outcome.seconds:.0f}s)", flush=True)
                    for violation in outcome.violations:
                        print(f"  ! {violation}", flush=True)
                    outcomes.append(outcome)
            finally:
                cluster.close()
    if not args.no_tests:
        for tested in TESTED:
            if (only and tested.number not in only) or (args.quick and not tested.quick):
                continue
            print(f"scenario {tested.number} (tests): {tested.title} ...", flush=True)
            outcome = run_tests(tested, out)
            print(f"  {outcome.result}: {outcome.runs} test(s) ({outcome.seconds:.0f}s)", flush=True)
            outcomes.append(outcome)
    path = write_report(outcomes, out, args.quick)
    print(f"report: {path} and {path.with_suffix('.json')}")
    return 1 if any(o.violations for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
