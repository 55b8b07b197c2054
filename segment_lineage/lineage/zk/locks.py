"""The floor, retention pass holds and elections: who may go first."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
)
from kazoo.handlers.threading import KazooTimeoutError

from segment_lineage.lineage import codec
from segment_lineage.lineage.core.acl import (
    Place,
)
from segment_lineage.lineage.core.errors import (
    AuthError,
    CorruptRecordError,
    PassRunningError,
    StoreUnavailableError,
    TableNotFoundError,
)
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.store.contract import (
    MEMBER_PREFIX,
    Floor,
    Member,
)

log = logging.getLogger(__name__)


class _Locks:
    def _floor_path(self, table: str) -> str:
        return f"{self.head_path(table)}/floor"

    def _floor(self, pending: Any, table: str) -> Floor | None:
        """The answer to a floor read sent earlier (None: no floor record)."""
        path = self._floor_path(table)
        try:
            raw, stat = self._wait(pending)
        except NoNodeError:
            return None
        except NoAuthError:
            raise AuthError(f"ZooKeeper refused reading {path}: not authorised") from None
        except (KazooException, KazooTimeoutError, ConnectionError) as exc:
            raise StoreUnavailableError(f"ZooKeeper reading {path} failed: {type(exc).__name__}") from None
        if not raw:  # made as a bare folder (an ACL repair of an older table): free
            return Floor(None, 0, int(stat.version))
        try:
            holder, until = codec.decode_floor(raw, path)
        except CorruptRecordError as exc:  # it decides who waits, never what is read: free
            log.warning("ignoring the floor of table %r: %s", table, exc.message)
            return Floor(None, 0, int(stat.version))
        return Floor(holder, until, int(stat.version))

    def take_floor(self, table: str, seen: Floor | None, commit_id: str, until_ms: int) -> bool:
        path = self._floor_path(table)
        data = codec.encode_floor(commit_id, until_ms)
        try:
            if seen is None:
                self._op("create", path, data, acl=self.acl_at(Place.FLOOR))
            else:
                self._op("set", path, data, version=seen.version)
        except (NodeExistsError, BadVersionError):
            return False
        except NoNodeError:
            if seen is None:
                raise TableNotFoundError(table) from None
            return False
        except NoAuthError:
            raise AuthError(f"ZooKeeper refused taking the floor of {table!r}: not authorised") from None
        except (KazooException, KazooTimeoutError, ConnectionError) as exc:
            raise StoreUnavailableError(f"taking the floor of {table!r}: {type(exc).__name__}") from None
        return True

    def leave_floor(self, table: str, commit_id: str) -> None:
        path = self._floor_path(table)
        try:
            floor = self._floor(self.client.get_async(path), table)
            if floor is None or floor.holder != commit_id:
                return
            self._op("set", path, codec.encode_floor(None, 0), version=floor.version)
        except (NoNodeError, BadVersionError):
            return  # gone with the table, or taken after it lapsed
        except (KazooException, KazooTimeoutError, ConnectionError) as exc:
            raise StoreUnavailableError(f"leaving the floor of {table!r}: {type(exc).__name__}") from None

    def _pass_path(self, table: str) -> str:
        return f"{self.head_path(table)}/passes/lock"

    def hold_pass(self, table: str) -> None:
        path = self._pass_path(table)
        with self._cache_lock:
            if table in self._passes_held:  # two passes of one process never overlap either
                raise PassRunningError(table)
            self._passes_held.add(table)
        try:
            self._hold_pass(table, path)
        except BaseException:
            with self._cache_lock:
                self._passes_held.discard(table)
            raise

    def _hold_pass(self, table: str, path: str) -> None:
        try:
            self._ephemeral(table, "passes", "lock", b"", sequence=False)
            return
        except (NodeExistsError, StoreUnavailableError) as exc:
            # Taken already (by another pass, or by this session before a lost
            # answer), or ZooKeeper is away: the node's owner tells which.
            try:
                stat = self._call("retention pass lock", "exists", path)
            except NoNodeError:
                stat = None
            if stat is None:
                if isinstance(exc, NodeExistsError):  # released meanwhile: the next pass takes it
                    raise PassRunningError(table) from None
                raise
        if stat.ephemeralOwner != self.session_id():
            raise PassRunningError(table)

    def holds_pass(self, table: str) -> bool:
        try:
            stat = self._call("retention pass lock", "exists", self._pass_path(table))
        except (NoNodeError, StoreUnavailableError):
            return False
        return stat is not None and stat.ephemeralOwner == self.session_id()

    def release_pass(self, table: str) -> None:
        """Release the hold, if it is still this session's: a pass whose
        session lapsed must not take away the hold of the pass after it."""
        with self._cache_lock:
            self._passes_held.discard(table)
        path = self._pass_path(table)
        try:
            stat = self._call("retention pass lock", "exists", path)
        except NoNodeError:
            return
        if stat is None or stat.ephemeralOwner != self.session_id():
            return
        with contextlib.suppress(NoNodeError, BadVersionError):
            self._op("delete", path, version=stat.version)

    # ---- elections: one ephemeral sequential member per candidate -------------

    def _election_path(self, role: str) -> str:
        return f"{self.root}/leaders/{check_table_name(role)}"

    def join_election(self, role: str, identity: str) -> str:
        path = self._election_path(role)
        self._ensure_root()
        self.ensure_node(f"{self.root}/leaders", Place.FOLDER)
        self.ensure_node(path, Place.ELECTION)
        try:
            created = self._op(
                "create",
                f"{path}/{MEMBER_PREFIX}",
                identity.encode("utf-8"),
                acl=self.acl_at(Place.MEMBER),
                ephemeral=True,
                sequence=True,
            )
        except NoAuthError:
            raise AuthError(
                f"ZooKeeper refused joining the {role} election: not authorised",
                remedy="run it as an identity with that role (LINEAGE_ZK_AUTH)",
            ) from None
        except (KazooException, KazooTimeoutError, ConnectionError) as exc:
            raise StoreUnavailableError(f"joining the {role} election: {type(exc).__name__}") from None
        return str(created).rsplit("/", 1)[-1]

    def election(self, role: str) -> list[str]:
        try:
            children = self._call(f"the {role} election", "get_children", self._election_path(role))
        except NoNodeError:
            return []
        return sorted(c for c in children if c.startswith(MEMBER_PREFIX))

    def election_member(self, role: str, name: str) -> Member | None:
        try:
            raw, stat = self._call(f"the {role} election", "get", f"{self._election_path(role)}/{name}")
        except NoNodeError:
            return None
        return Member(name, raw.decode("utf-8", "replace"), int(stat.ephemeralOwner) or None)

    def leave_election(self, role: str, name: str) -> None:
        self._delete_quietly(f"{self._election_path(role)}/{name}", "election member")
