"""Classifying a commit multi's results: which operation refused it, and
what that means (applied; a conflict; a lost claim; a refusal; an unknown
outcome). Sends nothing (a refusal's message names this identity's role,
from the policy the store has read): tests feed it results without a server."""

from __future__ import annotations

from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NoAuthError, NoNodeError, RolledBackError, RuntimeInconsistency

from segment_lineage.lineage.core.errors import AuthError, ClaimLostError, RefusedError, TableNotFoundError
from segment_lineage.lineage.store.contract import (
    RetryableStoreError,
    VersionConflict,
    WriteOutcomeUnknown,
)
from segment_lineage.lineage.zk.connection import refused
from segment_lineage.lineage.zk.store.nodes import Nodes


@dataclass(frozen=True)
class Results:
    """The multi's results, by what each operation checked."""

    head: object
    failed: tuple[object, ...]  # the blob creates or checks that failed
    floor_taken: bool
    claim: object  # None when the commit had no owner
    guard: object  # None when the commit wrote no role guard
    version: object = None  # the version record's create

    @property
    def claim_lost(self) -> bool:
        return isinstance(self.claim, NoNodeError)

    @property
    def no_versions_folder(self) -> bool:
        """The version record's folder is missing (a table made before
        versions were recorded): the multi applied nothing."""
        return isinstance(self.version, NoNodeError)

    @property
    def refused_whole(self) -> bool:
        return bool(
            isinstance(self.head, (BadVersionError, NoNodeError, NoAuthError))
            or self.failed
            or self.floor_taken
            or self.claim_lost
            or refused(self.guard)
        )


def split_results(results: list[object], floor: bool, owner: bool, guard: bool) -> Results:
    """The operations after a failed one fail as "inconsistent": the claim
    and the guard, last in the multi, are read off first."""
    claim: object = None
    if owner:
        claim, results = results[-1], results[:-1]
    guarded: object = None
    if guard:
        guarded, results = results[-1], results[:-1]
    floor_taken = floor and refused(results[-1])
    checks = results[1:-1] if floor else results[1:]
    failed = tuple(r for r in checks if refused(r))
    return Results(results[0], failed, floor_taken, claim, guarded, version=checks[-1])


def refused_by_role(
    nodes: Nodes, table: str, role: str | None, guard_path: str | None, r: Results
) -> Exception | None:
    if isinstance(r.guard, NoAuthError):
        return AuthError(
            f"ZooKeeper refused this change of table {table!r}: it needs the {role} role "
            f"({nodes.who()}); nothing was changed"
        )
    if isinstance(r.guard, NoNodeError):
        return RefusedError(
            f"the {role} role's node {guard_path} is missing; nothing was changed",
            table=table,
            remedy="run 'lineage acl apply' as an admin (once, for stores made before it)",
        )
    return None


def outcome(r: Results, owner: str | None, *, table: str, version: int, inline: bool) -> Exception | None:
    """What the multi's results mean for a commit of ``table`` on its
    ``version`` (``inline``: its blobs were created in the multi): None when
    it applied, else the error to raise (a conflict, a lost claim, a
    refusal, or an unknown outcome)."""
    return _lost(r, owner, table, version) or _failed(r, table, inline)


def _lost(r: Results, owner: str | None, table: str, version: int) -> Exception | None:
    """The commit lost a race: its claim, the head's version, the floor, or the table itself."""
    if r.claim_lost and owner is not None:
        return ClaimLostError(table, owner)
    if isinstance(r.head, BadVersionError):
        return VersionConflict(f"table {table} changed since version {version}")
    if r.floor_taken and not r.failed and isinstance(r.head, RolledBackError):
        return VersionConflict(f"table {table}: a writer took the floor since v{version}")
    if isinstance(r.head, NoNodeError):
        return TableNotFoundError(table)
    return None


def _failed(r: Results, table: str, inline: bool) -> Exception | None:
    """The multi failed otherwise: refused, a missing folder or blob, or an unknown head swap."""
    if isinstance(r.head, NoAuthError) or any(isinstance(x, NoAuthError) for x in (*r.failed, r.claim)):
        return AuthError(f"ZooKeeper refused writing table {table!r}: not authorised")
    if r.no_versions_folder:  # made for the resent multi, and gone again
        return RetryableStoreError(f"the versions folder of table {table!r} is missing")
    if r.failed:
        made = "creating a new blob failed" if inline else "a new blob vanished before the commit"
        return RetryableStoreError(f"{made} ({type(r.failed[0]).__name__})")
    if isinstance(r.head, Exception):
        return WriteOutcomeUnknown(f"head swap: {type(r.head).__name__}")
    return None


def cause_first(r: Results) -> int:
    """The table whose own operation failed the multi comes first: the
    others' operations only rolled back with it (or failed as inconsistent)."""
    mine = (r.head, *r.failed, r.claim, r.guard)
    return 0 if any(refused(x) and not isinstance(x, RuntimeInconsistency) for x in mine) else 1
