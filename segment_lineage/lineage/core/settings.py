"""What ``table alter`` changes (:class:`SettingsChange`), as a value:
each setting given is checked as a table create checks it, and applied to
a config by building it again; the table's name, root, type, time column
and schema are not settings. Pure: no I/O."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.lineage.core.model import TableConfig, TimeUnit
from segment_lineage.lineage.core.periods import format_period
from segment_lineage.lineage.core.schema import mirror_columns

NONE = "none"  # a setting's value that turns it off (time retention, time granularity) or back to default


@dataclass(frozen=True)
class SettingsChange:
    """What ``table alter`` changes: None leaves a setting as it is; ``none``
    turns time retention or time granularity off, and versions kept back to
    the store's default. The table's name, root, type, time column and
    schema are not settings."""

    replaced_segments_retention: str | None = None
    lineage_entry_cleanup_retention: str | None = None
    max_snapshots: int | None = None
    exclusive_delete: bool | None = None
    time_retention: str | None = None
    versions_kept: int | str | None = None
    time_granularity: str | None = None
    time_unit: str | None = None  # only while the table has none: values already pushed were read in it
    mirror: str | None = None  # a format ('delta'), or 'none' to stop publishing
    mirror_retention: str | None = None  # a period; 'none': the default

    def empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in dataclasses.fields(self))

    def _check_types(self) -> None:
        """InvalidInputError for a value of the wrong kind, and for 'none'
        where it means nothing (a retention period has no 'off')."""
        for names, fits, wanted in _KINDS:
            for name in names:
                value = getattr(self, name)
                if value is not None and not fits(value):
                    raise InvalidInputError(f"invalid {name.replace('_', ' ')} {value!r}: {wanted}")

    def _versions_kept(self, config: TableConfig) -> int | None:
        """The versions kept after the change: given, unchanged, or None ('none': the default)."""
        kept = self.versions_kept
        if not isinstance(kept, str):
            return config.versions_kept if kept is None else kept
        if kept.strip().lower() != NONE:
            raise InvalidInputError(
                f"invalid versions kept {kept!r}: a whole number, or 'none' for the default"
            )
        return None

    def _time_unit(self, config: TableConfig) -> TimeUnit | str | None:
        """The time unit after the change: one may be given only while the table has none (or the same)."""
        if self.time_unit is None:
            return config.time_unit
        if config.time_unit is not None and self.time_unit.strip().lower() != config.time_unit.value:
            raise InvalidInputError(
                f"table {config.name!r} reads its time column in {config.time_unit.value}: "
                "its segments' times were computed in it, so it cannot change"
            )
        return self.time_unit

    def applied(self, config: TableConfig) -> TableConfig:
        """``config`` with these changes, validated as at creation."""
        self._check_types()
        kept = self._versions_kept(config)
        unit = self._time_unit(config)
        built = TableConfig.build(
            config.name,
            config.root,
            config.table_type,
            time_column=config.time_column,
            time_unit=unit,
            replaced_segments_retention=_period(
                self.replaced_segments_retention, config.replaced_segments_retention_ms
            ),
            lineage_entry_cleanup_retention=_period(
                self.lineage_entry_cleanup_retention, config.lineage_entry_cleanup_retention_ms
            ),
            max_snapshots=config.max_snapshots if self.max_snapshots is None else self.max_snapshots,
            exclusive_delete=config.exclusive_delete
            if self.exclusive_delete is None
            else self.exclusive_delete,
            time_retention=_period(self.time_retention, config.time_retention_ms),
            versions_kept=kept,
            time_granularity=_setting(self.time_granularity, config.time_granularity),
            mirror=_setting(self.mirror, config.mirror),
            mirror_retention=_period(self.mirror_retention, config.mirror_retention_ms),
        )
        if built.mirror is not None:
            mirror_columns(config.schema, config.name)  # a column Delta lacks: refused, naming it
        return dataclasses.replace(
            built,
            root=config.root,
            schema=config.schema,
            schema_replaced_at=config.schema_replaced_at,
            schema_replaced_by=config.schema_replaced_by,
            past_schemas=config.past_schemas,
            purging_ms=config.purging_ms,
        )


# What each setting's value must be, when given: the settings, whether a value fits, and what fits.
_KINDS: tuple[tuple[tuple[str, ...], Callable[[object], bool], str], ...] = (
    (
        ("replaced_segments_retention", "lineage_entry_cleanup_retention"),
        lambda value: isinstance(value, str) and value.strip().lower() != NONE,
        "a period such as 12h or 7d",
    ),
    (
        ("time_retention", "time_granularity", "time_unit", "mirror", "mirror_retention"),
        lambda value: isinstance(value, str),
        "text, or 'none'",
    ),
    (("exclusive_delete",), lambda value: isinstance(value, bool), "true or false"),
    (("versions_kept",), lambda value: isinstance(value, int | str), "a whole number, or 'none'"),
)


def _period(value: str | None, current: int | None) -> str | None:
    """A period setting for the build: the one given ('none': off, or the
    default), else the current one as a period again."""
    if value is None:
        return None if current is None else format_period(current)
    return None if value.strip().lower() == NONE else value


def _setting(value: str | None, current: str | None) -> str | None:
    """A text setting for the build: the one given ('none': off), else the current one."""
    if value is None:
        return current
    return None if value.strip().lower() == NONE else value
