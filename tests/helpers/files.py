"""Segment files for tests that register segments by hand (``segment add``
reads each file's footer: a file must be real Parquet)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def parquet_file(path: Path, rows: int) -> int:
    """Write a Parquet file of ``rows`` rows at ``path``; its size in bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"v": pa.array(range(rows), pa.int64())}), path)
    return path.stat().st_size
