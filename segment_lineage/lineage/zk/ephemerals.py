"""Ephemeral nodes in per-identity folders: the machinery of owners and leases."""

from __future__ import annotations

import logging

from kazoo.exceptions import (
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
)
from kazoo.handlers.threading import KazooTimeoutError

from segment_lineage.lineage.core.acl import (
    OWN_FOLDER_OF,
    OWN_PREFIX,
    OWN_RIGHTS,
    TABLE_FOLDERS,
    Place,
    child_place,
    own_folder,
)
from segment_lineage.lineage.core.errors import (
    AuthError,
    StoreUnavailableError,
    TableNotFoundError,
)

log = logging.getLogger(__name__)


class _Ephemerals:
    # ---- push owners and reader leases -------------------------------------
    #
    # Under a policy each pusher and reader keeps its ephemerals in its own
    # folder (owners/by-<user>, leases/by-<user>), made by an admin: only it
    # may delete in there. Without a policy they sit in the folder itself.
    # Listings read both shapes (a process opened before the policy still
    # writes the flat one until it reopens).

    def _own_folders(self) -> list[tuple[str, Place, str]]:
        """(folder, place, identity) of every own folder a new table gets under the policy."""
        policy = self.policy()
        if policy is None:
            return []
        out: list[tuple[str, Place, str]] = []
        for folder, place in (("owners", Place.OWNERS), ("leases", Place.LEASES)):
            own = OWN_FOLDER_OF[place]
            out.extend((folder, own, ident) for ident in policy.ids(OWN_RIGHTS[own][0]))
        return out

    def _holder(self, folder: str) -> str | None:
        """The own folder this store keeps its ephemerals of ``folder`` in; None: flat."""
        policy = self.policy()
        if policy is None or self.identity is None or folder not in ("owners", "leases"):
            return None
        return own_folder(self.identity)

    def _ephemeral(self, table: str, folder: str, name: str, data: bytes, sequence: bool) -> str:
        """Create an ephemeral node; its id relative to ``folder`` (``by-u/lease-N`` or ``lease-N``)."""
        base = f"{self.head_path(table)}/{folder}"
        place = TABLE_FOLDERS[folder]
        holder = self._holder(folder)
        parent = base if holder is None else f"{base}/{holder}"
        for _ in range(3):
            try:
                path: str = self._op(
                    "create",
                    f"{parent}/{name}",
                    data,
                    acl=self.acl_at(child_place(place)),
                    ephemeral=True,
                    sequence=sequence,
                )
                return path[len(base) + 1 :]
            except NoNodeError:
                self._make_folder(table, folder, holder)
            except NodeExistsError:
                raise  # the caller asks whose it is
            except NoAuthError:
                raise AuthError(f"ZooKeeper refused {folder} of {table!r}: not authorised") from None
            except (KazooException, KazooTimeoutError) as exc:
                raise StoreUnavailableError(
                    f"ZooKeeper {folder} of {table!r}: {type(exc).__name__}"
                ) from None
        raise TableNotFoundError(table)

    def _make_folder(self, table: str, folder: str, holder: str | None) -> None:
        """Make a missing ephemerals folder (a table made before it existed),
        and this identity's own folder in it; only an admin may make the latter."""
        base = f"{self.head_path(table)}/{folder}"
        place = TABLE_FOLDERS[folder]
        steps = [(base, self.acl_at(place))]
        if holder is not None:
            steps.append((f"{base}/{holder}", self.acl_at(OWN_FOLDER_OF[place], self.identity)))
        for path, acl in steps:
            try:
                if self._op("exists", path) is None:
                    self._op("create", path, b"", acl=acl)
            except NodeExistsError:
                pass
            except NoNodeError:
                raise TableNotFoundError(table) from None
            except NoAuthError:
                raise AuthError(
                    f"ZooKeeper refused {folder} of {table!r}: not authorised; identity "
                    f"{(self.identity or 'anonymous').partition(':')[0]!r} has no {folder} folder "
                    f"there ({path})",
                    remedy="an admin makes it: run 'lineage acl apply' again after adding the identity",
                ) from None

    def _children(self, table: str, folder: str) -> list[str]:
        try:
            children: list[str] = self._call(folder, "get_children", f"{self.head_path(table)}/{folder}")
        except NoNodeError:
            return []
        return sorted(children)

    def _ephemerals(self, table: str, folder: str) -> list[str]:
        """The ids of the ephemerals under ``folder``, relative to it, own folders looked into."""
        base = f"{self.head_path(table)}/{folder}"
        children = self._children(table, folder)
        flat = [c for c in children if not c.startswith(OWN_PREFIX)]
        holders = [c for c in children if c.startswith(OWN_PREFIX)]

        def fetch() -> list[str]:
            pending = [(h, self.client.get_children_async(f"{base}/{h}")) for h in holders]
            out: list[str] = []
            for holder, result in pending:
                try:
                    out.extend(f"{holder}/{c}" for c in result.get(timeout=self.op_timeout_s))
                except NoNodeError:
                    continue
                except KazooTimeoutError:
                    raise OperationTimeoutError() from None
            return out

        try:
            nested = self.client.retry(fetch) if holders else []
        except NoAuthError:
            raise AuthError(f"ZooKeeper refused reading {base}: not authorised") from None
        except (KazooException, ConnectionError) as exc:
            raise StoreUnavailableError(f"reading {base}: {type(exc).__name__}") from None
        return sorted(flat + nested)

    def _own_path(self, table: str, folder: str, name: str) -> str:
        holder = self._holder(folder)
        base = f"{self.head_path(table)}/{folder}"
        return f"{base}/{name}" if holder is None else f"{base}/{holder}/{name}"

    def _delete_quietly(self, path: str, what: str) -> None:
        """Delete an ephemeral node; gone already is fine, other failures are
        reported as the project's errors (the session's end removes it anyway)."""
        try:
            self._retried("delete", path)
        except NoNodeError:
            pass
        except NoAuthError:
            raise AuthError(f"ZooKeeper refused releasing the {what} {path}: not authorised") from None
        except (KazooException, KazooTimeoutError) as exc:
            raise StoreUnavailableError(f"releasing the {what} {path}: {type(exc).__name__}") from None
