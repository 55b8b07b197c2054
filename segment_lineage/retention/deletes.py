"""Deleting a pass's files: the fence checked before each delete, a pool of
deleters, and the rule that nothing kept (or reached through a link) goes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.core.failpoints import armed, failpoint
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.retention.errors import FencedError
from segment_lineage.retention.planner import Deletion

Fence = Callable[[], None]


class SessionHeld(Protocol):
    """Whether the pass's own session still stands (``lineage.store.election.SessionCheck``)."""

    def holds(self) -> bool: ...


def session_fence(check: SessionHeld, message: str) -> Fence:
    """A fence on the pass's own ZooKeeper session: once it was suspended or
    replaced, the plan may be stale, so nothing more is deleted."""

    def fence() -> None:
        if not check.holds():
            raise FencedError(message)

    return fence


def no_fence() -> None:
    return None


LOCAL_DELETE_WORKERS = 8
REMOTE_DELETE_WORKERS = 16
MAX_DELETE_CHUNK = 256  # files per pool task


def delete_all(
    root: DeepStore, todo: Sequence[Deletion], fence: Fence
) -> Iterator[tuple[Deletion, bool | str]]:
    """Delete files, checking the fence right before each one. Yields each
    deletion with True (deleted), False (already gone) or an error message,
    in order. Deletes run on a pool: an object-store delete is a network
    round trip, and unlinking files long since written to disk waits on the
    file system's journal (on the development machine, 4 to 16 threads
    deleted such files 1.5x to 1.7x faster than one). Each task takes a run
    of files, so a big pass does not pay for one future per file. A lost
    fence stops every file not yet begun, and its error is raised once the
    outcomes of every file already deleted were yielded (an audit misses
    none)."""
    delete = root.deleter()
    crash_point = failpoint if armed() else None

    def one(deletion: Deletion) -> tuple[Deletion, bool | str]:
        fence()
        try:
            outcome: bool | str = delete(deletion.location)
        except LineageError as exc:
            outcome = exc.message
        if crash_point is not None:
            crash_point("retention.mid-delete")
        return deletion, outcome

    if crash_point is not None:  # a fault test wants to stop at a known file
        yield from map(one, todo)
        return

    def run(chunk: Sequence[Deletion]) -> tuple[list[tuple[Deletion, bool | str]], FencedError | None]:
        done: list[tuple[Deletion, bool | str]] = []
        try:
            for deletion in chunk:
                done.append(one(deletion))
        except FencedError as exc:
            return done, exc
        return done, None

    workers = LOCAL_DELETE_WORKERS if root.scheme == "file" else REMOTE_DELETE_WORKERS
    size = min(MAX_DELETE_CHUNK, max(1, len(todo) // (workers * 4)))
    chunks = [todo[at : at + size] for at in range(0, len(todo), size)]
    pool = ThreadPoolExecutor(workers, thread_name_prefix="retention-delete")
    try:
        first_lost: FencedError | None = None
        for done, lost in pool.map(run, chunks):
            yield from done
            first_lost = first_lost or lost
        if first_lost is not None:
            raise first_lost
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def not_kept(root: DeepStore, deletions: Sequence[Deletion], keep: set[str]) -> list[Deletion]:
    """The deletions that touch no kept file. On a local disk a path may lead
    through a symbolic link, so both sides are compared where they really
    are: a kept location registered through a link, and a deletion through
    one, each name the file the link leads to."""
    todo = [d for d in deletions if d.location not in keep]
    if root.scheme != "file" or not todo:
        return todo
    resolved_dirs: dict[str, str] = {}

    def real(location: str) -> str:
        try:
            return root.real_location(location, resolved_dirs)
        except LineageError:
            return location  # refused when deleted, and reported then

    really_kept = keep | {real(location) for location in keep}
    # A path through a link is never deleted: a segment registered meanwhile
    # under the file's real path would lose it (links are the operator's).
    return [d for d in todo if (where := real(d.location)) == d.location and where not in really_kept]
