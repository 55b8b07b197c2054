"""The ZooKeeper commit as data: what it writes is planned from the base and
the change alone, and what the multi's results mean is classified alone;
neither needs a ZooKeeper server."""

from __future__ import annotations

import dataclasses

import pytest
from kazoo.exceptions import BadVersionError, NoAuthError, NodeExistsError, NoNodeError, RolledBackError

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import ENTRIES, PENDING, SEGMENTS, Head
from segment_lineage.lineage.core.errors import ClaimLostError, TableNotFoundError, TooLargeError
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Audit, Change, Operation, Segment, TableConfig, TableState
from segment_lineage.lineage.store.contract import RetryableStoreError, VersionConflict, WriteOutcomeUnknown
from segment_lineage.lineage.zk.store import commit
from segment_lineage.lineage.zk.store import outcome as zk_outcome
from segment_lineage.lineage.zk.store.loaded import Loaded

KINDS = (SEGMENTS, ENTRIES, PENDING)
AUDIT = Audit("t@h")


def fresh(tail: int = 1) -> Loaded:
    """A table's first version, as a read of its head would load it."""
    config = TableConfig.build("events", "/d")
    records = tuple(
        HistoryRecord(v, f"c{v}", 1_000 + v, Operation.CREATE_TABLE, None, "t@h", None, None, 0, 0, 0)
        for v in range(1, tail + 1)
    )
    head = Head(config, tail, f"c{tail}", {k: (f"b-{k}",) for k in KINDS}, None, records)
    return Loaded(head, 7, {k: {} for k in KINDS}, {k: [[]] for k in KINDS}, {})


def register(loaded: Loaded, *names: str, reason: str | None = None) -> Change:
    base = loaded.state()
    segments = {n: Segment(n, f"{n}.parquet", rows=1) for n in names}
    state = TableState(base.config, base.version, segments, base.entries, base.pending)
    return Change(state, Operation.REGISTER, segments=len(names))


def test_a_small_change_is_planned_inline_with_its_version_record() -> None:
    loaded = fresh()
    plan = commit.plan_commit("events", loaded, register(loaded, "s1"), AUDIT, "c2", 5_000)
    assert plan.inline and not plan.sealed
    assert plan.version == 2 and set(plan.state.segments) == {"s1"}
    head = codec.decode_head(plan.head, "test")
    assert head.version == 2 and head.commit_id == "c2"
    assert head.buckets[ENTRIES] == ("b-entries",)  # untouched kinds keep their buckets
    (segment_bucket,) = head.buckets[SEGMENTS]
    assert set(plan.blobs) == {segment_bucket} and segment_bucket in plan.decoded
    assert [r.version for r in head.history_tail] == [1, 2]
    record = codec.decode_lease(plan.version_record, "test")
    assert record.version == 2 and record.buckets[SEGMENTS] == (segment_bucket,)


def test_a_full_history_tail_is_sealed_into_a_blob() -> None:
    loaded = fresh(tail=commit.HISTORY_TAIL)
    plan = commit.plan_commit("events", loaded, register(loaded, "s1"), AUDIT, "cX", 5_000)
    head = codec.decode_head(plan.head, "test")
    assert plan.sealed and head.history_last in plan.blobs
    assert [r.commit_id for r in head.history_tail] == ["cX"]


def test_a_large_change_writes_its_blobs_before_the_multi() -> None:
    loaded = fresh()
    names = [f"segment-{i:06d}-{'x' * 40}" for i in range(3_000)]
    plan = commit.plan_commit("events", loaded, register(loaded, *names), AUDIT, "c2", 5_000)
    assert not plan.inline


def test_a_head_over_its_limit_is_refused_before_anything_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commit, "HEAD_LIMIT", 100)
    loaded = fresh()
    with pytest.raises(TooLargeError, match="head record"):
        commit.plan_commit("events", loaded, register(loaded, "s1"), AUDIT, "c2", 5_000)


def plan_of(inline: bool = True) -> commit.CommitPlan:
    loaded = fresh()
    plan = commit.plan_commit("events", loaded, register(loaded, "s1"), AUDIT, "c2", 5_000)
    return dataclasses.replace(plan, inline=inline)


OK = [object(), object(), object()]  # head, one blob, the version record


@pytest.mark.parametrize(
    ("results", "floor", "owner", "inline", "error"),
    [
        (OK, False, None, True, None),
        ([BadVersionError(), RolledBackError(), RolledBackError()], False, None, True, VersionConflict),
        ([NoNodeError(), RolledBackError(), RolledBackError()], False, None, True, TableNotFoundError),
        ([RolledBackError(), NodeExistsError(), RolledBackError()], False, None, True, RetryableStoreError),
        ([RolledBackError(), NoNodeError(), RolledBackError()], False, None, False, RetryableStoreError),
        (
            [RolledBackError(), RolledBackError(), RolledBackError(), BadVersionError()],
            True,
            None,
            True,
            VersionConflict,
        ),
        (
            [RolledBackError(), RolledBackError(), RolledBackError(), NoNodeError()],
            False,
            "e1",
            True,
            ClaimLostError,
        ),
        ([NoAuthError(), RolledBackError(), RolledBackError()], False, None, True, Exception),
        ([ConnectionError(), object(), object()], False, None, True, WriteOutcomeUnknown),
    ],
    ids=["applied", "conflict", "dropped", "blob-exists", "blob-gone", "floor", "claim", "auth", "unknown"],
)
def test_the_multis_results_are_classified(
    results: list[object], floor: bool, owner: str | None, inline: bool, error: type[Exception] | None
) -> None:
    plan = plan_of(inline)
    r = zk_outcome.split_results(results, floor=floor, owner=owner is not None, guard=False)
    found = zk_outcome.outcome(r, owner, table=plan.table, version=plan.base.head.version, inline=plan.inline)
    if error is None:
        assert found is None and not r.refused_whole
    else:
        assert isinstance(found, error), found
        assert r.refused_whole or isinstance(found, WriteOutcomeUnknown)
