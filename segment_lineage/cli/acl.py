"""``lineage acl``: digest ids, putting a role policy in force, and showing it."""

from __future__ import annotations

from typing import Annotated

import typer

from segment_lineage.cli.context import connection, emit
from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.lineage.core.views import render_table

acl_app = typer.Typer(
    help="Least-privilege ZooKeeper ACLs for pushers, retention and readers.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(acl_app, name="acl")


@acl_app.command("digest")
def acl_digest(
    user: Annotated[str, typer.Argument(help="The identity's user name.")],
) -> None:
    """Print USER's digest id for 'acl apply'. The password is read from standard input (or asked for)."""
    import sys

    from segment_lineage.lineage.core.acl import check_digest_id, digest_id

    if not user.strip():
        raise InvalidInputError(f"invalid user name {user!r}: give a name that is not blank")
    if ":" in user:
        raise InvalidInputError(f"invalid user name {user!r}: give a name without ':'")
    if sys.stdin.isatty():
        password = typer.prompt(f"password of {user}", hide_input=True, confirmation_prompt=True)
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise InvalidInputError("empty password: give the identity's password on standard input")
    typer.echo(check_digest_id(digest_id(user, password)))


IdsOption = Annotated[
    list[str] | None,
    typer.Option(metavar="DIGEST_ID", help="A digest id (user:base64, from 'acl digest'); repeatable."),
]


@acl_app.command("apply")
def acl_apply(
    pusher: IdsOption = None,
    retention: IdsOption = None,
    reader: IdsOption = None,
    admin: Annotated[
        list[str] | None,
        typer.Option(metavar="DIGEST_ID", help="Another admin digest id, beside the caller; repeatable."),
    ] = None,
) -> None:
    """Put a role policy in force: ACLs on every node, and on every node created from now on.

    Run as an admin identity (LINEAGE_ZK_AUTH=user:password); that identity becomes an admin.
    Stores opened before keep their ACLs until they reopen: run it again then.
    """
    from segment_lineage.lineage.core.acl import AclPolicy, check_digest_id
    from segment_lineage.lineage.zk.acl import apply_policy

    pushers, retentions, readers, admins = pusher or [], retention or [], reader or [], admin or []
    for ident in (*pushers, *retentions, *readers, *admins):
        check_digest_id(ident)  # before connecting
    with connection() as store:
        if store.nodes.identity is None:
            raise InvalidInputError(
                "'lineage acl apply' needs LINEAGE_ZK_AUTH=user:password: the admin identity"
            )
        policy = AclPolicy.build([store.nodes.identity, *admins], pushers, retentions, readers)
        report = apply_policy(store, policy)
    emit(
        {"nodes": report.nodes, "created": list(report.created), "left_alone": list(report.strangers)},
        f"ACL policy in force: {report.nodes} node(s) set, {len(report.created)} folder(s) created"
        + (f", {len(report.strangers)} unknown node(s) left alone" if report.strangers else ""),
    )


@acl_app.command("show")
def acl_show() -> None:
    """Show the ACL policy in force and this identity's role."""
    from segment_lineage.lineage.core.acl import ADMIN_ROLE, RIGHTS, ROLES, Place, rights_text

    with connection() as store:
        policy = store.nodes.policy()
        role = store.nodes.role()
        identity = store.nodes.identity
    user = identity.partition(":")[0] if identity else None
    if policy is None:
        mode = "one digest identity owns every node" if identity else "nodes are open to every client"
        emit({"policy": None, "identity": user}, f"no ACL policy: {mode}")
        return
    roles = {r: list(policy.ids(r)) for r in (ADMIN_ROLE, *ROLES)}
    rights = {place.value: {r: rights_text(RIGHTS[place][r]) for r in ROLES} for place in Place}
    emit(
        {"policy": roles, "identity": user, "role": role, "rights": rights},
        _policy_text(user, role, roles, rights),
    )


def _policy_text(
    user: str | None, role: str | None, roles: dict[str, list[str]], rights: dict[str, dict[str, str]]
) -> str:
    """The policy as ``acl show`` prints it: this identity and its role, each
    role's ids, and a table of what each role may do at each place."""
    from segment_lineage.lineage.core.acl import ROLES

    lines = [f"this identity: {user or 'anonymous'} ({role or 'no role'})", ""]
    lines += [f"{r}: {', '.join(ids) or '-'}" for r, ids in roles.items()]
    rows = [{"place": p, **v} for p, v in rights.items()]
    lines += ["", render_table(rows, ["place", *ROLES])]
    return "\n".join(lines)
