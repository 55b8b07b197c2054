"""``python -m segment_lineage`` runs the ``lineage`` command."""

from segment_lineage import cli  # noqa: F401  (adds the ingest and retention commands to app)
from segment_lineage.cli.app import app

app(prog_name="lineage")
