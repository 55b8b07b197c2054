"""A table's records looked up by another key, pure: segments by casefolded
name and by casefolded location, pending deletions by casefolded location
(the twin and location checks of a register and a start).

Built once for a map and kept with it (``indexes`` of a bucket map or of a
change's copy). A change's copy (``buckets.Edited``) gets its look-up from
its base's and the keys it touched, and a bucket map written from such a
copy (``same_as``) from the copy's: a one-row push on a table of 100,000
segments costs what it touches, not a pass over the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from segment_lineage.lineage.core.buckets import BucketMap, Edited

Entries = Callable[[str, Any], Iterable[tuple[str, Any]]]  # (map key, record) -> (look-up key, value)
Whole = Callable[[Mapping[str, Any]], dict[str, Any]]  # the whole map's look-up, built at once

_REMOVED = object()
FLATTEN_AT = 256  # changes kept beside the root before they are folded into a new root


class Lookup:
    """A look-up: a root dict built once, and the changes since (a few), so
    deriving a changed map's look-up costs the change. Frozen once built."""

    __slots__ = ("_changes", "_root")

    def __init__(self, root: dict[str, Any], changes: dict[str, Any]) -> None:
        self._root, self._changes = root, changes

    def get(self, key: str, default: Any = None) -> Any:
        changes = self._changes
        if changes and key in changes:
            value = changes[key]
            return default if value is _REMOVED else value
        return self._root.get(key, default)

    def derived(self, edited: Edited[Any], base: Mapping[str, Any], entries: Entries) -> Lookup:
        """The look-up of ``edited``, this being that of its ``base``."""
        changed = edited.differing(base)
        changes = dict(self._changes)
        gone = _REMOVED  # also what "not there" looks like here: no record is it
        for key in changed:  # what the old records held goes first: a location may pass to another
            old = base.get(key, gone)
            if old is not gone:
                for at, value in entries(key, old):
                    if self.get(at, gone) == value:  # not another record's (a twin's, say)
                        changes[at] = _REMOVED
        for key in changed:
            new = edited.get(key, gone)
            if new is not gone:
                changes.update(entries(key, new))
        if len(changes) <= max(FLATTEN_AT, len(self._root) >> 4):
            return Lookup(self._root, changes)
        root = dict(self._root)
        for at, value in changes.items():
            if value is _REMOVED:
                root.pop(at, None)
            else:
                root[at] = value
        return Lookup(root, {})


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
        # Served by the copy it was written from, for every look-up that
        # derives cheaply there; then the copy may go.
        copy, records.same_as = records.same_as, None
        for other in WAYS:
            if other != name and other not in records.indexes and _kept(copy, other):
                records.indexes[other] = lookup(copy, other)
        found = lookup(copy, name)
    if found is None:
        found = Lookup(whole(records), {})
    if cache is not None:
        cache[name] = found
    return found


def _kept(records: Mapping[str, Any], name: str) -> bool:
    """Whether the look-up is kept with ``records``, or derives from one kept."""
    if name in getattr(records, "indexes", {}):
        return True
    if isinstance(records, Edited):
        base = records.base
        return base is not None and _kept(base, name)
    return isinstance(records, BucketMap) and records.same_as is not None and _kept(records.same_as, name)


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
    """Casefolded segment name -> the name as registered."""
    return lookup(segments, "names")


def locations_folded(segments: Mapping[str, Any]) -> Lookup:
    """Casefolded location of a registered segment -> the segment's name."""
    return lookup(segments, "locations")


def queued_folded(pending: Mapping[str, Any]) -> Lookup:
    """Casefolded location queued for deletion -> its pending record."""
    return lookup(pending, "queued")
