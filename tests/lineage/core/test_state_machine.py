"""Hypothesis drives the pure state machine against a small reference model.

The model keeps Pinot's rules as plain sets, written independently of
:mod:`segment_lineage.lineage.core.transitions`. For every step both must agree on accepted versus
refused, and on the visible set. Invariants: a ``to`` of a non-COMPLETED
entry is never visible; a ``from`` of a COMPLETED entry never is; visible
segments are registered; nothing is both registered and pending deletion.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.core.model import Audit, EntryState, Segment, TableConfig, TableState
from segment_lineage.lineage.core.visibility import visibility_delta, visible_names

NAMES = [f"s{i}" for i in range(10)]
AUDIT = Audit("model@test")


@dataclass
class ModelEntry:
    src: frozenset[str]
    dst: frozenset[str]
    state: str = "IN_PROGRESS"


@dataclass
class Model:
    registered: set[str] = field(default_factory=set)
    entries: dict[str, ModelEntry] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)  # names whose file is queued for deletion
    bound: dict[str, str] = field(default_factory=dict)  # name -> the IN_PROGRESS entry it was registered for

    def visible(self) -> set[str]:
        out = set(self.registered)
        for e in self.entries.values():
            out -= e.src if e.state == "COMPLETED" else e.dst
        return out

    def can_register(self, name: str) -> bool:
        if name in self.registered:  # only a hidden upload of a running entry may be uploaded again
            owner = self.entries.get(self.bound.get(name, ""))
            return owner is not None and owner.state == "IN_PROGRESS" and name in owner.dst
        if name in self.deleted:
            return False
        if any(name in e.src for e in self.entries.values() if e.state != "REVERTED"):
            return False
        owners = [e for e in self.entries.values() if name in e.dst]
        in_progress = any(e.state == "IN_PROGRESS" for e in owners)
        reverted = any(e.state == "REVERTED" for e in owners)
        return in_progress or not reverted

    def can_start(self, src: frozenset[str], dst: frozenset[str]) -> bool:
        visible = self.visible()
        if not src and not dst:
            return False
        if src & dst or not src <= visible or dst & visible or dst & self.registered:
            return False
        for e in self.entries.values():
            if e.state == "REVERTED":
                if dst & e.dst:
                    return False
            elif src & e.src or dst & e.dst or dst & e.src:
                return False
        return True

    def can_end(self, e: ModelEntry) -> bool:
        return e.dst <= self.registered and e.src <= self.registered

    def can_revert(self, eid: str, force: bool) -> bool:
        e = self.entries[eid]
        if e.state == "REVERTED" or (e.state == "IN_PROGRESS" and not force):
            return False
        for oid, other in self.entries.items():
            if oid != eid and other.state != "REVERTED" and e.dst & other.src:
                return False
        return not (e.state == "COMPLETED" and not e.src <= self.registered)

    def locked(self) -> set[str]:
        out: set[str] = set()
        for e in self.entries.values():
            if e.state == "IN_PROGRESS":
                out |= e.src | e.dst
            elif e.state == "COMPLETED":
                out |= e.src
        return out


class LineageMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # APPEND: no proactive cleanup, so the model needs no snapshot chains.
        self.state = TableState(TableConfig.build("t", "/d", "APPEND"), version=1)
        self.model = Model()
        self.now = 1_000
        self.past: list[TableState] = [self.state]

    def _apply(self, expected_ok: bool, fn: object) -> None:
        self.now += 1
        try:
            change = fn(self.state)  # type: ignore[operator]
        except LineageError as exc:
            assert not expected_ok, f"refused but the model accepts: {exc}"
            return
        assert expected_ok, "accepted but the model refuses"
        self.state = change.state.replace(version=self.state.version + 1)
        self.past.append(self.state)

    @rule(name=st.sampled_from(NAMES))
    def register(self, name: str) -> None:
        ok = self.model.can_register(name)
        self._apply(ok, lambda s: transitions.register_segments(s, [Segment(name, f"{name}.p")], self.now))
        if ok and name not in self.model.registered:
            self.model.registered.add(name)
            running = (i for i, e in self.model.entries.items() if e.state == "IN_PROGRESS" and name in e.dst)
            owner = next(running, None)
            self.model.bound.pop(name, None)
            if owner is not None:
                self.model.bound[name] = owner

    @rule(src=st.sets(st.sampled_from(NAMES), max_size=3), dst=st.sets(st.sampled_from(NAMES), max_size=3))
    def start(self, src: set[str], dst: set[str]) -> None:
        eid = str(uuid.UUID(int=len(self.past) * 1000 + len(self.model.entries) + 1))  # replayable
        ok = self.model.can_start(frozenset(src), frozenset(dst))
        self._apply(
            ok,
            lambda s: transitions.start_replace(
                s, sorted(src), sorted(dst), entry_id=eid, audit=AUDIT, now_ms=self.now
            ),
        )
        if ok:
            self.model.entries[eid] = ModelEntry(frozenset(src), frozenset(dst))

    @precondition(lambda self: bool(self.model.entries))
    @rule(data=st.data())
    def end(self, data: st.DataObject) -> None:
        self.end_entry(data.draw(st.sampled_from(sorted(self.model.entries))))

    def end_entry(self, eid: str) -> None:
        e = self.model.entries[eid]
        ok = e.state == "COMPLETED" or (e.state == "IN_PROGRESS" and self.model.can_end(e))
        self._apply(ok, lambda s: transitions.end_replace(s, eid, self.now))
        if ok:
            e.state = "COMPLETED"

    @precondition(lambda self: bool(self.model.entries))
    @rule(data=st.data(), force=st.booleans())
    def revert(self, data: st.DataObject, force: bool) -> None:
        eid = data.draw(st.sampled_from(sorted(self.model.entries)))
        ok = self.model.can_revert(eid, force)
        self._apply(ok, lambda s: transitions.revert_replace(s, eid, self.now, force))
        if ok:
            self.model.entries[eid].state = "REVERTED"

    @rule(name=st.sampled_from(NAMES))
    def delete(self, name: str) -> None:
        ok = name in self.model.registered and name not in self.model.locked()
        self._apply(ok, lambda s: transitions.delete_segments(s, [name], self.now))
        if ok:
            self.model.registered.discard(name)
            self.model.bound.pop(name, None)
            self.model.deleted.add(name)

    @rule(src=st.sets(st.sampled_from(NAMES), max_size=2), dst=st.sets(st.sampled_from(NAMES), max_size=2))
    def push(self, src: set[str], dst: set[str]) -> None:
        """A whole consistent push (start, register, end): gives rollbacks a history."""
        if not self.model.can_start(frozenset(src), frozenset(dst)):
            return
        if not all(n not in self.model.registered and n not in self.model.deleted for n in dst):
            return
        self.start(src, dst)
        eid = next(reversed(self.model.entries))
        for name in sorted(dst):
            self.register(name)
        self.end_entry(eid)

    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(self.past[-6:]))
        self.now += 1
        try:
            change = transitions.rollback(self.state, target, self.now)
        except LineageError:
            event("rollback refused")
            assert not _rollback_possible(self.state, target), "refused a rollback the sets allow"
            return
        event("rollback applied" if change.changed else "rollback: nothing to change")
        assert visible_names(change.state) == visible_names(target)
        if change.changed:
            self.state = change.state.replace(version=self.state.version + 1)
            self.past.append(self.state)
            for eid, entry in self.state.entries.items():
                self.model.entries[eid].state = entry.state.value

    @invariant()
    def delta_matches_the_sets(self) -> None:
        now = visible_names(self.state)
        for then in self.past[-8:]:
            was = visible_names(then)
            assert visibility_delta(then, self.state) == (now - was, was - now)

    @invariant()
    def same_visible_set(self) -> None:
        assert visible_names(self.state) == self.model.visible()

    @invariant()
    def hidden_rules_hold(self) -> None:
        shown = visible_names(self.state)
        for entry in self.state.entries.values():
            if entry.state is EntryState.COMPLETED:
                assert not shown.intersection(entry.segments_from)
            else:
                assert not shown.intersection(entry.segments_to)
        assert shown <= set(self.state.segments)
        registered_locations = {s.location for s in self.state.segments.values()}
        assert not registered_locations.intersection(self.state.pending)


def _rollback_possible(state: TableState, target: TableState) -> bool:
    """The rollback rule on whole visible sets (the slow, obvious way): entry
    states set to the target's give the target's visible set, and no running
    push names a segment of an entry that would change."""
    moved: set[str] = set()
    entries = dict(state.entries)
    for eid, entry in state.entries.items():
        if entry.state is EntryState.IN_PROGRESS:
            continue
        then = target.entries.get(eid)
        want = EntryState.COMPLETED if then is not None and then.state is EntryState.COMPLETED else None
        want = want or EntryState.REVERTED
        if entry.state is not want:
            entries[eid] = replace(entry, state=want)
            moved.update((*entry.segments_from, *entry.segments_to))
    if visible_names(state.replace(entries=entries)) != visible_names(target):
        return False
    return not any(
        moved.intersection((*e.segments_from, *e.segments_to))
        for e in state.entries.values()
        if e.state is EntryState.IN_PROGRESS
    )


LineageMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestLineageStateMachine = LineageMachine.TestCase
