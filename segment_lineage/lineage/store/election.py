"""Leader election among processes of one role (the retention daemons).

Each candidate is a member of the role's election for as long as its
session lives (ZooKeeper: an ephemeral sequential node under
``<root>/leaders/<role>``); the first member leads. A leader that dies, or loses its session,
gives way to the next candidate, which learns so the next time it checks.

Leadership is held in *terms*: a term is one member, so a candidate
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
import uuid
from collections.abc import Callable

from segment_lineage.lineage.core.errors import StoreUnavailableError
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.store.contract import Store

Clock = Callable[[], float]  # seconds, monotonic


def trust_s(store: Store) -> float:
    """How long a confirmation from ZooKeeper is trusted: a third of the
    session timeout, so a paused process asks again before its session could
    have expired unnoticed."""
    return store.session_timeout_s / 3


class Leadership:
    """One process's candidacy for a role. Thread-safe."""

    def __init__(self, store: Store, role: str, identity: str, *, clock: Clock = time.monotonic) -> None:
        self.store = store
        self.role = check_table_name(role)
        self.identity = identity
        # What this candidacy's members carry: its identity and a token of its
        # own, so a member of a join whose answer was lost is known as ours
        # (and only ours: candidates may share a session).
        self._tag = f"{identity} #{uuid.uuid4().hex[:8]}"
        self._clock = clock
        self._lock = threading.Lock()
        self._member: str | None = None
        self._session: int | None = None
        self._confirmed: float | None = None  # monotonic time of the last confirming request
        self._leading = False
        self._leader_identity: str | None = None

    # ---- asking ZooKeeper ------------------------------------------------------

    def check(self) -> str | None:
        """Join (or rejoin after a lost session) and ask who leads.

        Returns this process's term (its member's name) while it leads, else
        None. Never raises for connection trouble: no answer means no lead.
        """
        with self._lock:
            sent = self._clock()
            try:
                return self._check(sent)
            except StoreUnavailableError:
                self._leading = False
                self._leader_identity = None
                return None

    def _check(self, sent: float) -> str | None:
        store = self.store
        if not store.connected():
            self._leading = False
            self._leader_identity = None
            return None
        session = store.session_id()
        if self._member is None or session != self._session:
            self._join(session)
        members = store.election(self.role)
        mine = self._member
        assert mine is not None
        if mine not in members:  # our member went with an old session: rejoin
            self._join(session)
            return None
        self._leading = members[0] == mine
        if self._leading:
            self._confirmed = sent
            self._leader_identity = self.identity
            return mine
        first = store.election_member(self.role, members[0])
        if first is None:
            self._leader_identity = None
            return None
        if first.identity == self._tag:
            # A member of ours from a join whose answer was lost: it would
            # block this process from ever leading. Remove it; lead next time.
            store.leave_election(self.role, first.name)
        self._leader_identity = first.identity.rsplit(" #", 1)[0]
        return None

    def _join(self, session: int | None) -> None:
        self._member = self.store.join_election(self.role, self._tag)
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
            if self._clock() - self._confirmed < trust_s(self.store):
                return True
        return self.check() == term

    @property
    def connected(self) -> bool:
        return self.store.connected()

    @property
    def leading(self) -> bool:
        return self._leading

    @property
    def session(self) -> int | None:
        """The session of the current term (or of the last join)."""
        return self._session

    @property
    def leader_identity(self) -> str | None:
        return self._leader_identity

    def resign(self) -> None:
        """Leave the election (on a clean stop), so a standby takes over at
        once; members this session left behind (a join whose answer was
        lost) go too, else they would stand before the standbys while the
        process lives on."""
        with self._lock:
            member, self._member, self._leading = self._member, None, False
            store = self.store
            if not store.connected():
                return
            with contextlib.suppress(StoreUnavailableError):
                for name in store.election(self.role):
                    found = store.election_member(self.role, name) if name != member else None
                    if name == member or (found is not None and found.identity == self._tag):
                        store.leave_election(self.role, name)


class SessionCheck:
    """A fence for one-shot work that needs agreement (a retention pass run
    by hand): holds while the session this process started with is connected,
    unchanged, and confirmed by ZooKeeper within a third of the session
    timeout (asking again when the last answer is older). A process paused
    past its session timeout therefore fails the check on waking, before the
    client has even noticed the session is gone."""

    def __init__(self, store: Store, *, clock: Clock = time.monotonic) -> None:
        self.store = store
        self._clock = clock
        self.session = store.session_id()
        self._confirmed = clock()

    def holds(self) -> bool:
        if self.session is None or not self.store.session_alive(self.session):
            return False
        if self._clock() - self._confirmed < trust_s(self.store):
            return True
        sent = self._clock()
        try:
            self.store.confirm_session()
        except StoreUnavailableError:
            return False
        if not self.store.session_alive(self.session):
            return False
        self._confirmed = sent
        return True
