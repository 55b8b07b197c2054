"""Who goes first: a table's floor (a writer that kept losing holds the
commits a while), its retention pass hold (one pass at a time, for as long as
its session lives), and elections (one ephemeral sequential member per
candidate; the first leads). Liveness and exclusion only: every commit still
compares-and-sets the head."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from segment_lineage.lineage import codec
from segment_lineage.lineage.core.acl import Place
from segment_lineage.lineage.core.errors import (
    AuthError,
    CorruptRecordError,
    LineageError,
    StoreUnavailableError,
    TableNotFoundError,
)
from segment_lineage.lineage.store.contract import LOCK, MEMBER_PREFIX, Floor, Member
from segment_lineage.lineage.zk.connection import UNAVAILABLE, ZkConnection, translated
from segment_lineage.lineage.zk.store.ephemerals import Ephemerals
from segment_lineage.lineage.zk.store.nodes import Nodes
from segment_lineage.lineage.zk.store.paths import Paths

log = logging.getLogger(__name__)


TICKET_PREFIX = "t-"
TICKET = re.compile(r"^t-[0-9A-Za-z]{1,64}-[0-9]{10}$")  # t-<commit id>-<ZooKeeper's sequence>
NO_QUEUE_RETRY_S = 60.0  # a table found without a queue this identity may use is looked at again after this


def ticket_order(name: str) -> int:
    """Tickets are ``t-<commit id>-<sequence>``: ordered by the sequence."""
    return int(name.rsplit("-", 1)[-1])


class Queues:
    """A table's commit queue: a writer that lost a race takes an ephemeral
    sequential ticket under ``tables/<t>/queue`` and commits when the
    tickets ahead of it are gone, watching only the one right ahead (no
    herd when a ticket goes). Read with the head. A ticket's name holds its
    commit's id, so a join whose answer was lost finds its ticket again.
    Liveness only."""

    def __init__(self, zk: ZkConnection, paths: Paths, nodes: Nodes) -> None:
        self.zk = zk
        self.paths = paths
        self.nodes = nodes
        self._lock = threading.Lock()
        self._missing: dict[str, float] = {}  # table -> when it was found without a usable queue
        self._watched: dict[str, threading.Event] = {}  # ticket path -> set when it goes

    def send_read(self, table: str) -> Any:
        return self.zk.send_get_children(self.paths.folder(table, "queue"))

    def answer(self, pending: Any, table: str) -> tuple[str, ...]:
        """The tickets, oldest first (none when the table has no queue folder)."""
        path = self.paths.folder(table, "queue")
        with self.zk.reading(f"reading {path}"):
            try:
                names = self.zk.answer(pending)
            except NoNodeError:
                return ()
        # Only names a join makes count: a node planted under another name
        # (a pusher may create here) neither sorts ahead nor holds anyone.
        return tuple(sorted((n for n in names if TICKET.match(n)), key=ticket_order))

    def _no_queue(self, table: str) -> bool:
        with self._lock:
            since = self._missing.get(table)
            if since is not None and self.zk.env.monotonic() - since > NO_QUEUE_RETRY_S:
                del self._missing[table]  # an admin may have run 'acl apply' since
                since = None
            return since is not None

    def _mark_no_queue(self, table: str) -> None:
        with self._lock:
            self._missing[table] = self.zk.env.monotonic()

    def join(self, table: str, commit_id: str) -> str | None:
        if self._no_queue(table) or not TICKET.match(f"{TICKET_PREFIX}{commit_id}-0000000000"):
            return None  # (a commit id no ticket name can hold: commit without a queue)
        folder = self.paths.folder(table, "queue")
        mine = f"{TICKET_PREFIX}{commit_id}-"
        for _ in range(2):
            try:
                return self._create_ticket(table, folder, mine)
            except NoNodeError:
                pass  # a table made before queues (make its folder, once), or no table
            except AuthError:
                self._mark_no_queue(table)
                return None
            except StoreUnavailableError:
                # The answer was lost: the ticket may exist. Find it by its name (or give up on it).
                found = self._lost_ticket(folder, mine)
                if found is not None:
                    return found
                raise
            if not self._make_queue(table, folder):
                return None
        return None

    def _create_ticket(self, table: str, folder: str, mine: str) -> str:
        """Create this commit's ticket (ephemeral, sequential): its name."""
        with translated(
            f"joining the commit queue of {table!r}", refused="not authorised", passing=(NoNodeError,)
        ):
            path = self.zk.create(
                f"{folder}/{mine}",
                b"",
                acl=self.nodes.acl_at(Place.TICKET),
                ephemeral=True,
                sequence=True,
            )
        return path.rsplit("/", 1)[1]

    def _lost_ticket(self, folder: str, mine: str) -> str | None:
        """The ticket a create whose answer was lost made, if it did (and the queue can be read)."""
        with contextlib.suppress(LineageError, NoNodeError):
            found = [n for n in self.zk.get_children(folder, doing=f"reading {folder}") if n.startswith(mine)]
            if found:
                return sorted(found, key=ticket_order)[0]
        return None

    def _make_queue(self, table: str, folder: str) -> bool:
        """Make the queue folder of a table made before queues; False when
        this identity may not (commit without a queue)."""
        if self.zk.exists(self.paths.head(table), doing=f"reading table {table!r}") is None:
            raise TableNotFoundError(table)
        try:
            self.nodes.ensure_node(folder, Place.QUEUE)
        except AuthError:
            self._mark_no_queue(table)
            log.info("table %r has no commit queue and this identity may not make one", table)
            return False
        return True

    def await_turn(self, table: str, ahead: str, timeout_s: float) -> bool:
        """One watch per ticket waited on, however often this is called."""
        path = f"{self.paths.folder(table, 'queue')}/{ahead}"
        with self._lock:
            gone = self._watched.get(path)
            fresh = gone is None
            if gone is None:
                gone = self._watched[path] = threading.Event()
        if fresh:

            def went(_event: Any, path: str = path, gone: threading.Event = gone) -> None:
                gone.set()  # any event: created, changed, deleted, or the session's end
                with self._lock:
                    if self._watched.get(path) is gone:
                        del self._watched[path]

            try:
                if self.zk.exists_watch(path, went, doing=f"watching {path}") is None:
                    went(None)
                    return True
            except LineageError:
                with self._lock:
                    if self._watched.get(path) is gone:
                        del self._watched[path]
                raise
        elif not gone.is_set() and self.zk.exists(path, doing=f"reading {path}") is None:
            return True  # gone, and the watch set earlier has not been told yet
        return gone.wait(max(0.0, timeout_s))

    def leave(self, table: str, ticket: str) -> None:
        """Awaited, with kazoo's retry: a ticket left behind by a lost
        delete would stand in the queue as long as this session lives."""
        with contextlib.suppress(LineageError, *UNAVAILABLE):
            self.zk.delete(f"{self.paths.folder(table, 'queue')}/{ticket}", retry=True)


