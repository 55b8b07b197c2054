"""A table's settings changed after creation (``table alter``)."""

from __future__ import annotations

from collections.abc import Callable

from segment_lineage.lineage.core.model import (
    Change,
    Detail,
    Operation,
    TableConfig,
    TableState,
)
from segment_lineage.lineage.core.periods import format_period
from segment_lineage.lineage.core.settings import SettingsChange

# The settings an alter may change, as printed, each read from a config.
_SHOWN: dict[str, Callable[[TableConfig], str]] = {
    "replaced_retention": lambda c: format_period(c.replaced_segments_retention_ms),
    "entry_retention": lambda c: format_period(c.lineage_entry_cleanup_retention_ms),
    "max_snapshots": lambda c: str(c.max_snapshots),
    "exclusive_delete": lambda c: str(c.exclusive_delete).lower(),
    "time_retention": lambda c: "none" if c.time_retention_ms is None else format_period(c.time_retention_ms),
    "versions_kept": lambda c: "default" if c.versions_kept is None else str(c.versions_kept),
    "time_granularity": lambda c: "none" if c.time_granularity is None else c.time_granularity.value,
    "time_unit": lambda c: "none" if c.time_unit is None else c.time_unit.value,
    "mirror": lambda c: "none" if c.mirror is None else c.mirror.value,
    "mirror_retention": lambda c: format_period(c.mirror_window_ms),
}


def settings_diff(before: TableConfig, after: TableConfig) -> list[str]:
    """``name old -> new`` for each setting that differs."""
    out = []
    for name, show in _SHOWN.items():
        old, new = show(before), show(after)
        if old != new:
            out.append(f"{name} {old} -> {new}")
    return out


def alter_table(state: TableState, change: SettingsChange) -> Change:
    """The table's settings with ``change`` applied to the config of this
    state (validated as at creation: InvalidInputError names the setting);
    recorded with what changed, old and new. Nothing changes when every
    setting already has its value."""
    config = change.applied(state.config)
    diff = settings_diff(state.config, config)
    if not diff:
        return Change(state=state, operation=Operation.ALTER_TABLE, changed=False)
    return Change(
        state=state.replace(config=config),
        operation=Operation.ALTER_TABLE,
        detail=Detail(settings="; ".join(diff)),
    )
