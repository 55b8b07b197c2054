"""A change's copy of a map says what it touched, and look-ups by another key
derive from the base's: whatever is computed from them must be what a pass
over the whole map gives (the bucket diff, the keys added or removed, the
casefolded names and locations), after any edits, chained copies and
versions written from copies. And a register on a big table written by this
client builds no look-up from scratch."""

from __future__ import annotations

import copy
import pickle
import random
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from segment_lineage.lineage.core import lookups
from segment_lineage.lineage.core.bucket_maps import BucketMap, Edited, changed_keys, editable
from segment_lineage.lineage.core.buckets import _dirty
from segment_lineage.lineage.core.lookups import locations_folded, names_folded, queued_folded
from tests.lineage.zk.test_bucket_map import laid_out


@dataclass(frozen=True)
class Seg:
    location: str


def _edit(rng: random.Random, records: Edited[Seg], pool: list[str]) -> None:
    """A few random edits of every kind a transition makes. Case twins of
    names and of locations are made too (a table may hold some, written
    before a rule refused them): look-ups keep every twin. A location may
    pass from a segment removed to another in one change."""
    for _ in range(rng.randint(0, 6)):
        key = rng.choice(pool)
        how = rng.randrange(8)
        if how == 0 and key in records:
            records[key] = Seg(f"LOC/{key}/{rng.randrange(10**6)}")  # moved elsewhere
        elif how == 1:
            records.pop(key, None)
        elif how == 2 and key in records:
            del records[key]
        elif how == 3:
            records.setdefault(key, Seg(f"loc/{key}/{rng.randrange(10**6)}"))
        elif how == 4:
            other = rng.choice(pool)
            records.update({key: Seg(f"loc/{key}/{rng.randrange(10**6)}"), other: Seg(f"x/{other}")})
        elif how == 5 and key in records:
            records[key] = records[key]  # the same object again: no difference
        elif how == 6 and key in records:
            other = rng.choice([k for k in pool if k not in records] or [key])
            records |= {other: Seg(records.pop(key).location.upper())}  # its location, to another
        elif how == 7 and records:
            other = rng.choice(sorted(records))
            records[key] = Seg(rng.choice([str.upper, str.lower])(records[other].location))  # a twin's


Grouped = dict[str, tuple[object, ...]]


def _grouped(pairs: list[tuple[str, object]]) -> Grouped:
    out: dict[str, list[object]] = {}
    for at, value in pairs:
        out.setdefault(at, []).append(value)
    return {at: tuple(sorted(values, key=repr)) for at, values in out.items()}


def _full(records: dict[str, Seg]) -> tuple[Grouped, Grouped, Grouped]:
    names = _grouped([(key.casefold(), key) for key in records])
    locations = _grouped([(seg.location.casefold(), key) for key, seg in records.items()])
    queued = _grouped([(key.casefold(), seg) for key, seg in records.items()])
    return names, locations, queued


def _looked_up(records: dict[str, Seg], keys: set[str]) -> tuple[Grouped, Grouped, Grouped]:
    found = names_folded(records), locations_folded(records), queued_folded(records)
    return tuple(  # type: ignore[return-value]
        {k: tuple(sorted(v, key=repr)) for k in keys if (v := lookup.all(k))} for lookup in found
    )


