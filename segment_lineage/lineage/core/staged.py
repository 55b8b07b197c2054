"""A staged push: an IN_PROGRESS entry whose files are written and registered,
kept (held, no owner process) until someone publishes or reverts it.

What its publish needs is kept with the entry: the push's mode, its schema
policy, the columns it wrote, the time unit it read, and its audit (text in
the audit's own format, run again at publish; :mod:`segment_lineage.ingest.audit`), and,
for a push set's, the set and its tables (the set is published whole).
"""

from __future__ import annotations

from dataclasses import dataclass

from segment_lineage.lineage.core.schema import Schema

STAGED_TEXT_LIMIT = 70_000  # bytes of a staged push's audit text (its query is at most 65,536 characters)


@dataclass(frozen=True)
class Staged:
    """What a staged push's publish commits with, as its push would have."""

    mode: str | None
    policy: str  # a SchemaPolicy's value
    schema: Schema | None
    time_unit: str | None  # a TimeUnit's value
    audit: str | None  # the audit's checks, as text (None: none)
    set_id: str | None = None  # staged by a push set: published only with the set's other tables
    set_tables: tuple[str, ...] = ()  # every table of that set
