"""Which changes only an admin may make: the pure rule the commit applies.

A pusher pushes, reverts and rolls back; retention marks and clears. What
shortens what readers can rely on is an admin's: a settings change (the
retention windows, the mirror and its window, versions kept) and a delete
that hides visible data (a rollback hides data too, but a roll forward
brings it back; a deleted segment's file goes to retention). Under an ACL
policy the commit of such a change also writes a node only admins may
write, so ZooKeeper refuses it to every other role.
"""

from __future__ import annotations

from segment_lineage.lineage.core.model import Change, Operation, TableState
from segment_lineage.lineage.core.visibility import visibility_delta


def admin_only(before: TableState, change: Change) -> bool:
    """Whether only an admin may make ``change`` to ``before``."""
    if change.operation is Operation.ALTER_TABLE:
        return True
    if change.operation is Operation.DELETE:
        _appear, disappear = visibility_delta(before, change.state)
        return bool(disappear)
    return False
