"""Apache Pinot's own replacement tests, replayed through our CLI on real ZooKeeper.

``PinotHelixResourceManagerStatelessTest.testSegmentReplacementRegular`` and
``testSegmentReplacementForRefresh`` (apache/pinot, pinot-controller), step by
step: ``addNewSegment`` is ``segment add``, ``startReplaceSegments`` is
``start-replace`` (with ``--hold 0s``: the test's entries are opened by the
job that later retries them, which is Pinot's rule), ``getSegmentsFor(t,
false)`` is ``segment list`` (every registered segment) and ``getSegmentsFor(t,
true)`` is ``segments`` (what readers see). Where we differ from Pinot on
purpose (docs/design.md, "Where we differ from Pinot"), the step asserts our
behaviour and says why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from segment_lineage.cli import app

runner = CliRunner()
T = "testTable"


class Pinot:
    """The calls of Pinot's test, made through ``lineage``."""

    def __init__(self, zk: str) -> None:
        self.zk = zk

    def run(self, *args: str, ok: bool = True) -> Any:
        result = runner.invoke(app, ["--zk", self.zk, "--json", *args])
        if not ok:
            assert result.exit_code != 0, f"{args} should have failed: {result.stdout}"
            assert "Traceback" not in result.stderr
            return result.stderr
        assert result.exit_code == 0, f"{args}: {result.stderr}"
        return json.loads(result.stdout)

    def add(self, *names: str) -> None:
        self.run("segment", "add", T, *names, "--no-check")  # Pinot registers metadata only

    def start(self, src: list[str], dst: list[str], force: bool = False, ok: bool = True) -> Any:
        args = ["start-replace", T, "--from", ",".join(src), "--to", ",".join(dst), "--hold", "0s"]
        out = self.run(*args, *(["--force-cleanup"] if force else []), ok=ok)
        return out["entry"] if ok else out

    def end(self, entry: str, ok: bool = True) -> Any:
        return self.run("end-replace", T, entry, ok=ok)

    def revert(self, entry: str, force: bool = False, ok: bool = True) -> Any:
        return self.run("revert", T, entry, *(["--force"] if force else []), ok=ok)

    def all_segments(self) -> set[str]:
        return {s["name"] for s in self.run("segment", "list", T)}

    def online(self) -> set[str]:
        return {s["name"] for s in self.run("segments", T)}

    def entries(self) -> dict[str, dict[str, Any]]:
        return {e["id"]: e for e in self.run("entries", T)}

    def entry(self, entry: str) -> tuple[list[str], list[str], str]:
        e = self.entries()[entry]
        return e["from"], e["to"], e["state"]


