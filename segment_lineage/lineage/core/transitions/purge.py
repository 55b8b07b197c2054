"""A table dropped with ``--purge``: every segment unregistered and its file
queued for retention in one commit, the table marked purging. From then on
only retention's own commits (and files queued by a push that was refused)
change it; retention deletes the files with its usual care (a reader's pin,
the minimum grace, the intent log), and the table is dropped once none is
left.
"""

from __future__ import annotations

import dataclasses

from segment_lineage.lineage.core.errors import RefusedError
from segment_lineage.lineage.core.model import (
    Change,
    DeletionReason,
    EntryState,
    Operation,
    TableConfig,
    TableState,
)
from segment_lineage.lineage.core.periods import format_time
from segment_lineage.lineage.core.transitions.common import _queue_for_deletion

# What may still change a purging table: retention's marks and clears, and
# the files a refused push queues for it.
WHILE_PURGING = frozenset({Operation.RETENTION_MARK, Operation.RETENTION_CLEAR, Operation.QUEUE_FILES})


def purge_table(state: TableState, now_ms: int) -> Change:
    """Queue every registered segment's file (PURGED), forget the entries,
    turn the mirror off, and mark the table purging. Refused while a push
    is in progress. Purging again changes nothing."""
    config = state.config
    if config.purging_ms is not None:
        return Change(state=state, operation=Operation.PURGE_TABLE, changed=False)
    _check_no_push_running(state)
    segments = dict(state.segments)
    pending = dict(state.pending)
    _queue_for_deletion(segments, pending, list(segments), DeletionReason.PURGED, now_ms)
    purged = state.replace(
        config=dataclasses.replace(config, purging_ms=now_ms, mirror=None),
        segments=segments,
        entries={},
        pending=pending,
    )
    return Change(
        state=purged,
        operation=Operation.PURGE_TABLE,
        segments=len(state.segments),
        rows=sum(s.rows for s in state.segments.values()),
        size_bytes=sum(s.size_bytes for s in state.segments.values()),
    )


def _check_no_push_running(state: TableState) -> None:
    """A purge is refused while a push is in progress (the first is named)."""
    name = state.config.name
    running = [e.entry_id for e in state.entries.values() if e.state is EntryState.IN_PROGRESS]
    if running:
        raise RefusedError(
            f"cannot purge table {name!r}: push {running[0]} is in progress"
            + (f" (and {len(running) - 1} more)" if len(running) > 1 else ""),
            table=name,
            entry_id=running[0],
            remedy=f"wait for it to finish, or revert it if it is dead (lineage revert {name} "
            f"{running[0]} --force), then purge again",
        )


def purging_refusal(config: TableConfig, what: str) -> RefusedError | None:
    """The refusal of ``what`` on a table dropped with --purge (None: it is not)."""
    since = config.purging_ms
    if since is None:
        return None
    name = config.name
    return RefusedError(
        f"table {name!r} is being dropped with --purge (since {format_time(since)}): "
        f"nothing but retention changes it; {what} refused",
        table=name,
        remedy=f"retention reclaims its files, then the table goes (lineage table show {name} says "
        "what is left); create it again after that",
    )


def refuse_while_purging(before: TableState, change: Change) -> None:
    """RefusedError for a change to a purging table other than retention's
    own (and a purge again): nothing but retention changes it any more."""
    if change.operation in WHILE_PURGING or change.operation is Operation.PURGE_TABLE:
        return
    refused = purging_refusal(before.config, change.operation.value)
    if refused is not None:
        raise refused
