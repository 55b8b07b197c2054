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

import dataclasses

from segment_lineage.lineage.core.model import Change, Operation, TableState
from segment_lineage.lineage.core.visibility import visibility_delta

# Settings a push records itself (its columns, the unit it read times in):
# any other setting a change moves makes it an admin's, whatever it is called.
PUSHED_SETTINGS = ("schema", "schema_replaced_at", "schema_replaced_by", "time_unit")


def admin_only(before: TableState, change: Change) -> bool:
    """Whether only an admin may make ``change`` to ``before``: judged on
    what it does, not on the operation it names."""
    if change.operation is Operation.ALTER_TABLE:
        return True
    was, now = before.config, change.state.config
    if now is not was:
        kept = {name: getattr(was, name) for name in PUSHED_SETTINGS}
        if dataclasses.replace(now, **kept) != was:
            return True
    if change.operation is Operation.DELETE:
        _appear, disappear = visibility_delta(before, change.state)
        return bool(disappear)
    return False