def test_segment_replacement_regular(zk_hosts: str, tmp_path: Path) -> None:
    p = Pinot(zk_hosts)
    # An OFFLINE table without a REFRESH batch config: Pinot treats it as APPEND.
    p.run("table", "create", T, "--root", str(tmp_path / "t"), "--type", "APPEND")
    p.add(*(f"s{i}" for i in range(5)))
    assert len(p.all_segments()) == 5

    e1 = p.start([], ["s5", "s6"])
    assert set(p.entries()) == {e1}
    assert p.entry(e1) == ([], ["s5", "s6"], "IN_PROGRESS")
    p.start(["s1", "s2"], ["s3", "s4"], ok=False)  # segmentsTo exist
    p.start(["s1", "s2"], ["s2"], ok=False)  # in both
    p.start(["s1", "s6"], ["s7"], ok=False)  # s6 is not a visible segment
    p.run("end-replace", "REALTIME_" + T, e1, ok=False)  # another table
    p.end("invalid", ok=False)
    p.end(e1, ok=False)  # its segments are not uploaded yet
    p.add("s5", "s6")
    p.end(e1)
    assert set(p.entries()) == {e1}
    assert p.entry(e1) == ([], ["s5", "s6"], "COMPLETED")

    e2 = p.start(["s1", "s2"], ["merged_t1_0", "merged_t1_1"])
    assert set(p.entries()) == {e1, e2}
    assert p.entry(e2) == (["s1", "s2"], ["merged_t1_0", "merged_t1_1"], "IN_PROGRESS")
    p.add("merged_t1_0")
    assert "merged_t1_0" in p.all_segments()
    p.revert(e2, ok=False)  # IN_PROGRESS needs force
    p.revert(e2, force=True)
    assert p.entry(e2)[2] == "REVERTED"
    # Pinot deletes merged_t1_0 here; we keep a reverted entry's uploads,
    # hidden, for a later rollback (retention reclaims them).
    assert "merged_t1_0" not in p.online()

    e3 = p.start(["s1", "s2"], ["merged_t2_0", "merged_t2_1"])
    assert set(p.entries()) == {e1, e2, e3}
    assert p.entry(e3) == (["s1", "s2"], ["merged_t2_0", "merged_t2_1"], "IN_PROGRESS")
    p.add("merged_t2_0")
    p.start(["s1", "s2"], ["merged_t3_0", "merged_t3_1"], ok=False)  # s1, s2 being replaced
    e4 = p.start(["s1", "s2"], ["merged_t3_0", "merged_t3_1"], force=True)
    assert set(p.entries()) == {e1, e2, e3, e4}
    assert p.entry(e3) == (["s1", "s2"], ["merged_t2_0", "merged_t2_1"], "REVERTED")
    assert p.entry(e4) == (["s1", "s2"], ["merged_t3_0", "merged_t3_1"], "IN_PROGRESS")
    assert "merged_t2_0" not in p.all_segments()  # cleaned up (queued for retention)
    p.add("merged_t3_0", "merged_t3_1")
    p.end(e4)
    assert set(p.entries()) == {e1, e2, e3, e4}
    assert p.entry(e4) == (["s1", "s2"], ["merged_t3_0", "merged_t3_1"], "COMPLETED")

    e5 = p.start([], ["s7", "s8"])
    assert set(p.entries()) == {e1, e2, e3, e4, e5}
    assert p.entry(e5) == ([], ["s7", "s8"], "IN_PROGRESS")
    # A rerun with the same segmentsTo goes through and removes the failed entry.
    e6 = p.start([], ["s7", "s8"], force=True)
    assert set(p.entries()) == {e1, e2, e3, e4, e6}
    assert p.entry(e6) == ([], ["s7", "s8"], "IN_PROGRESS")
    p.add("s7")
    e7 = p.start([], ["s9", "s10"], force=True)  # an empty from overlaps nothing
    assert len(p.entries()) == 6
    assert p.entry(e6)[2] == "IN_PROGRESS" and p.entry(e7)[2] == "IN_PROGRESS"
    p.add("s9", "s10")
    p.end(e7)
    assert len(p.entries()) == 6
    assert p.entry(e6)[2] == "IN_PROGRESS"
    assert p.entry(e7) == ([], ["s9", "s10"], "COMPLETED")

    e8 = p.start(["s9", "s10"], ["s11", "s12"])
    assert len(p.entries()) == 7
    assert p.entry(e8) == (["s9", "s10"], ["s11", "s12"], "IN_PROGRESS")
    p.add("s11")
    e9 = p.start(["s0", "s9"], ["s13", "s14"], force=True)  # overlaps e8's from: e8 goes
    assert len(p.entries()) == 8
    assert p.entry(e8)[2] == "REVERTED" and p.entry(e9)[2] == "IN_PROGRESS"
    p.add("s13", "s14")
    p.end(e9)
    assert len(p.entries()) == 8
    assert p.entry(e9) == (["s0", "s9"], ["s13", "s14"], "COMPLETED")
    assert p.end(e9)["applied"] is False  # idempotent
    assert p.entry(e9)[2] == "COMPLETED"

    e10 = p.start(["s13", "s14"], [], force=True)  # an atomic delete
    assert len(p.entries()) == 9
    assert p.entry(e10)[2] == "IN_PROGRESS"
    p.end(e10)
    assert p.entry(e10) == (["s13", "s14"], [], "COMPLETED")

    p.run("table", "drop", T, "--force")
    p.run("entries", T, ok=False)