class Floors:
    def __init__(self, zk: ZkConnection, paths: Paths, nodes: Nodes) -> None:
        self.zk = zk
        self.paths = paths
        self.nodes = nodes

    def send_read(self, table: str) -> Any:
        """Send the floor's read (answered by :meth:`answer`)."""
        return self.zk.send_get(self.paths.floor(table))

    def answer(self, pending: Any, table: str) -> Floor | None:
        """The answer to a floor read sent earlier (None: no floor record)."""
        path = self.paths.floor(table)
        with translated(
            f"ZooKeeper reading {path} failed", refused=f"ZooKeeper refused reading {path}: not authorised"
        ):
            try:
                raw, stat = self.zk.answer(pending)
            except NoNodeError:
                return None
        if not raw:  # made as a bare folder (an ACL repair of an older table): free
            return Floor(None, 0, int(stat.version))
        try:
            holder, until = codec.decode_floor(raw, path)
        except CorruptRecordError as exc:  # it decides who waits, never what is read: free
            log.warning("ignoring the floor of table %r: %s", table, exc.message)
            return Floor(None, 0, int(stat.version))
        return Floor(holder, until, int(stat.version))

    def take(self, table: str, seen: Floor | None, commit_id: str, until_ms: int) -> bool:
        path = self.paths.floor(table)
        data = codec.encode_floor(commit_id, until_ms)
        with translated(
            f"taking the floor of {table!r}",
            refused=f"ZooKeeper refused taking the floor of {table!r}: not authorised",
        ):
            try:
                if seen is None:
                    self.zk.create(path, data, acl=self.nodes.acl_at(Place.FLOOR))
                else:
                    self.zk.set(path, data, version=seen.version)
            except (NodeExistsError, BadVersionError):
                return False
            except NoNodeError:
                if seen is None:
                    raise TableNotFoundError(table) from None
                return False
        return True

    def leave(self, table: str, commit_id: str) -> None:
        path = self.paths.floor(table)
        # A refusal of the set reads as unavailable, as it always has: the floor only delays.
        with translated(f"leaving the floor of {table!r}", refused=None):
            try:
                floor = self.answer(self.send_read(table), table)
                if floor is None or floor.holder != commit_id:
                    return
                self.zk.set(path, codec.encode_floor(None, 0), version=floor.version)
            except (NoNodeError, BadVersionError):
                return  # gone with the table, or taken after it lapsed