@pytest.mark.parametrize("seed", range(40))
def test_tracked_copies_and_derived_look_ups_agree_with_whole_map_passes(seed: int) -> None:
    rng = random.Random(seed)
    pool = [f"s{i}" for i in range(30)] + [f"S{i}" for i in range(6)]  # names' case twins too
    start = {key: Seg(f"loc/{key}") for key in rng.sample(pool, 12)}
    base = laid_out(start, 4) if seed % 2 else dict(start)  # type: ignore[arg-type]
    names_folded(base), locations_folded(base), queued_folded(base)  # kept with the base
    current: object = base
    for _ in range(8):
        records = editable(current)  # type: ignore[arg-type]
        _edit(rng, records, pool)
        if rng.random() < 0.5:  # looked up halfway through a change, as a transition's checks may
            names_folded(records), locations_folded(records)
            _edit(rng, records, pool)
        plain = dict(records)
        old = dict(current.items()) if isinstance(current, BucketMap) else dict(current)  # type: ignore[attr-defined]
        keys = {k.casefold() for k in pool} | {
            s.location.casefold() for s in (*plain.values(), *old.values())
        }
        # What a pass over the whole map gives, compared with the tracked answers.
        assert changed_keys(current, records) == set(old) ^ set(plain)  # type: ignore[arg-type]
        assert changed_keys(records, current) == set(old) ^ set(plain)  # type: ignore[arg-type]
        if records.base is current:
            assert _dirty(current, records, 8) == _dirty(old, plain, 8)  # type: ignore[arg-type]
        wanted = _full(plain)
        got = _looked_up(records, keys)
        assert got == tuple({k: v for k, v in part.items() if k in keys} for part in wanted)
        current = records if rng.random() < 0.7 else laid_out(plain, 4)  # type: ignore[arg-type]
        if isinstance(current, BucketMap) and rng.random() < 0.5:
            current.same_as = records  # written from the copy: its look-ups serve


def test_copies_written_back_and_forth_between_two_versions_look_up_without_end() -> None:
    """Two versions each written from a copy of the other (a rollback back
    to a version whose blobs a client still holds): the chain of copies and
    bases comes back on itself. A version written from a copy of either
    (the next push) is looked up all the same (two clients on one table, a
    staged push published, a rollback, a pass and a push met a RecursionError)."""
    one = laid_out({"a": Seg("loc/a"), "b": Seg("loc/b")}, 2)
    two = laid_out({"a": Seg("loc/a"), "b": Seg("loc/b"), "c": Seg("loc/C")}, 2)
    to_two, to_one = editable(one), editable(two)
    to_two["c"] = Seg("loc/C")
    del to_one["c"]
    two.same_as, one.same_as = to_two, to_one  # each written from a copy of the other
    after = editable(one)
    after["d"] = Seg("loc/d")
    newest = laid_out(dict(after), 2)
    newest.same_as = after  # the next push, written from a copy of one
    keys = {"a", "b", "c", "d", "loc/a", "loc/b", "loc/c", "loc/d"}
    assert not lookups._kept(newest, "names")  # no look-up kept anywhere on the way
    assert _looked_up(newest, keys) == tuple(
        {k: v for k, v in part.items() if k in keys} for part in _full(dict(after))
    )


def test_a_tracked_copy_pickles_and_copies_as_a_plain_dict() -> None:
    records = editable({"a": 1})
    records["b"] = 2
    for twin in (pickle.loads(pickle.dumps(records)), copy.copy(records), copy.deepcopy(records)):
        assert type(twin) is dict and twin == {"a": 1, "b": 2}
    assert records.touched == {"b": None}


def test_a_bucket_map_pickles_and_copies_as_a_plain_dict_of_its_records() -> None:
    """As a change's copy does: an outside trial could not pickle a table
    read from ZooKeeper (its loader is a local function), and a copy was a
    map that shared its dicts with the store's."""
    records = {f"k{i}": i for i in range(50)}
    mapped = laid_out(records, 4)
    for twin in (pickle.loads(pickle.dumps(mapped)), copy.copy(mapped), copy.deepcopy(mapped)):
        assert type(twin) is dict and twin == records
        twin["extra"] = 1  # the copy is the caller's own
    assert "extra" not in mapped and dict(mapped) == records


def test_a_copy_past_its_tracked_keys_starts_again_from_itself() -> None:
    records = editable({})
    for i in range(Edited.TRACKED):
        records[f"k{i}"] = i
    again = editable(records)
    assert again.base is records and not again.touched


