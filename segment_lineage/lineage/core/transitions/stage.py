"""A staged push's last step (``stage_replace``): its uploads registered and
its strays queued, as :func:`~segment_lineage.lineage.core.transitions.replace.complete_replace`
does, but its entry left IN_PROGRESS, held until a time and carrying what its
publish needs (:class:`~segment_lineage.lineage.core.staged.Staged`). Readers
do not see the uploads until the publish ends the entry (``complete_replace``
with no uploads), or ever, once it is reverted or its hold ends and retention
or another push's force cleanup takes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from segment_lineage.lineage.core.bucket_maps import editable
from segment_lineage.lineage.core.errors import RefusedError
from segment_lineage.lineage.core.model import (
    Change,
    Detail,
    EntryState,
    Operation,
    Segment,
    TableState,
    TimeUnit,
)
from segment_lineage.lineage.core.schema import SchemaPolicy
from segment_lineage.lineage.core.staged import Staged
from segment_lineage.lineage.core.transitions.common import _entry, _registered_with, _totals
from segment_lineage.lineage.core.transitions.deletions import queue_files
from segment_lineage.lineage.core.transitions.segments import register_segments
from segment_lineage.lineage.core.transitions.written import with_time_unit, with_written_schema


def stage_replace(
    state: TableState,
    entry_id: str,
    uploads: Sequence[Segment],
    now_ms: int,
    strays: Sequence[str] = (),
    *,
    held_until_ms: int,
    staged: Staged,
    audit: str | None = None,
) -> Change:
    """Register ``uploads`` bound to the running entry ``entry_id``, queue
    ``strays``, and keep the entry staged: held until ``held_until_ms`` (no
    force cleanup, no retention before) with ``staged``. The columns and the
    time unit are checked as the publish will check them, so a push that
    could never be published is refused now; nothing is recorded in the
    table's config until the publish. Recorded as a registration, with the
    push's mode and ``audit`` (what its checks passed). Idempotent: staging
    again an entry staged with these uploads changes nothing."""
    entry = _entry(state, entry_id)
    if entry.state is not EntryState.IN_PROGRESS:
        raise RefusedError(
            f"entry {entry_id} is {entry.state.value}: only a running push's entry is staged",
            table=state.config.name,
            entry_id=entry_id,
            expected="IN_PROGRESS",
            found=entry.state.value,
        )
    if entry.staged == staged and _registered_with(state, entry, uploads):
        return Change(state=state, operation=Operation.REGISTER, entry_id=entry_id, changed=False)
    config, _ = with_written_schema(state, entry_id, staged.schema, SchemaPolicy(staged.policy), staged.mode)
    with_time_unit(config, None if staged.time_unit is None else TimeUnit(staged.time_unit), entry_id)
    registered = register_segments(state, uploads, now_ms, entry_id).state if uploads else state
    if strays:
        registered = queue_files(registered, strays, now_ms, entry_id).state
    entries = editable(registered.entries)
    entries[entry_id] = dataclasses.replace(entry, held_until_ms=held_until_ms, staged=staged)
    count, rows, size = _totals(uploads)
    return Change(
        state=registered.replace(entries=entries),
        operation=Operation.REGISTER,
        entry_id=entry_id,
        segments=count,
        rows=rows,
        size_bytes=size,
        detail=Detail(mode=staged.mode, interval=entry.interval, audit=audit),
    )
