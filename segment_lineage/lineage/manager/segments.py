"""Segment operations: register and delete segments, one commit each."""

from __future__ import annotations

from collections.abc import Sequence

from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.acl import PUSHER
from segment_lineage.lineage.core.model import Segment
from segment_lineage.lineage.manager.commit import Committed, ManagerBase


class SegmentOps(ManagerBase):
    """Registering and deleting segments."""

    def register_segments(
        self,
        table: str,
        segments: Sequence[Segment],
        *,
        entry_id: str | None = None,
        reason: str | None = None,
    ) -> Committed:
        batch = list(segments)
        self.require_role(PUSHER, doing="registering segments")
        return self.commit(
            table, lambda s, now: transitions.register_segments(s, batch, now, entry_id), reason
        )

    def delete_segments(self, table: str, names: Sequence[str], reason: str | None = None) -> Committed:
        batch = list(names)
        self.require_role(PUSHER, doing="deleting segments")  # visible ones: an admin's (core.roles)
        return self.commit(table, lambda s, now: transitions.delete_segments(s, batch, now), reason)
