"""Putting an ACL policy in force on a ZooKeeper store (``lineage acl apply``).

The policy node is written first, by compare-and-set, so every store opened
afterwards creates nodes with the policy's ACLs; then every existing node
under the project root gets the ACL of its place (:func:`segment_lineage.lineage.core.acl.place_of`),
and each table gets the folders its roles create into (no role other than an
admin may create children of a head), with a folder of its own for each
pusher (``owners/by-<user>``) and each reader (``leases/by-<user>``). Running it again is harmless, and
catches nodes a store opened before the policy created meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from segment_lineage.lineage import codec
from segment_lineage.lineage.core.acl import (
    ADMIN_NODE,
    ADMIN_ROLE,
    OWN_FOLDER_OF,
    POLICY_NODE,
    RETENTION_NODE,
    TABLE_FOLDERS,
    AclPolicy,
    Place,
    own_folder,
    place_of,
)
from segment_lineage.lineage.core.errors import ConflictError, InvalidInputError
from segment_lineage.lineage.zk.connection import translated
from segment_lineage.lineage.zk.shared import batches, walk
from segment_lineage.lineage.zk.store import ZkStore
from segment_lineage.lineage.zk.store.nodes import folder_data, policy_acl

ELECTIONS = ("retention",)


@dataclass(frozen=True)
class ApplyReport:
    nodes: int  # nodes whose ACL was set
    created: tuple[str, ...]  # folders made for the roles
    strangers: tuple[str, ...]  # nodes under the root the project does not know: left alone


def apply_policy(store: ZkStore, policy: AclPolicy) -> ApplyReport:
    if store.nodes.identity is None:
        raise InvalidInputError("applying an ACL policy needs LINEAGE_ZK_AUTH: the admin identity")
    if policy.role_of(store.nodes.identity) != ADMIN_ROLE:
        raise InvalidInputError("the identity applying an ACL policy must be one of its admins")
    with translated(
        "applying the ACL policy",
        refused="ZooKeeper refused changing ACLs: not authorised",
        remedy="only an admin of the policy in force may change it",
    ):
        return _apply(store, policy)


def _apply(store: ZkStore, policy: AclPolicy) -> ApplyReport:
    root = store.root
    store.nodes.forget_policy()
    store.nodes.policy()  # refuses an identity the policy in force does not know
    store.nodes.ensure_node(root, Place.FOLDER)
    _write_policy(store, policy)
    store.nodes.forget_policy()
    if store.client.chroot:
        # Connecting through a chroot reads the chroot node ("/" here):
        # every role must be able to, whoever created it.
        store.zk.set_acls("/", policy_acl(policy, Place.FOLDER))
    created = _ensure_shared(store) + _ensure_table_folders(store, policy)
    nodes, strangers = _set_acls(store, policy)
    return ApplyReport(nodes, tuple(created), tuple(strangers))


def _ensure_shared(store: ZkStore) -> list[str]:
    """Make the project's shared nodes that are missing; the paths made."""
    root = store.root
    shared = (
        (f"{root}/tables", Place.FOLDER),
        (f"{root}/names", Place.FOLDER),
        (f"{root}/clock", Place.CLOCK),
        (f"{root}/{ADMIN_NODE}", Place.POLICY),
        (f"{root}/{RETENTION_NODE}", Place.RETENTION_GUARD),
        (f"{root}/leaders", Place.LEADERS),
        *((f"{root}/leaders/{name}", Place.ELECTION) for name in ELECTIONS),
    )
    return [path for path, place in shared if store.nodes.ensure_node(path, place)]


def _ensure_table_folders(store: ZkStore, policy: AclPolicy) -> list[str]:
    """Make each table's role folders, and each pusher's and reader's own, that are missing."""
    created: list[str] = []
    for table in store.zk.get_children(f"{store.root}/tables"):
        for folder, place in TABLE_FOLDERS.items():
            path = f"{store.root}/tables/{table}/{folder}"
            if store.nodes.ensure_node(path, place, folder_data(place)):
                created.append(path)
            created += _ensure_own_folders(store, policy, path, place)
    return created


def _ensure_own_folders(store: ZkStore, policy: AclPolicy, path: str, place: Place) -> list[str]:
    """Make the folders of one's own under a table folder whose place has them."""
    own = OWN_FOLDER_OF.get(place)
    if own is None:
        return []
    created: list[str] = []
    for ident in policy.own_folder_ids(own):
        own_path = f"{path}/{own_folder(ident)}"
        if store.nodes.ensure_node(own_path, own, owner=ident):
            created.append(own_path)
    return created


def _set_acls(store: ZkStore, policy: AclPolicy) -> tuple[int, list[str]]:
    """Give every node under the root the ACL of its place: how many were set, and the strangers."""
    root = store.root
    nodes = 0
    strangers: list[str] = []
    for batch in batches(walk(store.client, root, store.op_timeout_s)):
        pending = []
        for path in batch:
            found = place_of(path[len(root) :])
            if found is None:
                strangers.append(path)
                continue
            owner = policy.owner_of(found, path.rsplit("/", 1)[-1])
            pending.append(store.client.set_acls_async(path, policy_acl(policy, found, owner)))
        nodes += _settled(store, pending)
    return nodes, strangers


def _settled(store: ZkStore, pending: list[Any]) -> int:
    """Wait for a batch of ACL changes; how many nodes were still there to take them."""
    done = 0
    for result in pending:
        try:
            result.get(timeout=store.op_timeout_s)
            done += 1
        except NoNodeError:
            continue  # an ephemeral node or a collected blob went meanwhile
    return done


def _write_policy(store: ZkStore, policy: AclPolicy) -> None:
    path = f"{store.root}/{POLICY_NODE}"
    data = codec.encode_policy(policy)
    try:
        stat = store.zk.exists(path)
        if stat is None:
            store.zk.create(path, data, acl=policy_acl(policy, Place.POLICY))
        else:
            store.zk.set(path, data, version=stat.version)
    except (NodeExistsError, BadVersionError):
        raise ConflictError(
            "the ACL policy changed while this one was applied",
            remedy="look with 'lineage acl show', run again",
        ) from None
