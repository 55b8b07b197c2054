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
import hashlib
import threading
from collections.abc import Collection, Sequence

from segment_lineage.lineage.core.env import SYSTEM, Env
from segment_lineage.lineage.core.errors import LineageError, StoreUnavailableError
from segment_lineage.lineage.core.names import check_role, check_table_name
from segment_lineage.lineage.store.contract import Store


def trust_s(store: Store) -> float:
    """How long a confirmation from ZooKeeper is trusted: a third of the
    session timeout, so a paused process asks again before its session could
    have expired unnoticed."""
    return store.session.timeout_s / 3


def rank(role: str, tag: str) -> int:
    """A candidacy's rank for one role (rendezvous hashing): each role ranks
    the candidates in its own order, so many roles spread evenly, and a
    candidate that leaves moves only the roles it led."""
    return int.from_bytes(hashlib.blake2b(f"{role}\0{tag}".encode(), digest_size=8).digest(), "big")


class Leadership:
    """One process's candidacy for a role. Thread-safe."""

    def __init__(
        self,
        store: Store,
        role: str,
        identity: str,
        *,
        env: Env = SYSTEM,
        prefer: bool = False,
    ) -> None:
        """``prefer``: lead only while no other candidate ranks higher for
        this role (see :func:`rank`); a leader that finds one hands over by
        rejoining at the back. Spreads many roles (one per table) evenly
        over the candidates, and leaves a single role to whoever joined first
        when off."""
        self.store = store
        self.prefer = prefer
        self._tags: dict[str, str] = {}  # member name -> its candidacy's tag (names are never reused)
        self.role = check_role(role)
        self.identity = identity
        # What this candidacy's members carry: its identity and a token of its
        # own, so a member of a join whose answer was lost is known as ours
        # (and only ours: candidates may share a session).
        self._tag = f"{identity} #{env.hex_id()[:8]}"
        self._clock = env.monotonic
        self._lock = threading.Lock()
        self._member: str | None = None
        self._session: int | None = None
        self._confirmed: float | None = None  # monotonic time of the last confirming request
        self._leading = False
        self._leader_identity: str | None = None

    # ---- asking ZooKeeper ------------------------------------------------------

    def check(self, *, keep: bool = False) -> str | None:
        """Join (or rejoin after a lost session) and ask who leads.

        Returns this process's term (its member's name) while it leads, else
        None. Never raises for connection trouble: no answer means no lead.
        ``keep``: do not hand over to a higher-ranked candidate now (work is
        running in this term).
        """
        with self._lock:
            sent = self._clock()
            try:
                return self._check(sent, keep)
            except StoreUnavailableError:
                self._leading = False
                self._leader_identity = None
                return None
            except BaseException:  # refused, say: not leading, whatever it was before
                self._leading = False
                self._leader_identity = None
                raise

    def _check(self, sent: float, keep: bool) -> str | None:
        store = self.store
        if not store.session.connected():
            self._leading = False
            self._leader_identity = None
            return None
        session = store.session.id()
        seen = self._members(session)
        if seen is None:
            return None
        members, mine = seen
        self._tags = {name: tag for name, tag in self._tags.items() if name in members}
        self._tags[mine] = self._tag
        self._leading = members[0] == mine
        if self._leading and self.prefer and not keep and self._outranked(members):
            self._hand_over(session, mine)
            return None
        if self._leading:
            self._confirmed = sent
            self._leader_identity = self.identity
            return mine
        self._follow(members[0])
        return None

    def _members(self, session: int | None) -> tuple[list[str], str] | None:
        """The election's members and ours, joined first on a new session;
        None when our member went with an old session (joined again)."""
        if self._member is None or session != self._session:
            self._join(session)
        members = self.store.elections.members(self.role)
        mine = self._member
        assert mine is not None
        if mine not in members:
            self._join(session)
            return None
        return members, mine

    def _hand_over(self, session: int | None, mine: str) -> None:
        """Rejoin at the back: the higher-ranked candidate leads once the ones
        before it have handed over too. Not leading from before the leave:
        the next one may lead at once."""
        self._leading = False
        self._leader_identity = None
        self.store.elections.leave(self.role, mine)
        self._join(session)

    def _follow(self, first: str) -> None:
        """Another member leads: note whose it is (and remove it if it is a
        lost one of ours)."""
        tag = self._tag_of(first)
        if tag is None:
            self._leader_identity = None
            return
        if tag == self._tag:
            # A member of ours from a join whose answer was lost: it would
            # block this process from ever leading. Remove it; lead next time.
            self.store.elections.leave(self.role, first)
        self._leader_identity = tag.rsplit(" #", 1)[0]

    def _tag_of(self, name: str) -> str | None:
        """The tag a member carries (read once: a name is never reused)."""
        tag = self._tags.get(name)
        if tag is None:
            found = self.store.elections.member(self.role, name)
            if found is None:
                return None
            tag = self._tags[name] = found.identity
        return tag

    def _outranked(self, members: list[str]) -> bool:
        mine = rank(self.role, self._tag)
        for name in members[1:]:
            tag = self._tag_of(name)
            if tag is not None and tag != self._tag and rank(self.role, tag) > mine:
                return True
        return False

    def _join(self, session: int | None) -> None:
        self._member = self.store.elections.join(self.role, self._tag)
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
                or not self.store.session.alive(self._session)
                or term != self._member
                or not self._leading
                or self._confirmed is None
            ):
                return False
            if self._clock() - self._confirmed < trust_s(self.store):
                return True
        return self.check(keep=True) == term

    @property
    def connected(self) -> bool:
        return self.store.session.connected()

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
            if not store.session.connected():
                return
            with contextlib.suppress(StoreUnavailableError):
                for name in store.elections.members(self.role):
                    found = store.elections.member(self.role, name) if name != member else None
                    if name == member or (found is not None and found.identity == self._tag):
                        store.elections.leave(self.role, name)


