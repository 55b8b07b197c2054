"""What a push wrote, checked at its end against the table as it is then:
the columns (recorded, evolved or replaced under the push's policy, and
refused when another push recorded other types meanwhile), the unit of an
integer time column, and, for a push replacing the schema, that no segment
with the old columns stays visible."""

from __future__ import annotations

import dataclasses

from segment_lineage.lineage.core.errors import RefusedError
from segment_lineage.lineage.core.model import TableConfig, TableState, TimeUnit
from segment_lineage.lineage.core.schema import (
    Schema,
    SchemaMismatchError,
    SchemaPolicy,
    compare,
    resolve,
    written_schema,
)
from segment_lineage.lineage.core.schema_versions import with_schema
from segment_lineage.lineage.core.visibility import visible_names


def _check_written_types(config: TableConfig, schema: Schema, entry_id: str) -> None:
    """The push wrote the table's types: it was not planned on an older
    schema (another push recorded one meanwhile). Refused; nothing lands."""
    if config.schema is not None and written_schema(config.schema, schema) != schema:
        raise SchemaMismatchError(
            f"table {config.name!r} recorded other column types while this push ran: "
            f"{compare(config.schema, schema).describe() or 'narrower types written'}",
            table=config.name,
            entry_id=entry_id,
            remedy="push again: the push then writes the table's types",
        )


def with_written_schema(
    state: TableState, entry_id: str, schema: Schema | None, policy: SchemaPolicy, mode: str | None
) -> tuple[TableConfig, str | None]:
    """The config with the columns the push wrote recorded under ``policy``,
    and what became of the schema (None: nothing)."""
    config = state.config
    if schema is None:
        return config, None
    _check_written_types(config, schema, entry_id)
    recorded, note = resolve(
        config.schema,
        schema,
        policy,
        config.name,
        full_refresh=mode == "refresh",
        mirrored=config.mirror is not None,
    )
    if note is None:
        return config, None
    replaced = policy is SchemaPolicy.REPLACE and config.schema is not None
    changed = dataclasses.replace(
        with_schema(config, recorded, state.version + 1),
        schema_replaced_at=state.version + 1 if replaced else config.schema_replaced_at,
        schema_replaced_by=entry_id if replaced else config.schema_replaced_by,
    )
    return changed, note


def with_time_unit(config: TableConfig, time_unit: TimeUnit | None, entry_id: str) -> TableConfig:
    """The config with the unit the push read an integer time column in,
    recorded at the first push; refused when the table has another."""
    if time_unit is None or config.time_unit is time_unit:
        return config
    if config.time_unit is not None:  # declared (or recorded) while this push ran
        raise RefusedError(
            f"table {config.name!r} reads its time column in {config.time_unit.value}, and this push "
            f"wrote times read in {time_unit.value}; nothing of it lands",
            table=config.name,
            entry_id=entry_id,
            remedy="push again: it then reads the values in the table's unit",
        )
    return dataclasses.replace(config, time_unit=time_unit)  # inferred at the first push: kept


def check_only_its_own_left(ended: TableState, entry_id: str) -> None:
    """A push replacing the schema: every segment left visible must be its
    own; one pushed while it ran (an append) has the old columns, which the
    new schema misreads."""
    left = visible_names(ended) - set(ended.entries[entry_id].segments_to)
    if left:
        name = ended.config.name
        raise SchemaMismatchError(
            f"cannot replace the schema of table {name!r}: {len(left)} segment(s) pushed while "
            f"this refresh ran would stay visible with the old columns ({', '.join(sorted(left)[:3])})",
            table=name,
            entry_id=entry_id,
            remedy="run the refresh with --replace-schema again: it then replaces those too",
        )
