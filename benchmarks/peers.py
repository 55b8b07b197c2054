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


def overwritten_delta_log(path: Path, locations: list[str], size: int) -> None:
    """A Delta table at ``path`` whose files at ``locations`` (written
    already, ``size`` bytes each) were all replaced by one new file: the log
    written directly, as a writer that added them in one commit and then
    overwrote them would leave it (version 0: protocol, metadata, an add per
    file; version 1: a remove per file and the new file's add).

    For a million files: ``write_deltalake`` partitioned by ``k`` would make
    a million folders, one file each, where ours keeps the same files in a
    thousand; this gives the vacuum the same files in the same folders."""
    import json
    import time
    import uuid

    log = path / "_delta_log"
    log.mkdir(parents=True)
    now = int(time.time() * 1000)
    then = now - 3_600_000  # an hour ago: past any retention the vacuum is given
    fields = [{"name": f.name, "type": "long", "nullable": True, "metadata": {}} for f in SCHEMA]
    head = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps({"type": "struct", "fields": fields}),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": then,
            }
        },
        {"commitInfo": {"timestamp": then, "operation": "WRITE"}},
    ]

    def add(location: str) -> dict[str, Any]:
        return {
            "add": {
                "path": location,
                "partitionValues": {},
                "size": size,
                "modificationTime": then,
                "dataChange": True,
            }
        }

    def remove(location: str) -> dict[str, Any]:
        return {
            "remove": {
                "path": location,
                "deletionTimestamp": then,
                "dataChange": True,
                "extendedFileMetadata": True,
                "partitionValues": {},
                "size": size,
            }
        }

    new = "new.parquet"
    (path / new).write_bytes(b"x" * size)
    overwrite = {
        "commitInfo": {"timestamp": then, "operation": "WRITE", "operationParameters": {"mode": "Overwrite"}}
    }
    versions = [
        head + [add(loc) for loc in locations],
        [overwrite] + [remove(loc) for loc in locations] + [add(new)],
    ]
    for number, actions in enumerate(versions):
        with (log / f"{number:020d}.json").open("w") as out:
            out.writelines(json.dumps(action, separators=(",", ":")) + "\n" for action in actions)
