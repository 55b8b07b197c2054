"""Which versions a head applies (rollbacks jump to their target) and which
sets a set rollback would split."""

from __future__ import annotations

import random

from segment_lineage.lineage.core.applied import chain, is_applied, set_versions, splits, suspects
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Detail, Operation


def rec(
    version: int,
    set_id: str | None = None,
    target: int | None = None,
    *,
    op: Operation = Operation.END_REPLACE,
    entry: str | None = None,
) -> HistoryRecord:
    kind = Operation.ROLLBACK if target is not None else op
    detail = Detail(target=target) if target is not None else None
    entry = entry or (f"e-{set_id}" if set_id else None)
    return HistoryRecord(
        version, f"c{version}", version, kind, entry, "t", None, None, 0, 0, 0, detail=detail, set_id=set_id
    )


def test_a_chain_jumps_to_each_rollback_target() -> None:
    records = {v: rec(v) for v in range(1, 5)} | {5: rec(5, target=2), 6: rec(6), 7: rec(7, target=4)}
    assert chain(records, 4) == {1, 2, 3, 4}
    assert chain(records, 6) == {1, 2, 5, 6}
    assert chain(records, 7) == {1, 2, 3, 4, 7}  # rolled forward past the first rollback
    assert chain({3: rec(3, target=1)}, 4) == {1, 3, 4}  # missing records step back one


def test_a_later_set_in_a_table_outside_the_rollback_is_a_split() -> None:
    histories = {
        "u1": [rec(1), rec(2, "X")],
        "u2": [rec(1), rec(2, "X"), rec(3, "Y")],
        "u3": [rec(1), rec(2, "Y")],
    }
    heads = {"u1": 2, "u2": 3, "u3": 2}
    (split,) = splits(histories, heads, {"u1": 1, "u2": 1})
    assert (split.set_id, split.flipped, split.kept, split.applied) == ("Y", ("u2",), ("u3",), True)
    assert splits(histories, heads, {"u1": 1, "u2": 1, "u3": 1}) == []  # every table of Y moves too
    assert splits(histories, heads, {"u2": 2, "u3": 1}) == []  # Y itself rolled back


def test_a_set_already_split_or_already_undone_is_not_this_rollbacks_doing() -> None:
    histories = {
        "u1": [rec(1), rec(2, "X")],
        "u2": [rec(1), rec(2, "X"), rec(3, "Y"), rec(4, "R", target=2)],  # Y undone in u2 alone
        "u3": [rec(1), rec(2, "Y")],
    }
    assert splits(histories, {"u1": 2, "u2": 4, "u3": 2}, {"u1": 1, "u2": 1}) == []
    histories["u3"].append(rec(3, "R", target=1))  # and in u3: undone everywhere (R is a rollback)
    assert splits(histories, {"u1": 2, "u2": 4, "u3": 3}, {"u1": 1, "u2": 1}) == []


def test_bringing_a_set_back_in_some_tables_only_is_a_split() -> None:
    histories = {
        "u1": [rec(1), rec(2, "Y"), rec(3, target=1), rec(4, "X")],
        "u2": [rec(1), rec(2, "Y"), rec(3, target=1)],
    }
    (split,) = splits(histories, {"u1": 4, "u2": 3}, {"u1": 2})  # 2's chain has Y; u2's has not
    assert split.set_id == "Y" and split.applied is False and split.flipped == ("u1",)


def test_a_set_reverted_by_hand_is_not_applied_there() -> None:
    """W, then Y over b and c, then X over a and c, then Y's entry reverted
    by hand in b and c: Y shows nowhere. Rolling back X takes c back to
    before the revert there, so Y would come back in c and not in b."""
    histories = {
        "a": [rec(1), rec(2, "X")],
        "b": [rec(1), rec(2, "Y"), rec(3, op=Operation.REVERT_REPLACE, entry="e-Y")],
        "c": [rec(1), rec(2, "Y"), rec(3, "X"), rec(4, op=Operation.REVERT_REPLACE, entry="e-Y")],
    }
    (split,) = splits(histories, {"a": 2, "b": 3, "c": 4}, {"a": 1, "c": 2})
    assert (split.set_id, split.flipped, split.kept, split.applied) == ("Y", ("c",), ("b",), False)


def test_a_staged_set_shows_nothing_so_it_is_never_split() -> None:
    """A staged set's record registers its files and shows none of them."""
    histories = {
        "a": [rec(1), rec(2, "X")],
        "b": [rec(1), rec(2, "X"), rec(3, "S", op=Operation.REGISTER)],
        "c": [rec(1), rec(2, "S", op=Operation.REGISTER)],
    }
    assert splits(histories, {"a": 2, "b": 3, "c": 2}, {"a": 1, "b": 1}) == []


def _random_history(rng: random.Random) -> list[HistoryRecord]:
    """A table's history, oldest first: pushes (some of a set) started and
    ended, reverts (of running or completed pushes), rollbacks, registers."""
    records: list[HistoryRecord] = [rec(1, op=Operation.CREATE_TABLE)]
    running: list[str] = []
    ended: list[str] = []
    for version in range(2, rng.randint(3, 40)):
        roll = rng.random()
        if roll < 0.25 or not (running or ended):
            entry = f"e{version}"
            running.append(entry)
            records.append(rec(version, op=Operation.START_REPLACE, entry=entry))
        elif roll < 0.5 and running:
            entry = running.pop(rng.randrange(len(running)))
            ended.append(entry)
            set_id = f"S{version}" if rng.random() < 0.6 else None
            records.append(rec(version, set_id, op=Operation.END_REPLACE, entry=entry))
        elif roll < 0.65:
            entry = rng.choice(running + ended)
            records.append(rec(version, op=Operation.REVERT_REPLACE, entry=entry))
        elif roll < 0.85:
            records.append(rec(version, target=rng.randint(1, version - 1)))
        else:
            records.append(rec(version, op=Operation.REGISTER))
    return records


def test_suspects_hold_every_set_a_tables_rollback_flips_there() -> None:
    """Checked against the chains in full: every set whose push is applied
    on one of the two chains and not on the other is a suspect; and with no
    revert between them, the history is read only down to where the chains meet."""
    rng = random.Random(20261128)
    for _ in range(300):
        history = _random_history(rng)
        newest_first = list(reversed(history))
        head = history[-1].version
        records = {r.version: r for r in history}
        ends = set_versions(history)
        for target in range(1, head + 1):
            before, after = chain(records, head), chain(records, target)
            flipped = {
                s for s, change in ends.items()
                if is_applied(records, before, change) != is_applied(records, after, change)
            }  # fmt: skip
            read: list[int] = []
            found = suspects((read.append(r.version) or r for r in newest_first), head, target)
            assert flipped <= found, (history, target)
            differ = before ^ after
            if not any(records[v].operation is Operation.REVERT_REPLACE for v in differ):
                meet = max(before & after, default=0)
                assert min(read, default=head) >= min(meet, *differ, head), (history, target, read)
