"""Shared test plumbing: waiting for a condition, running the command line in a subprocess,
and the role identities of the ACL tests."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from segment_lineage.lineage.core.acl import digest_id

ROOT = Path(__file__).parent.parent.parent

# One user per role; tests that apply a policy name these.
IDENTITIES = {
    "admin": "boss:adm1n-pw",
    "pusher": "loader:push-pw",
    "retention": "janitor:ret-pw",
    "reader": "analyst:read-pw",
}


def ident(role: str) -> str:
    """The digest id of a role's identity."""
    user, _, password = IDENTITIES[role].partition(":")
    return digest_id(user, password)


def wait_for(what: str, predicate: Callable[[], object], timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def python_module(
    module: str, *args: str, env: Mapping[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS`` from the repository, in a new process (with exactly ``env`` if given)."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=None if env is None else dict(env),
        check=False,
    )


def lineage_process(*args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """``lineage ARGS`` in a new process with exactly ``env``."""
    return python_module("segment_lineage", *args, env=env)


def cli(zk: str, *args: str) -> tuple[int, str, str]:
    """``lineage --zk ZK ARGS...`` in this process: exit code, stdout, stderr."""
    from typer.testing import CliRunner

    from segment_lineage.cli import app

    result = CliRunner().invoke(app, ["--zk", zk, *args])
    return result.exit_code, result.stdout, result.stderr


def cli_history(zk: str, table: str) -> list[dict[str, object]]:
    """``lineage history TABLE --json``, newest first."""
    import json

    code, out, err = cli(zk, "--json", "history", table)
    assert code == 0, err
    return list(json.loads(out))
