"""The metadata GC's delete multis, fed results without a server: a batch
refused for a cause other than a blob already gone ends the pass with that
cause, instead of sending the same multi again and again."""

from __future__ import annotations

from typing import Any, cast

import pytest
from kazoo.exceptions import NoAuthError, NoNodeError, RolledBackError, RuntimeInconsistency

from segment_lineage.lineage.zk.store.gc import MetadataGc
from segment_lineage.lineage.zk.store.paths import Paths

MULTIS_MAX = 5


class _Txn:
    def __init__(self) -> None:
        self.deletes: list[str] = []

    def check(self, path: str, version: int) -> None:
        pass

    def delete(self, path: str) -> None:
        self.deletes.append(path.rsplit("/", 1)[1])


class _Zk:
    """Answers each multi with ``answer(blobs deleted)``; refuses to be asked more than MULTIS_MAX times."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.sent: list[list[str]] = []

    def transaction(self) -> _Txn:
        return _Txn()

    def commit(self, txn: _Txn) -> list[object]:
        self.sent.append(list(txn.deletes))
        if len(self.sent) > MULTIS_MAX:
            raise AssertionError("the same multi sent again and again")
        return cast("list[object]", self.answer(txn.deletes))


def _gc(zk: _Zk) -> MetadataGc:
    unused = cast("Any", None)  # the deletes need only the connection and the paths
    return MetadataGc(cast("Any", zk), Paths("/r"), unused, unused, unused, unused)


def test_blobs_gone_already_are_left_out_and_the_rest_deleted() -> None:
    def answer(blobs: list[str]) -> list[object]:
        if "b" in blobs:
            return [RolledBackError(), RolledBackError(), NoNodeError(), RuntimeInconsistency()]
        return [None] * (len(blobs) + 1)

    zk = _Zk(answer)
    assert _gc(zk)._delete_unless_moved("t", ["a", "b", "c"], 7) == 2
    assert zk.sent == [["a", "b", "c"], ["a", "c"]]


def test_a_moved_head_stops_the_pass() -> None:
    zk = _Zk(lambda blobs: [Exception("bad version"), *([RuntimeInconsistency()] * len(blobs))])
    assert _gc(zk)._delete_unless_moved("t", ["a", "b"], 7) == 0
    assert len(zk.sent) == 1


def test_a_delete_refused_for_another_cause_ends_the_pass_with_it() -> None:
    zk = _Zk(lambda blobs: [RolledBackError(), NoAuthError(), *([RuntimeInconsistency()] * (len(blobs) - 1))])
    with pytest.raises(NoAuthError):
        _gc(zk)._delete_unless_moved("t", ["a", "b"], 7)
    assert len(zk.sent) == 1
