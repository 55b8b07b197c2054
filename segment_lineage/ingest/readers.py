"""Readers that see exactly one complete snapshot, pinned while they read.

A :class:`SnapshotReader` pins the table's current version with a lease (an
ephemeral znode: a crashed reader releases it with its session), reads only
that version's visible segments, and releases the lease when closed. The
version is chosen and verified after the lease exists
(:meth:`LineageManager.pin_readable`), so retention cannot take its files
between the reader's look at the table and its lease. If the
files of its snapshot were reclaimed all the same (a lease lost with its
session), reading fails with :class:`SnapshotTooOldError`, never with a bare
file-not-found.

A :class:`Cut` (``SnapshotReader.together``) reads several tables as one: a
reader per table at versions that were current together, so a push set is
seen in all its tables or in none.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads

from segment_lineage.ingest.errors import NoColumnsError, PushInputError, SnapshotTooOldError, StorageError
from segment_lineage.lineage.core.errors import ContentionError, TableNotFoundError, VersionGoneError
from segment_lineage.lineage.core.model import Segment
from segment_lineage.lineage.core.visibility import visible_segments
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.arrow_types import arrow_schema
from segment_lineage.lineage.storage.deep import DeepStore


class SnapshotReader:
    """``as_of`` reads a retained past version instead (a version number, or
    text: a version, an ISO-8601 time or ``ms:EPOCH_MS``), pinned the same way.
    ``entry`` reads what a staged push (its id or a unique prefix) would show
    once published, on the current version: its files are kept by its hold."""

    def __init__(
        self, manager: LineageManager, table: str, as_of: int | str | None = None, entry: str | None = None
    ) -> None:
        self.manager = manager
        self.table = table
        if entry is not None and as_of is not None:
            raise PushInputError("a staged push is read on the current version: --entry goes without --as-of")
        version = None if as_of is None else manager.resolve_as_of(table, as_of)
        staged = None if entry is None else manager.resolve_entry(table, entry)
        # Pinned, then verified against a later head: accepted here means readable until closed.
        self.lease = manager.pin_readable(table, version)
        self._closed = False
        try:
            self.version = self.lease.state.version
            if staged is None:
                # A tuple: what the reader reads is the pinned version's, not the caller's to edit.
                self.segments: tuple[Segment, ...] = tuple(visible_segments(self.lease.state))
            else:
                from segment_lineage.ingest.stage import staged_segments  # a staged push's readers only

                self.segments = tuple(staged_segments(self.lease.state, staged, manager.now_ms()))
            self.store = DeepStore.for_root(self.lease.state.config.root)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def together(manager: LineageManager, tables: Sequence[str]) -> Cut:
        """Readers of ``tables`` at versions current together (a consistent
        cut: a push set is seen in all its tables or in none); close it, or
        use it as a context manager."""
        return Cut(manager, tables)

    def __enter__(self) -> SnapshotReader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.manager.release(self.lease)

    def arrow_schema(self) -> pa.Schema | None:
        """The table's recorded columns in Arrow types (None: none recorded):
        files written before a column was added read it as null."""
        recorded = self.lease.state.config.schema
        return None if recorded is None else arrow_schema(recorded)

    def dataset(self) -> pads.Dataset:
        paths = [self.store.path(s.location) for s in self.segments]
        try:
            return pads.dataset(
                paths, format="parquet", filesystem=self.store.filesystem(), schema=self.arrow_schema()
            )
        except FileNotFoundError as exc:
            raise self.too_old(str(exc)) from None

    def to_arrow(self, limit: int | None = None) -> pa.Table:
        if not self.segments:  # no rows, with the table's columns (none before its first push)
            return (self.arrow_schema() or pa.schema([])).empty_table()
        try:
            data = self.dataset()
            # A limit past the rows there are reads them all (Arrow's head takes a C int).
            everything = limit is None or limit >= sum(s.rows for s in self.segments)
            return data.to_table() if everything else data.head(limit)
        except (OSError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise self._read_failed(exc) from None

    def _read_failed(self, exc: Exception) -> Exception:
        """The error for a failed read: the snapshot too old when a file is
        gone, else StorageError (a file that does not fit the schema, or I/O)."""
        if isinstance(exc, FileNotFoundError):
            return self.too_old(str(exc))
        if isinstance(exc, pa.ArrowInvalid | pa.ArrowTypeError | pa.ArrowNotImplementedError):
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return StorageError(
                f"reading table {self.table!r} failed: a file does not fit its schema: {first}"
            )
        if "not found" in str(exc).lower() or "no such file" in str(exc).lower():
            return self.too_old(str(exc))
        return StorageError(f"reading table {self.table!r} failed: {exc}")

    def duckdb(self, connection: Any = None) -> Any:
        """A DuckDB relation over this snapshot (on ``connection``, or on
        DuckDB's default one), scanned lazily with filters pushed down. It
        reads the pinned files: use it while this reader is open."""
        import duckdb

        con = duckdb.default_connection() if connection is None else connection
        source = self._scannable()
        if not source.schema.names:
            raise NoColumnsError(
                f"table {self.table!r} has no columns yet (its first push records them): DuckDB holds "
                "no relation without columns"
            )
        return con.from_arrow(source)

    def polars(self) -> Any:
        """A Polars LazyFrame over this snapshot, read while this reader is open."""
        import polars as pl

        source = self._scannable()
        if isinstance(source, pa.Table):
            return pl.from_arrow(source).lazy()  # type: ignore[union-attr]
        return pl.scan_pyarrow_dataset(source)

    def _scannable(self) -> pads.Dataset | pa.Table:
        if not self.segments:
            return (self.arrow_schema() or pa.schema([])).empty_table()
        return self.dataset()

    def too_old(self, detail: str) -> Exception:
        """SnapshotTooOldError if the snapshot's segments were reclaimed (or
        the table dropped since, its pin lost with its session), else StorageError."""
        try:
            current = self.manager.table(self.table)
        except TableNotFoundError:
            return SnapshotTooOldError(self.table, self.version, "the table was dropped since")
        gone = [
            s.name
            for s in self.segments
            if (now := current.segments.get(s.name)) is None or now.location != s.location
        ]
        if gone:
            return SnapshotTooOldError(self.table, self.version, f"segment {gone[0]} was reclaimed")
        return StorageError(
            f"a file of table {self.table!r} is missing although its segment is registered: {detail}"
        )


def delta_extension_path() -> str:
    """The DuckDB delta extension shipped by the ``duckdb-extension-delta``
    package for the installed DuckDB: loaded from there, nothing is
    downloaded. StorageError when the two versions do not match."""
    from pathlib import Path

    import duckdb

    try:
        import duckdb_extension_delta  # type: ignore[import-untyped]
    except ImportError:
        raise StorageError(
            "DuckDB's delta extension is not installed: pip install duckdb-extension-delta "
            "(the version of the installed duckdb)"
        ) from None
    folder = Path(duckdb_extension_delta.__file__).parent / "extensions"
    found = folder / f"v{duckdb.__version__}" / "delta.duckdb_extension"
    if not found.is_file():
        shipped = sorted(p.name for p in folder.glob("v*")) if folder.is_dir() else []
        raise StorageError(
            f"duckdb-extension-delta ships the extension for DuckDB {', '.join(shipped) or 'none'}, "
            f"not for the installed v{duckdb.__version__}: install matching versions"
        )
    return str(found)


def duckdb_connection(database: str = ":memory:") -> Any:
    """A DuckDB connection with the delta extension loaded (``delta_scan``
    reads a table's mirror: docs/engines.md)."""
    import duckdb

    con = duckdb.connect(database)
    con.execute(f"LOAD '{delta_extension_path()}'")
    return con


def arrow_dataset(
    manager: LineageManager, table: str, as_of: int | str | None = None
) -> tuple[pads.Dataset, SnapshotReader]:
    """A pyarrow dataset over the current snapshot (or a past one), and the
    reader holding its lease: close the reader when done."""
    reader = SnapshotReader(manager, table, as_of)
    try:
        return reader.dataset(), reader
    except BaseException:
        reader.close()
        raise


# ---- several tables read as one: a consistent cut ------------------------------
#
# A push set ends every table's entry in one commit; a reader of those tables
# must not read one table before that commit and another after it. A Cut takes
# versions that were current together (LineageManager.cut) and pins each (a
# SnapshotReader per table), so every set is seen in all its tables or in none,
# for as long as the cut is open.

CUT_PINS = 5  # cuts taken again when a version went before it was pinned


class Cut(Mapping[str, SnapshotReader]):
    """A reader per table (``cut[table]``), at versions current together."""

    def __init__(self, manager: LineageManager, tables: Sequence[str]) -> None:
        self.manager = manager
        self._readers: dict[str, SnapshotReader] = {}
        for _ in range(CUT_PINS):
            versions = {t: snap.state.version for t, snap in manager.cut(tables).items()}
            try:
                for table in tables:
                    self._readers[table] = SnapshotReader(manager, table, as_of=versions[table])
                return
            except VersionGoneError:  # left the versions kept between the cut and its pin: again
                self.close()
                self._readers = {}
            except BaseException:
                self.close()
                raise
        raise ContentionError(", ".join(tables), CUT_PINS, 0.0, doing="pinning a consistent cut")

    @property
    def versions(self) -> dict[str, int]:
        return {t: r.version for t, r in self._readers.items()}

    def sets(self) -> dict[str, str | None]:
        """Each table's newest set (push set or set rollback) at its version
        in the cut: equal in tables a set always writes together."""
        found: dict[str, str | None] = {}
        for table, reader in self._readers.items():
            found[table] = next(
                (
                    r.set_id
                    for r in self.manager.iter_history(table)
                    if r.version <= reader.version and r.set_id
                ),
                None,
            )
        return found

    def __getitem__(self, table: str) -> SnapshotReader:
        return self._readers[table]

    def __iter__(self) -> Iterator[str]:
        return iter(self._readers)

    def __len__(self) -> int:
        return len(self._readers)

    def __enter__(self) -> Cut:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
