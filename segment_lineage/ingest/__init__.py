"""Consistent pushes (PySpark and Arrow) and readers that pin one complete snapshot."""
