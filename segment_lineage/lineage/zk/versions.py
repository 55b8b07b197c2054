"""Retained versions: their records, and rebuilding a past version from its blobs."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping

from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NoAuthError,
    NoNodeError,
)

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import ENTRIES, KINDS, PENDING, SEGMENTS, Head
from segment_lineage.lineage.core.acl import (
    Place,
)
from segment_lineage.lineage.core.errors import (
    AuthError,
    CorruptRecordError,
    StoreUnavailableError,
    VersionGoneError,
)
from segment_lineage.lineage.core.model import (
    TableState,
)
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.store.contract import (
    MAX_VERSIONS,
)
from segment_lineage.lineage.zk.blobs import _BLOB_ID, _BlobGone
from segment_lineage.lineage.zk.heads import STATES_CACHED
from segment_lineage.lineage.zk.paths import VERSIONS

log = logging.getLogger(__name__)


class _Versions:
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

    def _ensure_versions(self, table: str) -> None:
        """Tables created before versions were recorded get the folder once."""
        if table in self._versions_ready:
            return
        self.ensure_node(f"{self.head_path(table)}/{VERSIONS}", Place.VERSIONS)
        self._versions_ready.add(table)
