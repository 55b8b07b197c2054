"""``python -m segment_lineage`` runs the ``lineage`` command."""

from lineage.cli import app
from segment_lineage import cli  # noqa: F401  (adds the ingest and retention commands to app)

app(prog_name="lineage")
