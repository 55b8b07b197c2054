"""Leader election among processes of one role (the retention daemons).

Each candidate holds an ephemeral sequential node under
``<root>/leaders/<role>``; the lowest node leads. A node lives as long as its
owner's session, so a leader that dies, or loses its session, gives way to
the next candidate, which learns so the next time it checks.

Leadership is held in *terms*: a term is one member node, so a candidate
whose session expired and who rejoined with a new session is in a new term,
and :meth:`Leadership.holds` refuses the old one. Work planned in one term is
never finished in another.

A process paused past its session timeout (a long GC pause, SIGSTOP) may
still believe its session alive when it resumes. :meth:`Leadership.holds`
therefore trusts a confirmation for a third of the session timeout only,
measured on the monotonic clock from the moment the confirming request was
sent; after that it asks ZooKeeper again, and a dead session fails that
request.
"""

from __future__ import annotations

import contextlib
import threading
import time

from kazoo.exceptions import KazooException, NoAuthError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from lineage.acl import Place
from lineage.errors import AuthError, LineageError
from lineage.names import check_table_name
from lineage.zk_store import ZkStore

PREFIX = "member-"


def trust_s(store: ZkStore) -> float:
    """How long a confirmation from ZooKeeper is trusted: a third of the
    session timeout, so a paused process asks again before its session could
    have expired unnoticed."""
    return store.session_timeout_s / 3


class Leadership:
    """One process's candidacy for a role. Thread-safe."""

    def __init__(self, store: ZkStore, role: str, identity: str) -> None:
        self.store = store
        self.role = check_table_name(role)
        self.identity = identity
        self.path = f"{store.root}/leaders/{self.role}"
        self._lock = threading.Lock()
        self._member: str | None = None
        self._session: int | None = None
        self._confirmed: float | None = None  # monotonic time of the last confirming request
        self._leading = False
        self._leader_identity: str | None = None

    # ---- asking ZooKeeper ------------------------------------------------------

    def check(self) -> str | None:
        """Join (or rejoin after a lost session) and ask who leads.

        Returns this process's term (its member node) while it leads, else
        None. Never raises for connection trouble: no answer means no lead.
        """
        with self._lock:
            sent = time.monotonic()
            try:
                return self._check(sent)
            except (KazooException, KazooTimeoutError, ConnectionError):
                self._leading = False
                self._leader_identity = None
                return None

    def _check(self, sent: float) -> str | None:
        client = self.store.client
        if not client.connected:
            self._leading = False
            self._leader_identity = None
            return None
        session = self.store.session_id()
        if self._member is None or session != self._session:
            self._join(session)
        children = sorted(c for c in self.store._op("get_children", self.path) if c.startswith(PREFIX))
        assert self._member is not None
        mine = self._member.rsplit("/", 1)[-1]
        if mine not in children:  # our node went with an old session: rejoin
            self._join(session)
            return None
        self._leading = children[0] == mine
        if self._leading:
            self._confirmed = sent
            self._leader_identity = self.identity
            return self._member
        first = f"{self.path}/{children[0]}"
        try:
            raw, stat = self.store._op("get", first)
        except NoNodeError:
            self._leader_identity = None
            return None
        if stat.ephemeralOwner == session:
            # A node of ours from a create whose answer was lost: it would
            # block this process from ever leading. Remove it; lead next time.
            self.store._op("delete", first)
        self._leader_identity = raw.decode("utf-8", "replace")
        return None

    def _join(self, session: int | None) -> None:
        self.store.ensure_node(f"{self.store.root}/leaders", Place.FOLDER)
        self.store.ensure_node(self.path, Place.ELECTION)
        try:
            self._member = self.store._op(
                "create",
                f"{self.path}/{PREFIX}",
                self.identity.encode("utf-8"),
                acl=self.store.acl_at(Place.MEMBER),
                ephemeral=True,
                sequence=True,
            )
        except NoAuthError:
            raise AuthError(
                f"ZooKeeper refused joining the {self.role} election: not authorised",
                remedy="run it as an identity with that role (LINEAGE_ZK_AUTH)",
            ) from None
        self._session = session
        self._confirmed = None
        self._leading = False

    # ---- answering locally -----------------------------------------------------

    def holds(self, term: str) -> bool:
        """True while ``term`` is still this process's leading term: the
        session is connected, unchanged, and confirmed within ``trust_s``
        (asking ZooKeeper again when the last confirmation is older)."""
        with self._lock:
            if (
                self._session is None
                or not self.store.session_alive(self._session)
                or term != self._member
                or not self._leading
                or self._confirmed is None
            ):
                return False
            if time.monotonic() - self._confirmed < trust_s(self.store):
                return True
        return self.check() == term

    @property
    def connected(self) -> bool:
        return bool(self.store.client.connected)

    @property
    def leading(self) -> bool:
        return self._leading

    @property
    def leader_identity(self) -> str | None:
        return self._leader_identity

    def resign(self) -> None:
        """Leave the election (on a clean stop), so a standby takes over at once."""
        with self._lock:
            member, self._member, self._leading = self._member, None, False
            if member is None or not self.store.client.connected:
                return
            with contextlib.suppress(KazooException, KazooTimeoutError, ConnectionError):
                self.store._op("delete", member)


class SessionCheck:
    """A fence for one-shot work that needs agreement (a retention pass run
    by hand): holds while the session this process started with is connected,
    unchanged, and confirmed by ZooKeeper within a third of the session
    timeout (asking again when the last answer is older). A process paused
    past its session timeout therefore fails the check on waking, before the
    client has even noticed the session is gone."""

    def __init__(self, store: ZkStore) -> None:
        self.store = store
        self.session = store.session_id()
        self._confirmed = time.monotonic()

    def holds(self) -> bool:
        if self.session is None or not self.store.session_alive(self.session):
            return False
        if time.monotonic() - self._confirmed < trust_s(self.store):
            return True
        sent = time.monotonic()
        try:
            self.store._op("exists", self.store.root)
        except (KazooException, KazooTimeoutError, ConnectionError, LineageError):
            return False
        if not self.store.session_alive(self.session):
            return False
        self._confirmed = sent
        return True
