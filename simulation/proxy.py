"""What stands between an actor and the store: one proxy per actor.

Each store call is one "ZooKeeper request": the actor yields before and after
it. The proxy also plays the parts of ZooKeeper the in-memory store lacks:
sessions (the owners, leases and retention-pass holds an actor's session
created vanish when it crashes or its session expires) and lost answers (a
write applied, or not, and reported as ``WriteOutcomeUnknown``). On real
ZooKeeper the sessions are real, and :class:`ClientProxy` adds a switch point
before every request the store sends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from kazoo.exceptions import ConnectionLoss

from segment_lineage.lineage.core import errors as lineage_errors
from segment_lineage.lineage.core.acl import ADMIN_ROLE, READER
from segment_lineage.lineage.core.errors import AuthError, StoreUnavailableError
from segment_lineage.lineage.core.model import Operation
from segment_lineage.lineage.store.contract import LOCK, Lease, Member, Snapshot, Store, WriteOutcomeUnknown
from segment_lineage.retention.errors import FencedError

Switch = Callable[[str], None]
Ack = Callable[[str, str, int], None]


@dataclass
class Session:
    """One ZooKeeper session of one actor: what vanishes with it."""

    number: int
    owners: set[tuple[str, str]] = field(default_factory=set)
    leases: dict[str, Lease] = field(default_factory=dict)
    passes: set[str] = field(default_factory=set)
    mirrors: set[str] = field(default_factory=set)  # tables whose mirror it holds
    members: set[tuple[str, str]] = field(default_factory=set)  # (role, member) of elections
    tickets: set[tuple[str, str]] = field(default_factory=set)  # (table, ticket) in commit queues
    alive: bool = True


@dataclass
class Sessions:
    """The sessions of one run; which one holds each table's retention pass."""

    passes: dict[str, Session] = field(default_factory=dict)
    mirrors: dict[str, Session] = field(default_factory=dict)  # table -> who holds its mirror
    count: int = 0
    pins: dict[tuple[str, int], str] = field(default_factory=dict)  # (table, version) -> "current"/"as-of"
    members: dict[str, Session] = field(default_factory=dict)  # election member -> its session

    def new(self) -> Session:
        self.count += 1
        return Session(self.count)


