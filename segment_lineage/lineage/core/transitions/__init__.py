"""The lineage state machine: pure functions from one table state to the next.

Each function takes the current :class:`TableState`, the caller's arguments
and ``now_ms`` (the store's single clock), and returns a :class:`Change`, or
raises an error of :mod:`segment_lineage.lineage.core.errors` that names the broken precondition.
Nothing here performs I/O. The store bumps the version and records history.

Differences from Pinot, on purpose:

* No function deletes a file. Where Pinot deletes segments on the caller's
  thread (force cleanup, proactive cleanup), the segment is unregistered and
  its file is queued in ``pending`` for the retention daemon.
* A revert keeps the reverted ``to`` segments registered (hidden), so a later
  rollback can bring them back; retention reclaims them after
  ``lineage_entry_cleanup_retention``.
* A segment whose only lineage is a REVERTED entry cannot be registered again
  (that would resurrect reverted data, Pinot #13968).
* Force cleanup spares an entry whose pusher is alive or that was opened by
  hand and is still held, and names every entry it cleans up.
* A REFRESH table's snapshots beyond ``max_snapshots`` are queued at every
  start, with or without force cleanup; an end with a subset keeps the names
  left out in a REVERTED companion entry.

One module per family: ``segments`` (register, delete), ``replace`` (start,
end, revert, and a push's register-and-end), ``stage`` (a push's
register-and-keep, for a publish later), ``deletions`` (file queues and
retention's marks), ``rollback``, ``settings`` (a table's settings altered),
``purge`` (a table dropped with ``--purge``: everything queued, nothing else
changes it); ``cleanup`` holds what a start takes with it (force cleanup, a
REFRESH table's old snapshots).
Preconditions are data: small frozen objects whose ``check(state)`` raises
the error naming the rule, with what it expected and what it found where it
knows both (``start_requirements`` and ``overlap_requirements`` for a
replacement's start, ``end_requirements`` for its end or revert, ``segment_requirements`` for a
registration). ``common`` holds what the
families share, the :class:`~segment_lineage.lineage.core.transitions.common.Requirement`
protocol among it.
"""

from __future__ import annotations

from segment_lineage.lineage.core.transitions.deletions import (
    abandon_push,
    clear_pending,
    queue_files,
    retention_mark,
)
from segment_lineage.lineage.core.transitions.purge import purge_table, purging_refusal, refuse_while_purging
from segment_lineage.lineage.core.transitions.replace import (
    complete_replace,
    end_replace,
    revert_replace,
    start_replace,
)
from segment_lineage.lineage.core.transitions.rollback import rollback
from segment_lineage.lineage.core.transitions.segments import delete_segments, register_segments
from segment_lineage.lineage.core.transitions.settings import alter_table
from segment_lineage.lineage.core.transitions.stage import stage_replace

__all__ = [
    "abandon_push",
    "alter_table",
    "clear_pending",
    "complete_replace",
    "delete_segments",
    "end_replace",
    "purge_table",
    "purging_refusal",
    "queue_files",
    "refuse_while_purging",
    "register_segments",
    "retention_mark",
    "revert_replace",
    "rollback",
    "stage_replace",
    "start_replace",
]
