"""A table's current state held in memory, refreshed when ZooKeeper says its head moved.

A long-running reader (a query service, a dashboard) asks for the visible set
far more often than the table changes. :class:`WatchedTable` keeps the last
state it read and a data watch on the table's head: a read costs no round trip
until the watch reports a change, and the visible set is computed once per
version.

What it may serve:

* after the watch fired, the new version (re-read on the next call);
* after this process's own store sent a commit, the new version, even before
  the watch event arrives (read-your-writes within the store);
* while the connection is suspended or lost, nothing from memory: the call
  goes to ZooKeeper and fails the way any read would. After a reconnection
  the watch is set again and the state re-read.

Like every ZooKeeper read without ``sync``, a cached state may trail a commit
of another client by the watch's delivery time; it is always one complete
version, never a mix.
"""

from __future__ import annotations

import threading
from types import TracebackType

from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import DataWatch

from segment_lineage.lineage.core.errors import RefusedError
from segment_lineage.lineage.core.model import Segment, TableState
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.core.visibility import visible_segments
from segment_lineage.lineage.zk.connection import translated
from segment_lineage.lineage.zk.store import ZkStore


class WatchedTable:
    """Reads are thread-safe. Close it (or use it as a context manager) to stop the watch."""

    def __init__(self, store: ZkStore, table: str) -> None:
        self.store = store
        self.table = check_table_name(table)
        self._lock = threading.Lock()
        self._changes = 0  # watch events and connection changes seen
        self._closed = False
        self._seen: tuple[int, int] | None = None  # (changes, commits_sent) of the cached state
        self._state: TableState | None = None
        self._visible: tuple[Segment, ...] | None = None
        store.client.add_listener(self._on_connection)
        try:
            with translated(
                f"ZooKeeper refused watching table {self.table!r}",
                refused=f"ZooKeeper refused watching table {self.table!r}: not authorised",
            ):
                self.state()  # a missing table or a refused read is reported here, by the store
                # The watch's first call counts as a change, so whatever moved since
                # the read above is read again on the next call.
                DataWatch(store.client, store.paths.head(self.table), self._on_change)
        except BaseException:
            self.close()
            raise

    # ---- kazoo's threads ---------------------------------------------------------

    def _on_change(self, _data: bytes | None, _stat: ZnodeStat | None) -> bool:
        with self._lock:
            self._changes += 1
            return not self._closed  # False stops the watch

    def _on_connection(self, _state: str) -> None:
        # Suspended, lost or back: the next read goes to ZooKeeper (and fails
        # while there is none to answer).
        with self._lock:
            self._changes += 1

    # ---- reading -------------------------------------------------------------------

    def state(self) -> TableState:
        """The table's current state: from memory while nothing changed."""
        with self._lock:
            if self._closed:
                raise RefusedError(f"the watch on table {self.table!r} is closed", table=self.table)
            now = (self._changes, self.store.zk.commits_sent)
            if self._state is not None and self._seen == now:
                return self._state
        # Read outside the lock: kazoo's event thread must not wait on a read.
        # An event during the read changes the counter, so the next call re-reads.
        state = self.store.read(self.table).state.loaded()  # held past this call: no loading later
        with self._lock:
            if self._state is not state:  # the store returns the same object for an unmoved head
                self._visible = None
            self._state, self._seen = state, now
        return state

    def visible(self) -> tuple[Segment, ...]:
        """The visible segments of the current state, sorted by name; computed once per version."""
        state = self.state()
        with self._lock:
            if self._visible is not None and self._state is state:
                return self._visible
        visible = tuple(visible_segments(state))
        with self._lock:
            if self._state is state:
                self._visible = visible
        return visible

    # ---- lifetime ------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._state = self._visible = None
        self.store.client.remove_listener(self._on_connection)

    def __enter__(self) -> WatchedTable:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
