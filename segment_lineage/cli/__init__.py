"""Entry point of the ``lineage`` command: every command group, registered on one app.

Each module registers its commands in ``register``; the order here is the
order ``lineage --help`` lists them in. What they share (the app, the global
options and the settings built from them) is in :mod:`segment_lineage.cli.context`.
"""

from __future__ import annotations

import sys

from segment_lineage.cli import (
    acl,
    config,
    demo,
    history,
    ingest,
    mirror,
    push_set,
    replace,
    retention,
    segment,
    table,
    zk,
)
from segment_lineage.cli.context import app

__all__ = ["app", "main"]

for group in (zk, table, segment, replace, history, acl, config, demo, ingest, push_set, retention, mirror):
    group.register(app)


def main() -> None:
    """The command, as an install older than :mod:`segment_lineage.launch` runs it."""
    from segment_lineage.ingest.interrupts import interrupts_from_the_start

    interrupts_from_the_start(sys.argv)
    app()
