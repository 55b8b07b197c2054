"""Entry point of the ``lineage`` command: the core commands plus ingest's."""

from __future__ import annotations

import typer

from ingest.cli import register as register_ingest
from ingest.storage import RootClaimFiles, SegmentFileSizes
from lineage.cli import OPTIONS, app
from retention.cli import register as register_retention


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
