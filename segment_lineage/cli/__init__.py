"""Entry point of the ``lineage`` command: every command group, registered on one app.

Each module registers its commands in ``register``; the order here is the
order ``lineage --help`` lists them in.
"""

from __future__ import annotations

import typer

from segment_lineage.cli import acl, config, history, replace, segment, table, zk
from segment_lineage.cli.context import OPTIONS, app
from segment_lineage.cli.ingest import register as register_ingest
from segment_lineage.cli.retention import register as register_retention
from segment_lineage.lineage.storage.deep import RootClaimFiles, SegmentFileSizes

__all__ = ["app", "main"]

zk.register(app)
table.register(app)
segment.register(app)
replace.register(app)
history.register(app)
acl.register(app)
config.register(app)


@app.command("demo")
def demo() -> None:
    """Run the end-to-end demo on the embedded defaults."""
    from segment_lineage.demo import run_demo

    run_demo(OPTIONS.zk, echo=typer.echo)


register_ingest(app)
register_retention(app)
OPTIONS.claims = RootClaimFiles()  # table create claims its root; table claim claims an old one
OPTIONS.files = SegmentFileSizes()  # segment add checks each file before registering it


def main() -> None:
    app()
