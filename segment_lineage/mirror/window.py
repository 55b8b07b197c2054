"""The mirror's window: which files engines may still read through the
mirror. Retention's only question to the mirror is answered here, and the
window's start is computed here alone (for retention, and for the
publisher's cleanup of the log)."""

from __future__ import annotations

from segment_lineage.lineage.core.model import TableConfig


def horizon(config: TableConfig, now_ms: int) -> int:
    """The start of the mirror's window at ``now_ms``: a version committed
    before it (but the one current then) is no longer one engines may read."""
    return now_ms - config.mirror_window_ms


def readable_files(config: TableConfig, now_ms: int) -> frozenset[str]:
    """The files a version of the table's mirror that engines may still
    time-travel to references (those of every version committed within the
    window, and of the one current when it began), read now from the
    mirror's log; none without a mirror. A log that cannot be read raises
    MirrorError: nothing is deleted on a guess."""
    if config.mirror is None:
        return frozenset()
    from segment_lineage.mirror.delta import DeltaLog  # deltalake loads only where a mirror is

    return DeltaLog.open(config.root).referenced_since(horizon(config, now_ms))
