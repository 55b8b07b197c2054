"""Replace operations: open, end and revert a replacement (the lineage
entries of Pinot's segment replacement protocol), and rollback, which
restores a past version's visible set in one commit."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.acl import PUSHER
from segment_lineage.lineage.core.errors import ConflictError
from segment_lineage.lineage.core.model import Change, EntryState, Segment, TableState, TimeUnit
from segment_lineage.lineage.core.periods import parse_period
from segment_lineage.lineage.core.schema import Schema, SchemaPolicy
from segment_lineage.lineage.core.staged import Staged
from segment_lineage.lineage.core.visibility import visibility_delta, visible_segments
from segment_lineage.lineage.manager.commit import Committed, Update
from segment_lineage.lineage.manager.reads import Reads


@dataclass(frozen=True)
class RollbackPlan:
    """What a rollback does (or did): the target, and the visible set before and after."""

    table: str
    target_version: int
    from_version: int
    restored: tuple[str, ...]  # entries brought back (COMPLETED again)
    reverted: tuple[str, ...]  # entries reverted
    appear: tuple[str, ...]  # segments that become visible
    disappear: tuple[str, ...]  # segments that stop being visible
    rows_appearing: int
    rows_disappearing: int
    committed_version: int | None  # None for a dry run or a no-op
    rows_before: int | None = None  # the whole visible set's rows: dry runs only (linear in the table)
    rows_after: int | None = None
    schema: str | None = None  # what the rollback does to the schema (None: nothing)


@dataclass(frozen=True)
class VisibleChange:
    """What a change would do to the visible set (a dry run)."""

    appear: tuple[str, ...]
    disappear: tuple[str, ...]
    rows_appearing: int
    rows_disappearing: int


class ReplaceOps(Reads):
    """Replacements and rollback (a rollback reads past versions, hence :class:`Reads`)."""

    def start_replace(
        self,
        table: str,
        segments_from: Sequence[str],
        segments_to: Sequence[str],
        *,
        force_cleanup: bool = False,
        reason: str | None = None,
        entry_id: str | None = None,
        interval: tuple[int, int] | None = None,
        live_owners: frozenset[str] | None = None,
        hold: str | None = None,
    ) -> str:
        """Open a replacement by hand and return its entry id.

        No process holds an owner node for such an entry, so it is held for
        ``hold`` (a period; default the table's
        ``lineage_entry_cleanup_retention``; ``0s`` for none, Pinot's rule) on
        the store's clock: until then no other push's force cleanup and no
        retention pass takes it. See :func:`segment_lineage.lineage.core.transitions.start_replace`
        for ``interval`` and ``live_owners``.
        """
        eid = entry_id or self.env.text_id()
        self.open_replace(
            table,
            segments_from,
            segments_to,
            force_cleanup=force_cleanup,
            reason=reason,
            entry_id=eid,
            interval=interval,
            live_owners=live_owners,
            hold=hold,
        )
        return eid

    def open_replace(
        self,
        table: str,
        segments_from: Sequence[str],
        segments_to: Sequence[str],
        *,
        force_cleanup: bool = False,
        reason: str | None = None,
        entry_id: str | None = None,
        interval: tuple[int, int] | None = None,
        live_owners: frozenset[str] | None = None,
        hold: str | None = None,
    ) -> Committed:
        """:meth:`start_replace`, returning the commit: its change names the
        entry and the stale entries force cleanup reverted (``cleaned``)."""
        eid = entry_id or self.env.text_id()
        src, dst = list(segments_from), list(segments_to)
        self.require_role(PUSHER, doing="opening a replacement")
        audit = self.audit(reason)
        hold_ms = None if hold is None else parse_period(hold)

        def update(s: TableState, now: int) -> Change:
            span = s.config.lineage_entry_cleanup_retention_ms if hold_ms is None else hold_ms
            return transitions.start_replace(
                s,
                src,
                dst,
                entry_id=eid,
                audit=audit,
                now_ms=now,
                force_cleanup=force_cleanup,
                interval=interval,
                live_owners=live_owners,
                held_until_ms=now + span if span else None,
            )

        return self.commit(table, update, reason)

    def end_replace(
        self,
        table: str,
        entry_id: str,
        to_subset: Sequence[str] | None = None,
        reason: str | None = None,
    ) -> Committed:
        subset = None if to_subset is None else list(to_subset)
        self.require_role(PUSHER, doing="ending a replacement")
        return self.commit(table, lambda s, now: transitions.end_replace(s, entry_id, now, subset), reason)

    def complete_replace(
        self,
        table: str,
        entry_id: str,
        uploads: Sequence[Segment],
        *,
        strays: Sequence[str] = (),
        to_subset: Sequence[str] | None = None,
        reason: str | None = None,
        schema: Schema | None = None,
        schema_policy: SchemaPolicy = SchemaPolicy.ENFORCE,
        mode: str | None = None,
        time_unit: TimeUnit | None = None,
        owned: bool = False,
        check: Callable[[TableState], None] | None = None,
        audit: Callable[[TableState], str] | None = None,
    ) -> Committed:
        """Register ``uploads`` into the IN_PROGRESS entry, queue ``strays``
        and end the entry, in one commit (what a push does once its files
        are written): one round of reads and writes instead of two or three,
        and no moment where the uploads are registered but the entry runs.
        ``schema`` (the columns written), ``schema_policy`` and ``mode``: see
        :func:`segment_lineage.lineage.core.transitions.complete_replace`.

        ``owned``: this process holds the entry's owner claim
        (``store.holds("owner")``), and the commit lands only while it stands
        (ClaimLostError, nothing committed, once it is gone). ``check`` is
        called with the version the commit applies to, before the change:
        what it raises refuses the commit. So is ``audit``, whose answer (the
        checks the push's data passed, judged on that version) goes in the
        history record."""
        update = complete_update(
            entry_id, uploads, strays=strays, to_subset=to_subset, schema=schema, schema_policy=schema_policy,
            mode=mode, time_unit=time_unit, check=check, audit=audit,
        )  # fmt: skip
        return self.commit(table, update, reason, owner=entry_id if owned else None)

    def stage_replace(
        self,
        table: str,
        entry_id: str,
        uploads: Sequence[Segment],
        *,
        staged: Staged,
        hold_ms: int | None = None,
        strays: Sequence[str] = (),
        reason: str | None = None,
        check: Callable[[TableState], None] | None = None,
        audit: Callable[[TableState], str] | None = None,
    ) -> Committed:
        """A staged push's last commit (:func:`segment_lineage.lineage.core.transitions.stage_replace`),
        fenced by the push's owner claim as :meth:`complete_replace`: the
        entry is held for ``hold_ms`` from the commit (default: the table's
        lineage entry cleanup retention). ``check`` and ``audit`` as there."""
        update = stage_update(
            entry_id, uploads, staged, hold_ms=hold_ms, strays=strays, check=check, audit=audit
        )
        return self.commit(table, update, reason, owner=entry_id)

    def revert_replace(
        self, table: str, entry_id: str, *, force: bool = False, reason: str | None = None
    ) -> Committed:
        self.require_role(PUSHER, doing="reverting a replacement")
        return self.commit(table, lambda s, now: transitions.revert_replace(s, entry_id, now, force), reason)

    def revert_plan(self, table: str, entry_id: str, *, force: bool = False) -> VisibleChange:
        """What reverting ``entry_id`` would show and hide now (refused, as the
        revert would be, when a rule forbids it); nothing is committed."""
        state = self._read(table)
        after = transitions.revert_replace(state, entry_id, self.store.now_ms(), force).state
        appear, disappear = visibility_delta(state, after)
        return VisibleChange(
            appear=tuple(sorted(appear)),
            disappear=tuple(sorted(disappear)),
            rows_appearing=sum(after.segments[n].rows for n in appear),
            rows_disappearing=sum(state.segments[n].rows for n in disappear),
        )

    def rollback(
        self, table: str, target_version: int, *, dry_run: bool = False, reason: str | None = None
    ) -> RollbackPlan:
        """One atomic commit that makes the visible set equal to
        ``target_version``'s (earlier or later: a rollback is undone by rolling
        forward). Costs one version read and one commit, whatever the size:
        the plan is made on the commit's own first read."""
        if not dry_run:
            self.require_role(PUSHER, doing="a rollback")
        target = self._as_of(table, target_version)
        if dry_run:
            current = self._read(table)
            with self._past(target):  # the target's parts load as the plan wants them
                change = transitions.rollback(current, target, self.store.now_ms(), self.audit(reason))
                plan = _rollback_plan(current, change, target_version, None)
            rows_before = sum(s.rows for s in visible_segments(current))
            return dataclasses.replace(
                plan,
                rows_before=rows_before,
                rows_after=rows_before + plan.rows_appearing - plan.rows_disappearing,
            )

        planned: list[TableState] = []

        def apply(state: TableState, now: int) -> Change:
            # A rollback is planned on the version its first attempt read: if
            # another change lands before it commits (another rollback, say),
            # it gives way instead of planning again.
            if not planned:
                planned.append(state)
            if state.version != planned[0].version:
                raise ConflictError(
                    f"table {table!r} changed while the rollback was planned "
                    f"(version {planned[0].version} -> {state.version}); nothing was rolled back",
                    table=table,
                    remedy="look at 'lineage history' and run the rollback again if it still applies",
                )
            with self._past(target):  # gone, it is gone for every attempt: not read again
                return transitions.rollback(state, target, now, audit)

        why = reason or f"rollback to version {target_version}"
        audit = self.audit(why)
        committed = self._commit_lazy(table, apply, why)  # the plan looks at what changed only
        # apply commits only on the version it planned on: that is the one before.
        return _rollback_plan(
            planned[0],
            committed.change,
            target_version,
            committed.state.version if committed.applied else None,
        )


def complete_update(
    entry_id: str,
    uploads: Sequence[Segment],
    *,
    strays: Sequence[str] = (),
    to_subset: Sequence[str] | None = None,
    schema: Schema | None = None,
    schema_policy: SchemaPolicy = SchemaPolicy.ENFORCE,
    mode: str | None = None,
    time_unit: TimeUnit | None = None,
    check: Callable[[TableState], None] | None = None,
    audit: Callable[[TableState], str] | None = None,
) -> Update:
    """The pure update of :meth:`ReplaceOps.complete_replace` (a push's end,
    alone or as one table of a set)."""
    batch, queued = list(uploads), list(strays)
    subset = None if to_subset is None else list(to_subset)

    def update(s: TableState, now: int) -> Change:
        if check is not None:
            check(s)
        audited = None if audit is None else audit(s)
        return transitions.complete_replace(
            s,
            entry_id,
            batch,
            now,
            queued,
            subset,
            schema=schema,
            policy=schema_policy,
            mode=mode,
            time_unit=time_unit,
            audit=audited,
        )

    return update


def stage_update(
    entry_id: str,
    uploads: Sequence[Segment],
    staged: Staged,
    *,
    hold_ms: int | None = None,
    strays: Sequence[str] = (),
    check: Callable[[TableState], None] | None = None,
    audit: Callable[[TableState], str] | None = None,
) -> Update:
    """The pure update of :meth:`ReplaceOps.stage_replace` (a staged push's
    last commit, alone or as one table of a set)."""
    batch, queued = list(uploads), list(strays)

    def update(s: TableState, now: int) -> Change:
        if check is not None:
            check(s)
        audited = None if audit is None else audit(s)
        span = s.config.lineage_entry_cleanup_retention_ms if hold_ms is None else hold_ms
        return transitions.stage_replace(
            s, entry_id, batch, now, queued, held_until_ms=now + span, staged=staged, audit=audited
        )

    return update


def _rollback_plan(before: TableState, change: Change, target: int, committed: int | None) -> RollbackPlan:
    after = change.state
    appear, disappear = visibility_delta(before, after)

    def was(e: str) -> EntryState | None:
        entry = before.entries.get(e)  # None: removed by retention, brought back by the rollback
        return None if entry is None else entry.state

    restored = tuple(
        e
        for e, entry in after.entries.items()
        if entry.state is EntryState.COMPLETED and was(e) is EntryState.REVERTED
    )
    reverted = tuple(
        e
        for e, entry in after.entries.items()
        if entry.state is EntryState.REVERTED and was(e) in (EntryState.COMPLETED, None)
    )
    return RollbackPlan(
        table=before.config.name,
        target_version=target,
        from_version=before.version,
        restored=restored,
        reverted=reverted,
        appear=tuple(sorted(appear)),
        disappear=tuple(sorted(disappear)),
        rows_appearing=sum(after.segments[n].rows for n in appear),
        rows_disappearing=sum(before.segments[n].rows for n in disappear),
        committed_version=committed,
        schema=None if change.detail is None else change.detail.schema,
    )