class StoreProxy:
    """Wraps the store one actor uses. Any method of the store goes through
    :meth:`_call`; the session-bound ones are tracked (memory backend)."""

    def __init__(
        self,
        inner: Store,
        switch: Switch,
        sessions: Sessions,
        on_ack: Ack,
        *,
        zookeeper: bool = False,
        expire: Callable[[], None] | None = None,
    ) -> None:
        self.inner = inner
        self._switch = switch
        self._sessions = sessions
        self._on_ack = on_ack
        self.zookeeper = zookeeper
        self._expire_zk = expire
        self.sim_session = sessions.new()
        self.lose_next_write: bool | None = None  # armed fault: the next write's answer is lost
        # Armed fault (ZooKeeper): the next request this actor sends is lost on
        # the way (a connection dropped), as kazoo reports it: ConnectionLoss.
        self.lose_next_request = False
        self.dead = False
        self.calling: str | None = None  # the store call under way (ZooKeeper: its requests' labels)
        self.requests = 0  # requests that call sent so far
        # Push entries whose owner claim went with an ended session; a start or
        # end of one landing afterwards is a late commit (on_late reports it).
        self.lapsed: set[tuple[str, str]] = set()
        self.on_late: Callable[[str], None] | None = None
        # The actor's role under an ACL policy (None: no policy, anyone may):
        # the proxy refuses what ZooKeeper's ACLs would (a change whose commit
        # writes another role's guard node; a role check the store makes).
        self.role: str | None = None

    # ---- faults, from the scheduler's thread ------------------------------------

    def end_session(self) -> None:
        """The session ends (expiry or the process's death): its ephemerals go."""
        old = self.sim_session
        old.alive = False
        self.lapsed |= old.owners
        if self.zookeeper:
            if self._expire_zk is not None:
                self._expire_zk()
        else:
            for table, entry in sorted(old.owners):
                self.inner.holds("owner").release(table, entry)
            for lease in old.leases.values():
                self.inner.pins.release(lease)
            for role, member in sorted(old.members):
                self.inner.elections.leave(role, member)
                self._sessions.members.pop(member, None)
            for table, ticket in sorted(old.tickets):
                self.inner.queues.leave(table, ticket)
        for table in old.passes:
            if self._sessions.passes.get(table) is old:
                del self._sessions.passes[table]
        for table in old.mirrors:
            if self._sessions.mirrors.get(table) is old:
                del self._sessions.mirrors[table]
        self.sim_session = self._sessions.new()

    def crash(self) -> None:
        self.dead = True
        self.end_session()

    def fence(self) -> Callable[[], None]:
        """A retention fence on this actor's session (what ``session_fence``
        does on ZooKeeper): once the session it began in is gone, stop."""
        began = self.sim_session

        def fence() -> None:
            if self.dead or self.sim_session is not began:
                raise FencedError("the pass's session ended; it stopped")

        return fence

    # ---- calls ---------------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        if name == "holds":
            return lambda kind: Recipe(self, f"holds:{kind}", self.inner.holds(kind))
        if name in RECIPES:
            return Recipe(self, name, getattr(self.inner, name))
        if name == "read_now_many" and not self.zookeeper:
            # Pipelined on ZooKeeper, not atomic: other requests land between
            # one table's answer and the next. In memory each table is read at
            # its own switch point (on ZooKeeper every request has its own).
            read_now = self.inner.read_now
            return lambda tables: [self._call("read_now", read_now, (t,), {}) for t in tables]
        if name == "read_version_now" and not self.zookeeper:
            # One round trip on ZooKeeper, other sessions' requests landing
            # between its answers; in memory the version's read, then the
            # commit's, each at its own switch point (as the calls were).
            read_version, read_now = self.inner.read_version, self.inner.read_now

            def version_then_now(table: str, version: int) -> Any:
                state = self._call("read_version", read_version, (table, version), {})
                return (state, *self._call("read_now", read_now, (table,), {}))

            return version_then_now
        attr = getattr(self.inner, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._call(name, attr, args, kwargs)

        return call

    def _call(self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self._switch(f"store.{name}")
        self._acl(name, args, kwargs)
        special = None if self.zookeeper else getattr(self, f"_mem_{name}", None)
        self.calling, self.requests = f"store.{name}", 0
        try:
            if name == "write":
                result = self._write(fn, args, kwargs)
            elif name == "write_together":
                checks = args[1] if len(args) > 1 else kwargs.get("checks", ())
                result = self._write_together(fn, args[0] if args else kwargs["writes"], checks)
            elif name == "await_turn":  # never block the baton: look once, the caller sleeps in virtual time
                result = fn(args[0], args[1], 0.0)
            elif special is not None:
                result = special(fn, *args, **kwargs)
            else:
                result = fn(*args, **kwargs)
        finally:
            self.calling = None
        if name == "pin":
            asked = args[1] if len(args) > 1 else kwargs.get("version")
            # the newest pin of a version names it: a missing file shows right after it
            self._sessions.pins[(args[0], result.state.version)] = "as-of" if asked else "current"
        if name == "find_commit" and result is not None:
            self._on_ack(args[0], args[1], result.version)
        if self.zookeeper and name == "hold_owner":  # the memory backend's own does this
            self.sim_session.owners.add((args[0], args[1]))
        self._switch(f"store.{name}.done")
        return result

    def _acl(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """What the ACL policy refuses this actor's role, as ZooKeeper would."""
        if self.role is None or self.role == ADMIN_ROLE:
            return
        if name == "require_role":
            roles, doing = args, kwargs.get("doing", "this")
            if self.role not in roles:
                needed = " or ".join(roles or (ADMIN_ROLE,))
                raise AuthError(f"{doing} needs the {needed} role; identity is {self.role}")
        elif name == "write":
            self._acl_write(kwargs.get("role", args[7] if len(args) > 7 else None))
        elif name == "write_together":
            for w in args[0] if args else kwargs["writes"]:
                self._acl_write(w.role)

    def _acl_write(self, guard: str | None) -> None:
        if self.role == READER or (guard is not None and guard != self.role):
            raise AuthError(f"this change needs the {guard or 'pusher'} role; identity is {self.role}")

    def _write(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        landed, self.lose_next_write = self.lose_next_write, None
        if landed is False:
            raise WriteOutcomeUnknown("simulated: the request was lost before it was applied")
        state = fn(*args, **kwargs)
        self._late(args[0], args[2] if len(args) > 2 else kwargs["change"])
        if landed:
            raise WriteOutcomeUnknown("simulated: applied, but the answer was lost")
        table, commit_id = args[0], args[4] if len(args) > 4 else kwargs["commit_id"]
        self._on_ack(table, commit_id, state.version)
        return state

    def _write_together(self, fn: Callable[..., Any], writes: Any, checks: Any = ()) -> Any:
        """Several tables' commits in one request: lost, or answered, as one."""
        landed, self.lose_next_write = self.lose_next_write, None
        if landed is False:
            raise WriteOutcomeUnknown("simulated: the request was lost before it was applied")
        states = fn(writes, checks)
        for w in writes:
            self._late(w.table, w.change)
        if landed:
            raise WriteOutcomeUnknown("simulated: applied, but the answer was lost")
        for w, state in zip(writes, states, strict=True):
            self._on_ack(w.table, w.commit_id, state.version)
        return states

    def _late(self, table: str, change: Any) -> None:
        """A push's start or end landed for an entry whose claim its process lost."""
        late = change.operation in (Operation.START_REPLACE, Operation.END_REPLACE)
        if late and (table, change.entry_id) in self.lapsed and self.on_late is not None:
            what = f"{change.operation.value} of entry {change.entry_id}"
            self.on_late(f"{table}: {what} landed after its owner's session ended")

    # ---- the memory backend's sessions --------------------------------------------

    def _mem_join_queue(self, fn: Callable[..., Any], table: str, commit_id: str) -> str | None:
        ticket: str | None = fn(table, commit_id)
        if ticket is not None:
            self.sim_session.tickets.add((table, ticket))
        return ticket

    def _mem_leave_queue(self, fn: Callable[..., Any], table: str, ticket: str) -> None:
        if (table, ticket) in self.sim_session.tickets:  # a lapsed session's ticket went with it
            fn(table, ticket)
            self.sim_session.tickets.discard((table, ticket))

    def _mem_hold_owner(self, fn: Callable[..., Any], table: str, entry_id: str) -> None:
        fn(table, entry_id)
        self.sim_session.owners.add((table, entry_id))

    def _mem_release_owner(self, fn: Callable[..., Any], table: str, entry_id: str) -> None:
        if (
            table,
            entry_id,
        ) in self.sim_session.owners:  # a lapsed session's: not ours to judge
            fn(table, entry_id)
            self.sim_session.owners.discard((table, entry_id))

    def _mem_pin(
        self, fn: Callable[..., Any], table: str, version: int | None = None, read: Snapshot | None = None
    ) -> Lease:
        if version is None:
            # On ZooKeeper a pin of the current version is two requests, the
            # head, then the lease: the other actors may act in between.
            version = self.inner.read(table).state.version
            self._switch("store.pin.lease")
        # A read handed in was the caller's, some switch points ago: the
        # lease builds on it, as on ZooKeeper, whatever happened since.
        lease: Lease = fn(table, version, read)
        self.sim_session.leases[lease.lease_id] = lease
        return lease

    def _mem_release(self, fn: Callable[..., Any], lease: Lease) -> None:
        if self.sim_session.leases.pop(lease.lease_id, None) is not None:
            fn(lease)

    def _mem_hold_pass(self, _fn: Callable[..., Any], table: str, _name: str = LOCK) -> None:
        self.inner.read(table)
        holder = self._sessions.passes.setdefault(table, self.sim_session)
        if holder is not self.sim_session:
            raise lineage_errors.PassRunningError(table)
        self.sim_session.passes.add(table)

    def _mem_holds_pass(self, _fn: Callable[..., Any], table: str, _name: str = LOCK) -> bool:
        return self._sessions.passes.get(table) is self.sim_session

    def _mem_release_pass(self, _fn: Callable[..., Any], table: str, _name: str = LOCK) -> None:
        if self._sessions.passes.get(table) is self.sim_session:
            del self._sessions.passes[table]
        self.sim_session.passes.discard(table)

    def _mem_hold_mirror(self, _fn: Callable[..., Any], table: str, _name: str = LOCK) -> None:
        self.inner.read(table)
        holder = self._sessions.mirrors.get(table)
        if holder is not None or table in self.sim_session.mirrors:
            raise lineage_errors.MirrorHeldError(table)
        self._sessions.mirrors[table] = self.sim_session
        self.sim_session.mirrors.add(table)

    def _mem_holds_mirror(self, _fn: Callable[..., Any], table: str, _name: str = LOCK) -> bool:
        return self._sessions.mirrors.get(table) is self.sim_session

    def _mem_release_mirror(self, _fn: Callable[..., Any], table: str, _name: str = LOCK) -> None:
        if self._sessions.mirrors.get(table) is self.sim_session:
            del self._sessions.mirrors[table]
        self.sim_session.mirrors.discard(table)

    def _mem_drop_table(self, fn: Callable[..., Any], table: str, *args: Any, **kwargs: Any) -> None:
        fn(table, *args, **kwargs)
        holder = self._sessions.mirrors.pop(table, None)  # on ZooKeeper the hold's node goes with the table
        if holder is not None:
            holder.mirrors.discard(table)

    def _mem_connected(self, _fn: Callable[..., Any]) -> bool:
        return not self.dead

    def _mem_session_id(self, _fn: Callable[..., Any]) -> int | None:
        return None if self.dead else self.sim_session.number

    def _mem_session_alive(self, _fn: Callable[..., Any], since: int) -> bool:
        return not self.dead and self.sim_session.alive and self.sim_session.number == since

    def _mem_confirm_session(self, _fn: Callable[..., Any]) -> None:
        if self.dead:
            raise StoreUnavailableError("simulated: no answer")

    def _mem_join_election(self, fn: Callable[..., Any], role: str, identity: str) -> str:
        landed, self.lose_next_write = self.lose_next_write, None
        if landed is False:
            raise StoreUnavailableError("simulated: the join was lost before it was applied")
        member: str = fn(role, identity)
        self.sim_session.members.add((role, member))
        self._sessions.members[member] = self.sim_session
        if landed:
            raise StoreUnavailableError("simulated: joined, but the answer was lost")
        return member

    def _mem_election_member(self, fn: Callable[..., Any], role: str, name: str) -> Member | None:
        found: Member | None = fn(role, name)
        holder = self._sessions.members.get(name)
        if found is None or holder is None:
            return found
        return replace(found, session=holder.number)

    def _mem_leave_election(self, fn: Callable[..., Any], role: str, name: str) -> None:
        fn(role, name)
        holder = self._sessions.members.pop(name, None)
        if holder is not None:
            holder.members.discard((role, name))


# Each recipe call is one request, named as the store's own calls are
# (``hold_owner``, ``join_queue``...): the faults aim at these names.
RECIPES = ("queues", "floors", "pins", "elections", "session")
LABELS = {
    **{
        (f"holds:{kind}", verb): f"{verb}_{kind}" if verb != "holds" else f"holds_{kind}"
        for kind in ("owner", "pass", "mirror")
        for verb in ("hold", "holds", "holds_now", "release")
    },
    ("holds:owner", "live"): "live_owners",
    ("queues", "join"): "join_queue",
    ("queues", "await_turn"): "await_turn",
    ("queues", "leave"): "leave_queue",
    ("floors", "take"): "take_floor",
    ("floors", "leave"): "leave_floor",
    ("pins", "pin"): "pin",
    ("pins", "release"): "release",
    ("pins", "leases"): "leases",
    ("pins", "pinned_states"): "pinned_states",
    ("pins", "ignored"): "ignored_leases",
    ("elections", "join"): "join_election",
    ("elections", "members"): "election",
    ("elections", "member"): "election_member",
    ("elections", "leave"): "leave_election",
    ("session", "connected"): "connected",
    ("session", "id"): "session_id",
    ("session", "alive"): "session_alive",
    ("session", "confirm"): "confirm_session",
}


class Recipe:
    """One coordination recipe of the store, its calls sent through the actor's proxy."""

    def __init__(self, proxy: StoreProxy, recipe: str, inner: Any) -> None:
        self._proxy = proxy
        self._recipe = recipe
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        label = LABELS.get((self._recipe, name))
        if label is None or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if label == "pin" and not self._proxy.zookeeper and kwargs.pop("look", False):
                return self._pin_then_read(attr, args, kwargs)
            if label.startswith("holds_now_") and not self._proxy.zookeeper:
                return self._holds_then_clock(label.removeprefix("holds_now_"), args, kwargs)
            return self._proxy._call(label, attr, args, kwargs)

        return call

    def _holds_then_clock(self, kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
        """``holds_now`` on the memory backend: the hold's look, then the
        clock's, each a request with its switch points (on ZooKeeper they go
        together, and other sessions' requests may land between them)."""
        proxy = self._proxy
        held = proxy._call(f"holds_{kind}", self._inner.holds, args, kwargs)
        now: int = proxy._call("now_ms", proxy.inner.now_ms, (), {})
        return now if held else None

    def _pin_then_read(self, pin: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Lease:
        """A pin that reads the table behind its lease, on the memory
        backend: on ZooKeeper the read follows the lease in one round trip
        (a switch point before each request there), and other sessions'
        requests may land between the two. Played as the lease's call, then
        the read's, each with its switch points, and the lease released
        when the read fails."""
        proxy = self._proxy
        lease: Lease = proxy._call("pin", pin, args, kwargs)
        try:
            after = proxy._call("read", proxy.inner.read, (lease.table,), {})
        except BaseException:
            proxy._call("release", proxy.inner.pins.release, (lease,), {})
            raise
        return replace(lease, after=after.state)


class ClientProxy:
    """Wraps an actor's kazoo client: a switch point before every request."""

    def __init__(self, client: Any, switch: Switch) -> None:
        self._client = client
        self._switch = switch
        self.store: StoreProxy | None = None  # whose calls send these requests

    def label(self, request: str) -> str:
        """``zk.get``, or inside a store call ``store.read_version/zk.get#2``
        (its second request): faults can aim inside one call."""
        store = self.store
        if store is None or store.calling is None:
            return f"zk.{request}"
        store.requests += 1
        return f"{store.calling}/zk.{request}#{store.requests}"

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name.endswith("_async") and callable(attr):

            def request(*args: Any, **kwargs: Any) -> Any:
                self._switch(self.label(name.removesuffix("_async")))
                store = self.store
                if store is not None and store.lose_next_request:
                    # As kazoo reports a request the connection dropped: its
                    # answer holds the error (sent requests are never raised at).
                    store.lose_next_request = False
                    lost = self._client.handler.async_result()
                    lost.set_exception(ConnectionLoss("simulated: the connection dropped; nothing was sent"))
                    return lost
                return attr(*args, **kwargs)

            return request
        if name == "transaction":
            return lambda: _TxnProxy(attr(), self._switch, self.label)
        return attr


class _TxnProxy:
    def __init__(self, txn: Any, switch: Switch, label: Callable[[str], str]) -> None:
        self._txn = txn
        self._switch = switch
        self._label = label

    def __getattr__(self, name: str) -> Any:
        return getattr(self._txn, name)

    def commit_async(self) -> Any:
        self._switch(self._label("multi"))
        return self._txn.commit_async()
