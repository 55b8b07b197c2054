"""Batch ingestion with consistent push (PySpark), and snapshot readers."""