def owner_role(table: str) -> str:
    """The election whose leader owns ``table`` for retention."""
    return f"retention.{check_table_name(table)}"


class Ownership:
    """One process's candidacy for many tables at once: a :class:`Leadership`
    per table (its own election), ranked, so that every table is owned by
    exactly one live candidate, candidates given different tables each own
    theirs, and candidates given the same tables spread them evenly. A
    candidate that dies (its session expires) leaves its tables to the
    others at their next :meth:`check`. Thread-safe."""

    def __init__(self, store: Store, identity: str, *, env: Env = SYSTEM) -> None:
        self.store = store
        self.identity = identity
        self._env = env
        self._lock = threading.Lock()
        self._candidacies: dict[str, Leadership] = {}
        self._owners: dict[str, str | None] = {}  # table -> its owner's identity, as last seen

    def candidacies(self) -> dict[str, Leadership]:
        """This process's candidacy for each table it stands for: a copy,
        taken without the lock (copying a dict is one step for the
        interpreter), so an observer never waits behind a check that is
        waiting on ZooKeeper."""
        return dict(self._candidacies)

    def check(self, tables: Sequence[str], *, keep: Collection[str] = ()) -> dict[str, str]:
        """Stand for every table in ``tables`` (leaving the elections of those
        no longer in it), hand over tables a higher-ranked candidate stands
        for, except those in ``keep`` (work is running on them), and return
        the tables this process owns, each with its term. Never raises for
        connection trouble: no answer means no table."""
        with self._lock:
            wanted = dict.fromkeys(tables)
            for table in [t for t in self._candidacies if t not in wanted]:
                self._candidacies.pop(table).resign()
                self._owners.pop(table, None)
            terms: dict[str, str] = {}
            refused: LineageError | None = None
            for table in wanted:
                try:
                    term = self._candidacy(table).check(keep=table in keep)
                except LineageError as exc:  # refused for this table: the others are still checked
                    refused = refused or exc
                    term = None
                if term is not None:
                    terms[table] = term
                candidacy = self._candidacies.get(table)
                self._owners[table] = None if candidacy is None else candidacy.leader_identity
            if refused is not None and not terms:
                raise refused  # refused everywhere: the caller says why
            return terms

    def _candidacy(self, table: str) -> Leadership:
        """This process's candidacy for ``table``, made the first time."""
        candidacy = self._candidacies.get(table)
        if candidacy is None:
            candidacy = Leadership(self.store, owner_role(table), self.identity, env=self._env, prefer=True)
            self._candidacies[table] = candidacy
        return candidacy

    def holds(self, table: str, term: str) -> bool:
        """True while ``term`` is still this process's term for ``table``
        (see :meth:`Leadership.holds`)."""
        candidacy = self._candidacies.get(table)
        return candidacy is not None and candidacy.holds(term)

    def owners(self) -> dict[str, str | None]:
        """Each table stood for, and its owner's identity as last seen (None:
        nobody owned it at the last check)."""
        with self._lock:
            return dict(self._owners)

    @property
    def connected(self) -> bool:
        return self.store.session.connected()

    def resign(self) -> None:
        """Leave every election (on a clean stop), so the others take over at once."""
        with self._lock:
            for candidacy in self._candidacies.values():
                candidacy.resign()
            self._candidacies.clear()
            self._owners.clear()


class SessionCheck:
    """A fence for one-shot work that needs agreement (a retention pass run
    by hand): holds while the session this process started with is connected,
    unchanged, and confirmed by ZooKeeper within a third of the session
    timeout (asking again when the last answer is older). A process paused
    past its session timeout therefore fails the check on waking, before the
    client has even noticed the session is gone."""

    def __init__(self, store: Store, *, env: Env = SYSTEM) -> None:
        self.store = store
        self._clock = env.monotonic
        self.session = store.session.id()
        self._confirmed = self._clock()

    def holds(self) -> bool:
        if self.session is None or not self.store.session.alive(self.session):
            return False
        if self._clock() - self._confirmed < trust_s(self.store):
            return True
        sent = self._clock()
        try:
            self.store.session.confirm()
        except StoreUnavailableError:
            return False
        if not self.store.session.alive(self.session):
            return False
        self._confirmed = sent
        return True
