"""Least-privilege ACLs: which role may do what to each kind of znode.

With an ACL policy in place (``lineage acl apply``, stored at
``<root>/acl``), every znode the project creates carries the ACL of its
*place* below: the admin identities hold every right everywhere, and each
role gets only what its work needs.

- **pusher**: writes the head (commits), creates metadata blobs and version
  records, and holds push-owner claims. It never deletes lineage metadata.
- **retention**: writes the head (retention marks and clears), creates
  blobs and version records, deletes unreferenced blobs and old version
  records (the metadata sweep), and joins the retention leader election.
- **reader**: reads everything and takes snapshot leases; it changes
  nothing else.

Pushers and retention both hold a table's mirror (``mirror/lock``) while
they publish to its Delta log after their commits.

A reader's leases and a pusher's owner claims are ephemeral nodes, and in
ZooKeeper deleting a node takes ``DELETE`` on its *parent*. So each identity
of those roles gets its own folder, ``leases/by-<user>`` or
``owners/by-<user>`` (pushers and retention get a leases folder too: they pin
the versions they publish to a mirror), made by an admin (``acl apply``, ``table create``):
that identity alone may create and delete in it. Nobody else of its role can
delete its leases or claims, and nobody can squat its folder.

Tables are created and dropped by an admin. ZooKeeper rights are per node
and not inherited: ``CREATE`` and ``DELETE`` on a node govern its children,
``WRITE`` its own data. Identities are ZooKeeper digest ids
(``user:base64(sha1(user:password))``), so the policy holds no password.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from segment_lineage.lineage.core.errors import InvalidInputError

READ, WRITE, CREATE, DELETE, ADMIN = 1, 2, 4, 8, 16
ALL = READ | WRITE | CREATE | DELETE | ADMIN

PUSHER = "pusher"
RETENTION = "retention"
READER = "reader"
ROLES = (PUSHER, RETENTION, READER)
ADMIN_ROLE = "admin"

POLICY_NODE = "acl"  # below the project root
# Below the project root, written by admins only: a commit that only an admin
# may make (a settings change, hiding visible data by deleting segments) sets
# it in the same multi, so ZooKeeper itself refuses it to every other role.
ADMIN_NODE = "admin"
# Below the project root, written by retention (and admins) only: a retention
# mark that unregisters visible segments (time retention) sets it.
RETENTION_NODE = "retention"
GUARD_NODES = {ADMIN_ROLE: ADMIN_NODE, RETENTION: RETENTION_NODE}


class Place(Enum):
    """The kinds of znode, each with its own rights."""

    FOLDER = "folder"  # the root, tables, names: listed by all, changed by admins
    LEADERS = "leaders"  # leaders: retention creates a table's election there
    POLICY = "policy"
    CLOCK = "clock"  # scratch node whose mtime is the clock: every role sets it
    GUARD = "guard"  # names/<casefolded>: create-if-absent guard of table names; roots: the root registry
    HEAD = "head"
    BLOBS = "blobs"
    BLOB = "blob"
    VERSIONS = "versions"
    VERSION = "version"
    GC = "gc"
    FLOOR = "floor"  # tables/<t>/floor: a writer that kept losing holds the commits a while
    QUEUE = "queue"  # tables/<t>/queue: writers that lost a race commit in turn
    TICKET = "ticket"  # one writer's ephemeral place in the queue
    OWNERS = "owners"
    OWN_OWNERS = "own owners"  # owners/by-<user>: one pusher's claims
    OWNER = "owner"
    LEASES = "leases"
    OWN_LEASES = "own leases"  # leases/by-<user>: one reader's leases
    LEASE = "lease"
    RETENTION_HOLDS = "passes"  # tables/<t>/passes: where a retention pass holds the table
    RETENTION_HOLD = "hold"
    MIRROR_HOLDS = "mirror"  # tables/<t>/mirror: where a publisher (or a drop) holds the table's mirror
    MIRROR_HOLD = "mirror hold"
    RETENTION_GUARD = "retention guard"  # retention: set by a mark that unregisters visible data
    ELECTION = "election"  # leaders/<name>: retention, or retention.<table> (one per table)
    MEMBER = "member"  # leaders/<name>/<member>


R, RW, RC, RCD = READ, READ | WRITE, READ | CREATE, READ | CREATE | DELETE

RIGHTS: Mapping[Place, Mapping[str, int]] = {
    Place.FOLDER: {PUSHER: R, RETENTION: R, READER: R},
    Place.LEADERS: {PUSHER: R, RETENTION: RC, READER: R},
    Place.POLICY: {PUSHER: R, RETENTION: R, READER: R},
    Place.CLOCK: {PUSHER: RW, RETENTION: RW, READER: RW},
    Place.GUARD: {PUSHER: R, RETENTION: R, READER: R},
    Place.HEAD: {PUSHER: RW, RETENTION: RW, READER: R},
    Place.BLOBS: {PUSHER: RC, RETENTION: RCD, READER: R},
    Place.BLOB: {PUSHER: R, RETENTION: R, READER: R},
    Place.VERSIONS: {PUSHER: RC, RETENTION: RCD, READER: R},
    Place.VERSION: {PUSHER: R, RETENTION: R, READER: R},
    Place.GC: {PUSHER: R, RETENTION: RW, READER: R},
    Place.FLOOR: {PUSHER: RW, RETENTION: RW, READER: R},
    Place.QUEUE: {PUSHER: RCD, RETENTION: RCD, READER: R},
    Place.TICKET: {PUSHER: R, RETENTION: R, READER: R},
    Place.OWNERS: {PUSHER: R, RETENTION: R, READER: R},
    Place.OWN_OWNERS: {PUSHER: R, RETENTION: R, READER: R},
    Place.OWNER: {PUSHER: R, RETENTION: R, READER: R},
    Place.LEASES: {PUSHER: R, RETENTION: R, READER: R},
    Place.OWN_LEASES: {PUSHER: R, RETENTION: R, READER: R},
    Place.LEASE: {PUSHER: R, RETENTION: R, READER: R},
    Place.RETENTION_HOLDS: {PUSHER: R, RETENTION: RCD, READER: R},
    Place.RETENTION_HOLD: {PUSHER: R, RETENTION: R, READER: R},
    Place.MIRROR_HOLDS: {PUSHER: RCD, RETENTION: RCD, READER: R},  # both publish after their commits
    Place.MIRROR_HOLD: {PUSHER: R, RETENTION: R, READER: R},
    Place.RETENTION_GUARD: {PUSHER: R, RETENTION: RW, READER: R},
    Place.ELECTION: {PUSHER: R, RETENTION: RCD, READER: R},
    Place.MEMBER: {PUSHER: R, RETENTION: R, READER: R},
}

# A folder of one identity: the roles whose identities get one, and what that
# identity alone holds on it (the rest of its role gets RIGHTS above). Pushers
# and retention take leases too: they pin the versions they publish to a
# table's mirror after their commits.
OWN_RIGHTS: Mapping[Place, tuple[tuple[str, ...], int]] = {
    Place.OWN_OWNERS: ((PUSHER,), RCD),
    Place.OWN_LEASES: ((READER, PUSHER, RETENTION), RCD),
}
OWN_FOLDER_OF: Mapping[Place, Place] = {Place.OWNERS: Place.OWN_OWNERS, Place.LEASES: Place.OWN_LEASES}
OWN_PREFIX = "by-"  # no entry id (a UUID) and no flat lease (lease-N) starts so

TABLE_FOLDERS: Mapping[str, Place] = {
    "blobs": Place.BLOBS,
    "versions": Place.VERSIONS,
    "gc": Place.GC,
    "floor": Place.FLOOR,
    "queue": Place.QUEUE,
    "owners": Place.OWNERS,
    "leases": Place.LEASES,
    "passes": Place.RETENTION_HOLDS,
    "mirror": Place.MIRROR_HOLDS,
}
_CHILD_OF = {
    Place.BLOBS: Place.BLOB,
    Place.VERSIONS: Place.VERSION,
    Place.OWNERS: Place.OWNER,
    Place.OWN_OWNERS: Place.OWNER,
    Place.LEASES: Place.LEASE,
    Place.OWN_LEASES: Place.LEASE,
    Place.RETENTION_HOLDS: Place.RETENTION_HOLD,
    Place.MIRROR_HOLDS: Place.MIRROR_HOLD,
    Place.QUEUE: Place.TICKET,
}

_DIGEST_ID = re.compile(r"^[^:\s]{1,64}:[A-Za-z0-9+/]{27}=$")
_PLAIN_USER = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


# ZooKeeper's auth schemes: a user so named is most likely a scheme given by mistake (digest:user:pw).
SCHEMES = ("digest", "world", "auth", "ip", "sasl", "x509", "super", "kerberos")


def no_role(user: str | None) -> tuple[str, str]:
    """``identity 'x' has no role`` with why, and its remedy: what every
    refusal of an identity a role policy does not name says (``user``: its
    user, None for anonymous). ZooKeeper's digest scheme takes any user and
    password (they only make the digest id ACLs name), so a wrong password
    cannot be told from a user the policy does not name: one message covers
    both."""
    if user is None:
        why = "LINEAGE_ZK_AUTH is not set"
    elif user.lower() in SCHEMES:
        why = f"LINEAGE_ZK_AUTH is user:password, with no scheme: {user!r} was taken as the user"
    else:
        why = "the ACL policy does not name it, or its password is wrong"
    return (
        f"identity {user or 'anonymous'!r} has no role ({why})",
        "set LINEAGE_ZK_AUTH=user:password to an identity the policy names ('lineage acl show', run as "
        "an admin, lists them)",
    )


def user_of(ident: str) -> str:
    """The user of a digest id (``user:hash``)."""
    return ident.partition(":")[0]


def own_folder(ident: str) -> str:
    """The name of an identity's own folder: ``by-<user>``, or, for a user
    name that is no plain path part, ``by-~`` and a hash of it."""
    user = user_of(ident)
    if _PLAIN_USER.match(user) and user not in (".", ".."):
        return OWN_PREFIX + user
    return OWN_PREFIX + "~" + hashlib.sha256(user.encode()).hexdigest()[:24]


def digest_id(user: str, password: str) -> str:
    """ZooKeeper's digest id of an identity: what ACLs name instead of the password."""
    hashed = base64.b64encode(hashlib.sha1(f"{user}:{password}".encode()).digest()).decode()  # noqa: S324
    return f"{user}:{hashed}"