def test_a_one_row_push_on_a_table_this_client_wrote_builds_no_look_up_anew(
    zk_hosts: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first register builds the look-ups; each later push derives its
    from what the last commit's change built, and copies the change's dict
    instead of gathering the new version's buckets into one (a one-row push
    on a big table costs what it touches, and a copy at C speed)."""
    from segment_lineage.lineage.core.model import Segment, TableConfig
    from segment_lineage.lineage.manager import LineageManager
    from segment_lineage.lineage.zk.client import ZkSettings, connect
    from segment_lineage.lineage.zk.store import ZkStore
    from tests.conftest import fast_retry

    built: list[str] = []
    ways = {
        name: (entries, lambda r, name=name, whole=whole: built.append(name) or whole(r))
        for name, (entries, whole) in lookups.WAYS.items()
    }
    monkeypatch.setattr(lookups, "WAYS", ways)
    gathered: list[BucketMap[object]] = []
    flat = BucketMap.flat

    def counted(self: BucketMap[object]) -> dict[str, object]:
        built = self._flat is None
        records = flat(self)
        if built and any(isinstance(r, Segment) for r in records.values()):  # entries load whole
            gathered.append(self)
        return records

    monkeypatch.setattr(BucketMap, "flat", counted)
    store = ZkStore(connect(ZkSettings(hosts=zk_hosts)))
    try:
        m = LineageManager(store, retry=fast_retry())
        m.create_table(TableConfig.build("t", str(tmp_path / "t"), "APPEND"))
        m.register_segments("t", [Segment(f"s{i}", f"s{i}.parquet", rows=1) for i in range(50)])
        assert built  # the first register on the table: from the whole map
        built.clear()
        m.start_replace("t", [], ["w"])  # the first change after it: its version's buckets gathered once
        gathered.clear()
        for i in range(5):
            entry = m.start_replace("t", [], [f"x{i}"])
            m.complete_replace("t", entry, [Segment(f"x{i}", f"x{i}.parquet", rows=1)])
        assert not built, built
        assert not gathered, gathered
        assert sorted(s.name for s in m.visible_segments("t")) == sorted(
            [f"s{i}" for i in range(50)] + [f"x{i}" for i in range(5)]
        )
    finally:
        store.close()


# ---- case twins already in a table: the rules see every one ---------------------------


def _table(segments: dict[str, Any], pending: dict[str, Any]) -> Any:
    from segment_lineage.lineage.core.model import TableConfig, TableState

    return TableState(TableConfig.build("t", "/t", "APPEND"), 2, segments, {}, pending)


def test_a_batch_whose_locations_differ_only_in_case_is_refused() -> None:
    """As a segment's location against the table's: one batch cannot make two
    segments whose locations a look-up folds together."""
    from segment_lineage.lineage.core import transitions
    from segment_lineage.lineage.core.errors import InvalidInputError
    from segment_lineage.lineage.core.model import Segment

    batch = [Segment("A", "x.parquet", rows=1), Segment("B", "X.parquet", rows=1)]
    with pytest.raises(InvalidInputError, match=r"'x\.parquet' and 'X\.parquet', alike but for case"):
        transitions.register_segments(_table({}, {}), batch, 5)


@pytest.mark.parametrize("derived", [False, True], ids=["built", "derived"])
@pytest.mark.parametrize("orphan_first", [False, True], ids=["condemned-first", "orphan-first"])
def test_a_location_condemned_is_refused_whatever_twin_only_seen_as_an_orphan_is_beside_it(
    orphan_first: bool, derived: bool
) -> None:
    """A location queued for deletion and a case twin of it retention only saw
    unreferenced (which does not condemn): a new segment there is refused,
    whichever record came first, in a look-up built whole or derived from a
    change (a long-lived writer's, which must agree with a fresh one)."""
    from segment_lineage.lineage.core import transitions
    from segment_lineage.lineage.core.errors import RefusedError
    from segment_lineage.lineage.core.model import DeletionReason, PendingDeletion, Segment

    condemned = PendingDeletion("A.parquet", "S", DeletionReason.DELETED, 1)
    orphan = PendingDeletion("a.parquet", "file", DeletionReason.ORPHAN_SEEN, 2)
    records = [orphan, condemned] if orphan_first else [condemned, orphan]
    pending: dict[str, Any] = {}
    if derived:  # the first record was there, the second came with the last change
        pending = {records[0].location: records[0]}
        queued_folded(pending)
        pending = editable(pending)
        pending[records[1].location] = records[1]
    else:
        pending = {p.location: p for p in records}
    state = _table({}, pending)
    with pytest.raises(RefusedError, match=r"queued for deletion \(it held segment 'S'\)"):
        transitions.register_segments(state, [Segment("N", "A.parquet", rows=1)], 5)


def test_removing_one_of_two_location_twins_leaves_the_other_in_the_look_up() -> None:
    """The outside trial's case: segments at x.parquet and X.parquet (written
    before the batch rule), one removed by a change: the look-up derived for
    that change still finds the other, as a whole pass does."""
    from segment_lineage.lineage.core import transitions
    from segment_lineage.lineage.core.errors import RefusedError
    from segment_lineage.lineage.core.model import Segment

    segments = {"A": Segment("A", "x.parquet", rows=1), "B": Segment("B", "X.parquet", rows=1)}
    locations_folded(segments)  # kept with the version: the change derives from it
    after = editable(segments)
    del after["B"]
    assert locations_folded(after).all("x.parquet") == ("A",)
    with pytest.raises(RefusedError, match="used by segment 'A'"):
        transitions.register_segments(_table(after, {}), [Segment("C", "x.parquet", rows=1)], 5)


def test_a_committed_versions_records_are_frozen() -> None:
    """What a commit hands back is the version the store keeps (and its
    look-ups): editing it is refused, and changes nothing."""
    from segment_lineage.lineage.core.errors import RefusedError
    from segment_lineage.lineage.core.model import Segment, TableConfig
    from segment_lineage.lineage.manager import LineageManager
    from segment_lineage.lineage.store.memory import MemoryStore

    m = LineageManager(MemoryStore())
    m.create_table(TableConfig.build("t", "/t", "APPEND"))
    m.register_segments("t", [Segment("Alpha", "alpha.parquet", rows=1)])
    done = m.register_segments("t", [Segment("Beta", "beta.parquet", rows=1)])
    segments = cast("dict[str, Segment]", done.state.segments)
    for edit in (
        lambda: segments.pop("Alpha"),
        lambda: segments.__delitem__("Alpha"),
        lambda: segments.__setitem__("Gamma", segments["Alpha"]),
        segments.popitem,
        segments.clear,
        lambda: segments.update({"Gamma": segments["Alpha"]}),
        lambda: segments.setdefault("Gamma", segments["Alpha"]),
    ):
        with pytest.raises(TypeError, match="frozen"):
            edit()
    assert sorted(segments) == ["Alpha", "Beta"]
    with pytest.raises(RefusedError, match="differs only in case from 'Alpha'"):
        m.register_segments("t", [Segment("ALPHA", "y.parquet", rows=1)])


def test_a_start_that_cleans_nothing_up_copies_no_map() -> None:
    """A push's start on a big table leaves its segments and pending
    deletions as they are (no copy) unless force cleanup takes an entry or a
    refresh trims old snapshots; then it edits copies."""
    from segment_lineage.lineage.core import transitions
    from segment_lineage.lineage.core.model import Audit, Segment

    segments = {f"s{i}": Segment(f"s{i}", f"s{i}.parquet", rows=1) for i in range(5)}
    state = _table(segments, {})
    audit = Audit("tester")
    first = transitions.start_replace(
        state, [], ["n1"], entry_id=str(uuid.uuid4()), audit=audit, now_ms=5, force_cleanup=True
    ).state
    assert first.segments is state.segments and first.pending is state.pending
    # A dead push's entry (no live owner) that this start cleans up: its maps are copies.
    registered = transitions.register_segments(first, [Segment("n1", "n1.parquet", rows=1)], 6).state
    second = transitions.start_replace(
        registered,
        [],
        ["n2"],
        entry_id=str(uuid.uuid4()),
        audit=audit,
        now_ms=7,
        force_cleanup=True,
        live_owners=frozenset(),
    )
    assert second.cleaned and second.state.segments is not registered.segments
    assert "n1" not in second.state.segments and "n1.parquet" in second.state.pending
