"""``python -m segment_lineage`` runs the ``lineage`` command."""

from segment_lineage.cli import app

app(prog_name="lineage")
