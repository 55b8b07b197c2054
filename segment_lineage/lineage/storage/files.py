"""Checking segment files before they are registered.

A segment registered at a location where no file is breaks every read of
the table afterwards, so the command line looks before it registers: each
file must exist under the table's root, and its size must match the size
given (a size not given is taken from the file); its footer must be
Parquet's, and the row count given must be the footer's (one not given is
taken from it): readers and `table show` report the registered counts. The deep storage that answers
is injected where the CLI is composed (:class:`SegmentFiles`); the decision
is pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from segment_lineage.lineage.core.errors import RefusedError
from segment_lineage.lineage.core.model import Segment

NO_CHECK_HINT = "pass --no-check to register without looking (for object stores where it costs too much)"
SHOWN = 5
_Counted = Literal["size_bytes", "rows"]  # the fields of a segment its file tells too


@dataclass(frozen=True)
class Footer:
    """What a Parquet file's footer says: its rows and its Arrow schema."""

    rows: int
    schema: Any  # a pyarrow.Schema (pyarrow is imported where files are read)


class SegmentFiles(Protocol):
    """Deep storage, as far as registering segments needs it."""

    def sizes(self, root: str, locations: Sequence[str]) -> dict[str, int | None]:
        """Each location's file size under ``root``; None where no file is.
        Raises a LineageError when the storage cannot be asked, or a location
        leads out of the root."""
        ...

    def footers(self, root: str, locations: Sequence[str]) -> dict[str, Footer | None]:
        """Each existing Parquet file's footer (its row count and columns);
        None where the file cannot be read as Parquet."""
        ...


def _few(items: Sequence[str]) -> str:
    """The first SHOWN items, and how many more there are."""
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def checked_segments(
    table: str, root: str, segments: Sequence[Segment], sizes: Mapping[str, int | None]
) -> list[Segment]:
    """``segments`` with sizes filled in from their files, or RefusedError
    naming every segment whose file is missing or of another size."""
    missing = [s for s in segments if sizes.get(s.location) is None]
    if missing:
        raise RefusedError(
            f"no file under the root {root!r} of table {table!r} for {len(missing)} segment(s): "
            f"{_located(missing)}; nothing was registered",
            table=table,
            expected="a file at each location",
            found=f"{len(missing)} missing",
            remedy="write the files first, or give the right locations; " + NO_CHECK_HINT,
        )
    wrong = [s for s in segments if s.size_bytes and s.size_bytes != sizes[s.location]]
    if wrong:
        raise RefusedError(
            f"the size given for {len(wrong)} segment(s) of table {table!r} is not their file's size "
            f"(bytes): {_given(wrong, sizes, 'size_bytes')}; nothing was registered",
            table=table,
            expected="the file's size",
            found=f"{len(wrong)} different",
            remedy="give the file's size, or leave it out to take it from the file; " + NO_CHECK_HINT,
        )
    return [
        s if s.size_bytes else dataclasses.replace(s, size_bytes=sizes[s.location] or 0) for s in segments
    ]


def checked_rows(table: str, segments: Sequence[Segment], rows: Mapping[str, int | None]) -> list[Segment]:
    """``segments`` with row counts filled in from their files' footers, or
    RefusedError naming every segment whose file is not Parquet or whose
    given row count is not its file's (readers would report wrong counts)."""
    unreadable = [s for s in segments if rows.get(s.location) is None]
    if unreadable:
        raise RefusedError(
            f"{len(unreadable)} file(s) of table {table!r} cannot be read as Parquet: "
            f"{_located(unreadable)}; nothing was registered",
            table=table,
            expected="a Parquet file at each location",
            found=f"{len(unreadable)} unreadable",
            remedy="register segment files written as Parquet; " + NO_CHECK_HINT,
        )
    wrong = [s for s in segments if s.rows and s.rows != rows[s.location]]
    if wrong:
        raise RefusedError(
            f"the row count given for {len(wrong)} segment(s) of table {table!r} is not their file's: "
            f"{_given(wrong, rows, 'rows')}; nothing was registered",
            table=table,
            expected="the row count in the file's footer",
            found=f"{len(wrong)} different",
            remedy="give the file's row count, or leave --rows out to take it from the file; "
            + NO_CHECK_HINT,
        )
    return [s if s.rows else dataclasses.replace(s, rows=rows[s.location] or 0) for s in segments]


def _located(segments: Sequence[Segment]) -> str:
    """The first few segments, each with its location."""
    return _few([f"{s.name} ({s.location})" for s in segments])


def _given(segments: Sequence[Segment], found: Mapping[str, int | None], field: _Counted) -> str:
    """The first few segments, each with its ``field`` as given and as ``found`` in its file."""
    return _few([f"{s.name} (given {getattr(s, field)}, file {found[s.location]})" for s in segments])