def check_digest_id(value: str) -> str:
    if not _DIGEST_ID.match(value):
        raise InvalidInputError(
            f"invalid digest id for user {value.partition(':')[0]!r}: expected user:base64-sha1, "
            "not a password (make one with 'lineage acl digest USER')"
        )
    return value


def child_place(folder: Place) -> Place:
    """The place of the children of a table folder."""
    return _CHILD_OF[folder]


_TOP_NODES = {
    "clock": Place.CLOCK,
    POLICY_NODE: Place.POLICY,
    ADMIN_NODE: Place.POLICY,
    RETENTION_NODE: Place.RETENTION_GUARD,
    "roots": Place.GUARD,
    "id": Place.GUARD,
    "tables": Place.FOLDER,
    "names": Place.FOLDER,
    "leaders": Place.LEADERS,
}

# Below the top folders but ``tables``: (top folder, depth) -> place.
_NESTED_NODES = {
    ("names", 2): Place.GUARD,
    ("leaders", 2): Place.ELECTION,
    ("leaders", 3): Place.MEMBER,
}


def place_of(path: str) -> Place | None:
    """The place of a path relative to the project root ('' is the root); None for a stranger."""
    parts = [p for p in path.split("/") if p]
    depth = len(parts)
    if depth == 0:
        return Place.FOLDER
    if depth == 1:
        return _TOP_NODES.get(parts[0])
    if parts[0] == "tables":
        return _table_place(parts[2:])
    return _NESTED_NODES.get((parts[0], depth))


