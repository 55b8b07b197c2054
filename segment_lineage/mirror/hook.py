"""Publishing right after a commit: the hook a manager calls (cheap to import:
the publisher, and deltalake, load only for a mirrored table)."""

from __future__ import annotations

from collections.abc import Callable

from segment_lineage.lineage.core.errors import ContentionError
from segment_lineage.lineage.core.model import Operation
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.manager.commit import AfterCommit, Committed, ManagerBase
from segment_lineage.mirror.errors import MirrorError


def publish_after(warn: Callable[[str], None]) -> AfterCommit:
    """A hook for :attr:`ManagerBase.after_commit`: publish right after a
    commit of a mirrored table, best effort. A failure is only reported
    (``warn``): the commit stands, and the next sync publishes it."""

    def hook(manager: ManagerBase, table: str, done: Committed) -> None:
        if done.state.config.mirror is None or not isinstance(manager, LineageManager):
            return
        if done.change.operation is Operation.START_REPLACE:
            return  # an entry opened: nothing a reader sees changed
        from segment_lineage.mirror.publisher import sync

        try:
            sync(manager, table)
        except (MirrorError, ContentionError) as exc:
            warn(
                f"the Delta mirror of table {table!r} was not updated: {exc.message}; "
                f"`lineage mirror sync {table}` publishes it"
            )

    return hook
