"""Retained versions: each commit records its version (its blob ids) under
``versions``; a past version is rebuilt from those blobs, and the oldest
records beyond the table's versions kept (MAX_VERSIONS by default) are
pruned. A reader's lease is the same record, so reading records (and
skipping a reader's malformed lease) lives here too."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import BadVersionError, NoAuthError, NoNodeError

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import Head
from segment_lineage.lineage.core.acl import Place
from segment_lineage.lineage.core.errors import (
    AuthError,
    CorruptRecordError,
    LineageError,
    StoreUnavailableError,
    VersionGoneError,
)
from segment_lineage.lineage.core.model import TableState
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.core.schema_versions import config_at
from segment_lineage.lineage.store.contract import MAX_VERSIONS
from segment_lineage.lineage.zk.connection import ZkConnection, translated
from segment_lineage.lineage.zk.store.blobs import BLOB_ID, BlobGone
from segment_lineage.lineage.zk.store.ephemerals import Ephemerals
from segment_lineage.lineage.zk.store.heads import Heads
from segment_lineage.lineage.zk.store.nodes import Nodes
from segment_lineage.lineage.zk.store.paths import VERSIONS, Paths

log = logging.getLogger(__name__)


class Versions:
    def __init__(
        self, zk: ZkConnection, paths: Paths, nodes: Nodes, heads: Heads, ephemerals: Ephemerals
    ) -> None:
        self.zk = zk
        self.paths = paths
        self.nodes = nodes
        self.heads = heads
        self.ephemerals = ephemerals
        self._lock = threading.Lock()
        self._ignored: dict[str, dict[str, str]] = {}  # per table: malformed lease path -> why

    def versions(self, table: str) -> list[int]:
        """The retained versions of a table, oldest first."""
        out = []
        for child in self.ephemerals.children(table, VERSIONS):
            if child.startswith("v-") and child[2:].isdigit():
                out.append(int(child[2:]))
        return sorted(out)

    def ensure_folder(self, table: str) -> None:
        """The folder of a table created before versions were recorded, made
        when a commit finds it missing. Under a policy only an admin may
        create in a head: any other role is told so (AuthError), and that
        ``lineage acl apply`` makes it."""
        path = self.paths.folder(table, VERSIONS)
        try:
            self.nodes.ensure_node(path, Place.VERSIONS)
        except AuthError:
            if self.nodes.policy() is None:
                raise
            raise AuthError(
                f"table {table!r} has no versions folder ({path}; a table made before versions were "
                f"recorded), and only an admin may make it: {self.nodes.who()}; nothing was committed",
                remedy="an admin runs 'lineage acl apply' again: it makes every table's missing folders",
            ) from None

    def records(self, table: str, folder: str) -> list[tuple[str, codec.LeaseRecord]]:
        """The version records under ``folder`` (``versions``, or ``leases``
        with each reader's own folder looked into), fetched in one pipelined
        batch (with kazoo's bounded retry); one removed meanwhile is skipped.

        A version record that does not decode fails closed (CorruptRecordError).
        A lease that cannot be read (its ACL), does not decode, or names blobs
        no store could have written, is skipped and remembered (:meth:`ignored_leases`): leases
        are written by readers, and one reader's bad lease must not stop
        retention for everyone else's."""
        base = self.paths.folder(table, folder)
        names = (
            self.ephemerals.listing(table, folder)
            if folder == "leases"
            else self.ephemerals.children(table, folder)
        )

        deadline = time.monotonic() + self.zk.op_timeout_s

        def fetch() -> dict[str, bytes | None]:
            if names:
                self.zk.check_answering()
            pending = {name: self.zk.send_get(f"{base}/{name}") for name in names}
            raws: dict[str, bytes | None] = {}
            for name, result in pending.items():
                try:
                    raws[name] = self.zk.answer(result, deadline)[0]
                except NoNodeError:
                    continue
                except NoAuthError:
                    if folder != "leases":
                        raise
                    raws[name] = None  # a lease made with an ACL that hides it
            return raws

        with translated(f"reading {base}", refused=f"ZooKeeper refused reading {base}: not authorised"):
            raws = self.zk.retry(fetch)
        if folder != "leases":
            return [(name, codec.decode_lease(raw or b"", f"{base}/{name}")) for name, raw in raws.items()]
        return self._leases(table, base, raws)

    def _leases(
        self, table: str, base: str, raws: dict[str, bytes | None]
    ) -> list[tuple[str, codec.LeaseRecord]]:
        """The leases that decode and name only blobs a store writes; the others ignored, with why."""
        out: list[tuple[str, codec.LeaseRecord]] = []
        for name, raw in raws.items():
            if raw is None:
                self.ignore_lease(table, f"{base}/{name}", "not readable (its ACL)")
                continue
            try:
                out.append((name, _lease(raw, f"{base}/{name}")))
            except CorruptRecordError as exc:
                self.ignore_lease(table, f"{base}/{name}", exc.message)
        return out

    def ignore_lease(self, table: str, path: str, why: str) -> None:
        why = f"lease {path}: {why.replace(f'corrupt lineage record at {path}: ', '')}"
        log.warning("ignoring a malformed lease: %s", why)
        with self._lock:
            self._ignored.setdefault(table, {})[path] = why

    def ignored_leases(self, table: str) -> list[str]:
        """The malformed leases of ``table`` this store skipped so far, each
        with why (retention reports them)."""
        with self._lock:
            return sorted(self._ignored.get(table, {}).values())

    def record(
        self, table: str, version: int, newest: int, pending: Any = None
    ) -> tuple[bytes, codec.LeaseRecord]:
        """The raw and decoded record of a retained past version; ``pending``:
        its read, sent earlier with another request (asked again, with
        retries, when it got no answer in time)."""
        path = self.paths.version(table, version)
        doing = f"reading version {version} of {table!r}"
        try:
            raw: bytes | None = None
            if pending is not None:
                with contextlib.suppress(StoreUnavailableError), self.zk.reading(doing):
                    raw = self.zk.answer(pending)[0]
            if raw is None:
                raw, _ = self.zk.get(path, doing=doing)
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
        return self.read_version_with_head(table, version)[0]

    def read_version_with_head(
        self, table: str, version: int, behind: Callable[[], None] | None = None
    ) -> tuple[TableState, tuple[Head, int, bytes]]:
        """:meth:`read_version`, and the head it read (decoded, its znode
        version, its bytes); ``behind`` sends more requests right behind
        the head's read (one round trip for all)."""
        check_table_name(table)
        # The version's record goes out with the head (one round trip): it
        # is immutable, so when it was read does not matter.
        pending = self.zk.send_get(self.paths.version(table, version))
        head, zversion, raw = read = self.heads.read_head_raw(table, behind)
        if version == head.version:
            last = self.heads.last(table, head, zversion)
            if last is not None:
                return last.state, read
            try:
                loaded = self.heads.load(table, head, zversion)
            except BlobGone:
                pass  # the head moved on and its blobs went: the version's record has them
            else:
                state = loaded.state()
                self.heads.remember_state(table, head.buckets, state)
                return state, read
        _, record = self.record(table, version, head.version, pending)
        # What comparing the two will want (a rollback, a look at what is
        # readable), fetched together; the head kept as read, so a commit's
        # read of it right after decodes nothing.
        state = self.rebuild(table, head, record, ahead=True)
        self.heads.keep(table, head, zversion, raw)
        return state, read

    @staticmethod
    def _pinned(head: Head, record: codec.LeaseRecord) -> Head:
        """The head that version ``record`` had, as a load reads it (``head``: the table's current one)."""
        return Head(config_at(head.config, record.version), record.version, "", record.buckets, None, ())

    def rebuild(
        self, table: str, head: Head, record: codec.LeaseRecord, *, ahead: bool = False, lease: bool = False
    ) -> TableState:
        """The version ``record`` names, with ``head``'s config as that version
        is read (its own schema). A blob gone: VersionGoneError when the
        version's record went too (pruned since it was read, then swept),
        else CorruptRecordError (``lease``: the record is a reader's lease,
        whose blobs the sweep keeps whatever the versions kept).
        ``ahead``: when it must be built, fetch with it what comparing it
        with ``head`` will want (see Heads.preload)."""
        pinned = self._pinned(head, record)
        cached = self.heads.remembered_state(table, record.version, record.buckets)
        if cached is not None and cached.config == pinned.config:
            return cached
        if ahead:
            self.heads.preload({table: [head, pinned]})
        try:
            loaded = self.heads.load(table, pinned, -1)
        except BlobGone as gone:
            raise self._gone(table, record.version, str(gone), lease) from None
        state = loaded.state()
        self.heads.remember_state(table, record.buckets, state)
        return state

    def _gone(self, table: str, version: int, blob: str, lease: bool) -> LineageError:
        """Why a retained version's blob is missing: the version went since it
        was read (VersionGoneError, naming the next one), else corruption."""
        if (
            not lease
            and self.zk.exists(
                self.paths.version(table, version), doing=f"reading version {version} of {table!r}"
            )
            is None
        ):
            later = [v for v in self.versions(table) if v > version]
            return VersionGoneError(table, version, later[0] if later else None)
        missing = f"blob {blob} of retained version {version} is missing"
        return CorruptRecordError(self.paths.head(table), missing)

    def prune(self, table: str, kept: int | None = None) -> None:
        """Keep the newest ``kept`` version records (the table's setting;
        None: MAX_VERSIONS); the rest go (they are immutable, so deleting at
        data version 0 is the compare-and-set)."""
        for version in self.versions(table)[: -(kept or MAX_VERSIONS)]:
            with contextlib.suppress(NoNodeError, BadVersionError):
                self.zk.delete(self.paths.version(table, version), version=0)


def _lease(raw: bytes, path: str) -> codec.LeaseRecord:
    """A reader's lease, refused (CorruptRecordError) when it names a blob no store could have written."""
    record = codec.decode_lease(raw, path)
    bad = sorted(b for b in record.blobs if not BLOB_ID.match(b))
    if bad:
        raise CorruptRecordError(path, f"names blob {bad[0][:80]!r}")
    return record
