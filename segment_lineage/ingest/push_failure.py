"""A push that failed: what it left (its entry, its files), cleaned up best
effort in one commit, and the one error that says so. After an unknown
outcome nothing is cleaned up: the entry is left for the next push to judge."""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass

from segment_lineage.ingest.audit import AuditFailedError, Judgement
from segment_lineage.ingest.errors import (
    PushError,
    PushInterrupted,
    PushNotCommittedError,
    PushOutcomeUnknownError,
)
from segment_lineage.ingest.interrupts import Terminated
from segment_lineage.ingest.push_plan import PushTarget, Written
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import (
    ClaimLostError,
    LineageError,
    OutcomeUnknownError,
    StoreUnavailableError,
)
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.lineage.storage.dirs import remove_empty_dirs

log = logging.getLogger("segment_lineage.ingest.push")


def claim_gone(manager: LineageManager, table: str, entry_id: str) -> bool:
    """Whether this push's owner claim is gone (its session ended); False when
    that cannot be known (ZooKeeper away): the error is then told as it is."""
    try:
        return entry_id not in manager.live_owners(table)
    except LineageError:
        return False


@dataclass
class PushRun:
    """A push under way: whether its entry started and what it wrote, which
    is what a failure must clean up and say."""

    manager: LineageManager
    target: PushTarget
    started: bool = False
    written: Written | None = None
    judged: Judgement | None = None  # its audit, once judged on its files (its last commit judges again)
    staged_until_ms: int | None = None  # a staged push's: its entry is held until then
    cleanup: str | None = None  # after a failure: what became of its entry (a key of CLEANUP_SAID)

    def failure(self, exc: BaseException, job_id: str | None) -> BaseException:
        """The error to raise for ``exc``, after cleaning up what the push
        left (never after an unknown outcome: the entry is left for the next
        push to judge)."""
        if isinstance(exc, OutcomeUnknownError):
            return self._unknown(exc, job_id)
        exc = self._reason(exc)
        cleanup = self.cleanup = (
            abandon(self.manager, self.target.table, self.target, self.written, exc)
            if self.started
            else "nothing"
        )
        return self._told(exc, cleanup)

    def _unknown(self, exc: OutcomeUnknownError, job_id: str | None) -> OutcomeUnknownError:
        """An unknown outcome, said as the push's (its entry and job) once it started."""
        if not self.started or isinstance(exc, PushOutcomeUnknownError):
            return exc
        cause = exc.message.rsplit(" (", 1)[-1].rstrip(")") if " (" in exc.message else exc.message
        return PushOutcomeUnknownError(self.target.table, self.target.entry_id, exc.commit_id, cause, job_id)

    def _reason(self, exc: BaseException) -> BaseException:
        """``exc``, or ClaimLostError when the push's claim is gone: refused for
        what another process did once this push's session ended (its entry
        force-cleaned by a rerun, or removed by retention), that is the reason
        to give, whatever rule the commit met first."""
        if (
            self.started
            and isinstance(exc, LineageError)
            and not isinstance(exc, StoreUnavailableError)  # ZooKeeper away: no look, no second wait
            and claim_gone(self.manager, self.target.table, self.target.entry_id)
        ):
            return ClaimLostError(self.target.table, self.target.entry_id)
        return exc

    def _told(self, exc: BaseException, cleanup: str) -> BaseException:
        """The error that says ``exc`` and what the cleanup did."""
        table, entry_id = self.target.table, self.target.entry_id
        if isinstance(exc, ClaimLostError):  # one line: what it did not do, and what became of its files
            return ClaimLostError(table, entry_id, CLAIM_CLEANUP_SAID[cleanup])
        if self.started and isinstance(exc, StoreUnavailableError):
            return PushNotCommittedError(
                table, entry_id, exc.message, left_behind(self.target, self.written, cleanup)
            )
        if isinstance(exc, KeyboardInterrupt):
            signum = exc.signum if isinstance(exc, Terminated) else int(signal.SIGINT)
            return PushInterrupted(table, entry_id, signum, cleanup)
        if isinstance(exc, Exception) and not isinstance(exc, LineageError):
            what = CLEANUP_SAID[cleanup]
            return PushError(f"push to {table!r} failed {what}: {type(exc).__name__}: {exc}")
        return exc


def abandon(
    manager: LineageManager, table: str, target: PushTarget, written: Written | None, cause: BaseException
) -> str:
    """Best effort after a failed push, in one commit: revert the entry,
    unregister its segments, queue every file under the push's directory.

    Returns what became of the entry: "reverted", "completed" (it had
    landed: nothing undone) or "left" (the cleanup failed too: the next push
    cleans up, once the owner node lapses).
    """
    listed = dict(sorted(_files_left(target, written).items()))
    reason = f"push failed: {type(cause).__name__}"
    if isinstance(cause, AuditFailedError):  # which checks, with their figures, in the history
        reason = cause.message.encode("utf-8")[:900].decode("utf-8", "ignore")
    try:
        done = manager.commit(
            table, lambda s, now: transitions.abandon_push(s, target.entry_id, listed, now), reason
        )
    except LineageError as exc:
        log.warning("cleanup after a failed push to %s left for the next push: %s", table, exc.message)
        return "left"
    return "reverted" if done.applied else "completed"


def _files_left(target: PushTarget, written: Written | None) -> dict[str, int]:
    """Location -> size in bytes (0 while unknown) of every file the push
    left: what it wrote, its strays and what its directory holds (listed
    best effort; an empty directory is removed)."""
    files: dict[str, int] = {}
    if written is not None:
        files.update((s.location, s.size_bytes) for s in written.segments)
        files.update((location, 0) for location in written.strays)
    deep = DeepStore.for_root(target.root)
    try:
        files.update((f.location, f.size) for f in deep.list(target.push_dir))
        if not files:  # nothing written, but the writer may have made the directories
            remove_empty_dirs(deep, target.push_dir)
    except LineageError as exc:
        log.warning("listing %s of a failed push: %s", target.push_dir, exc.message)
    return files


def left_behind(target: PushTarget, written: Written | None, cleanup: str) -> str:
    """What a push that did not commit left behind, in words."""
    files = 0 if written is None else len(written.segments) + len(written.strays)
    where = f"{files or 'its'} file(s) under {target.root.rstrip('/')}/{target.push_dir}"
    if cleanup == "reverted":
        return f"its entry {target.entry_id} was reverted and {where} queued for retention"
    return (
        f"left: entry {target.entry_id} (IN_PROGRESS; the next push to {target.table!r} reverts it once "
        f"this process's claim has lapsed with its session) and {where}, which retention reclaims as "
        "orphans once they are older than its orphan grace (1 day by default)"
    )


CLAIM_CLEANUP_SAID = {  # after "... it committed nothing; "
    "nothing": "nothing was written",
    "reverted": "its entry was reverted and its files queued for retention",
    "completed": "its entry had completed",
    "left": "its entry and files are left for the next push's cleanup and retention",
}

CLEANUP_SAID = {  # after "push to T failed "
    "nothing": "before it started: nothing to undo",
    "reverted": "and was reverted",
    "completed": "but its entry had completed",
    "left": "and its cleanup failed too: the next push cleans up",
}
