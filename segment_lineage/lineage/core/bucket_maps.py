"""Maps laid out in hash buckets, pure: which bucket a key lives in
(:func:`bucket_of`); a version's map loaded a bucket at a time
(:class:`BucketMap`); a change's copy of a map that remembers what it
touched (:class:`Edited`, from :func:`editable`), so a commit rewrites only
those buckets (:mod:`segment_lineage.lineage.core.buckets` decides which)."""

from __future__ import annotations

import copy
import itertools
import operator
import weakref
import zlib
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, Sequence, ValuesView
from typing import Any, Self, TypeVar

V = TypeVar("V")


def bucket_of(key: str, buckets: int) -> int:
    return zlib.crc32(key.encode()) & (buckets - 1)


def placed(keys: Sequence[str], index: int, buckets: int) -> bool:
    """Whether every one of ``keys`` belongs in bucket ``index``: :func:`bucket_of`
    of each, in C's loops (a fresh read of 100,000 segments checks them all)."""
    if not keys:
        return True
    crcs = map(zlib.crc32, map(str.encode, keys))
    return set(map(operator.and_, crcs, itertools.repeat(buckets - 1))) == {index}


LoadBuckets = Callable[[Sequence[int]], Mapping[int, Sequence[tuple[str, V]]]]


class LazyPairs(Sequence[tuple[str, V]]):
    """A bucket's (key, record) pairs whose records are built the first time
    one is wanted (``build``, which returns them in the keys' order). Its
    keys, and the fields held beside them (``fields``: a field's values in
    the keys' order), are read without building any: a whole-table read of
    names and locations makes no object per record. Thread-safe: two
    threads building at once build equal records, and either list serves."""

    # Not ``keys``: dict(pairs) and dict.update would take it for a mapping's.
    __slots__ = ("_build", "_pairs", "fields", "key_list")

    def __init__(
        self, keys: Sequence[str], fields: Mapping[str, Sequence[Any]], build: Callable[[], Sequence[V]]
    ):
        self.key_list = keys
        self.fields = fields
        self._build: Callable[[], Sequence[V]] | None = build
        self._pairs: tuple[tuple[str, V], ...] | None = None

    def built(self) -> tuple[tuple[str, V], ...]:
        pairs = self._pairs
        if pairs is None:
            build = self._build
            if build is None:  # another thread built them meanwhile (it set the pairs first)
                return self._pairs or ()
            pairs = tuple(zip(self.key_list, build(), strict=True))
            self._pairs = pairs
            self._build = None  # what it built from can go
        return pairs

    def __len__(self) -> int:
        return len(self.key_list)

    def __getitem__(self, index: Any) -> Any:
        return self.built()[index]

    def __iter__(self) -> Iterator[tuple[str, V]]:
        return iter(self.built())


def keys_and_field(pairs: Sequence[tuple[str, V]], field: str) -> tuple[Sequence[str], Sequence[Any]]:
    """A bucket's keys and one field of its records, side by side (from a
    lazy bucket's columns when it holds that field, building nothing)."""
    if isinstance(pairs, LazyPairs) and field in pairs.fields:
        return pairs.key_list, pairs.fields[field]
    return [key for key, _ in pairs], [getattr(record, field) for _, record in pairs]