class TableHolds:
    """One kind of exclusive hold on a table: an ephemeral node
    ``<folder>/lock`` that lives as long as the holder's session. Retention
    passes hold ``passes``; mirror publishers, and the drop or disable that
    removes a mirror's log, hold ``mirror``."""

    def __init__(
        self,
        zk: ZkConnection,
        paths: Paths,
        ephemerals: Ephemerals,
        folder: str,
        busy: Callable[[str, str | None], LineageError],
    ) -> None:
        self.zk = zk
        self.paths = paths
        self.ephemerals = ephemerals
        self.folder = folder
        self.busy = busy
        self._doing = f"{folder} lock"
        self._lock = threading.Lock()
        self._held: set[tuple[str, str]] = set()  # (table, name) this store holds
        self._who = f"{socket.gethostname()} pid {os.getpid()}".encode()[:200]  # said to those who wait

    def path(self, table: str, name: str = LOCK) -> str:
        return f"{self.paths.folder(table, self.folder)}/{name}"

    def hold(self, table: str, name: str = LOCK) -> None:
        with self._lock:
            if (table, name) in self._held:  # two holders in one process never overlap either
                raise self.busy(table, f"this one, pid {os.getpid()}")
            self._held.add((table, name))
        try:
            self._hold(table, name, self.path(table, name))
        except BaseException:
            with self._lock:
                self._held.discard((table, name))
            raise

    def _hold(self, table: str, name: str, path: str) -> None:
        try:
            self.ephemerals.create(table, self.folder, name, self._who, sequence=False)
            return
        except (NodeExistsError, StoreUnavailableError) as exc:
            # Taken already (by another holder, or by this session before a
            # lost answer), or ZooKeeper is away: the node's owner tells which.
            try:
                stat = self.zk.exists(path, doing=self._doing)
            except NoNodeError:
                stat = None
            if stat is None:
                if isinstance(exc, NodeExistsError):  # released meanwhile: the next try takes it
                    raise self.busy(table, None) from None
                raise
        if stat.ephemeralOwner == 0:
            # A lasting node is no one's hold (made by hand, or by a client that
            # may create there): it would hold the table for ever. It goes; the
            # next try takes the hold.
            with (
                translated(f"removing a lasting {self.folder} node of {table!r}", refused=None),
                contextlib.suppress(NoNodeError, BadVersionError),
            ):
                self.zk.delete(path, version=stat.version)
            raise self.busy(table, "a node that was no session's, now removed")
        if stat.ephemeralOwner != self.zk.session_id():
            raise self.busy(table, self._holder(path))

    def _holder(self, path: str) -> str | None:
        """Who holds it, as its holder said (None: gone, or not said)."""
        try:
            raw, _ = self.zk.get(path, doing=self._doing)
        except (NoNodeError, StoreUnavailableError):
            return None
        return raw.decode("utf-8", "replace")[:200] or None

    def holds(self, table: str, name: str = LOCK) -> bool:
        try:
            stat = self.zk.exists(self.path(table, name), doing=self._doing)
        except (NoNodeError, StoreUnavailableError):
            return False
        return stat is not None and stat.ephemeralOwner == self.zk.session_id()

    def holds_now(self, table: str, name: str = LOCK) -> int | None:
        return self.ephemerals.owned_now(self.path(table, name), self._doing)

    def release(self, table: str, name: str = LOCK) -> None:
        """Release the hold, if it is still this session's: a holder whose
        session lapsed must not take away the hold of the one after it."""
        with self._lock:
            self._held.discard((table, name))
        path = self.path(table, name)
        try:
            stat = self.zk.exists(path, doing=self._doing)
        except NoNodeError:
            return
        if stat is None or stat.ephemeralOwner != self.zk.session_id():
            return
        # An answer lost or late is told as the project's error (the holder
        # logs it: the session's end releases the hold anyway), never kazoo's.
        with (
            translated(f"releasing the {self.folder} hold on {table!r}", refused=None),
            contextlib.suppress(NoNodeError, BadVersionError),
        ):
            self.zk.delete(path, version=stat.version)

    def live(self, table: str) -> frozenset[str]:
        return frozenset(self.ephemerals.listing(table, self.folder))


class Elections:
    def __init__(self, zk: ZkConnection, paths: Paths, nodes: Nodes, ephemerals: Ephemerals) -> None:
        self.zk = zk
        self.paths = paths
        self.nodes = nodes
        self.ephemerals = ephemerals

    def join(self, role: str, identity: str) -> str:
        path = self.paths.election(role)
        self.nodes.ensure_root()
        self.nodes.ensure_node(self.paths.leaders, Place.LEADERS)
        self.nodes.ensure_node(path, Place.ELECTION)
        with translated(
            f"joining the {role} election",
            refused=f"ZooKeeper refused joining the {role} election: not authorised",
            remedy="run it as an identity with that role (LINEAGE_ZK_AUTH)",
        ):
            created = self.zk.create(
                f"{path}/{MEMBER_PREFIX}",
                identity.encode("utf-8"),
                acl=self.nodes.acl_at(Place.MEMBER),
                ephemeral=True,
                sequence=True,
            )
        return created.rsplit("/", 1)[-1]

    def members(self, role: str) -> list[str]:
        try:
            children = self.zk.get_children(self.paths.election(role), doing=f"the {role} election")
        except NoNodeError:
            return []
        return sorted(c for c in children if c.startswith(MEMBER_PREFIX))

    def member(self, role: str, name: str) -> Member | None:
        try:
            raw, stat = self.zk.get(f"{self.paths.election(role)}/{name}", doing=f"the {role} election")
        except NoNodeError:
            return None
        return Member(name, raw.decode("utf-8", "replace"), int(stat.ephemeralOwner) or None)

    def leave(self, role: str, name: str) -> None:
        self.ephemerals.delete_quietly(f"{self.paths.election(role)}/{name}", "election member")