def test_segment_replacement_for_refresh(zk_hosts: str, tmp_path: Path) -> None:
    p = Pinot(zk_hosts)
    p.run("table", "create", T, "--root", str(tmp_path / "t"), "--type", "REFRESH")
    p.add("s0", "s1", "s2")
    assert len(p.all_segments()) == 3

    e1 = p.start(["s0", "s1", "s2"], ["s3", "s4", "s5"])
    assert set(p.entries()) == {e1}
    assert p.entry(e1) == (["s0", "s1", "s2"], ["s3", "s4", "s5"], "IN_PROGRESS")
    assert p.all_segments() == {"s0", "s1", "s2"}
    p.add("s3", "s4", "s5")
    assert p.all_segments() == {f"s{i}" for i in range(6)}
    assert p.online() == {"s0", "s1", "s2"}
    p.end(e1)
    assert len(p.all_segments()) == 6
    assert p.online() == {"s3", "s4", "s5"}
    assert set(p.entries()) == {e1}
    assert p.entry(e1) == (["s0", "s1", "s2"], ["s3", "s4", "s5"], "COMPLETED")

    e2 = p.start(["s3", "s4", "s5"], ["s6", "s7", "s8"])
    assert len(p.entries()) == 2
    assert p.entry(e2) == (["s3", "s4", "s5"], ["s6", "s7", "s8"], "IN_PROGRESS")
    # Pinot cleans up the oldest snapshot only with forceCleanup; we do it on
    # every start of a REFRESH table (at most max_snapshots are ever kept,
    # whoever starts the push). Its files are queued, not deleted.
    assert p.all_segments() == {"s3", "s4", "s5"}
    assert p.online() == {"s3", "s4", "s5"}
    p.revert(e1, ok=False)  # its segments are replaced again by e2
    p.add("s6")
    assert p.online() == {"s3", "s4", "s5"}

    # Force cleanup reverts e2 (and Pinot's proactive cleanup of s0-s2 is done already).
    e3 = p.start(["s3", "s4", "s5"], ["s9", "s10", "s11"], force=True)
    assert len(p.entries()) == 3
    assert p.entry(e2)[2] == "REVERTED"
    assert p.entry(e3) == (["s3", "s4", "s5"], ["s9", "s10", "s11"], "IN_PROGRESS")
    assert p.all_segments() == {"s3", "s4", "s5"}
    assert p.online() == {"s3", "s4", "s5"}
    p.end(e2, ok=False)  # reverted
    p.add("s9", "s10", "s11")
    p.end(e3)
    assert len(p.all_segments()) == 6
    assert p.online() == {"s9", "s10", "s11"}

    p.revert(e3)
    assert p.online() == {"s3", "s4", "s5"}
    # Pinot deletes s9-s11 at revert and lets them be uploaded again; we keep
    # them (hidden, for a rollback) and refuse to bring reverted data back
    # under the same names (Pinot #13968).
    assert p.all_segments() == {"s3", "s4", "s5", "s9", "s10", "s11"}
    assert "already registered" in p.run("segment", "add", T, "s9", ok=False)
    e4 = p.start(["s3", "s4", "s5"], ["s12", "s13", "s14"], force=True)
    p.add("s12", "s13", "s14")
    p.end(e4)
    assert {"s3", "s4", "s5", "s12", "s13", "s14"} <= p.all_segments()
    assert p.online() == {"s12", "s13", "s14"}

    e5 = p.start([], ["s15", "s16"])
    assert p.entry(e5) == ([], ["s15", "s16"], "IN_PROGRESS")
    p.add("s15")
    e6 = p.start([], ["s17", "s18"], force=True)
    assert p.entry(e5)[2] == "IN_PROGRESS" and p.entry(e6)[2] == "IN_PROGRESS"
    p.add("s17", "s18")
    p.end(e6)
    assert p.entry(e6) == ([], ["s17", "s18"], "COMPLETED")

    e7 = p.start(["s17", "s18"], ["s19", "s20"])
    assert p.entry(e7) == (["s17", "s18"], ["s19", "s20"], "IN_PROGRESS")
    p.add("s19")
    e8 = p.start(["s14", "s17"], ["s21", "s22"], force=True)  # overlaps e7's from
    assert p.entry(e7)[2] == "REVERTED" and p.entry(e8)[2] == "IN_PROGRESS"
    p.add("s21", "s22")
    p.end(e8)
    assert p.entry(e8) == (["s14", "s17"], ["s21", "s22"], "COMPLETED")

    e9 = p.start(["s21", "s22"], ["s23", "s24"])
    assert p.entry(e9) == (["s21", "s22"], ["s23", "s24"], "IN_PROGRESS")
    p.add("s23", "s24")
    # The retry reuses s24: force cleanup keeps that upload (Pinot: "to avoid
    # race conditions"), and cleans up only s23.
    e10 = p.start(["s21", "s22"], ["s24", "s25"], force=True)
    assert p.entry(e9) == (["s21", "s22"], ["s23"], "REVERTED")
    assert p.entry(e10) == (["s21", "s22"], ["s24", "s25"], "IN_PROGRESS")
    assert "s24" in p.all_segments() and "s23" not in p.all_segments()
    p.add("s24", "s25")  # uploaded again at the same location, as Pinot's job does
    p.end(e10)
    assert p.entry(e10) == (["s21", "s22"], ["s24", "s25"], "COMPLETED")
    assert {"s24", "s25"} <= p.online()

    p.run("table", "drop", T, "--force")
    p.run("entries", T, ok=False)
