"""Each version's schema. A table's config holds its current schema and,
bounded, the schemas its earlier versions had (``PastSchema`` spans, oldest
first): a past version is read with its own columns, and a rollback brings
back the schema of the version it restores. Pure: no I/O.

A span is recorded when a commit changes the schema (a push that records,
types, evolves or replaces it; a rollback that restores one). Spans no
retained version needs are dropped, and the oldest beyond MAX_PAST_SCHEMAS
or PAST_SCHEMA_BYTES: a version whose schema is no longer recorded is read
with the current one, and a rollback to it is refused when a replacement
came since (its files may have other columns).
"""

from __future__ import annotations

import dataclasses

from segment_lineage.lineage.core.model import DEFAULT_VERSIONS_KEPT, TableConfig
from segment_lineage.lineage.core.schema import PastSchema, Schema, compare, schema_bytes

MAX_PAST_SCHEMAS = 32
PAST_SCHEMA_BYTES = 128 * 1024  # beside the current schema (64 KB at most) in the head's 448 KB
CURRENT = 2**63 - 1  # the ``until`` of the current schema's span: no end yet


def schema_since(config: TableConfig) -> int:
    """The first version the current schema is known to apply to (tables
    whose versions did not record their schemas yet: their last
    replacement, else every version)."""
    if config.past_schemas:
        return config.past_schemas[-1].until
    return config.schema_replaced_at or 0


def span_at(config: TableConfig, version: int) -> PastSchema | None:
    """The span whose schema ``version`` had (the current schema's has
    ``until`` CURRENT), or None when the config no longer records it."""
    since = schema_since(config)
    if version >= since:
        return PastSchema(since, CURRENT, config.schema, config.schema_replaced_by)
    for span in config.past_schemas:
        if span.since <= version < span.until:
            return span
    return None


def config_at(config: TableConfig, version: int) -> TableConfig:
    """``config`` as version ``version`` is read: with that version's schema
    when recorded, else as it is."""
    span = span_at(config, version)
    if span is None or span.until == CURRENT or span.schema == config.schema:
        return config
    return dataclasses.replace(config, schema=span.schema)


def reads(current: Schema | None, then: Schema | None) -> bool:
    """Whether a table recording ``current`` reads files written under
    ``then`` as they were: it has each of their columns, in the same or a
    wider type (columns it adds read as null)."""
    if then is None or then == current:
        return True
    if current is None:
        return False
    diff = compare(current, then)
    return not diff.added and not diff.changed


def with_schema(config: TableConfig, schema: Schema | None, version: int) -> TableConfig:
    """``config`` with ``schema`` from ``version`` on (the version the commit
    makes): the schema before becomes a past span, named by the replacement
    in force then. Spans no retained version needs are dropped, then the
    oldest beyond the bounds."""
    if schema == config.schema:
        return config
    since = schema_since(config)
    past = list(config.past_schemas)
    if since < version:
        past.append(PastSchema(since, version, config.schema, config.schema_replaced_by))
    window = config.versions_kept or DEFAULT_VERSIONS_KEPT
    return dataclasses.replace(config, schema=schema, past_schemas=_kept_spans(past, version - window))


def _kept_spans(past: list[PastSchema], oldest: int) -> tuple[PastSchema, ...]:
    """The spans a version after ``oldest`` had, less the oldest of them
    beyond MAX_PAST_SCHEMAS spans or PAST_SCHEMA_BYTES of columns."""
    kept = [span for span in past if span.until > oldest]
    while len(kept) > MAX_PAST_SCHEMAS or (
        kept and sum(schema_bytes(span.schema or ()) for span in kept) > PAST_SCHEMA_BYTES
    ):
        kept.pop(0)
    return tuple(kept)


def columns_known(config: TableConfig, version: int) -> bool:
    """Whether version ``version`` is read with columns its files have: its
    schema is recorded, or no replacement came since (the current schema
    then only added columns to its)."""
    if span_at(config, version) is not None:
        return True
    return config.schema_replaced_at is None or version >= config.schema_replaced_at
