"""Replace operations: open and end a replacement (the lineage entries of
Pinot's segment replacement protocol). Its revert, which judges push sets,
is :mod:`.revert`; a table's rollback :mod:`.rollback`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.acl import PUSHER
from segment_lineage.lineage.core.errors import RefusedError
from segment_lineage.lineage.core.model import Change, Segment, TableState, TimeUnit
from segment_lineage.lineage.core.periods import parse_period
from segment_lineage.lineage.core.schema import Schema, SchemaPolicy
from segment_lineage.lineage.core.staged import Staged
from segment_lineage.lineage.manager.commit import Committed, ManagerBase, Update


class ReplaceOps(ManagerBase):
    """Replacements: opened, ended, staged."""

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
        """End ``entry_id`` (Pinot's endReplace). Refused (RefusedError,
        nothing changed) for a push set's staged push: a set is published
        whole, in one commit (``publish_set``)."""
        subset = None if to_subset is None else list(to_subset)
        self.require_role(PUSHER, doing="ending a replacement")

        def update(state: TableState, now: int) -> Change:
            entry = state.entries.get(entry_id)
            staged = None if entry is None else entry.staged
            if staged is not None and staged.set_id is not None:  # judged on the version it ends
                raise RefusedError(
                    f"entry {entry_id} of table {table!r} is push set {staged.set_id}'s staged push "
                    f"({', '.join(staged.set_tables)}): a set is published whole, in one commit",
                    table=table,
                    entry_id=entry_id,
                    remedy=f"lineage publish --set {staged.set_id}",
                )
            return transitions.end_replace(state, entry_id, now, subset)

        return self.commit(table, update, reason)

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
