"""The ZooKeeper store: one small head per table, immutable blobs behind it.

Layout under the project root (``/segment-lineage`` below any chroot)::

    /tables/<table>               head: config, version, blob ids, history tail
    /tables/<table>/blobs/<id>    immutable: a hash bucket of segments,
                                  entries or pending deletions; a chunk of a
                                  long name list; sealed history records
    /tables/<table>/versions/v-N  a retained version: its blob ids
    /tables/<table>/gc            marks of the metadata sweep
    /tables/<table>/floor         which commit holds the commits a while (a big change)
    /tables/<table>/owners/<id>   ephemeral: a running push's claim
    /tables/<table>/leases/...    ephemeral: a reader's pinned version
    /names/<casefolded table>     create-if-absent guard against case twins
    /clock                        scratch node; its mtime is the single clock
    /leaders/<name>/...           leader elections (the retention daemon)
    /acl                          the ACL policy, when roles are in use

With an ACL policy (:mod:`segment_lineage.lineage.core.acl`) every node is created with the ACL
of its place; without one, with the single identity's ACL, or open.

Why: one znode per table caps Pinot near 9K-69K segments (1 MB
``jute.maxbuffer``). Here a commit first writes the new blobs it needs (each
well under 512 KB, uniquely named, invisible until referenced) and then
compare-and-sets the head: that single versioned ``set`` is the atomic
commit. A reader reads the head, then only blobs that head references, so it
always sees exactly one version. Blobs are immutable, so they are cached by id.

Unreferenced blobs (from failed commits, or replaced by later ones) are
removed by :meth:`ZkStore.collect_garbage` after a grace period measured on
ZooKeeper's clock.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import threading
import time
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import ACL, Id

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import ENTRIES, KINDS, PENDING, SEGMENTS, Head, NameList, StoredEntry
from segment_lineage.lineage.core.acl import (
    ADMIN_ROLE,
    OWN_FOLDER_OF,
    OWN_PREFIX,
    OWN_RIGHTS,
    POLICY_NODE,
    RETENTION,
    TABLE_FOLDERS,
    AclPolicy,
    Place,
    child_place,
    own_folder,
)
from segment_lineage.lineage.core.errors import (
    AuthError,
    CorruptRecordError,
    InvalidNameError,
    LineageError,
    PassRunningError,
    RefusedError,
    StoreUnavailableError,
    TableExistsError,
    TableNotFoundError,
    TooLargeError,
    VersionGoneError,
)
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.model import (
    Audit,
    Change,
    HistoryRecord,
    LineageEntry,
    Operation,
    TableConfig,
    TableState,
)
from segment_lineage.lineage.core.names import check_entry_id, check_table_name
from segment_lineage.lineage.core.roots import check_no_overlap, overlaps
from segment_lineage.lineage.store.contract import (
    MAX_HISTORY,
    MAX_VERSIONS,
    MEMBER_PREFIX,
    Floor,
    Lease,
    LeaseInfo,
    Member,
    RetryableStoreError,
    Snapshot,
    TableListing,
    VersionConflict,
    WriteOutcomeUnknown,
)
from segment_lineage.lineage.zk.shared import close_open_nodes

log = logging.getLogger(__name__)

ROOT = "/segment-lineage"
REQUEST_LIMIT = 512 * 1024  # every request we send stays under this
HEAD_LIMIT = 448 * 1024  # leaves room for the blob checks in the commit multi
BLOB_LIMIT = 256 * 1024  # a bucket or name chunk, encoded
INLINE_NAMES_BYTES = 4 * 1024  # shorter name lists live inside the entry record
HISTORY_TAIL = 64  # history records kept in the head before sealing a blob
HISTORY_TAIL_BYTES = 64 * 1024  # ... or fewer, when their text makes them this large
MAX_BUCKETS = 1 << 11  # three kinds of 2048 bucket ids still fit in the head
# A commit rewrites the buckets it touches, so buckets stay small while the
# head can list them cheaply: split at SPLIT_BYTES up to SOFT_BUCKETS
# buckets (about 4 MB of records per kind), then let them grow to BLOB_LIMIT.
SPLIT_BYTES = 16 * 1024
SOFT_BUCKETS = 1 << 8


def bucket_limit(count: int) -> int:
    """The largest encoded bucket allowed among ``count`` buckets."""
    return SPLIT_BYTES if count < SOFT_BUCKETS else BLOB_LIMIT


METADATA_GRACE_MS = 10 * 60_000
# Garbage is bounded by size too: past this many unreferenced blobs (each at
# most SPLIT_BYTES, mostly), the grace shrinks to PRESSURE_GRACE_MS. Safe:
# an unreferenced blob belongs to no head, retained version or lease; a
# reader or writer that still wanted one finds it gone and reads again.
GARBAGE_SOFT_BLOBS = 1024
PRESSURE_GRACE_MS = 5_000
DELETE_BATCH = 500  # blob deletes per multi (with the head check), well under the request limit
GC_MARKS_MAX = 8_000
READ_ATTEMPTS = 5

VERSIONS = "versions"
STATES_CACHED = 8  # rebuilt versions kept in memory
MERGED_CACHED = 12  # merged per-kind maps kept in memory, shared by versions with the same blobs
CACHE_BLOBS = 8192
# Decoded blobs are weighed by their records (a bucket's pairs, a chunk's
# names). A table that keeps changing leaves superseded buckets behind, so the
# cache holds at most this many records plus twice the largest table read.
CACHE_RECORDS = 50_000

_UNKNOWN = (ConnectionLoss, OperationTimeoutError, SessionExpiredError)


def _refused(result: object) -> bool:
    """A multi's result that failed on its own (not rolled back with the rest)."""
    return isinstance(result, Exception) and not isinstance(result, RolledBackError)


def policy_acl(policy: AclPolicy, place: Place, owner: str | None = None) -> list[ACL]:
    """The ZooKeeper ACL of a node at ``place`` under ``policy`` (``owner``:
    whose own folder it is, see :data:`segment_lineage.lineage.core.acl.OWN_RIGHTS`)."""
    return [ACL(rights, Id("digest", ident)) for ident, rights in policy.grants(place, owner)]


def bucket_of(key: str, buckets: int) -> int:
    return zlib.crc32(key.encode()) & (buckets - 1)


def _blob_id() -> str:
    return uuid.uuid4().hex


_BLOB_ID = re.compile(r"^[0-9a-f]{32}$")  # what _blob_id makes


@dataclass
class _Loaded:
    """The store's token for one read: what the state was built from."""

    head: Head
    zversion: int
    maps: dict[str, dict[str, Any]]  # kind -> key -> object (shared with the state)
    bucket_keys: dict[str, list[list[str]]]  # kind -> bucket -> keys
    lists: dict[str, tuple[tuple[str, ...], NameList, tuple[str, ...], NameList]]

    def chunk_blobs(self) -> set[str]:
        """The name-list chunks the entries of this version use."""
        out: set[str] = set()
        for _, src_list, _, dst_list in self.lists.values():
            out.update(src_list.chunks)
            out.update(dst_list.chunks)
        return out


@dataclass(frozen=True)
class _Bucket:
    """A decoded bucket blob, checked for the place it was decoded for."""

    index: int
    count: int
    pairs: tuple[tuple[str, Any], ...]


def _weight(value: Any) -> int:
    if isinstance(value, _Bucket):
        return max(1, len(value.pairs))
    if isinstance(value, tuple):
        return max(1, len(value))
    return 1


