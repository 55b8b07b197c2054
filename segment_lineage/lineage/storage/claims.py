"""Where a table's root is on this machine, and whose it is.

:func:`resolve_root` makes a root canonical (:func:`canonical_root`) and, for
a local root, resolves its symbolic links and refuses protected places: it
reads the local disk, so it lives here rather than in the pure core.

The claim marker (:data:`CLAIM_FILE`) is written where the root lives, in
deep storage, and names the store and table the root belongs to: the
registry of roots knows only this store's tables, a marker speaks for all.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from segment_lineage.lineage import codec
from segment_lineage.lineage.core.errors import CorruptRecordError, RefusedError
from segment_lineage.lineage.core.roots import (
    STATE_MARKER,
    _invalid,
    _key,
    canonical_root,
    check_not_dangerous,
)


def resolve_root(root: str, state_dir: str | os.PathLike[str], *, walk: bool = True) -> str:
    """:func:`canonical_root`, then, for a local root, symbolic links resolved
    and protected places refused: a home directory, and ``state_dir`` (the
    project's state directory, :func:`segment_lineage.lineage.config.state_dir`)
    with the embedded ZooKeeper's data inside, and any ZooKeeper server's data
    directory (marked on disk: inside one, or holding one, with ``walk``).
    Runs where the table is created."""
    canonical = canonical_root(root)
    if "://" in canonical:
        return canonical
    resolved = os.path.realpath(canonical)
    home = os.path.realpath(os.path.expanduser("~"))
    state = os.path.realpath(state_dir)
    check_not_dangerous(
        resolved,
        [("a home directory", home), ("the project's state directory", state)],
        [("the embedded ZooKeeper's data", os.path.join(state, "zookeeper"))],
    )
    if resolved == "/":
        raise _invalid(root, "it resolves to the file system root")
    problem = local_shape_problem(resolved) or state_dir_problem(resolved, walk=walk)
    if problem is not None:
        raise _invalid(root, problem)
    return resolved


NAME_MAX = 255  # bytes in one part of a local path
PATH_MAX = 4095  # bytes in a whole local path


def local_shape_problem(path: str) -> str | None:
    """Why a local folder can never be made at ``path`` (None: it can): a
    part or the whole too long for the file system, or a file where a folder
    must be (the root, or a folder above it)."""
    if any(len(part.encode()) > NAME_MAX for part in path.split("/")):
        return f"a part of it is longer than {NAME_MAX} bytes"
    if len(path.encode()) > PATH_MAX:
        return f"it is longer than {PATH_MAX} bytes"
    current = path
    while not os.path.lexists(current):  # the nearest part that exists must be a folder
        current = os.path.dirname(current)
    if not os.path.isdir(current):
        return f"{current!r} is a file, not a folder"
    return None


# ---- state directories: marked on disk, never scanned ---------------------------

# STATE_MARKER (lineage.core.roots): a ZooKeeper server's data directory.


def marked_above(path: str, seen: dict[str, str | None] | None = None, *, real: bool = False) -> str | None:
    """The nearest folder at or above local ``path`` that holds the state
    marker (None: none does). A few stats, one per level. ``real``: ``path``
    has its links resolved already. ``seen`` keeps the answer of every
    folder looked at (one batch's): a batch of a thousand folders under one
    root looks at each folder above them once, not once per folder."""
    current = path if real else os.path.realpath(path)
    walked: list[str] = []
    found: str | None = None
    while True:
        if seen is not None and current in seen:
            found = seen[current]
            break
        walked.append(current)
        if os.path.isfile(os.path.join(current, STATE_MARKER)):
            found = current
            break
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    if seen is not None:
        seen.update(dict.fromkeys(walked, found))  # each lies at or below what was found
    return found


def state_dir_problem(root: str, *, walk: bool) -> str | None:
    """Why local ``root`` may not be a table's root: it lies inside a marked
    state directory or (``walk``: its tree is walked) holds one. None: fine."""
    where = marked_above(root)
    if where is None and walk:
        where = _marked_below(root)
    if where is None:
        return None
    how = "lies inside" if _key(os.path.realpath(root)).startswith(_key(where)) else "holds"
    return (
        f"it {how} {where!r}, a ZooKeeper server's data directory (its {STATE_MARKER}), which "
        "retention must never scan"
    )


def _marked_below(root: str) -> str | None:
    """The first folder in local ``root``'s tree (links not followed) that
    holds the state marker (None: none does, or ``root`` is no folder)."""
    if not os.path.isdir(root):
        return None
    for folder, dirs, names in os.walk(root, followlinks=False):
        if STATE_MARKER in names:
            return folder
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
    return None


def check_no_state_dir(path: str, root: str, *, walk: bool) -> None:
    """RefusedError (nothing done) when local ``path``, the deep-store root
    ``root`` or a folder under it, lies inside a marked state directory or
    (``walk``) holds one: :func:`state_dir_problem`."""
    problem = state_dir_problem(path, walk=walk)
    if problem is not None:
        what = f"deep-store root {root!r}" if path == root else f"{path!r} under deep-store root {root!r}"
        raise RefusedError(
            f"{what}: {problem}; nothing under it is touched",
            remedy="move the table's data to a root of its own, away from every ZooKeeper server's data",
        )


# ---- claims: whose a root is, written where the root lives ---------------------

CLAIM_FILE = ".segment-lineage-root.json"  # a dot name: no location can name it, no push writes it


class ClaimFiles(Protocol):
    """Reads and writes the claim marker under a root (deep storage)."""

    def read_claim(self, root: str) -> bytes | None:
        """The marker's bytes, or None when the root has none."""
        ...

    def write_claim(self, root: str, data: bytes, *, exclusive: bool = False) -> bool:
        """Write the marker; with ``exclusive``, only if there is none (False
        when one appeared meanwhile; object stores cannot promise that)."""
        ...

    def remove_claim(self, root: str) -> None: ...

    def claims_around(self, root: str) -> list[str]:
        """The roots, other than ``root``, that hold a marker and lie above
        ``root`` or below it (another table's root, perhaps of another store)."""
        ...

    def first_entry(self, root: str) -> str | None:
        """A file or folder directly under ``root`` other than the marker (None: it
        holds nothing else, or does not exist): one listing, not a walk."""
        ...


@dataclass(frozen=True)
class Claim:
    store: str  # the id of the store (ZooKeeper ensemble and chroot) the table lives in
    table: str


def read_claim(files: ClaimFiles, root: str) -> Claim | None:
    raw = files.read_claim(root)
    if raw is None:
        return None
    try:
        store, table = codec.decode_claim(raw, f"{root}/{CLAIM_FILE}")
    except CorruptRecordError:
        raise RefusedError(
            f"the claim marker {CLAIM_FILE} under {root!r} is unreadable; nothing under that root is touched",
            remedy="look at the file: restore it, or remove it and run 'lineage table claim TABLE'",
        ) from None
    return Claim(store, table)


def check_no_claim_around(
    files: ClaimFiles, table: str, root: str, holds: Callable[[Claim, str], bool]
) -> None:
    """Refuse a root above or below another claimed root. The registry of
    roots knows only this store's tables, and only as they were spelled:
    a marker in deep storage also speaks for other stores, and for roots
    whose parent moved behind a link. ``holds(claim, where)`` tells a claim
    that still holds from a stale one (a dropped table of this store)."""
    for other in files.claims_around(root):
        claim = read_claim(files, other)
        if claim is None or not holds(claim, other):
            continue
        how = "holds" if _key(other).startswith(_key(root)) else "lies inside"
        raise RefusedError(
            f"deep-store root {root!r} {how} {other!r}, claimed by table {claim.table!r} of store "
            f"{claim.store} (its {CLAIM_FILE}); retention would take one table's files for the other's "
            "orphans",
            table=table,
            expected="a root with no claimed root above or below it",
            found=other,
            remedy="give the table a root of its own, beside the others; if that table is gone for good "
            f"and nothing of it remains there, remove {other}/{CLAIM_FILE}",
        )


def check_claim(claim: Claim | None, store_id: str, table: str, root: str, *, live: bool) -> None:
    """Refuse a root whose marker names another store, or another table of
    this store that still has this root (``live``)."""
    if claim is None or claim == Claim(store_id, table):
        return
    if claim.store != store_id:
        raise RefusedError(
            f"deep-store root {root!r} is claimed by table {claim.table!r} of another lineage store "
            f"({claim.store}): its retention would take this table's files, or the other way round",
            table=table,
            expected=f"no claim, or store {store_id}",
            found=claim.store,
            remedy=f"check --zk / LINEAGE_ZK: is this the ensemble the table lives in? If that store is "
            f"gone for good and nothing of it remains under the root, remove {root}/{CLAIM_FILE}",
        )
    if live:
        raise RefusedError(
            f"deep-store root {root!r} is claimed by table {claim.table!r}",
            table=table,
            expected=f"no claim, or table {table!r}",
            found=claim.table,
            remedy="give the table a root of its own",
        )