def _table_place(below: list[str]) -> Place | None:
    """The place of a path below one table's head (``[]``: the head itself)."""
    if not below:
        return Place.HEAD
    folder = TABLE_FOLDERS.get(below[0])
    if folder is None or len(below) > 3:
        return None
    if len(below) == 1:
        return folder
    own = OWN_FOLDER_OF.get(folder)
    if own is not None and below[1].startswith(OWN_PREFIX):
        return own if len(below) == 2 else _CHILD_OF[own]
    return _CHILD_OF.get(folder) if len(below) == 2 else None


@dataclass(frozen=True)
class AclPolicy:
    """Digest ids per role. The admins hold every right on every node."""

    admin: tuple[str, ...]
    pusher: tuple[str, ...] = ()
    retention: tuple[str, ...] = ()
    reader: tuple[str, ...] = ()

    @staticmethod
    def build(
        admin: Iterable[str],
        pusher: Iterable[str] = (),
        retention: Iterable[str] = (),
        reader: Iterable[str] = (),
    ) -> AclPolicy:
        def ids(values: Iterable[str]) -> tuple[str, ...]:
            return tuple(sorted({check_digest_id(v) for v in values}))

        policy = AclPolicy(ids(admin), ids(pusher), ids(retention), ids(reader))
        if not policy.admin:
            raise InvalidInputError("an ACL policy needs at least one admin identity")
        seen: dict[str, str] = {}
        for role in (ADMIN_ROLE, *ROLES):
            for ident in policy.ids(role):
                user = ident.partition(":")[0]
                if user in seen:
                    raise InvalidInputError(
                        f"identity {user!r} is given two roles ({seen[user]} and {role}): one role each"
                    )
                seen[user] = role
        return policy

    def ids(self, role: str) -> tuple[str, ...]:
        ids: tuple[str, ...] = getattr(self, role)
        return ids

    def role_of(self, ident: str | None) -> str | None:
        if ident is None:
            return None
        for role in (ADMIN_ROLE, *ROLES):
            if ident in self.ids(role):
                return role
        return None

    def grants(self, place: Place, owner: str | None = None) -> list[tuple[str, int]]:
        """(digest id, rights) pairs for a place, admins first. ``owner`` is
        the identity whose own folder it is (for the places of OWN_RIGHTS)."""
        own_roles, own_rights = OWN_RIGHTS.get(place, ((), 0))
        out = [(ident, ALL) for ident in self.admin]
        for role, rights in RIGHTS[place].items():
            for ident in self.ids(role):
                out.append((ident, own_rights if role in own_roles and ident == owner else rights))
        return out

    def own_folder_ids(self, place: Place) -> tuple[str, ...]:
        """The identities that get an own folder of ``place`` (OWN_RIGHTS)."""
        roles, _ = OWN_RIGHTS.get(place, ((), 0))
        return tuple(ident for role in roles for ident in self.ids(role))

    def owner_of(self, place: Place, folder: str) -> str | None:
        """The identity whose own folder ``folder`` is; None for one the policy does not name."""
        return next((i for i in self.own_folder_ids(place) if own_folder(i) == folder), None)


def rights_text(rights: int) -> str:
    return "".join(
        c for bit, c in zip((READ, WRITE, CREATE, DELETE, ADMIN), "rwcda", strict=True) if rights & bit
    )
