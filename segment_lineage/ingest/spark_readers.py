"""Spark readers of one pinned snapshot: a DataFrame over exactly the
segments of a version, its files held by a lease while it is read."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage.manager import LineageManager


def snapshot_dataframe(spark: SparkSession, reader: SnapshotReader) -> DataFrame:
    """A DataFrame over exactly the segments of a pinned snapshot."""
    store = reader.store
    if not reader.segments:
        return spark.createDataFrame([], StructType([]))
    if store.scheme in ("file", "hdfs"):
        recorded = reader.arrow_schema()
        source = spark.read if recorded is None else spark.read.schema(from_arrow_schema(recorded))
        try:
            return source.parquet(*(store.uri(s.location) for s in reader.segments))
        except AnalysisException as exc:
            if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
                raise reader.too_old(str(exc).splitlines()[0]) from None
            raise
    # Spark has no S3/GCS connector here; the pinned files come through Arrow.
    return spark.createDataFrame(reader.to_arrow())


@contextmanager
def pinned_table(
    spark: SparkSession, manager: LineageManager, table: str, as_of: int | str | None = None
) -> Iterator[DataFrame]:
    """``with pinned_table(spark, m, "events") as df:`` reads one snapshot
    (the current one, or ``as_of`` a retained version or time); its files stay
    (the lease) until the block ends."""
    with SnapshotReader(manager, table, as_of) as reader:
        yield snapshot_dataframe(spark, reader)


_HELD: list[SnapshotReader] = []


def read_table(
    spark: SparkSession, table: str, manager: LineageManager, as_of: int | str | None = None
) -> DataFrame:
    """A DataFrame over the table's current snapshot (or ``as_of`` a retained
    version or time). Its lease is held until :func:`release_reads` or the end
    of the process (use :func:`pinned_table` to scope it)."""
    reader = SnapshotReader(manager, table, as_of)
    _HELD.append(reader)
    return snapshot_dataframe(spark, reader)


def release_reads() -> None:
    while _HELD:
        _HELD.pop().close()
