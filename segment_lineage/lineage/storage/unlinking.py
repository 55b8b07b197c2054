"""Deleting a batch of a table's files: each file's checks first (placing
it: under the root, through no link, not under a ZooKeeper server's data),
then the delete itself, which on a local disk never follows a link.

A local delete walks from the table's root to the file's folder one
directory at a time, refusing a link at each step (``O_NOFOLLOW``), and
unlinks the file inside the folder it opened. A folder swapped for a link
after the checks (``mv d d.old && ln -s ../live/d d`` while a retention pass
runs) leads nowhere else: the file removed is the one the checks placed, or
none. The checks alone could not promise that: they look at a folder once
per batch, and the delete comes later. A remover keeps the folders it
opened for a run of files (a few dozen at most), so a folder is walked to
once per run, not once per file.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

from segment_lineage.lineage.storage.claims import check_no_state_dir, marked_above
from segment_lineage.lineage.storage.errors import StorageError
from segment_lineage.lineage.storage.folders import Folders

if TYPE_CHECKING:
    from segment_lineage.lineage.storage.deep import DeepStore

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FOLDER_NO_LINK = _FOLDER | os.O_NOFOLLOW


class Remover(Protocol):
    """Deletes placed files (``remover(location, path)``: False when it was
    already gone); used as a context manager by one thread at a time."""

    def __call__(self, location: str, path: str) -> bool: ...

    def __enter__(self) -> Remover: ...

    def __exit__(self, *exc: object) -> None: ...


class DeleteBatch:
    """One batch of deletes under one root: :meth:`place` on one thread
    (each directory resolved once), :meth:`remover` for each thread that
    deletes."""

    def __init__(self, store: DeepStore, folders: Folders | None = None) -> None:
        self.store = store
        self._folders = Folders() if folders is None else folders  # a pass's checks before share theirs
        self._unmarked: set[str] = set()  # local folders seen without a state marker above them
        self._marks: dict[str, str | None] = {}  # folders above them, looked at once (marked_above)
        self._local = store.scheme == "file"
        # An object store's handle, shared by the batch's removers (made here:
        # removers are asked for on several threads at once).
        self._fs: Any = None if self._local else store.filesystem()

    def place(self, location: str) -> str:
        """The file's path once its checks pass (StorageError else: it leaves
        the root, or lies under a ZooKeeper server's data)."""
        target = self.store.path(location, self._folders)
        if self._local:
            folder = os.path.dirname(target)
            if folder not in self._unmarked:  # never a file of a ZooKeeper server's data
                # Where the folder really is, as placing the file resolved it already.
                if marked_above(self._folders.real(folder), self._marks, real=True) is not None:
                    check_no_state_dir(folder, self.store.root, walk=False)  # refused, and told why
                self._unmarked.add(folder)
        return target

    def remover(self) -> Remover:
        return _LocalRemover(self.store) if self._local else _StoreRemover(self.store, self._fs)


class _StoreRemover:
    """An object store's (or HDFS's) delete: there, a path is a key."""

    def __init__(self, store: DeepStore, fs: Any) -> None:
        self._store = store
        self._fs = fs

    def __enter__(self) -> _StoreRemover:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, location: str, path: str) -> bool:
        try:
            self._fs.delete_file(path)
            return True
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise _failed(self._store, location, exc) from None


class _LocalRemover:
    """A local disk's delete, beneath the root and through no link (the
    module's first paragraph). The folders it opened close with it."""

    MOST_OPEN = 32

    def __init__(self, store: DeepStore) -> None:
        self._store = store
        self._root: int | None = None
        self._open: dict[str, int] = {}  # folder (relative) -> descriptor, the newest last
        self._last: tuple[str | None, int] = (None, -1)  # the folder walked to last

    def __enter__(self) -> _LocalRemover:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()
        self._last = (None, -1)
        if self._root is not None:
            os.close(self._root)
            self._root = None

    def __call__(self, location: str, path: str) -> bool:
        folder, _, name = location.rpartition("/")
        try:
            # A run of one folder's files reuses the folder it walked to last.
            fd = self._last[1] if folder == self._last[0] else self._folder(folder)
            os.unlink(name, dir_fd=fd)
            return True
        except FileNotFoundError:  # the file, or a folder on its way
            return False
        except NotADirectoryError:  # a folder on its way is a link (or a file) now
            raise StorageError(
                f"deleting {location!r} under {self._store.root!r} was refused: a folder on its path is "
                "no longer a directory (a link is never followed)"
            ) from None
        except OSError as exc:
            raise _failed(self._store, location, exc) from None

    def _folder(self, folder: str) -> int:
        """A descriptor of ``folder`` (relative to the root), walked to one
        directory at a time, never through a link."""
        if self._root is None:  # the root itself may be reached through a link: it is the table's
            self._root = os.open(self._store.base, _FOLDER)
        if not folder:
            return self._root
        fd = self._open.pop(folder, None)
        if fd is None:
            parent, _, name = folder.rpartition("/")
            fd = os.open(name, _FOLDER_NO_LINK, dir_fd=self._folder(parent))
        self._open[folder] = fd
        while len(self._open) > self.MOST_OPEN:
            os.close(self._open.pop(next(iter(self._open))))
        self._last = (folder, fd)  # the newest: never the one closed
        return fd


def _failed(store: DeepStore, location: str, exc: OSError) -> StorageError:
    return StorageError(f"deleting {location!r} under {store.root!r} failed: {exc}")
