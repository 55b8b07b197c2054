"""``python -m segment_lineage`` runs the ``lineage`` command."""

from segment_lineage.launch import main

main()
