"""Publishing right after a commit: the hook a manager calls (cheap to import:
the publisher, and deltalake, load only for a mirrored table)."""

from __future__ import annotations

from collections.abc import Callable

from segment_lineage.lineage.core.errors import LineageError, MirrorHeldError
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.manager.commit import AfterCommit, Committed, ManagerBase
from segment_lineage.mirror.plan import shows_nothing_new

HOLD_WAIT_S = 10.0  # for another publisher (or a drop) to let go of the mirror: then a warning


def publish_after(warn: Callable[[str], None]) -> AfterCommit:
    """A hook for :attr:`ManagerBase.after_commit`: publish right after a
    commit of a mirrored table, best effort. A failure is only reported
    (``warn``): the commit stands, and the next sync publishes it."""

    def hook(manager: ManagerBase, table: str, done: Committed) -> None:
        if done.state.config.mirror is None or not isinstance(manager, LineageManager):
            return
        if shows_nothing_new(done.change.operation, done.change.entry_id):
            return  # nothing a reader sees changed: nothing to publish
        from segment_lineage.mirror.publisher import sync

        try:
            sync(manager, table, wait_s=HOLD_WAIT_S)
        except MirrorHeldError:
            problem = f"another process held it (publishing, or removing it) for {HOLD_WAIT_S:g} s"
        except LineageError as exc:
            problem = exc.message
            if exc.remedy:  # refused: a sync would be refused too; say what helps
                warn(f"the Delta mirror of table {table!r} was not updated: {problem}; {exc.remedy}")
                return
        except Exception as exc:  # noqa: BLE001  the commit landed: no publish failure may undo its success
            problem = f"{type(exc).__name__}: {exc}"
        else:
            return
        warn(
            f"the Delta mirror of table {table!r} was not updated: {problem}; "
            f"`lineage mirror sync {table}` publishes it"
        )

    return hook
