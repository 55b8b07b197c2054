"""What features need of the store beside commits, through the manager (the
only door into the lineage): the store's clock, a table's holds, its
retained versions and history, live pushes and pins, the metadata sweep.

A hold is a small object after kazoo's ``client.Lock(path)``: one class for
a table's retention pass, its mirror's publish and a push's owner claim,
taken and released by name, asked whether it still stands (the fence a
late write checks), and usable as a context manager.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Self

from segment_lineage.lineage.core.acl import PUSHER
from segment_lineage.lineage.core.errors import AuthError, LineageError
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import TableState
from segment_lineage.lineage.manager.commit import ManagerBase
from segment_lineage.lineage.store.contract import LOCK, Holds, Lease, Snapshot


class TableHold:
    """One hold on one table: a retention pass's, a mirror publish's or a
    push's owner claim, over the store's recipe of its kind. ``take`` waits
    for nothing (the store refuses a hold another session has); ``held``
    says whether this session still holds it; ``release`` lets it go (gone
    with the session anyway)."""

    def __init__(
        self,
        what: str,
        holds: Holds,
        table: str,
        name: str = LOCK,
        refused: Callable[[], None] | None = None,
    ) -> None:
        self.what = what
        self._holds, self._table, self._name = holds, table, name
        self._refused = refused  # raises the clearer error when the store refused the hold

    def take(self) -> None:
        try:
            self._holds.hold(self._table, self._name)
        except AuthError:
            if self._refused is not None:
                self._refused()
            raise

    def held(self) -> bool:
        return self._holds.holds(self._table, self._name)

    def held_now(self) -> int | None:
        """The store's clock if this session still holds it, else None (one round trip)."""
        return self._holds.holds_now(self._table, self._name)

    def release(self) -> None:
        self._holds.release(self._table, self._name)

    def __enter__(self) -> Self:
        self.take()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.release()
        except LineageError:  # the session's end releases it anyway
            if kind is None:
                raise


class Coordination(ManagerBase):
    """The store's clock, holds, versions, history, owners, pins and sweep."""

    def now_ms(self) -> int:
        """The store's clock (ZooKeeper's): every age the lineage records is on it."""
        return self.store.now_ms()

    @property
    def session_timeout_s(self) -> float:
        """The store's session timeout (every store has a session now)."""
        return float(self.store.session.timeout_s)

    def snapshot(self, table: str) -> Snapshot:
        """The table's newest version with its floor (who holds its commits)."""
        return self.store.read(table)

    def pass_hold(self, table: str) -> TableHold:
        """The hold a retention pass keeps on ``table``: two passes never overlap."""
        return TableHold(f"retention pass on {table!r}", self.store.holds("pass"), table)

    def mirror_hold(self, table: str) -> TableHold:
        """The hold a publish (or a mirror's enable, disable, drop) keeps on ``table``'s mirror."""
        return TableHold(f"mirror of {table!r}", self.store.holds("mirror"), table)

    def owner_hold(self, table: str, entry_id: str, *, doing: str = "a push") -> TableHold:
        """A push's owner claim on its entry: its commits are fenced by it.
        Only a pusher (or an admin) holds one: when the store refuses another
        role's claim (an own owners folder no reader or retention identity
        has), the error names the role (``doing`` needs the pusher role).
        Asked only then: a push's way makes no extra request."""

        def refused() -> None:
            self.require_role(PUSHER, doing=doing)

        return TableHold(f"push {entry_id} on {table!r}", self.store.holds("owner"), table, entry_id, refused)

    def live_owners(self, table: str) -> frozenset[str]:
        """The entries whose pushing process still holds its claim."""
        return self.store.holds("owner").live(table)

    def versions(self, table: str) -> list[int]:
        """The retained versions of ``table``, oldest first."""
        return self.store.versions(table)

    def iter_history(self, table: str) -> Iterator[HistoryRecord]:
        """The table's history, newest first, read as far as the caller goes."""
        return self.store.iter_history(table)

    def release(self, lease: Lease) -> None:
        """Let a reader's pin go."""
        self.store.pins.release(lease)

    def pinned_states(self, table: str) -> list[TableState]:
        """The versions live readers pin."""
        return self.store.pins.pinned_states(table)

    def ignored_leases(self, table: str) -> list[str]:
        """Malformed leases of ``table`` skipped so far, each with why."""
        return self.store.pins.ignored(table)

    def collect_garbage(self, table: str) -> int:
        """Sweep the table's unreferenced metadata; how much went."""
        return self.store.collect_garbage(table)

    def roots(self) -> dict[str, str]:
        """Every table's registered root (a dropping table's too)."""
        return self.store.roots()

    def store_id(self) -> str:
        """This lineage store's identity (a root's claim names it)."""
        return self.store.store_id()
