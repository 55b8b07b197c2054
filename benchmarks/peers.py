"""The peers' tables, built the same way in every suite: N data files of one row each.

deltalake: ``write_deltalake`` partitioned by ``k`` (one file per value).
pyiceberg: a SQL catalog on SQLite, a table partitioned by identity on ``k``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])


def rows(first: int, count: int, value: int = 1) -> pa.Table:
    """``count`` rows with distinct keys from ``first``: ``count`` files once partitioned."""
    return pa.table(
        {"k": pa.array(range(first, first + count), pa.int64()), "v": pa.array([value] * count, pa.int64())}
    )


def one_row() -> pa.Table:
    return pa.table({"k": pa.array([-1], pa.int64()), "v": pa.array([2], pa.int64())})


def delta_table(path: Path, files: int) -> None:
    from deltalake import write_deltalake

    write_deltalake(str(path), rows(0, files), partition_by=["k"])


def iceberg_catalog(work: Path, name: str) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(
        name, uri=f"sqlite:///{work}/iceberg-{name}.db", warehouse=f"file://{work}/iceberg-{name}"
    )


def iceberg_table(work: Path, name: str, files: int) -> Any:
    """A new catalog ``name`` with table ``bench.t`` of ``files`` data files."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField

    catalog = iceberg_catalog(work, name)
    catalog.create_namespace("bench")
    schema = Schema(
        NestedField(1, "k", LongType(), required=False), NestedField(2, "v", LongType(), required=False)
    )
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="k"))
    table = catalog.create_table("bench.t", schema=schema, partition_spec=spec)
    table.append(rows(0, files))
    return catalog