class BucketMap(Mapping[str, V]):
    """An immutable map laid out in buckets (``bucket_of``), each loaded the
    first time a key of it is wanted, so a look-up costs one bucket.

    ``ids`` names the buckets' contents (the store's blob ids): two maps with
    the same id at a place hold the same records there, so ``changed_keys``
    compares only the buckets whose ids differ. ``load(indexes)`` returns
    each asked bucket's (key, record) pairs, in their stored order; several
    buckets wanted at once (iteration, a diff) are loaded in one call.
    Thread-safe: a bucket loaded twice at once is the same content.
    """

    __slots__ = ("__weakref__", "_dicts", "_flat", "_load", "_pairs", "ids", "indexes", "same_as")

    def __init__(self, ids: Sequence[str], load: LoadBuckets[V]) -> None:
        if not ids or len(ids) & (len(ids) - 1):
            raise ValueError(f"bucket count {len(ids)} is not a power of two")
        self.ids: tuple[str, ...] = tuple(ids)
        self._load = load
        self._pairs: list[Sequence[tuple[str, V]] | None] = [None] * len(self.ids)  # as loaded
        self._dicts: list[dict[str, V] | None] = [None] * len(self.ids)  # built for look-ups
        self._flat: dict[str, V] | None = None  # every record, once all were wanted
        self.indexes: dict[str, Any] = {}  # look-ups by another key, built when wanted (core.lookups)
        # A map known to hold the same records (a commit's copy it was written
        # from): its look-ups serve this one's (core.lookups).
        self.same_as: Mapping[str, V] | None = None

    @property
    def count(self) -> int:
        return len(self.ids)

    def _fetch(self, indexes: Sequence[int]) -> None:
        pairs = self._pairs
        missing = [i for i in indexes if pairs[i] is None]
        if missing:
            for i, loaded in self._load(missing).items():
                pairs[i] = loaded
        for i in indexes:
            if pairs[i] is None:
                raise LookupError(f"bucket {i} was not loaded")

    def _buckets(self, indexes: Sequence[int]) -> list[dict[str, V]]:
        """The records of each of ``indexes``, loading those not yet loaded in
        one call: this map's own dicts, which serve its look-ups (private: an
        edit there would change the map)."""
        self._fetch(indexes)
        out: list[dict[str, V]] = []
        for i in indexes:
            bucket = self._dicts[i]
            if bucket is None:
                bucket = self._dicts[i] = dict(self._pairs[i] or ())
            out.append(bucket)
        return out

    def _bucket(self, index: int) -> dict[str, V]:
        bucket = self._dicts[index]
        return bucket if bucket is not None else self._buckets([index])[0]

    def flat(self) -> dict[str, V]:
        """Every record in one dict (loading what is not loaded yet, in one
        call), built once: whole-map work runs at dict speed. Not to be changed."""
        flat = self._flat
        if flat is None:
            self._fetch(range(len(self.ids)))
            flat = {}
            for pairs in self._pairs:
                flat.update(pairs or ())
            self._flat = flat
        return flat

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled or copied, it is a plain dict of its records (as a change's
        # copy is): its loader is the store's, which stays in this process.
        return (dict, (dict(self.flat()),))

    def __copy__(self) -> dict[str, V]:
        return dict(self.flat())

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, V]:
        return copy.deepcopy(dict(self.flat()), memo)

    def known(self, records: dict[str, V]) -> None:
        """Its records, known already as one dict (the change's copy a commit
        wrote it from, which nobody edits once written): kept as the whole-map
        dict when that is not built yet, so a writer's next change copies it
        instead of gathering every bucket again. Iterated in that dict's order."""
        if self._flat is None:
            self._flat = records

    def load_all(self) -> None:
        """Load every bucket not loaded yet (in one call)."""
        self.flat()

    def load_buckets(self, indexes: Iterable[int]) -> None:
        """Load those of ``indexes`` not loaded yet, in one call (a change's
        dirty buckets, before their keys are read one bucket at a time)."""
        self._fetch(sorted(indexes))

    def keys_in(self, index: int) -> list[str]:
        """The keys of one bucket, in their stored order."""
        self._fetch([index])
        pairs = self._pairs[index] or ()
        return list(pairs.key_list) if isinstance(pairs, LazyPairs) else [key for key, _ in pairs]

    def field(self, name: str) -> list[tuple[Sequence[str], Sequence[Any]]]:
        """Per bucket, its keys and the field ``name`` of its records, side by
        side (every bucket not loaded yet loaded in one call): a bucket
        loaded lazily (:class:`LazyPairs`) holding that field builds no
        record. Once every record is in one dict, one pair from it."""
        flat = self._flat
        if flat is not None:
            return [(list(flat), [getattr(record, name) for record in flat.values()])]
        self._fetch(range(len(self.ids)))
        return [keys_and_field(pairs or (), name) for pairs in self._pairs]

    def __getitem__(self, key: str) -> V:
        flat = self._flat
        if flat is not None:
            return flat[key]
        return self._bucket(bucket_of(key, len(self.ids)))[key]

    def __contains__(self, key: object) -> bool:
        flat = self._flat
        if flat is not None:
            return key in flat
        return isinstance(key, str) and key in self._bucket(bucket_of(key, len(self.ids)))

    def get(self, key: str, default: Any = None) -> Any:
        flat = self._flat
        if flat is not None:
            return flat.get(key, default)
        return self._bucket(bucket_of(key, len(self.ids))).get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self.flat())

    def __len__(self) -> int:
        return len(self.flat())

    def keys(self) -> KeysView[str]:
        return self.flat().keys()

    def items(self) -> ItemsView[str, V]:
        return self.flat().items()

    def values(self) -> ValuesView[V]:
        return self.flat().values()

    def __repr__(self) -> str:
        return f"BucketMap({len(self.ids)} buckets)"


_GONE = object()


