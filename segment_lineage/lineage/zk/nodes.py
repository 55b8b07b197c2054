"""The ACL policy in force for one store, and the shared nodes it creates:
the root folders, the clock, the store id."""

from __future__ import annotations

import contextlib
import logging
import uuid

from kazoo.exceptions import (
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import ACL, Id

from segment_lineage.lineage import codec
from segment_lineage.lineage.core.acl import (
    ADMIN_ROLE,
    POLICY_NODE,
    RETENTION,
    AclPolicy,
    Place,
)
from segment_lineage.lineage.core.errors import (
    AuthError,
    StoreUnavailableError,
)
from segment_lineage.lineage.zk.shared import close_open_nodes

log = logging.getLogger(__name__)


def policy_acl(policy: AclPolicy, place: Place, owner: str | None = None) -> list[ACL]:
    """The ZooKeeper ACL of a node at ``place`` under ``policy`` (``owner``:
    whose own folder it is, see :data:`segment_lineage.lineage.core.acl.OWN_RIGHTS`)."""
    return [ACL(rights, Id("digest", ident)) for ident, rights in policy.grants(place, owner)]


class _Nodes:
    # ---- access control ------------------------------------------------------

    def policy(self) -> AclPolicy | None:
        """The ACL policy in force, read once per store; None when there is none."""
        if self._policy is None:
            path = f"{self.root}/{POLICY_NODE}"
            try:
                raw, _ = self._retried("get", path)
                self._policy = (codec.decode_policy(raw, path),)
            except NoNodeError:
                self._policy = (None,)
            except NoAuthError:
                raise AuthError(
                    f"ZooKeeper refused reading the ACL policy: identity "
                    f"{(self.identity or 'anonymous').partition(':')[0]!r} has no role",
                    remedy="set LINEAGE_ZK_AUTH to an identity the policy names "
                    "('lineage acl show' as an admin)",
                ) from None
            except (KazooException, KazooTimeoutError) as exc:
                raise StoreUnavailableError(f"reading the ACL policy: {type(exc).__name__}") from None
        return self._policy[0]

    def _refused_by_policy(self) -> None:
        """After a refusal: raise the clearer error when a policy names no role for this identity."""
        self.forget_policy()
        with contextlib.suppress(StoreUnavailableError):
            self.policy()

    def forget_policy(self) -> None:
        self._policy = None

    def role(self) -> str | None:
        policy = self.policy()
        return None if policy is None else policy.role_of(self.identity)

    def acl_at(self, place: Place, owner: str | None = None) -> list[ACL] | None:
        """The ACL a node created at ``place`` gets."""
        policy = self.policy()
        if policy is None:
            return self.acl
        return policy_acl(policy, place, owner)

    def _acl_of_node(self, place: Place, name: str) -> list[ACL] | None:
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
                f"{doing} needs the {' or '.join(roles)} role; identity "
                f"{(self.identity or 'anonymous').partition(':')[0]!r} is {role or 'unknown'}",
                remedy="run it as an identity with that role (LINEAGE_ZK_AUTH)",
            )

    def may_sweep(self) -> bool:
        """Whether this identity may delete metadata blobs and version records."""
        return self.policy() is None or self.role() in (ADMIN_ROLE, RETENTION)

    def ensure_node(self, path: str, place: Place, data: bytes = b"", owner: str | None = None) -> bool:
        """Create ``path`` unless it exists; True when this call created it.
        Asks first: ZooKeeper checks the right to create before existence."""
        try:
            if self._op("exists", path) is not None:
                return False
            self._op("create", path, data, acl=self.acl_at(place, owner))
            return True
        except NodeExistsError:
            return False
        except NoAuthError:
            raise AuthError(f"ZooKeeper refused to create {path}: not authorised") from None
        except (KazooException, KazooTimeoutError) as exc:
            raise StoreUnavailableError(f"creating {path}: {type(exc).__name__}") from None

    def _ensure_root(self) -> None:
        """Once per store: the shared nodes exist, and none is left open to
        anyone (an anonymous run creates them open; see :mod:`segment_lineage.lineage.zk.shared`)."""
        if self._ready:
            return
        for path in (self.root, f"{self.root}/tables", f"{self.root}/names", f"{self.root}/clock"):
            self.ensure_node(path, Place.CLOCK if path.endswith("/clock") else Place.FOLDER)
        close_open_nodes(self.client, self.root, self._acl_of_node, self.op_timeout_s)
        self._ready = True

    def now_ms(self) -> int:
        self._ensure_root()
        # The clock node holds nothing shared; only its mtime (set by the
        # ZooKeeper leader) matters, so an unconditional set is right here.
        clock = f"{self.root}/clock"
        try:
            stat = self._call("clock read", "set", clock, b"")
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
                stat = self._call("clock read", "set", clock, b"")
            except NoNodeError:
                raise StoreUnavailableError(f"the clock node {clock} keeps disappearing") from None
        return int(stat.mtime)

    def store_id(self) -> str:
        """This store's id (its ensemble and chroot): a uuid made by the first
        client that asked, kept in ``id``. Root claims name it."""
        if self._store_id is None:
            self._ensure_root()
            path = f"{self.root}/id"
            try:
                self.ensure_node(path, Place.GUARD, uuid.uuid4().hex.encode())
                raw, _ = self._call("reading the store id", "get", path)
            except NoNodeError:
                raise StoreUnavailableError(f"the store id {path} vanished; retry") from None
            self._store_id = codec.decode_store_id(raw, path)
        return self._store_id
