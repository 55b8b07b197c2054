"""Deleting a pass's files: the fence checked before each delete, a pool of
deleters, and the rule that nothing kept (or reached through a link) goes."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.core.failpoints import armed, failpoint
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.lineage.storage.errors import LinkUnknownError
from segment_lineage.lineage.storage.folders import Folders
from segment_lineage.lineage.storage.unlinking import DeleteBatch, Remover
from segment_lineage.retention.errors import FencedError
from segment_lineage.retention.planner import Deletion

Fence = Callable[[], None]
_Placed = tuple[Deletion, str, str | None]  # a deletion, its path, or why it is refused
_Done = tuple[list[tuple[Deletion, bool | str]], FencedError | None]


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
    root: DeepStore, todo: Sequence[Deletion], fence: Fence, folders: Folders | None = None
) -> Iterator[tuple[Deletion, bool | str]]:
    """Delete files, checking the fence right before each one. Yields each
    deletion with True (deleted), False (already gone) or an error message,
    in the order of their locations (a folder's files together).

    Deletes run on a pool: an object-store delete is a network round trip,
    and unlinking files long since written to disk waits on the file
    system's journal (on the development machine, 4 to 16 threads deleted
    such files 1.5x to 1.7x faster than one). Each task takes a run of
    files, so a big pass does not pay for one future per file. The checks
    of each file's path (it stays under the root, through no link) run on
    the calling thread, a run ahead of the pool, which only deletes
    (locally inside each folder as it walked to it, never through a link:
    :mod:`segment_lineage.lineage.storage.unlinking`). Python work on the
    deleters' threads made each of them wait for the interpreter after
    every delete (at 100,000 local files, 5.6 s where the deletes alone
    took 2.4 s).

    A lost fence stops every file not yet begun, and its error is raised
    once the outcomes of every file already deleted were yielded (an audit
    misses none). ``folders``: what :func:`not_kept` learned of the same
    files' folders (resolved and listed once for both)."""
    steps = _Steps(root.delete_batch(folders), fence, failpoint if armed() else None)
    if steps.crash_point is not None:  # a fault test wants to stop at a known file
        with steps.batch.remover() as remove:
            yield from (steps.one(remove, steps.placed(d)) for d in todo)
        return
    # A folder's files together: a deleter opens each folder once for its run of them.
    todo = sorted(todo, key=lambda d: d.location)
    workers = LOCAL_DELETE_WORKERS if root.scheme == "file" else REMOTE_DELETE_WORKERS
    size = min(MAX_DELETE_CHUNK, max(1, len(todo) // (workers * 4)))
    yield from _on_a_pool(steps, todo, workers, size)


class _Steps:
    """One file's steps: placed (checked) on the calling thread, deleted on a
    deleter's, the fence checked right before."""

    def __init__(self, batch: DeleteBatch, fence: Fence, crash_point: Callable[[str], None] | None) -> None:
        self.batch = batch
        self.fence = fence
        self.crash_point = crash_point

    def placed(self, deletion: Deletion) -> _Placed:
        try:
            return deletion, self.batch.place(deletion.location), None
        except LineageError as exc:
            return deletion, "", exc.message

    def one(self, remove: Remover, item: _Placed) -> tuple[Deletion, bool | str]:
        deletion, target, refused = item
        self.fence()
        outcome: bool | str
        if refused is not None:
            outcome = refused
        else:
            try:
                outcome = remove(deletion.location, target)
            except LineageError as exc:
                outcome = exc.message
        if self.crash_point is not None:
            self.crash_point("retention.mid-delete")
        return deletion, outcome

    def run(self, chunk: Sequence[_Placed]) -> _Done:
        """A deleter's run of files, until the fence falls."""
        done: list[tuple[Deletion, bool | str]] = []
        with self.batch.remover() as remove:
            try:
                for item in chunk:
                    done.append(self.one(remove, item))
            except FencedError as exc:
                return done, exc
        return done, None


def _on_a_pool(
    steps: _Steps, todo: Sequence[Deletion], workers: int, size: int
) -> Iterator[tuple[Deletion, bool | str]]:
    """Runs of ``size`` files placed here and handed to ``workers`` deleters,
    their outcomes yielded in order; nothing more begun once a fence fell."""
    pool = ThreadPoolExecutor(workers, thread_name_prefix="retention-delete")
    running: deque[Future[_Done]] = deque()
    lost: list[FencedError] = []

    def finished(future: Future[_Done]) -> list[tuple[Deletion, bool | str]]:
        done, fenced = future.result()
        if fenced is not None:
            lost.append(fenced)
        return done

    try:
        for at in range(0, len(todo), size):
            if lost:
                break  # nothing more is begun; the tasks handed out stop at the fence
            running.append(pool.submit(steps.run, [steps.placed(d) for d in todo[at : at + size]]))
            while running and running[0].done():
                yield from finished(running.popleft())
        while running:
            yield from finished(running.popleft())
        if lost:
            raise lost[0]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# Why a planned deletion is kept by not_kept: its location is kept, or it is reached through a link.
AGAIN = "registered, pinned or published again while the pass ran"
UNKNOWN = "a kept location lies where the pass cannot look (a folder it may not enter)"
THROUGH_A_LINK = (
    "reached through a link, or the file a kept location's link leads to (links are never followed)"
)


def not_kept(
    root: DeepStore, deletions: Sequence[Deletion], keep: set[str], folders: Folders | None = None
) -> list[Deletion]:
    """The deletions that touch no kept file. On a local disk a path may lead
    through a symbolic link, so both sides are compared where they really
    are: a kept location registered through a link, and a deletion through
    one, each name the file the link leads to. ``folders`` keeps what is
    learned of each folder, for the deletes after (:func:`delete_all`)."""
    todo = [d for d in deletions if d.location not in keep]
    if root.scheme != "file" or not todo:
        return todo
    folders = Folders() if folders is None else folders

    def real(location: str) -> str | None:
        try:
            return root.real_location(location, folders)
        except LinkUnknownError:
            return None  # where it leads is unknown
        except LineageError:
            return location  # refused when deleted, and reported then

    reals = {location: real(location) for location in keep}
    unknown = sorted(location for location, where in reals.items() if where is None)
    if unknown:  # a kept location may lead to any of the files: none goes
        raise LinkUnknownError(f"where kept location {unknown[0]!r} leads cannot be told: nothing deleted")
    really_kept = keep | {where for where in reals.values() if where is not None}
    # A path through a link is never deleted: a segment registered meanwhile
    # under the file's real path would lose it (links are the operator's).
    return [d for d in todo if (where := real(d.location)) == d.location and where not in really_kept]
