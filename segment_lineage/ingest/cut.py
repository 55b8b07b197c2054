"""Several tables read as one: a consistent cut.

A push set ends every table's entry in one commit; a reader of those tables
must not read one table before that commit and another after it.
:class:`Cut` takes versions that were current together
(:meth:`~segment_lineage.lineage.manager.LineageManager.cut`) and pins each
(a :class:`~segment_lineage.ingest.readers.SnapshotReader` per table), so
every set is seen in all its tables or in none, for as long as the cut is open.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType

from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage.core.errors import ContentionError, VersionGoneError
from segment_lineage.lineage.manager import LineageManager

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
