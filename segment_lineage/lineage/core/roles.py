"""Which changes only some roles may make: the pure rule the commit applies.

A pusher pushes, reverts and rolls back; retention marks and clears. What
shortens what readers can rely on is an admin's: a settings change (the
retention windows, the mirror and its window, versions kept) and a change
that unregisters or deletes visible data (a rollback hides data too, but a
roll forward brings it back; a deleted segment's file goes to retention),
except retention's own mark, which unregisters what time retention
condemns. Judged on what a change does, not on the operation it names.
Under an ACL policy the commit of such a change also writes a node only
that role (and admins) may write, so ZooKeeper refuses it to every other.
"""

from __future__ import annotations

import dataclasses

from segment_lineage.lineage.core.acl import ADMIN_ROLE, RETENTION
from segment_lineage.lineage.core.buckets import changed_keys
from segment_lineage.lineage.core.model import Change, Operation, TableState
from segment_lineage.lineage.core.visibility import visibility_delta

# Settings a push records itself (its columns, the unit it read times in):
# any other setting a change moves makes it an admin's, whatever it is called.
PUSHED_SETTINGS = ("schema", "schema_replaced_at", "schema_replaced_by", "past_schemas", "time_unit")


def guard_role(before: TableState, change: Change) -> str | None:
    """The role (ADMIN_ROLE or RETENTION) only which, with the admins, may
    make ``change`` to ``before``; None: any role with the head's rights."""
    if change.operation is Operation.ALTER_TABLE:
        return ADMIN_ROLE
    was, now = before.config, change.state.config
    if now is not was:
        kept = {name: getattr(was, name) for name in PUSHED_SETTINGS}
        if dataclasses.replace(now, **kept) != was:
            return ADMIN_ROLE
    after = change.state.segments
    removed = {n for n in changed_keys(before.segments, after) if n not in after}
    if change.operation is Operation.DELETE or removed:
        _appear, disappear = visibility_delta(before, change.state)
        hidden = disappear if change.operation is Operation.DELETE else disappear & removed
        if hidden:
            return RETENTION if change.operation is Operation.RETENTION_MARK else ADMIN_ROLE
    return None
