"""The lineage manager: Pinot's operations over any :class:`Store`.

Each operation reads one consistent version, applies a pure transition from
:mod:`segment_lineage.lineage.core.transitions`, and compare-and-swaps the result, re-reading and
recomputing on conflict within a bounded budget.

Errors and what they mean for the caller:

* validation errors, :class:`RefusedError`, :class:`ConflictError`: definitely
  not applied; fix the input or the state, then retry;
* :class:`ContentionError`: not applied, the retry budget ran out; retry later;
* :class:`OutcomeUnknownError`: the last write may have landed; re-read before
  doing anything else, and never clean up after it.

The operations live one concern per module, as mixins over the commit loop:
:mod:`.commit` (the loop, its retry budget and "outcome unknown" recovery),
:mod:`.floor` (the table's floor), :mod:`.tables` (create, drop, claim),
:mod:`.segments` (register, delete), :mod:`.replace` (start, end),
:mod:`.together` (several tables in one commit, a consistent cut),
:mod:`.set_rollback` (a push set's rollback), :mod:`.rollback` (a table's,
which judges push sets too), :mod:`.revert` (a revert, which judges them
too), :mod:`.reads` (snapshots, leases, versions, history) and
:mod:`.coordination` (the store's clock, holds, owners and pins: what
features need of the store, through the manager only).
:class:`LineageManager` composes them, so it keeps one flat API of methods.
Mixins rather than a class delegating to functions: each method's signature
and docstring stay in one place, next to its code, and :meth:`for_job`
still copies one object. The mixins share only :class:`.commit.ManagerBase`
(and the rollbacks read past versions through :class:`.reads.Reads`).
"""

from __future__ import annotations

from segment_lineage.lineage.manager.commit import commit_step
from segment_lineage.lineage.manager.coordination import Coordination, TableHold
from segment_lineage.lineage.manager.floor import FLOOR_MS
from segment_lineage.lineage.manager.reads import PIN_ATTEMPTS
from segment_lineage.lineage.manager.replace import ReplaceOps
from segment_lineage.lineage.manager.revert import RevertOps
from segment_lineage.lineage.manager.rollback import RollbackOps
from segment_lineage.lineage.manager.segments import SegmentOps
from segment_lineage.lineage.manager.tables import TableOps
from segment_lineage.lineage.store.contract import Snapshot  # what snapshot() returns

__all__ = ["FLOOR_MS", "PIN_ATTEMPTS", "LineageManager", "Snapshot", "TableHold", "commit_step"]


class LineageManager(TableOps, SegmentOps, ReplaceOps, RollbackOps, RevertOps, Coordination):
    """Pinot's lineage operations over one :class:`~segment_lineage.lineage.store.contract.Store`."""
