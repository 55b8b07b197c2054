"""Errors of the mirror package: one root under the lineage root, so the CLI's
single handler covers them."""

from __future__ import annotations

from segment_lineage.lineage.core.errors import LineageError, RefusedError


class MirrorError(LineageError):
    """Root of every error the mirror package raises on purpose: publishing
    failed (the lineage commit stands; a later sync publishes it)."""


class MirrorRefusedError(MirrorError, RefusedError):
    """The mirror cannot publish this table as it is (a column type the format
    lacks, a log another writer changed). Nothing was written to the log."""


class NoMirrorError(MirrorRefusedError):
    """The table has no mirror (any more) to publish to."""


class DamagedLogError(MirrorError):
    """The Delta log cannot be read (a commit file missing, or one that does
    not parse): no engine reads it either. ``lineage mirror repair TABLE
    --rebuild`` publishes the table's current version as a new log."""


def damaged_log(root: str, why: str) -> DamagedLogError:
    """The error for the log under ``root`` that cannot be read, ``why`` being the reader's own words."""
    return DamagedLogError(
        f"the Delta log under {root!r} cannot be read (a commit file missing or damaged?); "
        f"no engine can read it either: {why[:200]}",
        remedy="rebuild it from the table: lineage mirror repair TABLE --rebuild (its Delta "
        "versions start again at 0)",
    )


class MirrorConflict(MirrorError):
    """Another commit reached the log between our read and our write."""