class _BlobGone(Exception):
    """A blob referenced by the head we read has been collected: re-read."""


def _key(kind: str, obj: Any) -> str:
    if kind == SEGMENTS:
        return str(obj.name)
    if kind == ENTRIES:
        return str(obj.entry_id)
    return str(obj.location)


class ZkStore:
    """Thread-safe for reads and writes from several threads of one process."""

    def __init__(
        self,
        client: KazooClient,
        *,
        acl: Sequence[ACL] | None = None,
        identity: str | None = None,
        owns_client: bool = True,
        root: str = ROOT,
        op_timeout_s: float = 10.0,
        session_timeout_s: float = 10.0,
    ) -> None:
        self.client = client
        self.session_timeout_s = session_timeout_s
        self.root = root
        self._store_id: str | None = None
        self._passes_held: set[str] = set()  # tables whose retention pass this store holds
        self._ignored: dict[str, dict[str, str]] = {}  # per table: malformed lease path -> why
        self.op_timeout_s = op_timeout_s
        self.acl = list(acl) if acl else None
        self.identity = identity  # this client's digest id, when it authenticates
        self._policy: tuple[AclPolicy | None] | None = None  # loaded once
        self._owns_client = owns_client
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._cache_records = 0
        self._largest_table = 0  # records of the largest table state read
        self._ready = False
        self._versions_ready: set[str] = set()
        self._last: dict[str, tuple[_Loaded, Snapshot]] = {}  # per table: the last version read
        self._states: OrderedDict[tuple[object, ...], TableState] = OrderedDict()
        self._merged: OrderedDict[tuple[str, str, tuple[str, ...]], tuple[dict[str, Any], list[list[str]]]]
        self._merged = OrderedDict()
        self._commits_sent = 0  # multis sent by this store, whatever their outcome
        self._commits_lock = threading.Lock()
        # When a wait for ZooKeeper last ran out, until it answers again: while
        # the client stays disconnected, later calls fail at once instead of
        # each waiting op_timeout_s in turn (a failed push's cleanup, its owner
        # release), so a command fails within one bounded wait.
        self._unanswered_since: float | None = None
        client.add_listener(self._on_state)

    # ---- paths and plumbing ------------------------------------------------

    def head_path(self, table: str) -> str:
        return f"{self.root}/tables/{check_table_name(table)}"

    def blob_path(self, table: str, blob: str) -> str:
        return f"{self.head_path(table)}/blobs/{blob}"

    def version_path(self, table: str, version: int) -> str:
        return f"{self.head_path(table)}/{VERSIONS}/v-{version:010d}"

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

    def _ensure_versions(self, table: str) -> None:
        """Tables created before versions were recorded get the folder once."""
        if table in self._versions_ready:
            return
        self.ensure_node(f"{self.head_path(table)}/{VERSIONS}", Place.VERSIONS)
        self._versions_ready.add(table)

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

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._unanswered_since = None

    def _check_answering(self) -> None:
        """Before sending: StoreUnavailableError (nothing sent) when a wait
        already ran out and the client has not reconnected since."""
        since = self._unanswered_since
        if since is not None and not self.client.connected:
            raise StoreUnavailableError(
                f"ZooKeeper has not answered for {time.monotonic() - since:.0f}s "
                "and is still unreachable; nothing was sent",
                remedy="check the ensemble (a quorum must be up); calls work again as soon as it answers",
            )

    def _wait(self, result: Any, deadline: float | None = None) -> Any:
        """The result of a request sent, waiting at most ``op_timeout_s`` (and
        not past ``deadline``, a time.monotonic())."""
        began = time.monotonic()
        timeout = self.op_timeout_s if deadline is None else min(self.op_timeout_s, deadline - began)
        try:
            value = result.get(timeout=max(0.0, timeout))
        except KazooTimeoutError:
            self._unanswered_since = began
            raise OperationTimeoutError() from None
        self._unanswered_since = None
        return value

    def _op(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """One ZooKeeper call with a bounded wait.

        kazoo's blocking calls wait forever while no server with a quorum
        answers; here a call that outlives ``op_timeout_s`` becomes an
        OperationTimeoutError, handled like a lost connection. Once one has,
        calls fail at once with StoreUnavailableError (nothing sent) until
        the client reconnects.
        """
        self._check_answering()
        return self._wait(getattr(self.client, f"{name}_async")(*args, **kwargs))

    def _op_until(self, deadline: float, name: str, *args: Any, **kwargs: Any) -> Any:
        """:meth:`_op`, one attempt of a retried call: none starts, or waits, past ``deadline``."""
        self._check_answering()
        if time.monotonic() >= deadline:
            raise OperationTimeoutError()
        return self._wait(getattr(self.client, f"{name}_async")(*args, **kwargs), deadline)

    def _retried(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """:meth:`_op` under kazoo's bounded retry, every attempt within one
        ``op_timeout_s`` of the first: a connection lost late in one attempt
        does not buy the next a whole wait of its own."""
        deadline = time.monotonic() + self.op_timeout_s
        return self.client.retry(self._op_until, deadline, name, *args, **kwargs)

    def _commit(self, txn: Any) -> list[Any]:
        self._check_answering()
        try:
            return list(self._wait(txn.commit_async()))
        finally:
            with self._commits_lock:
                self._commits_sent += 1

    @property
    def commits_sent(self) -> int:
        """How many multis this store has sent, landed or not: a watched view
        re-reads after its own process wrote, before the watch event arrives."""
        with self._commits_lock:
            return self._commits_sent

    def _call(self, what: str, name: str, *args: Any, **kwargs: Any) -> Any:
        """Run one read-only call with kazoo's bounded retry; translate errors."""
        try:
            return self._retried(name, *args, **kwargs)
        except StoreUnavailableError:
            raise
        except NoAuthError:
            self._refused_by_policy()
            raise AuthError(
                f"ZooKeeper refused {what}: not authorised",
                remedy="check LINEAGE_ZK_AUTH",
            ) from None
        except NoNodeError:
            raise
        except (KazooException, ConnectionError) as exc:
            raise StoreUnavailableError(f"ZooKeeper {what} failed: {type(exc).__name__}") from None

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

    # ---- blobs ---------------------------------------------------------------

    def _cached(self, blob: str) -> Any | None:
        with self._cache_lock:
            value = self._cache.get(blob)
            if value is not None:
                self._cache.move_to_end(blob)
            return value

    def _remember(self, blob: str, value: Any) -> None:
        with self._cache_lock:
            if blob in self._cache:
                return
            self._cache[blob] = value
            self._cache_records += _weight(value)
            limit = CACHE_RECORDS + 2 * self._largest_table
            while len(self._cache) > 1 and (len(self._cache) > CACHE_BLOBS or self._cache_records > limit):
                _, gone = self._cache.popitem(last=False)
                self._cache_records -= _weight(gone)

    @property
    def cached_records(self) -> int:
        """Records held by the decoded-blob cache (bounded; see CACHE_RECORDS)."""
        with self._cache_lock:
            return self._cache_records

    def _fetch(self, table: str, blobs: Iterable[str]) -> dict[str, bytes]:
        """Raw bytes of blobs not in the cache, fetched in one pipelined batch."""
        wanted = list(blobs)
        if wanted:
            self._check_answering()
        pending = {b: self.client.get_async(self.blob_path(table, b)) for b in wanted}
        out: dict[str, bytes] = {}
        for blob, result in pending.items():
            try:
                data, _ = self._wait(result)
            except NoNodeError:
                raise _BlobGone(blob) from None
            except NoAuthError:
                raise AuthError(f"ZooKeeper refused reading table {table!r}: not authorised") from None
            except (KazooException, KazooTimeoutError, ConnectionError, TimeoutError) as exc:
                raise StoreUnavailableError(f"ZooKeeper read failed: {type(exc).__name__}") from None
            out[blob] = data
        return out

    def _decoded(self, table: str, blobs: Sequence[str], decode: Any) -> dict[str, Any]:
        found: dict[str, Any] = {}
        missing: list[str] = []
        for blob in blobs:
            value = self._cached(blob)
            if value is None:
                missing.append(blob)
            else:
                found[blob] = value
        fresh = {
            blob: decode(blob, raw, self.blob_path(table, blob))
            for blob, raw in self._fetch(table, missing).items()
        }
        found.update(fresh)
        if fresh:
            # What one read needs stays cached together, however large the table.
            needed = sum(_weight(value) for value in found.values())
            with self._cache_lock:
                self._largest_table = max(self._largest_table, needed)
            for blob, value in fresh.items():
                self._remember(blob, value)
        return found

    def _write_blobs(self, table: str, blobs: Mapping[str, bytes]) -> None:
        for data in blobs.values():
            if len(data) > REQUEST_LIMIT:
                raise TooLargeError(
                    f"blob of {len(data)} bytes for table {table!r} exceeds the request limit"
                )
        if blobs:
            self._check_answering()
        results = {
            b: self.client.create_async(self.blob_path(table, b), data, acl=self.acl_at(Place.BLOB))
            for b, data in blobs.items()
        }
        for blob, result in results.items():
            try:
                self._wait(result)
            except NodeExistsError:
                # Ids are fresh per write and a create is never resent: the node is not ours.
                raise RetryableStoreError(f"blob {blob} already exists") from None
            except NoNodeError:
                raise TableNotFoundError(table) from None
            except NoAuthError:
                raise AuthError(f"ZooKeeper refused writing table {table!r}: not authorised") from None
            except (KazooException, KazooTimeoutError, ConnectionError, TimeoutError) as exc:
                raise RetryableStoreError(f"writing blob {blob} failed: {type(exc).__name__}") from None

    def _discard_blobs(self, table: str, blobs: Iterable[str]) -> None:
        """Delete blobs nothing references (best effort: what is left, the
        sweep takes after its grace). Sent together, each answer awaited."""
        sent = [self.client.delete_async(self.blob_path(table, b)) for b in blobs]
        for result in sent:
            with contextlib.suppress(KazooException, KazooTimeoutError, ConnectionError, TimeoutError):
                result.get(timeout=self.op_timeout_s)

    # ---- reading -------------------------------------------------------------

    def _read_head(self, table: str) -> tuple[Head, int]:
        path = self.head_path(table)
        try:
            raw, stat = self._call(f"reading table {table!r}", "get", path)
        except NoNodeError:
            raise TableNotFoundError(table) from None
        head = codec.decode_head(raw, path)
        if head.dropping:
            raise TableNotFoundError(table)
        if head.config.name != table:
            raise CorruptRecordError(path, f"head names table {head.config.name!r}")
        return head, int(stat.version)

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

    def read(self, table: str) -> Snapshot:
        check_table_name(table)
        last_gone = ""
        for _ in range(READ_ATTEMPTS):
            pending_floor = self.client.get_async(self._floor_path(table))  # with the head: one round trip
            head, zversion = self._read_head(table)
            floor = self._floor(pending_floor, table)
            last = self._last.get(table)
            if last is not None and last[0].zversion == zversion and last[0].head == head:
                return replace(last[1], floor=floor)  # the head did not move: the same immutable version
            try:
                loaded = self._load(table, head, zversion)
            except _BlobGone as gone:
                last_gone = str(gone)
                continue
            state = TableState(
                config=head.config,
                version=head.version,
                segments=loaded.maps[SEGMENTS],
                entries=loaded.maps[ENTRIES],
                pending=loaded.maps[PENDING],
            )
            snapshot = Snapshot(state, loaded, floor)
            with self._cache_lock:
                size = len(state.segments) + len(state.entries) + len(state.pending)
                self._largest_table = max(self._largest_table, size)
            self._last[table] = (loaded, snapshot)
            self._remember_state(table, head.buckets, state)
            return snapshot
        raise CorruptRecordError(self.head_path(table), f"blob {last_gone} referenced by the head is missing")

    def _load(self, table: str, head: Head, zversion: int) -> _Loaded:
        maps: dict[str, dict[str, Any]] = {}
        bucket_keys: dict[str, list[list[str]]] = {}
        for kind in KINDS:
            ids = head.buckets[kind]
            if len(set(ids)) != len(ids):
                raise CorruptRecordError(self.head_path(table), f"a {kind} bucket blob is listed twice")
            index_of = {blob: i for i, blob in enumerate(ids)}

            def decode(
                blob: str,
                raw: bytes,
                where: str,
                kind: str = kind,
                index_of: dict[str, int] = index_of,
            ) -> _Bucket:
                # Placement and duplicates are checked once, when the blob is
                # decoded; the cached result then serves every later read.
                index, count = index_of[blob], len(index_of)
                pairs = []
                seen: set[str] = set()
                for obj in codec.decode_records(kind, codec.decode_bucket(raw, kind, where), where):
                    key = _key(kind, obj)
                    if key in seen:
                        raise CorruptRecordError(where, f"duplicate {kind} key {key!r}")
                    if bucket_of(key, count) != index:
                        raise CorruptRecordError(where, f"{key!r} in the wrong bucket")
                    seen.add(key)
                    pairs.append((key, obj))
                return _Bucket(index, count, tuple(pairs))

            reused = self._merged_cached(table, kind, ids)
            if reused is not None:
                maps[kind], bucket_keys[kind] = reused
                continue
            blobs: dict[str, _Bucket] = self._decoded(table, ids, decode)
            merged: dict[str, Any] = {}
            keys: list[list[str]] = []
            for index, blob in enumerate(ids):
                bucket = blobs[blob]
                if (bucket.index, bucket.count) != (index, len(ids)):
                    raise CorruptRecordError(
                        self.blob_path(table, blob), "bucket blob listed at another place"
                    )
                merged.update(bucket.pairs)
                keys.append([key for key, _ in bucket.pairs])
            maps[kind] = merged
            bucket_keys[kind] = keys
            self._remember_merged(table, kind, ids, merged, keys)

        stored: dict[str, StoredEntry] = maps[ENTRIES]
        chunk_ids = [c for e in stored.values() for c in (*e.src.chunks, *e.dst.chunks)]
        chunks = self._decoded(
            table, chunk_ids, lambda _blob, raw, where: tuple(codec.decode_names(raw, where))
        )
        entries: dict[str, LineageEntry] = {}
        lists: dict[str, tuple[tuple[str, ...], NameList, tuple[str, ...], NameList]] = {}
        for entry in sorted(stored.values(), key=lambda e: (e.created_ms, e.entry_id)):
            src = self._names(entry.src, chunks, table, entry.entry_id)
            dst = self._names(entry.dst, chunks, table, entry.entry_id)
            entries[entry.entry_id] = entry.resolve(src, dst)
            lists[entry.entry_id] = (src, entry.src, dst, entry.dst)
        maps[ENTRIES] = entries
        return _Loaded(head, zversion, maps, bucket_keys, lists)

    def _merged_cached(
        self, table: str, kind: str, ids: tuple[str, ...]
    ) -> tuple[dict[str, Any], list[list[str]]] | None:
        """A kind's merged map built before from the same bucket blobs: versions
        that share them (a rollback leaves the segments alone) share the map,
        which nobody mutates, so neither reading nor diffing them is linear."""
        with self._cache_lock:
            found = self._merged.get((table, kind, ids))
            if found is not None:
                self._merged.move_to_end((table, kind, ids))
            return found

    def _remember_merged(
        self, table: str, kind: str, ids: tuple[str, ...], merged: dict[str, Any], keys: list[list[str]]
    ) -> None:
        with self._cache_lock:
            self._merged[(table, kind, ids)] = (merged, keys)
            while len(self._merged) > MERGED_CACHED:
                self._merged.popitem(last=False)

    def _names(
        self, names: NameList, chunks: Mapping[str, tuple[str, ...]], table: str, entry: str
    ) -> tuple[str, ...]:
        if names.names is not None:
            return names.names
        out: tuple[str, ...] = ()
        for chunk in names.chunks:
            out += chunks[chunk]
        if len(out) != names.count:
            raise CorruptRecordError(
                self.head_path(table),
                f"entry {entry}: expected {names.count} names, found {len(out)}",
            )
        return out

    # ---- writing ---------------------------------------------------------------

    def _name_list(self, names: tuple[str, ...], blobs: dict[str, bytes]) -> NameList:
        if len(codec.dumps(list(names))) <= INLINE_NAMES_BYTES:
            return NameList(names=names, chunks=(), count=len(names))
        chunk_ids: list[str] = []
        current: list[str] = []
        size = 0
        for name in names:
            if current and size + len(name) + 3 > BLOB_LIMIT - 128:
                blob = _blob_id()
                blobs[blob] = codec.encode_names(current)
                chunk_ids.append(blob)
                current, size = [], 0
            current.append(name)
            size += len(name) + 3
        if current:
            blob = _blob_id()
            blobs[blob] = codec.encode_names(current)
            chunk_ids.append(blob)
        return NameList(names=None, chunks=tuple(chunk_ids), count=len(names))

    def _encode(self, kind: str, obj: Any, base: _Loaded, blobs: dict[str, bytes]) -> dict[str, object]:
        if kind == SEGMENTS:
            return codec.segment_to_dict(obj)
        if kind == PENDING:
            return codec.pending_to_dict(obj)
        entry: LineageEntry = obj
        old = base.lists.get(entry.entry_id)
        if old is not None and old[0] is entry.segments_from:
            src = old[1]
        else:
            src = self._name_list(entry.segments_from, blobs)
        if old is not None and old[2] is entry.segments_to:
            dst = old[3]
        else:
            dst = self._name_list(entry.segments_to, blobs)
        return codec.entry_to_dict(entry, src, dst)

    def _buckets(
        self,
        kind: str,
        new: Mapping[str, Any],
        base: _Loaded,
        blobs: dict[str, bytes],
        table: str,
        decoded: dict[str, _Bucket],
    ) -> tuple[str, ...]:
        old = base.maps[kind]
        old_ids = base.head.buckets[kind]
        if new is old:  # untouched by the change (a rollback's segments, say)
            return old_ids
        count = len(old_ids)
        dirty: set[int] = set()
        for key, obj in new.items():
            if old.get(key) is not obj:
                dirty.add(bucket_of(key, count))
        for key in old:
            if key not in new:
                dirty.add(bucket_of(key, count))
        if not dirty:
            return old_ids
        layout: list[list[str]] | None = None
        while True:
            if layout is None:
                keys_of = {i: [k for k in base.bucket_keys[kind][i] if k in new] for i in dirty}
                for key in new:
                    if key not in old:
                        i = bucket_of(key, count)
                        keys_of[i].append(key)
            else:
                keys_of = dict(enumerate(layout))
            encoded: dict[int, bytes] = {}
            too_big = False
            for i, keys in keys_of.items():
                raw = codec.encode_bucket(kind, [self._encode(kind, new[k], base, blobs) for k in keys])
                if len(raw) > BLOB_LIMIT or (len(raw) > bucket_limit(count) and len(keys) > 1):
                    too_big = True
                    break
                encoded[i] = raw
            if not too_big:
                break
            count *= 2
            if count > MAX_BUCKETS:
                raise TooLargeError(
                    f"table {table!r}: {kind} metadata exceeds {MAX_BUCKETS} buckets of {BLOB_LIMIT} bytes"
                )
            layout = [[] for _ in range(count)]
            for key in new:
                layout[bucket_of(key, count)].append(key)
            dirty = set(range(count))
        ids = list(old_ids) if len(old_ids) == count else [""] * count
        for i, raw in encoded.items():
            blob = _blob_id()
            blobs[blob] = raw
            ids[i] = blob
            if kind != ENTRIES:  # records stored as they are: what reading the blob would give
                decoded[blob] = _Bucket(i, count, tuple((k, new[k]) for k in keys_of[i]))
        return tuple(ids)

    def write(
        self, table: str, base: Snapshot, change: Change, audit: Audit, commit_id: str, now_ms: int
    ) -> TableState:
        loaded = base.token
        if not isinstance(loaded, _Loaded):
            raise TypeError("snapshot was not read from this store")
        state = change.state
        blobs: dict[str, bytes] = {}
        decoded: dict[str, _Bucket] = {}
        buckets = {
            SEGMENTS: self._buckets(SEGMENTS, state.segments, loaded, blobs, table, decoded),
            ENTRIES: self._buckets(ENTRIES, state.entries, loaded, blobs, table, decoded),
            PENDING: self._buckets(PENDING, state.pending, loaded, blobs, table, decoded),
        }
        version = loaded.head.version + 1
        record = HistoryRecord.of(version, commit_id, now_ms, change, audit)
        last, tail = loaded.head.history_last, loaded.head.history_tail
        # Sealed by count and by size: long reasons in any script never push
        # the head past its limit.
        sealed_now = bool(tail) and (
            len(tail) >= HISTORY_TAIL or codec.history_size((*tail, record)) > HISTORY_TAIL_BYTES
        )
        if sealed_now:
            blob = _blob_id()
            blobs[blob] = codec.encode_history(tail, last)
            last, tail = blob, ()
        head = Head(
            config=state.config,
            version=version,
            commit_id=commit_id,
            buckets=buckets,
            history_last=last,
            history_tail=(*tail, record),
        )
        raw = codec.encode_head(head)
        if len(raw) > HEAD_LIMIT:
            raise TooLargeError(f"table {table!r}: head record of {len(raw)} bytes exceeds {HEAD_LIMIT}")
        # The version's own record, for time travel and rollback: its bucket
        # blobs and (a superset of) the name chunks its entries use.
        used = codec.bucket_ids(buckets) | ({last} if sealed_now else set())
        chunks = loaded.chunk_blobs() | (set(blobs) - used)
        version_record = codec.encode_lease(codec.LeaseRecord(version, buckets, tuple(sorted(chunks))))
        self._ensure_versions(table)
        self._write_blobs(table, blobs)
        # One multi: swap the head only if every new blob is still there (a
        # garbage pass may have taken the blobs of a writer paused too long).
        txn = self.client.transaction()
        txn.set_data(self.head_path(table), raw, version=loaded.zversion)
        for blob in blobs:
            txn.check(self.blob_path(table, blob), 0)
        txn.create(self.version_path(table, version), version_record, acl=self.acl_at(Place.VERSION))
        if base.floor is not None:  # nobody took the floor since the read
            txn.check(self._floor_path(table), base.floor.version)
        failpoint("store.before-head-swap")
        try:
            results = self._commit(txn)
        except NoAuthError:
            raise AuthError(f"ZooKeeper refused writing table {table!r}: not authorised") from None
        except (KazooException, KazooTimeoutError) as exc:
            raise WriteOutcomeUnknown(f"head swap: {type(exc).__name__}") from None
        head_result = results[0]
        floor_taken = base.floor is not None and _refused(results[-1])
        checks = results[1:-1] if base.floor is not None else results[1:]
        failed = [r for r in checks if _refused(r)]
        if isinstance(head_result, (BadVersionError, NoNodeError, NoAuthError)) or failed or floor_taken:
            # The multi was refused as a whole: no head, version or lease
            # references this attempt's blobs. Take them away now rather than
            # leave them to the sweep: under contention a big commit's
            # attempts would otherwise fill the server's memory.
            self._discard_blobs(table, blobs)
        if isinstance(head_result, BadVersionError):
            raise VersionConflict(f"table {table} changed since version {loaded.head.version}")
        if floor_taken and not failed and isinstance(head_result, RolledBackError):
            raise VersionConflict(f"table {table}: a writer took the floor since v{loaded.head.version}")
        if isinstance(head_result, NoNodeError):
            raise TableNotFoundError(table)
        if isinstance(head_result, NoAuthError):
            raise AuthError(f"ZooKeeper refused writing table {table!r}: not authorised")
        if failed:
            raise RetryableStoreError(f"a new blob vanished before the commit ({type(failed[0]).__name__})")
        if isinstance(head_result, Exception):
            raise WriteOutcomeUnknown(f"head swap: {type(head_result).__name__}")
        # The writer's next read needs no decoding of the buckets it wrote.
        for blob, bucket in decoded.items():
            self._remember(blob, bucket)
        if sealed_now and self.may_sweep():
            self._collect_quietly(table)
        return TableState(state.config, version, state.segments, state.entries, state.pending)

    # ---- tables ----------------------------------------------------------------

    def create_table(self, config: TableConfig, audit: Audit, commit_id: str) -> TableState:
        table = check_table_name(config.name)
        self._ensure_root()
        now = self.now_ms()
        empty = {kind: _blob_id() for kind in KINDS}
        record = HistoryRecord(
            1,
            commit_id,
            now,
            Operation.CREATE_TABLE,
            None,
            audit.actor,
            audit.job_id,
            audit.reason,
            0,
            0,
            0,
        )
        head = Head(config, 1, commit_id, {k: (b,) for k, b in empty.items()}, None, (record,))
        guard = f"{self.root}/names/{table.casefold()}"
        path = self.head_path(table)
        for _ in range(READ_ATTEMPTS):
            # The root registry is read, checked and swapped in the same multi
            # that creates the name guard: two creates of overlapping roots
            # cannot both land.
            roots, roots_version = self._roots_for_create(table, config.root)
            txn = self.client.transaction()
            txn.create(guard, codec.encode_guard(table), acl=self.acl_at(Place.GUARD))
            txn.create(path, codec.encode_head(head), acl=self.acl_at(Place.HEAD))
            txn.create(f"{path}/blobs", b"", acl=self.acl_at(Place.BLOBS))
            txn.create(f"{path}/{VERSIONS}", b"", acl=self.acl_at(Place.VERSIONS))
            txn.create(f"{path}/gc", codec.encode_gc({}), acl=self.acl_at(Place.GC))
            txn.create(f"{path}/owners", b"", acl=self.acl_at(Place.OWNERS))
            txn.create(f"{path}/leases", b"", acl=self.acl_at(Place.LEASES))
            for folder, own, ident in self._own_folders():
                txn.create(f"{path}/{folder}/{own_folder(ident)}", b"", acl=self.acl_at(own, ident))
            txn.create(f"{path}/passes", b"", acl=self.acl_at(Place.RETENTION_HOLDS))
            txn.create(f"{path}/floor", codec.encode_floor(None, 0), acl=self.acl_at(Place.FLOOR))
            initial = codec.LeaseRecord(1, {k: (b,) for k, b in empty.items()}, ())
            txn.create(
                self.version_path(table, 1), codec.encode_lease(initial), acl=self.acl_at(Place.VERSION)
            )
            for kind, blob in empty.items():
                txn.create(
                    self.blob_path(table, blob), codec.encode_bucket(kind, []), acl=self.acl_at(Place.BLOB)
                )
            registry = codec.encode_roots({**roots, table: config.root})
            if roots_version is None:
                txn.create(self._roots_path, registry, acl=self.acl_at(Place.GUARD))
            else:
                txn.set_data(self._roots_path, registry, version=roots_version)
            try:
                results = self._commit(txn)
            except _UNKNOWN:
                try:
                    self._call("sync", "sync", f"{self.root}/tables")
                    current, _ = self._read_head(table)
                except TableNotFoundError:
                    continue
                if current.commit_id == commit_id or any(
                    r.commit_id == commit_id for r in current.history_tail
                ):
                    return TableState(config=config, version=1)
                raise TableExistsError(table) from None
            except NoAuthError:
                raise AuthError(f"ZooKeeper refused creating table {table!r}: not authorised") from None
            failures = [r for r in results if isinstance(r, Exception)]
            if not failures:
                return TableState(config=config, version=1)
            if isinstance(results[0], NodeExistsError):
                try:
                    raw_guard, guard_stat = self._call("table lookup", "get", guard)
                except NoNodeError:
                    continue
                existing = codec.decode_guard(raw_guard, guard, table.casefold())
                if not self._call("table lookup", "exists", self.head_path(existing)):
                    # Left by a drop cut short after the head went: creates are
                    # atomic, so a guard without a head is never a live table.
                    with contextlib.suppress(NoNodeError, BadVersionError):
                        self._op("delete", guard, version=guard_stat.version)
                    continue
                raise TableExistsError(table, existing)
            if isinstance(results[-1], (BadVersionError, NodeExistsError)):
                continue  # another create or drop changed the root registry: check again
            if isinstance(results[0], NoAuthError) or any(isinstance(r, NoAuthError) for r in failures):
                raise AuthError(f"ZooKeeper refused creating table {table!r}: not authorised")
            first = next(r for r in failures if type(r).__name__ != "RolledBackError")
            raise StoreUnavailableError(f"creating table {table!r} failed: {type(first).__name__}")
        raise StoreUnavailableError(f"creating table {table!r} did not settle after {READ_ATTEMPTS} attempts")

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

    @property
    def _roots_path(self) -> str:
        return f"{self.root}/roots"

    def roots(self) -> dict[str, str]:
        """Every table's root (table -> root), from the root registry; built
        from the tables' heads while no registry exists yet."""
        self._ensure_root()
        try:
            raw, _ = self._call("reading the root registry", "get", self._roots_path)
        except NoNodeError:
            return self._roots_from_heads()
        return codec.decode_roots(raw, self._roots_path)

    def _roots_from_heads(self) -> dict[str, str]:
        """Tables created before the registry existed: their roots as recorded."""
        out = {}
        for name in self._call("listing tables", "get_children", f"{self.root}/tables"):
            try:
                head, _ = self._read_head(name)
            except (TableNotFoundError, CorruptRecordError, InvalidNameError):
                continue
            out[name] = head.config.root
        return out

    def _roots_for_create(self, table: str, root: str) -> tuple[dict[str, str], int | None]:
        """The registry to extend with ``root`` and its znode version (None:
        no registry yet), after refusing an overlap with a live table's root.
        An entry whose table is gone (a drop cut short) is dropped."""
        self._ensure_root()
        try:
            raw, stat = self._call("reading the root registry", "get", self._roots_path)
            roots, version = codec.decode_roots(raw, self._roots_path), stat.version
        except NoNodeError:
            roots, version = self._roots_from_heads(), None
        for other, theirs in list(roots.items()):
            if (
                other != table
                and overlaps(root, theirs)
                and not self._call("table lookup", "exists", self.head_path(other))
            ):
                del roots[other]
        roots.pop(table, None)
        check_no_overlap(table, root, roots)
        return roots, version

    def _forget_root(self, table: str) -> None:
        """Remove a dropped table from the root registry (compare-and-set; a
        create also drops entries whose table is gone, so this is best effort)."""
        for _ in range(READ_ATTEMPTS):
            try:
                raw, stat = self._call("reading the root registry", "get", self._roots_path)
            except NoNodeError:
                return
            roots = codec.decode_roots(raw, self._roots_path)
            if roots.pop(table, None) is None:
                return
            try:
                self._op("set", self._roots_path, codec.encode_roots(roots), version=stat.version)
                return
            except BadVersionError:
                continue

    def list_tables(self) -> list[str]:
        return list(self.table_listing().readable)

    def table_listing(self) -> TableListing:
        self._ensure_root()
        children = self._call("listing tables", "get_children", f"{self.root}/tables")
        readable, unreadable = [], {}
        for name in sorted(children):
            try:
                self._read_head(name)
            except (TableNotFoundError, InvalidNameError):
                continue  # being dropped, or not a table of ours
            except CorruptRecordError as exc:
                unreadable[name] = exc.message
                continue
            readable.append(name)
        return TableListing(tuple(readable), unreadable)

    def find_commit(self, table: str, commit_id: str, after_version: int) -> HistoryRecord | None:
        self._call("sync", "sync", self.head_path(table))
        head, _ = self._read_head(table)
        for record in self._history(table, head, until_version=after_version):
            if record.commit_id == commit_id and record.version > after_version:
                return record
        return None

    def _history_chunks(self, table: str, head: Head) -> Iterable[tuple[str, codec.HistoryChunk]]:
        """Sealed history chunks, newest first, following each chunk's ``prev``
        for at most MAX_HISTORY records: older chunks are no longer reachable,
        so the metadata garbage pass removes them (history stays bounded)."""
        blob = head.history_last
        seen = len(head.history_tail)
        for _ in range(MAX_HISTORY):  # a chunk holds at least one record
            if blob is None or seen >= MAX_HISTORY:
                return
            try:
                chunk: codec.HistoryChunk = self._decoded(
                    table, [blob], lambda _blob, raw, where: codec.decode_history(raw, where)
                )[blob]
            except _BlobGone:
                raise CorruptRecordError(self.blob_path(table, blob), "history blob missing") from None
            yield blob, chunk
            seen += len(chunk.records)
            blob = chunk.prev

    def _history(self, table: str, head: Head, until_version: int = 0) -> Iterable[HistoryRecord]:
        yield from reversed(head.history_tail)
        for _, chunk in self._history_chunks(table, head):
            yield from reversed(chunk.records)
            if chunk.records and chunk.records[0].version <= until_version:
                return

    def iter_history(self, table: str) -> Iterator[HistoryRecord]:
        head, _ = self._read_head(table)  # now: a missing table is refused at the call
        return iter(self._history(table, head))

    def history(self, table: str, limit: int | None = None) -> list[HistoryRecord]:
        return list(itertools.islice(self.iter_history(table), limit))

    def drop_table(
        self, table: str, audit: Audit, expected_version: int | None, *, resume_only: bool = False
    ) -> None:
        """Mark the head dropping (compare-and-set), delete the blobs, then the head.

        ``expected_version``: the version the caller checked; VersionConflict
        when the table moved on. None skips the check (a forced drop of an
        unreadable table). ``resume_only`` finishes an interrupted drop and
        nothing else. A drop cut short is finished by running it again.
        """
        path = self.head_path(table)
        guard = f"{self.root}/names/{table.casefold()}"
        try:
            for _ in range(READ_ATTEMPTS):
                try:
                    raw, stat = self._call(f"reading table {table!r}", "get", path)
                except NoNodeError:
                    raise TableNotFoundError(table) from None
                try:
                    head: Head | None = codec.decode_head(raw, path)
                except CorruptRecordError:
                    if expected_version is not None or resume_only:
                        raise
                    head = None
                if head is not None and not head.dropping:
                    if resume_only:
                        raise TableNotFoundError(table)
                    if expected_version is not None and head.version != expected_version:
                        raise VersionConflict(f"table {table} changed since version {expected_version}")
                    marked = Head(
                        head.config,
                        head.version + 1,
                        uuid.uuid4().hex,
                        head.buckets,
                        head.history_last,
                        head.history_tail,
                        dropping=True,
                    )
                    # The name guard is rewritten (same bytes) in the same multi:
                    # only an identity allowed to drop tables may write it, so
                    # one that may only commit cannot leave the table half dropped.
                    txn = self.client.transaction()
                    txn.set_data(path, codec.encode_head(marked), version=stat.version)
                    txn.set_data(guard, codec.encode_guard(table))
                    head_result, guard_result = self._commit(txn)
                    if isinstance(head_result, NoAuthError) or isinstance(guard_result, NoAuthError):
                        raise NoAuthError()
                    if isinstance(guard_result, NoNodeError):  # left by an old crash: restore it, retry
                        with contextlib.suppress(NodeExistsError):
                            self._op("create", guard, codec.encode_guard(table), acl=self.acl_at(Place.GUARD))
                        continue
                    if isinstance(head_result, BadVersionError):
                        if expected_version is not None:
                            raise VersionConflict(f"table {table} changed while dropping") from None
                        continue
                    if isinstance(head_result, Exception):
                        raise head_result
                    stat = head_result
                for child in self._call("listing", "get_children", path):
                    for grandchild in self._call("listing", "get_children", f"{path}/{child}"):
                        node = f"{path}/{child}/{grandchild}"
                        if grandchild.startswith(OWN_PREFIX):  # one identity's owners or leases
                            with contextlib.suppress(NoNodeError):
                                for leaf in self._call("listing", "get_children", node):
                                    with contextlib.suppress(NoNodeError):
                                        self._retried("delete", f"{node}/{leaf}")
                        with contextlib.suppress(NoNodeError, NotEmptyError):
                            self._retried("delete", node)
                    with contextlib.suppress(NoNodeError, NotEmptyError):
                        self._retried("delete", f"{path}/{child}")
                try:
                    self._op("delete", path, version=stat.version)
                except NotEmptyError:
                    continue  # a late writer added a blob: sweep again
                except BadVersionError:
                    continue
                with contextlib.suppress(NoNodeError):
                    self._op("delete", guard)
                self._forget_root(table)
                return
        except NoAuthError:
            raise AuthError(f"ZooKeeper refused dropping table {table!r}: not authorised") from None
        except (KazooException, KazooTimeoutError) as exc:
            raise StoreUnavailableError(
                f"dropping table {table!r} was interrupted ({type(exc).__name__})",
                remedy="run the drop again; it continues where it stopped",
            ) from None
        raise StoreUnavailableError(f"dropping table {table!r} did not settle; run the drop again")

    # ---- metadata garbage ------------------------------------------------------

    def referenced_blobs(self, table: str) -> set[str]:
        """Every blob the current head reaches: buckets, name chunks, history."""
        return self._referenced(table)[0]

    def _referenced(self, table: str) -> tuple[set[str], int]:
        """:meth:`referenced_blobs`, and the head's znode version they were read at."""
        snap = self.read(table)
        loaded = snap.token
        assert isinstance(loaded, _Loaded)
        keep = loaded.head.bucket_blobs() | loaded.chunk_blobs()
        keep.update(blob for blob, _ in self._history_chunks(table, loaded.head))
        for _, lease in self._records(table, "leases"):
            keep.update(lease.blobs)
        for _, record in self._records(table, VERSIONS):
            keep.update(record.blobs)
        return keep, loaded.zversion

    def _delete_unless_moved(self, table: str, blobs: Sequence[str], head_zversion: int) -> int:
        """Delete ``blobs`` in multis that also check the head is still at
        ``head_zversion``: a commit that landed since the keep set was read may
        reference one of them (its blob check passed before this delete), so
        once the head moved nothing more is deleted (the next pass looks
        again). Returns how many were deleted."""
        deleted = 0
        for start in range(0, len(blobs), DELETE_BATCH):
            batch = list(blobs[start : start + DELETE_BATCH])
            while batch:
                txn = self.client.transaction()
                txn.check(self.head_path(table), head_zversion)
                for blob in batch:
                    txn.delete(self.blob_path(table, blob))
                results = self._commit(txn)
                if not any(_refused(r) for r in results):
                    deleted += len(batch)
                    break
                if _refused(results[0]):
                    return deleted  # the head moved (or went): stop here
                # Some were gone already: delete the rest.
                batch = [b for b, r in zip(batch, results[1:], strict=True) if not isinstance(r, NoNodeError)]
        return deleted

    def collect_garbage(self, table: str, grace_ms: int = METADATA_GRACE_MS) -> int:
        """One mark-and-sweep pass over a table's unreferenced blobs.

        A blob is deleted only when an earlier pass already saw it
        unreferenced at least ``grace_ms`` ago (ZooKeeper's clock), so a
        reader holding an older head, or a writer between writing its blobs
        and swapping the head, has that long; with more than
        GARBAGE_SOFT_BLOBS unreferenced, PRESSURE_GRACE_MS at most. The marks live in the table's
        ``gc`` node, updated by compare-and-set: of two concurrent passes, one
        gives way. Returns the number of blobs deleted.
        """
        gc_path = f"{self.head_path(table)}/gc"
        try:
            now = self.now_ms()
            self._prune_versions(table)
            keep, head_zversion = self._referenced(table)
            children = self._call("listing blobs", "get_children", f"{self.head_path(table)}/blobs")
            unreferenced = [b for b in children if b not in keep]
            try:
                raw, stat = self._call("reading gc marks", "get", gc_path)
                marks = codec.decode_gc(raw, gc_path)
                version: int | None = int(stat.version)
            except NoNodeError:
                marks, version = {}, None
            if len(unreferenced) > GARBAGE_SOFT_BLOBS:
                grace_ms = min(grace_ms, PRESSURE_GRACE_MS)
            due = [b for b in unreferenced if b in marks and now - marks[b] >= grace_ms]
            due_set = set(due)
            kept = {b: marks.get(b, now) for b in unreferenced if b not in due_set}
            kept = dict(sorted(kept.items(), key=lambda kv: kv[1])[:GC_MARKS_MAX])
            data = codec.encode_gc(kept)
            try:
                if version is None:
                    self._op("create", gc_path, data, acl=self.acl_at(Place.GC))
                else:
                    self._op("set", gc_path, data, version=version)
            except (BadVersionError, NodeExistsError):
                return 0  # another pass is running
            return self._delete_unless_moved(table, due, head_zversion)
        except NoAuthError:
            raise AuthError(f"ZooKeeper refused collecting garbage of {table!r}: not authorised") from None
        except (KazooException, KazooTimeoutError) as exc:
            raise StoreUnavailableError(f"metadata garbage pass on {table!r}: {type(exc).__name__}") from None

    # ---- retained versions -----------------------------------------------------

    def versions(self, table: str) -> list[int]:
        """The retained versions of a table, oldest first."""
        out = []
        for child in self._children(table, VERSIONS):
            if child.startswith("v-") and child[2:].isdigit():
                out.append(int(child[2:]))
        return sorted(out)

    def _records(self, table: str, folder: str) -> list[tuple[str, codec.LeaseRecord]]:
        """The version records under ``folder`` (``versions``, or ``leases``
        with each reader's own folder looked into), fetched in one pipelined
        batch (with kazoo's bounded retry); one removed meanwhile is skipped.

        A version record that does not decode fails closed (CorruptRecordError).
        A lease that cannot be read (its ACL), does not decode, or names blobs
        no store could have written, is skipped and remembered (:meth:`ignored_leases`): leases
        are written by readers, and one reader's bad lease must not stop
        retention for everyone else's."""
        base = f"{self.head_path(table)}/{folder}"
        names = self._ephemerals(table, folder) if folder == "leases" else self._children(table, folder)

        deadline = time.monotonic() + self.op_timeout_s

        def fetch() -> dict[str, bytes | None]:
            if names:
                self._check_answering()
            pending = {name: self.client.get_async(f"{base}/{name}") for name in names}
            raws: dict[str, bytes | None] = {}
            for name, result in pending.items():
                try:
                    raws[name] = self._wait(result, deadline)[0]
                except NoNodeError:
                    continue
                except NoAuthError:
                    if folder != "leases":
                        raise
                    raws[name] = None  # a lease made with an ACL that hides it
            return raws

        try:
            raws = self.client.retry(fetch)
        except StoreUnavailableError:
            raise
        except NoAuthError:
            raise AuthError(f"ZooKeeper refused reading {base}: not authorised") from None
        except (KazooException, ConnectionError) as exc:
            raise StoreUnavailableError(f"reading {base}: {type(exc).__name__}") from None
        if folder != "leases":
            return [(name, codec.decode_lease(raw or b"", f"{base}/{name}")) for name, raw in raws.items()]
        out: list[tuple[str, codec.LeaseRecord]] = []
        for name, raw in raws.items():
            if raw is None:
                self._ignore_lease(table, f"{base}/{name}", "not readable (its ACL)")
                continue
            try:
                record = codec.decode_lease(raw, f"{base}/{name}")
                bad = sorted(b for b in record.blobs if not _BLOB_ID.match(b))
                if bad:
                    raise CorruptRecordError(f"{base}/{name}", f"names blob {bad[0][:80]!r}")
            except CorruptRecordError as exc:
                self._ignore_lease(table, f"{base}/{name}", exc.message)
                continue
            out.append((name, record))
        return out

    def _ignore_lease(self, table: str, path: str, why: str) -> None:
        why = f"lease {path}: {why.replace(f'corrupt lineage record at {path}: ', '')}"
        log.warning("ignoring a malformed lease: %s", why)
        with self._cache_lock:
            self._ignored.setdefault(table, {})[path] = why

    def ignored_leases(self, table: str) -> list[str]:
        """The malformed leases of ``table`` this store skipped so far, each
        with why (retention reports them)."""
        with self._cache_lock:
            return sorted(self._ignored.get(table, {}).values())

    def _version_record(self, table: str, version: int, newest: int) -> tuple[bytes, codec.LeaseRecord]:
        """The raw and decoded record of a retained past version."""
        path = self.version_path(table, version)
        try:
            raw, _ = self._call(f"reading version {version} of {table!r}", "get", path)
        except NoNodeError:
            retained = self.versions(table)
            raise VersionGoneError(table, version, retained[0] if retained else None, newest) from None
        record = codec.decode_lease(raw, path)
        if record.version != version:
            raise CorruptRecordError(path, f"holds version {record.version}")
        return raw, record

    def read_version(self, table: str, version: int) -> TableState:
        """One retained version of a table, rebuilt from its blobs: ``version``
        itself or VersionGoneError, whatever commits meanwhile. The head is
        read once, never again: a second read could land after a commit and
        answer a newer version."""
        check_table_name(table)
        head, zversion = self._read_head(table)
        if version == head.version:
            last = self._last.get(table)
            if last is not None and last[0].zversion == zversion and last[0].head == head:
                return last[1].state
            try:
                loaded = self._load(table, head, zversion)
            except _BlobGone:
                pass  # the head moved on and its blobs went: the version's record has them
            else:
                maps = loaded.maps
                state = TableState(head.config, head.version, maps[SEGMENTS], maps[ENTRIES], maps[PENDING])
                self._remember_state(table, head.buckets, state)
                return state
        _, record = self._version_record(table, version, head.version)
        return self._rebuild(table, head, record)

    def _remember_state(self, table: str, buckets: Mapping[str, tuple[str, ...]], state: TableState) -> None:
        """Versions are immutable: keep the last few rebuilt, keyed by content."""
        key = (table, state.version, tuple(tuple(buckets[k]) for k in KINDS))
        with self._cache_lock:
            self._states[key] = state
            self._states.move_to_end(key)
            while len(self._states) > STATES_CACHED:
                self._states.popitem(last=False)

    def _rebuild(self, table: str, head: Head, record: codec.LeaseRecord) -> TableState:
        key = (table, record.version, tuple(tuple(record.buckets[k]) for k in KINDS))
        with self._cache_lock:
            cached = self._states.get(key)
        if cached is not None and cached.config == head.config:
            return cached
        pinned = Head(head.config, record.version, "", record.buckets, None, ())
        try:
            loaded = self._load(table, pinned, -1)
        except _BlobGone as gone:
            raise CorruptRecordError(
                self.head_path(table), f"blob {gone} of retained version {record.version} is missing"
            ) from None
        state = TableState(
            head.config, record.version, loaded.maps[SEGMENTS], loaded.maps[ENTRIES], loaded.maps[PENDING]
        )
        self._remember_state(table, record.buckets, state)
        return state

    def _prune_versions(self, table: str) -> None:
        """Keep the newest MAX_VERSIONS version records; the rest go (they are
        immutable, so deleting at data version 0 is the compare-and-set)."""
        for version in self.versions(table)[:-MAX_VERSIONS]:
            with contextlib.suppress(NoNodeError, BadVersionError):
                self._op("delete", self.version_path(table, version), version=0)

    def _collect_quietly(self, table: str) -> None:
        """A garbage pass after a commit: its failure must not fail the commit."""
        try:
            self.collect_garbage(table)
        except LineageError as exc:
            log.warning("metadata garbage pass on %s skipped: %s", table, exc.message)

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

    def hold_owner(self, table: str, entry_id: str) -> None:
        try:
            self._ephemeral(table, "owners", check_entry_id(entry_id), b"", sequence=False)
        except NodeExistsError:
            path = self._own_path(table, "owners", entry_id)
            stat = self._call("owner", "exists", path)
            if stat is None or stat.ephemeralOwner != self.session_id():
                raise RefusedError(
                    f"entry {entry_id} is already owned by another push", table=table
                ) from None

    def release_owner(self, table: str, entry_id: str) -> None:
        self._delete_quietly(self._own_path(table, "owners", check_entry_id(entry_id)), "owner")

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

    def live_owners(self, table: str) -> frozenset[str]:
        return frozenset(i.rsplit("/", 1)[-1] for i in self._ephemerals(table, "owners"))

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

    def pin(self, table: str, version: int | None = None) -> Lease:
        """Lease one version. The lease alone does not make it readable:
        retention may have condemned it before the lease existed, which only
        a head read after the lease can tell (``LineageManager.pin_readable``)."""
        snap = self.read(table)
        loaded = snap.token
        assert isinstance(loaded, _Loaded)
        state = snap.state
        if version is not None and version != state.version:
            raw, past = self._version_record(table, version, state.version)
            # The lease goes first: from then on retention keeps its blobs and files.
            lease_id = self._ephemeral(table, "leases", "lease-", raw, sequence=True)
            return Lease(table, lease_id, self._rebuild(table, loaded.head, past))
        record = codec.LeaseRecord(
            version=state.version,
            buckets=dict(loaded.head.buckets),
            chunks=tuple(sorted(loaded.chunk_blobs())),
        )
        lease_id = self._ephemeral(table, "leases", "lease-", codec.encode_lease(record), sequence=True)
        return Lease(table, lease_id, state)

    def pinned_states(self, table: str) -> list[TableState]:
        """The table versions live readers pinned, rebuilt from their blobs.
        A lease that does not decode, or whose blobs are gone (no reader
        could be reading through it), is skipped and reported
        (:meth:`ignored_leases`)."""
        head, _ = self._read_head(table)
        base = f"{self.head_path(table)}/leases"
        states = []
        for name, record in self._records(table, "leases"):
            try:
                states.append(self._rebuild(table, head, record))
            except CorruptRecordError as exc:
                self._ignore_lease(table, f"{base}/{name}", exc.message)
        return states

    def release(self, lease: Lease) -> None:
        self._delete_quietly(f"{self.head_path(lease.table)}/leases/{lease.lease_id}", "lease")

    def leases(self, table: str) -> list[LeaseInfo]:
        return [LeaseInfo(lease_id, record.version) for lease_id, record in self._records(table, "leases")]

    def session_alive(self, since: int) -> bool:
        """False once the connection is suspended or the session is lost: work
        that needs agreement (deleting files) must stop. Also False once the
        session ``since`` (a :meth:`session_id`) was replaced by a new one,
        even though the client is connected again."""
        return bool(self.client.connected) and self.session_id() == since

    def session_id(self) -> int | None:
        """The current ZooKeeper session's id (None while there is none)."""
        client_id = self.client.client_id
        return int(client_id[0]) if client_id else None

    def connected(self) -> bool:
        return bool(self.client.connected)

    def confirm_session(self) -> None:
        """One round trip to the server: a dead session fails it."""
        try:
            self._op("exists", self.root)
        except (KazooException, KazooTimeoutError, ConnectionError) as exc:
            raise StoreUnavailableError(f"ZooKeeper did not answer: {type(exc).__name__}") from None

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

    def close(self) -> None:
        self.client.remove_listener(self._on_state)
        if self._owns_client:
            self.client.stop()
            self.client.close()
