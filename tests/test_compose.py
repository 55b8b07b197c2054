"""docker/compose.yml, run as compose would run it, as local processes on
loopback (no Docker engine here): every service's command, environment,
order and health check (tests/helpers/compose.py says what is translated).
Then what its header tells a user to do: push again, read, stop a daemon."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.compose import LocalCompose
from tests.helpers.run import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.ensemble, pytest.mark.e2e]
DAEMONS = ("retention-1", "retention-2")


@pytest.fixture
def compose(tmp_path: Path) -> Iterator[LocalCompose]:
    group = LocalCompose(tmp_path)
    try:
        yield group
    finally:
        group.down()


def test_the_compose_deployment_runs_as_local_processes(compose: LocalCompose) -> None:
    order = compose.up()
    assert order.index("setup") < order.index("push") and "reader" not in order
    # The push service (part of `up`) pushed with the Spark cluster.
    compose.wait("push", "service_completed_successfully")
    pushed = compose.tail("push")
    assert "engine: spark" in pushed and "spark://127.0.0.1:" in pushed, pushed

    # The daemons' own health check passes; one of them owns the table.
    wait_for("both daemons healthy", lambda: all(compose.healthy(d) for d in DAEMONS), 120)
    reports = {d: compose.health(d) or {} for d in DAEMONS}
    owners = [d for d, r in reports.items() if r.get("owned") == ["events"]]
    assert len(owners) == 1, reports
    assert all(r["owners"] == {"events": reports[owners[0]]["owners"]["events"]} for r in reports.values())

    # docker compose run --rm push: a second push; run --rm reader: read it.
    again = compose.run("push")
    assert again.returncode == 0, again.stderr
    read = compose.run("reader")
    assert read.returncode == 0, read.stderr
    assert len([line for line in read.stdout.splitlines() if line.strip()]) >= 5, read.stdout

    # A hand-run pass in a daemon's container, as an operator would (the
    # config's minimum grace is accepted, not refused as below the floor).
    hand = compose.exec(owners[0], "lineage", "retention", "run", "--yes")
    assert hand.returncode == 0, hand.stderr + hand.stdout

    # Each service's identity holds only its role: the push job cannot drop the table.
    refused = compose.exec("push", "lineage", "table", "drop", "events", "--force")
    assert refused.returncode == 1 and "not authorised" in refused.stderr, refused.stderr

    # docker compose stop retention-N: the other daemon takes the table.
    owner = owners[0]
    other = next(d for d in DAEMONS if d != owner)
    assert compose.stop(owner) == 0, compose.tail(owner)
    wait_for(
        "the other daemon to own the table",
        lambda: (compose.health(other) or {}).get("owned") == ["events"],
        60,
    )
    assert compose.healthy(other)
