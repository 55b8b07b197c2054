"""The ``lineage`` command line and the demo: the one place that sees every package."""
