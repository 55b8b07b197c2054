"""The ACL policy in force for one store, and the nodes it creates with it:
every node gets the ACL of its place; the shared folders, the clock and the
store id are made here."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from kazoo.exceptions import NoAuthError, NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat
from kazoo.security import ACL, Id

from segment_lineage.lineage import codec
from segment_lineage.lineage.core.acl import (
    ADMIN_ROLE,
    OWN_FOLDER_OF,
    POLICY_NODE,
    RETENTION,
    AclPolicy,
    Place,
    no_role,
    own_folder,
    user_of,
)
from segment_lineage.lineage.core.errors import AuthError, StoreUnavailableError
from segment_lineage.lineage.zk.connection import UNAVAILABLE, ZkConnection, translated
from segment_lineage.lineage.zk.shared import close_open_nodes
from segment_lineage.lineage.zk.store.paths import Paths

SHARED_FRESH_S = 1.0  # answers older than this (the policy read long before) are asked again


def policy_acl(policy: AclPolicy, place: Place, owner: str | None = None) -> list[ACL]:
    """The ZooKeeper ACL of a node at ``place`` under ``policy`` (``owner``:
    whose own folder it is, see :data:`segment_lineage.lineage.core.acl.OWN_RIGHTS`)."""
    return [ACL(rights, Id("digest", ident)) for ident, rights in policy.grants(place, owner)]


def folder_data(place: Place) -> bytes:
    """What a table folder holds when it is created: the sweep's empty marks,
    a free floor, or nothing."""
    if place is Place.GC:
        return codec.encode_gc({})
    if place is Place.FLOOR:
        return codec.encode_floor(None, 0)
    return b""


class Nodes:
    def __init__(
        self, zk: ZkConnection, paths: Paths, acl: Sequence[ACL] | None, identity: str | None
    ) -> None:
        self.zk = zk
        self.paths = paths
        self.acl = list(acl) if acl else None
        self.identity = identity  # this client's digest id, when it authenticates
        self._policy: tuple[AclPolicy | None] | None = None  # loaded once
        self._ready = False
        # exists of the shared nodes, sent with the policy's read (when, what)
        self._shared_sent: tuple[float, list[Any]] | None = None
        # A new client's first contact sent ahead of its first read, not yet
        # answered: the policy's read, and the shared nodes' exists.
        self._contact: tuple[Any, list[Any], float] | None = None
        self._store_id: str | None = None
        zk.on_refused = self.refused_by_policy

    # ---- the policy ------------------------------------------------------------

    def policy(self) -> AclPolicy | None:
        """The ACL policy in force, read once per store; None when there is none."""
        if self._policy is None:
            self._load_policy()
        assert self._policy is not None
        return self._policy[0]

    @property
    def _policy_path(self) -> str:
        return f"{self.paths.root}/{POLICY_NODE}"

    def send_contact(self) -> None:
        """A new client's first contact (the policy's read, and whether the
        shared nodes exist), sent now and answered when first wanted: the
        read this goes ahead of carries it, one round trip for both (a
        command's first read, then its role check and first commit, need no
        round trip of their own for it). Nothing when it was made already,
        or ZooKeeper is not answering (the first want asks then)."""
        if self._policy is not None or self._contact is not None:
            return
        try:
            self.zk.check_answering()
        except StoreUnavailableError:
            return
        pending = self.zk.send_get(self._policy_path)
        shared = [] if self._ready else [self.zk.send_exists(p) for p in self._shared_paths()]
        self._contact = (pending, shared, self.zk.env.monotonic())

    def _load_policy(self) -> None:
        """Read the policy (the answer of a first contact sent ahead, when
        there is one); on a new client's first contact, ask whether the
        shared nodes exist in the same round trip (ensure_root's question)."""
        path = self._policy_path
        contact, self._contact = self._contact, None
        sent: list[Any] = []
        at = self.zk.env.monotonic()

        def behind() -> None:
            if not self._ready:
                sent[:] = [self.zk.send_exists(p) for p in self._shared_paths()]

        message, remedy = no_role(None if self.identity is None else self.user)
        with translated(
            "reading the ACL policy",
            refused=f"ZooKeeper refused reading the ACL policy: {message}",
            remedy=remedy,
        ):
            try:
                raw = None
                # A contact answered long before the policy is first wanted
                # (a long-lived client's first read) is not relied on: the
                # policy is read when first wanted, as it always was.
                if contact is not None and self.zk.env.monotonic() - contact[2] < SHARED_FRESH_S:
                    pending, sent[:], at = contact
                    raw = self._answered(pending)
                if raw is None:  # no contact sent ahead, or its answer lost: asked now
                    at = self.zk.env.monotonic()
                    raw, _ = self.zk.get(path, retry=True, behind=behind)
                self._policy = (codec.decode_policy(raw, path),)
            except NoNodeError:
                self._policy = (None,)
        self._shared_sent = (at, sent) if sent else None

    def _answered(self, pending: Any) -> bytes | None:
        """The bytes a read sent ahead got (NoNodeError: no node); None when
        its answer was lost with a connection (asked again)."""
        try:
            raw, _ = self.zk.answer(pending)
        except (NoNodeError, NoAuthError):
            raise  # answers: no policy, or not allowed to read it
        except UNAVAILABLE:
            return None
        return bytes(raw)

    def refused_by_policy(self) -> None:
        """After a refusal: raise the clearer error when a policy names no role for this identity."""
        self.forget_policy()
        with contextlib.suppress(StoreUnavailableError):
            self.policy()

    def forget_policy(self) -> None:
        self._policy = None

    def role(self) -> str | None:
        policy = self.policy()
        return None if policy is None else policy.role_of(self.identity)

    def who(self) -> str:
        """``identity 'x' is ROLE``, as refusals name this client."""
        return f"identity {self.user!r} is {self.role() or 'unknown'}"

    @property
    def user(self) -> str:
        """This client's user (its digest id's), or ``anonymous``."""
        return "anonymous" if self.identity is None else user_of(self.identity)

    def acl_at(self, place: Place, owner: str | None = None) -> list[ACL] | None:
        """The ACL a node created at ``place`` gets."""
        policy = self.policy()
        if policy is None:
            return self.acl
        return policy_acl(policy, place, owner)

    def acl_of_node(self, place: Place, name: str) -> list[ACL] | None:
        """The ACL of an existing node at ``place`` named ``name`` (an own folder's name tells whose)."""
        policy = self.policy()
        return self.acl_at(place, policy.owner_of(place, name) if policy is not None else None)

    def require_role(self, *roles: str, doing: str) -> None:
        """Refuse work meant for other roles, when a policy is in force.
        ZooKeeper enforces the rights on znodes; this also keeps, say, a
        pusher's identity from running a retention pass against deep storage."""
        if self.policy() is None:
            return
        role = self.role()
        if role != ADMIN_ROLE and role not in roles:
            raise AuthError(
                f"{doing} needs the {' or '.join(roles or (ADMIN_ROLE,))} role; {self.who()}",
                remedy="run it as an identity with that role (LINEAGE_ZK_AUTH)",
            )

    def may_sweep(self) -> bool:
        """Whether this identity may delete metadata blobs and version records."""
        return self.policy() is None or self.role() in (ADMIN_ROLE, RETENTION)

    # ---- own folders: each pusher's owners, each reader's leases ---------------
    #
    # Under a policy each pusher and reader keeps its ephemerals in its own
    # folder (owners/by-<user>, leases/by-<user>), made by an admin: only it
    # may delete in there. Without a policy they sit in the folder itself.
    # Listings read both shapes (a process opened before the policy still
    # writes the flat one until it reopens).

    def own_folders(self) -> list[tuple[str, Place, str]]:
        """(folder, place, identity) of every own folder a new table gets under the policy."""
        policy = self.policy()
        if policy is None:
            return []
        out: list[tuple[str, Place, str]] = []
        for folder, place in (("owners", Place.OWNERS), ("leases", Place.LEASES)):
            own = OWN_FOLDER_OF[place]
            out.extend((folder, own, ident) for ident in policy.own_folder_ids(own))
        return out

    def holder(self, folder: str) -> str | None:
        """The own folder this store keeps its ephemerals of ``folder`` in; None: flat."""
        policy = self.policy()
        if policy is None or self.identity is None or folder not in ("owners", "leases"):
            return None
        return own_folder(self.identity)

    # ---- nodes -----------------------------------------------------------------

    def ensure_node(self, path: str, place: Place, data: bytes = b"", owner: str | None = None) -> bool:
        """Create ``path`` unless it exists; True when this call created it.
        Asks first: ZooKeeper checks the right to create before existence."""
        with translated(f"creating {path}", refused=f"ZooKeeper refused to create {path}: not authorised"):
            try:
                if self.zk.exists(path) is not None:
                    return False
                self.zk.create(path, data, acl=self.acl_at(place, owner))
                return True
            except NodeExistsError:
                return False

    def _shared_paths(self) -> tuple[str, ...]:
        root = self.paths.root
        return (root, f"{root}/tables", f"{root}/names", f"{root}/clock")

    def _shared_found(self) -> list[ZnodeStat | None]:
        """Whether each shared node exists: the answers sent with the policy's
        read when there are some, else asked now (one round trip)."""
        sent, self._shared_sent = self._shared_sent, None
        if sent is not None and self.zk.env.monotonic() - sent[0] < SHARED_FRESH_S:
            try:
                return [self.zk.answer(pending) for pending in sent[1]]
            except UNAVAILABLE:
                pass  # sent on a connection lost since: ask again
        return self.zk.exists_many(self._shared_paths())

    def ensure_root(self) -> None:
        """Once per store: the shared nodes exist, and none is left open to
        anyone (an anonymous run creates them open; see :mod:`segment_lineage.lineage.zk.shared`).
        A new client asks this with its first read of the policy: one round trip."""
        if self._ready:
            return
        if self._policy is None:
            self._load_policy()  # the shared nodes are asked in the same round trip
        with translated("checking the store's nodes", refused="ZooKeeper refused checking the store's nodes"):
            found = self._shared_found()  # usually all are there
        for path, stat in zip(self._shared_paths(), found, strict=True):
            if stat is None:  # in order: a folder before what goes in it
                self.ensure_node(path, Place.CLOCK if path.endswith("/clock") else Place.FOLDER)
        close_open_nodes(self.zk.client, self.paths.root, self.acl_of_node, self.zk.op_timeout_s)
        self._ready = True

    def now_ms(self) -> int:
        self.ensure_root()
        # The clock node holds nothing shared; only its mtime (set by the
        # ZooKeeper leader) matters, so an unconditional set is right here.
        clock = self.paths.clock
        try:
            stat = self.zk.set(clock, b"", doing="clock read")
        except NoNodeError:
            # Deleted since this store made sure of it: it holds nothing, so
            # making it again loses nothing.
            try:
                self.ensure_node(clock, Place.CLOCK)
            except AuthError:
                raise AuthError(
                    f"the clock node {clock} is missing and this identity may not create it",
                    remedy="run 'lineage acl apply' as an admin: it makes the clock again",
                ) from None
            try:
                stat = self.zk.set(clock, b"", doing="clock read")
            except NoNodeError:
                raise StoreUnavailableError(f"the clock node {clock} keeps disappearing") from None
        return int(stat.mtime)

    def store_id(self) -> str:
        """This store's id (its ensemble and chroot): a uuid made by the first
        client that asked, kept in ``id``. Root claims name it."""
        if self._store_id is None:
            self.ensure_root()
            path = self.paths.store_id
            try:
                self.ensure_node(path, Place.GUARD, self.zk.env.hex_id().encode())
                raw, _ = self.zk.get(path, doing="reading the store id")
            except NoNodeError:
                raise StoreUnavailableError(f"the store id {path} vanished; retry") from None
            self._store_id = codec.decode_store_id(raw, path)
        return self._store_id
