"""The ACL policy: digest ids per role."""

from __future__ import annotations

from segment_lineage.lineage.codec.envelope import (
    _decoding,
    _envelope,
    _str_list,
    dumps,
    parse,
)
from segment_lineage.lineage.core.acl import ADMIN_ROLE, ROLES, AclPolicy

ACL = "segment-lineage.acl"


def encode_policy(policy: AclPolicy) -> bytes:
    return dumps(_envelope(ACL, **{role: list(policy.ids(role)) for role in (ADMIN_ROLE, *ROLES)}))


def decode_policy(raw: bytes, where: str) -> AclPolicy:
    doc = parse(raw, ACL, where)
    with _decoding(where):
        ids = {role: _str_list(doc, role) for role in (ADMIN_ROLE, *ROLES)}
        return AclPolicy.build(ids[ADMIN_ROLE], ids["pusher"], ids["retention"], ids["reader"])
