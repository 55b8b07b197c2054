"""A table's records looked up by another key, pure: segments by casefolded
name and by casefolded location, pending deletions by casefolded location
(the twin and location checks of a register and a start).

Built once for a map and kept with it (``indexes`` of a bucket map or of a
change's copy). A change's copy (``bucket_maps.Edited``) gets its look-up from
its base's and the keys it touched, and a bucket map written from such a
copy (``same_as``) from the copy's: a one-row push on a table of 100,000
segments costs what it touches, not a pass over the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from segment_lineage.lineage.core.bucket_maps import BucketMap, Edited

Entries = Callable[[str, Any], Iterable[tuple[str, Any]]]  # (map key, record) -> (look-up key, value)
Whole = Callable[[Mapping[str, Any]], dict[str, Any]]  # the whole map's look-up at dict speed, none shared

_REMOVED = object()
FLATTEN_AT = 256  # changes kept beside the root before they are folded into a new root


class Twins(tuple[Any, ...]):
    """Several values under one look-up key (case twins: a table's records
    may hold some, written before a rule refused them or allowed by one)."""

    __slots__ = ()


def _with(found: Any, value: Any) -> Any:
    """``found`` (one value, Twins, or _REMOVED: none) with ``value`` added."""
    if found is _REMOVED:
        return value
    return Twins((*found, value)) if type(found) is Twins else Twins((found, value))


def _without(found: Any, value: Any) -> Any:
    """``found`` without one value equal to ``value`` (_REMOVED once none is left)."""
    if type(found) is not Twins:
        return _REMOVED if found is _REMOVED or found == value else found
    left = list(found)
    for i, other in enumerate(left):
        if other == value:
            del left[i]
            break
    return left[0] if len(left) == 1 else Twins(left)


class Lookup:
    """A look-up: a root dict built once, and the changes since (a few), so
    deriving a changed map's look-up costs the change. Every value under a
    key is kept (:meth:`all`): removing one twin leaves the others. Frozen
    once built."""

    __slots__ = ("_changes", "_root")

    def __init__(self, root: dict[str, Any], changes: dict[str, Any]) -> None:
        self._root, self._changes = root, changes

    def _get(self, key: str) -> Any:
        changes = self._changes
        if changes and key in changes:
            return changes[key]
        return self._root.get(key, _REMOVED)

    def all(self, key: str) -> tuple[Any, ...]:
        """Every value under ``key`` (none, one, or case twins)."""
        found = self._get(key)
        if found is _REMOVED:
            return ()
        return found if type(found) is Twins else (found,)

    def derived(self, edited: Edited[Any], base: Mapping[str, Any], entries: Entries) -> Lookup:
        """The look-up of ``edited``, this being that of its ``base``."""
        changed = edited.differing(base)
        changes = dict(self._changes)

        def now(at: str) -> Any:
            return changes[at] if at in changes else self._root.get(at, _REMOVED)

        gone = _REMOVED  # also what "not there" looks like here: no record is it
        for key in changed:  # what the old records held goes first: a location may pass to another
            old = base.get(key, gone)
            if old is not gone:
                for at, value in entries(key, old):
                    changes[at] = _without(now(at), value)
        for key in changed:
            new = edited.get(key, gone)
            if new is not gone:
                for at, value in entries(key, new):
                    changes[at] = _with(now(at), value)
        if len(changes) <= max(FLATTEN_AT, len(self._root) >> 4):
            return Lookup(self._root, changes)
        return Lookup(_flattened(self._root, changes), {})


def _flattened(root: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``root`` with ``changes`` made in it (a value removed where one says so)."""
    out = dict(root)
    for at, value in changes.items():
        if value is _REMOVED:
            out.pop(at, None)
        else:
            out[at] = value
    return out


def _whole(records: Mapping[str, Any], entries: Entries, fast: Whole) -> dict[str, Any]:
    """The whole map's look-up: at dict speed (``fast``) when no two records
    share a key, else value by value, twins kept."""
    root = fast(records)
    if len(root) == len(records):  # one key per record, none shared
        return root
    root = {}
    for key, record in records.items():
        for at, value in entries(key, record):
            root[at] = _with(root.get(at, _REMOVED), value)
    return root


def lookup(records: Mapping[str, Any], name: str) -> Lookup:
    """``records`` looked up the way ``name`` says (one of WAYS), kept with
    a map that can keep it."""
    cache: dict[str, Any] | None = getattr(records, "indexes", None)
    if cache is not None and name in cache:
        return cache[name]  # type: ignore[no-any-return]
    entries, whole = WAYS[name]
    found: Lookup | None = None
    if isinstance(records, Edited):
        base = records.base
        if base is not None:
            found = lookup(base, name).derived(records, base, entries)
    elif isinstance(records, BucketMap) and records.same_as is not None:
        found = _from_copy(records, records.same_as, name)
    if found is None:
        found = Lookup(_whole(records, entries, whole), {})
    if cache is not None:
        cache[name] = found
    return found


def _from_copy(records: BucketMap[Any], copy: Mapping[str, Any], name: str) -> Lookup:
    """A bucket map's look-up, served by the copy it was written from, as is
    every other look-up that derives cheaply there; then the copy may go."""
    records.same_as = None
    for other in WAYS:
        if other != name and other not in records.indexes and _kept(copy, other):
            records.indexes[other] = lookup(copy, other)
    return lookup(copy, name)


def _kept(records: Mapping[str, Any], name: str) -> bool:
    """Whether the look-up is kept with ``records``, or derives from one kept
    (through the copies' bases and the copies maps were written from). The
    chain may come back to a map it passed (a version rolled back to was
    written from a copy of a later one): it ends there."""
    seen: set[int] = set()
    current: Mapping[str, Any] | None = records
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if name in getattr(current, "indexes", {}):
            return True
        if isinstance(current, Edited):
            current = current.base
        elif isinstance(current, BucketMap):
            current = current.same_as
        else:
            return False
    return False


def _name(key: str, _record: Any) -> tuple[tuple[str, str]]:
    return ((key.casefold(), key),)


def _location(key: str, record: Any) -> tuple[tuple[str, str]]:
    return ((record.location.casefold(), key),)


def _queued(key: str, record: Any) -> tuple[tuple[str, Any]]:
    return ((key.casefold(), record),)


WAYS: dict[str, tuple[Entries, Whole]] = {
    "names": (_name, lambda r: {key.casefold(): key for key in r}),
    "locations": (_location, lambda r: {seg.location.casefold(): key for key, seg in r.items()}),
    "queued": (_queued, lambda r: {key.casefold(): p for key, p in r.items()}),
}


def names_folded(segments: Mapping[str, Any]) -> Lookup:
    """Casefolded segment name -> the names registered so (``Lookup.all``)."""
    return lookup(segments, "names")


def locations_folded(segments: Mapping[str, Any]) -> Lookup:
    """Casefolded location of registered segments -> their names."""
    return lookup(segments, "locations")


def queued_folded(pending: Mapping[str, Any]) -> Lookup:
    """Casefolded location queued for deletion -> the pending records there."""
    return lookup(pending, "queued")