class Edited(dict[str, V]):
    """A change's copy of a map (:func:`editable`): a dict that remembers
    the map it was copied from (``base``, never changed itself: maps are
    frozen data) and every key set or removed since (``touched``), so a
    comparison with ``base`` looks at those keys only. A copy of a copy
    keeps the first base and adds to its keys, up to TRACKED keys; past
    them it starts again from itself. The keys are kept in the order first
    touched (a dict), so what is derived from them does not hang on the
    hash seed. The base is held weakly where it can be (it keeps no chain
    of old maps alive; gone, comparisons look at every key). Look-ups by
    another key are kept in ``indexes`` (core.lookups). Pickled or copied,
    it is a plain dict."""

    __slots__ = ("__weakref__", "_base", "_frozen", "indexes", "touched")
    TRACKED = 4096
    touched: dict[str, None]
    indexes: dict[str, Any]

    def __init__(self, base: Mapping[str, V], items: Mapping[str, V], touched: dict[str, None]) -> None:
        super().__init__(items)
        self.touched, self.indexes, self._frozen = touched, {}, False
        self._base: Mapping[str, V] | weakref.ref[Mapping[str, V]] | None
        try:
            self._base = weakref.ref(base)
        except TypeError:  # a plain dict: held as it is
            self._base = base

    @property
    def base(self) -> Mapping[str, V] | None:
        """The map this one was copied from (None: none, or no longer in memory)."""
        base = self._base
        return base() if isinstance(base, weakref.ref) else base

    def differing(self, base: Mapping[str, object]) -> list[str]:
        """The touched keys whose object differs from ``base``'s (added,
        removed, or another object), ``base`` being this map's base."""
        base_get, get = base.get, self.get
        return [key for key in self.touched if base_get(key, _GONE) is not get(key, _GONE)]

    def freeze(self) -> None:
        """No more edits (TypeError): the copy is a version's records now."""
        self._frozen = True

    def _editable(self) -> None:
        if self._frozen:
            raise TypeError("a committed version's records are frozen; edit a copy (bucket_maps.editable)")

    def _touch(self, key: str) -> None:
        self._editable()
        self.touched[key] = None
        if self.indexes:  # built while it was being edited: stale now
            self.indexes.clear()

    def __setitem__(self, key: str, value: V) -> None:
        self._touch(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._touch(key)
        super().__delitem__(key)

    def pop(self, key: str, *default: Any) -> Any:
        self._touch(key)
        return super().pop(key, *default)

    def popitem(self) -> tuple[str, V]:
        self._editable()
        key = next(reversed(self))  # touched before it goes (a frozen copy refuses)
        self._touch(key)
        return key, super().pop(key)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self._touch(key)
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> Self:  # type: ignore[override,misc]  # in place: an Edited still
        self.update(other)
        return self

    def clear(self) -> None:
        self._editable()  # an empty map's too: frozen is frozen
        for key in list(self):
            self._touch(key)
        super().clear()

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))

    def __copy__(self) -> dict[str, V]:
        return dict(self)


def frozen(records: Mapping[str, V]) -> Mapping[str, V]:
    """``records`` as a version's records, which nobody edits: a change's
    copy frozen where it is (:meth:`Edited.freeze`), a bucket map as it is
    (it has no edits), any other map a frozen copy (a plain dict a
    transition built, or a table's first, empty maps)."""
    if isinstance(records, BucketMap):
        return records
    if not isinstance(records, Edited):
        copy: Edited[V] = Edited({}, records, {})
        copy._base = None  # copied from nothing (a change's copy of it has it as its base)
        records = copy
    records.freeze()
    return records


def copy_of(new: Mapping[str, object], old: Mapping[str, object]) -> Edited[object] | None:
    """``new`` as a change's copy of ``old`` (it names the keys it touched), or None."""
    return new if isinstance(new, Edited) and new.base is old else None


def editable(records: Mapping[str, V]) -> Edited[V]:
    """A dict of ``records`` for a change to edit (:class:`Edited`: it says
    what the change touched). A bucket map's whole-map dict is copied at C
    speed (``dict(bucket_map)`` would call back into Python once per key)."""
    if isinstance(records, Edited) and len(records.touched) < Edited.TRACKED:
        base = records.base
        if base is not None:
            return Edited(base, records, dict(records.touched))
    return Edited(records, records.flat() if isinstance(records, BucketMap) else records, {})


def changed_keys(a: Mapping[str, object], b: Mapping[str, object]) -> set[str]:
    """The keys in one of ``a`` and ``b`` but not in the other. Two bucket maps
    of one layout are compared only where their bucket ids differ, so the
    cost follows what changed between them, not their size."""
    if a is b:
        return set()
    for x, y in ((a, b), (b, a)):
        if (edited := copy_of(y, x)) is not None:  # a change's copy: only its touched keys
            return {key for key in edited.touched if (key in x) != (key in edited)}
    if isinstance(a, BucketMap) and isinstance(b, BucketMap) and a.count == b.count:
        return _changed_in_buckets(a, b)
    return set(a.keys() ^ b.keys())


def _changed_in_buckets(a: BucketMap[object], b: BucketMap[object]) -> set[str]:
    """:func:`changed_keys` of two bucket maps of one count, read only where their bucket ids differ."""
    differ = [i for i in range(a.count) if a.ids[i] != b.ids[i]]
    out: set[str] = set()
    for x, y in zip(a._buckets(differ), b._buckets(differ), strict=True):
        out.update(x.keys() ^ y.keys())
    return out
