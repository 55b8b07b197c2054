"""Directories under a table's root that deleting files left empty: pruned
after retention's deletes (object stores' empty "directory" markers too),
and removed where a push that wrote nothing left them."""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from segment_lineage.lineage.core.names import check_location
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.lineage.storage.errors import StorageError
from segment_lineage.lineage.storage.folders import Folders

PRUNE_WORKERS = 8  # directories removed at once, when one depth has PRUNE_POOL_FROM or more
PRUNE_POOL_FROM = 32


def prune_dirs(store: DeepStore, locations: Iterable[str]) -> int:
    """Remove directories left empty by deleting ``locations`` (deepest
    first, never the root). Object stores keep an empty "directory"
    marker where the last file of a prefix was deleted; those go too.
    A directory that is not empty stays. Returns how many went.

    The directories of one depth go on a pool when there are many (each
    removal is a file-system call or a round trip; a directory is
    removed only after every deeper one was tried)."""
    import pyarrow.fs as pafs

    fs = store.filesystem()
    by_depth: dict[int, set[str]] = {}
    for location in locations:
        parts = check_location(location).split("/")[:-1]
        for i in range(1, len(parts) + 1):
            by_depth.setdefault(i, set()).add("/".join(parts[:i]))
    folders = Folders()

    def remove(relative: str) -> bool:
        try:
            full = store.path(relative, folders)
        except StorageError:
            return False  # leads outside the root, through a link: not ours
        try:
            if store.scheme == "file":
                os.rmdir(full)  # refuses a non-empty directory, atomically
            else:
                if fs.get_file_info(pafs.FileSelector(full, allow_not_found=True)):
                    return False
                fs.delete_dir(full)
        except OSError:
            return False  # not empty, already gone, or not ours to remove: leave it
        return True

    removed = 0
    with ThreadPoolExecutor(PRUNE_WORKERS, thread_name_prefix="prune-dirs") as pool:
        for depth in sorted(by_depth, reverse=True):
            level = sorted(by_depth[depth])
            done = pool.map(remove, level) if len(level) >= PRUNE_POOL_FROM else map(remove, level)
            removed += sum(done)
    return removed


def remove_empty_dirs(store: DeepStore, prefix: str) -> int:
    """Remove ``prefix`` (a directory under the root) and the directories
    in it, deepest first, where they hold no file: what a push that
    wrote nothing leaves (a writer made the directories). Local disks
    only: an object store keeps no empty directory. Returns how many went."""
    if store.scheme != "file":
        return 0
    try:
        top = store.path(prefix)
    except StorageError:
        return 0  # leads out of the root: not ours
    removed = 0
    for folder, _dirs, _names in os.walk(top, topdown=False, followlinks=False):
        try:
            os.rmdir(folder)  # refuses a directory that is not empty, or a link
            removed += 1
        except OSError:
            continue
    return removed
