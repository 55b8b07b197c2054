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
from segment_lineage.lineage.core.bucket_maps import changed_keys
from segment_lineage.lineage.core.model import Change, Operation, TableConfig, TableState
from segment_lineage.lineage.core.visibility import visibility_delta

# Settings a push records itself (its columns, the unit it read times in):
# any other setting a change moves makes it an admin's, whatever it is called.
PUSHED_SETTINGS = ("schema", "schema_replaced_at", "schema_replaced_by", "past_schemas", "time_unit")


def guard_role(before: TableState, change: Change) -> str | None:
    """The role (ADMIN_ROLE or RETENTION) only which, with the admins, may
    make ``change`` to ``before``; None: any role with the head's rights."""
    if change.operation is Operation.ALTER_TABLE or _moves_settings(before.config, change.state.config):
        return ADMIN_ROLE
    if _hides_data(before, change):
        return RETENTION if change.operation is Operation.RETENTION_MARK else ADMIN_ROLE
    return None


def _moves_settings(was: TableConfig, now: TableConfig) -> bool:
    """Whether a change moves a setting other than those a push records itself."""
    if now is was:
        return False
    kept = {name: getattr(was, name) for name in PUSHED_SETTINGS}
    return dataclasses.replace(now, **kept) != was


def _hides_data(before: TableState, change: Change) -> bool:
    """Whether a change hides visible data: a delete's segments, or those it unregisters."""
    after = change.state.segments
    removed = {n for n in changed_keys(before.segments, after) if n not in after}
    if change.operation is not Operation.DELETE and not removed:
        return False
    _appear, disappear = visibility_delta(before, change.state)
    hidden = disappear if change.operation is Operation.DELETE else disappear & removed
    return bool(hidden)
