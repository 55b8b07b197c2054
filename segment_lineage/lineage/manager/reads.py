"""Reads: the visible set, entries and history; past versions (time travel);
pinning a version for a reader with a lease, chosen and checked after the
lease exists."""

from __future__ import annotations

import contextlib
import itertools
import sys
from collections.abc import Iterator

from segment_lineage.lineage.core.bucket_maps import BucketMap
from segment_lineage.lineage.core.errors import (
    ContentionError,
    CorruptRecordError,
    InvalidInputError,
    LineageError,
    NotFoundError,
    RefusedError,
    VersionGoneError,
)
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import EntryState, LineageEntry, Operation, Segment, TableState
from segment_lineage.lineage.core.names import check_entry_id, check_table_name
from segment_lineage.lineage.core.periods import check_version, format_time, parse_version_or_time
from segment_lineage.lineage.core.schema_versions import columns_known
from segment_lineage.lineage.core.visibility import visible_locations, visible_segments
from segment_lineage.lineage.manager.collector import fewer_collections
from segment_lineage.lineage.manager.commit import ManagerBase
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.lineage.store.contract import Lease, ReadAgainError, Snapshot

# A reader whose current version is condemned between its read and its lease
# pins again at the newest: each retry needs another retention mark meanwhile.
PIN_ATTEMPTS = 5


MIN_ENTRY_PREFIX = 4
ENTRY_ID_LENGTH = 36  # a UUID with its dashes
MAX_PREFIX_SEARCH = 100_000  # history records a prefix is looked for in
MAX_EXAMINED = 512  # retained versions readable_versions loads


class Reads(ManagerBase):
    """Reading tables: the visible set, entries, history, past versions and pins."""

    def visible_segments(self, table: str) -> list[Segment]:
        return visible_segments(self.table(table))

    def visible_files(self, table: str) -> list[str]:
        """The visible segments' files as engines open them (a local file's
        absolute path; ``s3://...``, ``gs://...``, ``hdfs://host:port/...``),
        in the order of :meth:`visible_segments`: an engine's file list.
        Read from the segments' names and locations alone, building no
        segment. Not pinned: retention may reclaim them after a later push;
        a reader that must finish reading pins them (``SnapshotReader``)."""
        check_table_name(table)
        with fewer_collections():
            state = self.store.read(table, whole=True).state
            return DeepStore.for_root(state.config.root).locators(visible_locations(state))

    def entries(self, table: str) -> list[LineageEntry]:
        return list(self.table(table).entries.values())

    def history(self, table: str, limit: int | None = None) -> list[HistoryRecord]:
        check_table_name(table)
        if limit is not None and limit < 1:
            raise InvalidInputError(f"invalid limit {limit}: must be at least 1")
        # A limit past any history there can be is no limit (islice stops at sys.maxsize).
        return self.store.history(table, None if limit is not None and limit >= sys.maxsize else limit)

    def resolve_version(
        self,
        table: str,
        *,
        version: int | None = None,
        at_ms: int | None = None,
        entry_id: str | None = None,
    ) -> int:
        """A table version from one of: a version number; a moment (the newest
        version committed at or before it); an entry (the version just before
        that push completed). With none, the version before the newest
        completed push."""
        given = [x for x in (version, at_ms, entry_id) if x is not None]
        if len(given) > 1:
            raise InvalidInputError("give at most one of a version, a time and an entry")
        if version is not None:
            return check_version(version)
        if at_ms is not None:
            return self._version_at(table, at_ms)
        ends = (r for r in self.store.iter_history(table) if r.operation is Operation.END_REPLACE)
        if entry_id is not None:
            return _before_entry(table, check_entry_id(entry_id), ends)
        return self._before_last_push(table, ends)

    def _version_at(self, table: str, at_ms: int) -> int:
        """The newest version committed at or before ``at_ms`` (ZooKeeper's clock)."""
        now = self.store.now_ms()
        if at_ms > now:  # as Delta refuses a timestamp after its newest version
            raise InvalidInputError(
                f"{format_time(at_ms)} is in the future (ZooKeeper's clock reads {format_time(now)}): "
                f"no version of table {table!r} exists then yet",
                remedy="give a past time, or no time for the current version",
            )
        oldest: HistoryRecord | None = None
        for record in self.store.iter_history(table):  # newest first, read only as far as needed
            if record.at_ms <= at_ms:
                return record.version
            oldest = record
        if oldest is None or oldest.version == 1:  # the table's whole history is kept: it was not there
            raise NotFoundError(
                f"table {table!r} did not exist at {format_time(at_ms)}",
                remedy="give a later time; 'lineage history' lists the versions and their times",
            )
        raise NotFoundError(
            f"no version of table {table!r} from {format_time(at_ms)} is kept: the oldest, "
            f"{oldest.version}, is from {format_time(oldest.at_ms)}",
            remedy="give a later time; 'lineage history' lists the versions and their times",
        )

    def _before_last_push(self, table: str, ends: Iterator[HistoryRecord]) -> int:
        """The version before the newest push still in force (``ends``: the
        history's END_REPLACE records, newest first)."""
        live = self._read(table)
        landed: set[str] | None = None  # entries whose segments are visible now, computed once if needed
        for record in ends:
            entry = live.entries.get(record.entry_id or "")
            if entry is not None:
                if entry.state is EntryState.COMPLETED:
                    return record.version - 1
                continue
            # Gone from the record: retention removes a finished push's entry
            # once nothing is left to reclaim (every APPEND push). Its segments
            # still name it: if any is visible, the push is still in force.
            if landed is None:
                landed = {s.entry_id for s in visible_segments(live) if s.entry_id is not None}
            if record.entry_id in landed:
                return record.version - 1
        raise RefusedError(f"table {table!r} has no completed push to undo", table=table)

    def resolve_entry(self, table: str, text: str, *, in_history: bool = False) -> str:
        """The entry id ``text`` names: a whole id, or a unique prefix of one
        (as the tool prints them: segment names carry the first 8 digits)
        among the table's entries, and with ``in_history`` among those its
        history names too. NotFoundError when none matches, InvalidInputError
        when the prefix is not hexadecimal or matches several."""
        raw = text.strip().lower()
        if len(raw) == ENTRY_ID_LENGTH:
            return check_entry_id(raw)
        _check_prefix(text, raw)
        found = {e for e in self._read(table).entries if e.startswith(raw)}
        if in_history:  # both: a prefix naming a live entry and a past one is ambiguous
            records = itertools.islice(self.store.iter_history(table), MAX_PREFIX_SEARCH)
            found |= {r.entry_id for r in records if r.entry_id is not None and r.entry_id.startswith(raw)}
        return _only_match(table, text, found)

    def table_as_of(self, table: str, version: int) -> TableState:
        """Version ``version`` itself, or VersionGoneError: never another one,
        whatever commits meanwhile, every record loaded. Not pinned: its files
        may go at any time (use :meth:`pin_readable` to read them)."""
        state = self._as_of(table, version)
        with self._past(state), fewer_collections():
            return state.loaded()

    @contextlib.contextmanager
    def _past(self, *versions: TableState) -> Iterator[None]:
        """Around work on past versions asked for by number and read earlier,
        whose segments and pending deletions load when first wanted. A part
        of one of them collected since means that version is no longer kept
        (its record was pruned, then its blobs swept): reading the table
        again cannot bring it back, so VersionGoneError, naming the oldest
        version kept. A part of another version (the head as read, moved on
        since) stays ReadAgainError: reading again helps there."""
        try:
            yield
        except ReadAgainError as exc:
            for state in versions:
                if exc.blob is not None and exc.blob in _bucket_blobs(state):
                    raise self._unreadable(state, exc.blob) from None
            raise

    def _unreadable(self, state: TableState, blob: str) -> LineageError:
        """Why past version ``state`` cannot be read, its part ``blob`` gone."""
        table, version = state.config.name, state.version
        kept = self.store.versions(table)
        if version in kept:  # the sweep keeps every blob a retained version names: a loss, not a race
            lost = CorruptRecordError(
                f"version {version} of table {table!r}",
                f"its metadata blob {blob} is missing, though the version is retained",
            )
            lost.remedy = (
                "other versions may read ('lineage history' lists them); nothing of this project deletes "
                "a retained version's blobs: look for what did"
            )
            return lost
        later = [v for v in kept if v > version]
        return VersionGoneError(table, version, later[0] if later else None)

    def _as_of(self, table: str, version: int) -> TableState:
        """``table_as_of`` as the store reads it: buckets loaded when first wanted."""
        check_table_name(table)
        return _checked(table, version, self.store.read_version(table, check_version(version)))

    def _as_of_now(self, table: str, version: int) -> tuple[TableState, tuple[Snapshot, int]]:
        """:meth:`_as_of`, with a commit's first read of the table (its
        version, floor, queue and the clock), read together."""
        check_table_name(table)
        state, snap, now = self.store.read_version_now(table, check_version(version))
        return _checked(table, version, state), (snap, now)

    def resolve_as_of(self, table: str, as_of: int | str) -> int:
        """``as_of`` as users give it: a version number, or text (a version,
        an ISO-8601 time, or ``ms:EPOCH_MS``)."""
        if isinstance(as_of, str):
            version, at_ms = parse_version_or_time(as_of)
            return self.resolve_version(table, version=version, at_ms=at_ms)
        return self.resolve_version(table, version=as_of)

    def pin_readable(self, table: str, version: int | None = None, *, read: Snapshot | None = None) -> Lease:
        """Pin a version whose files stay until the lease is released: the
        current one (``version=None``) or a retained past one.

        Pin first, then choose and verify: the lease is created, then the head
        is read again, and every segment the pinned version shows must still
        be registered there at the same location (not condemned into
        ``pending``). Retention re-reads the leases after its mark commit and
        ZooKeeper applies writes in one order, so either this read sees the
        mark or the pass sees the lease. The current version, condemned under
        us, is pinned again at the newest version, at most ``PIN_ATTEMPTS``
        times.

        ``read``: the table as the caller read it; when it is at ``version``,
        the first lease builds on it instead of reading the head again (the
        head read after the lease checks it all the same). When the head
        read after that lease is no longer at ``version``, the version's
        metadata may have been collected while the caller paused, before
        the lease named it (retention ignores a lease whose records are
        gone): it is pinned again from the store.

        Raises VersionGoneError for a past version no longer readable (naming
        the oldest readable one): not retryable. ContentionError when every
        attempt lost its version: retry later. Any error releases the lease.
        """
        check_table_name(table)
        if version is not None:
            self.resolve_version(table, version=version)  # validates it
        started = self.retry.clock()
        if read is not None and (version is None or read.state.version != version):
            read = None  # only a read at the version asked for saves the head read
        for _ in range(PIN_ATTEMPTS):
            handed, lease = read is not None, self.store.pins.pin(table, version, read, look=True)
            read = None  # a later attempt pins what the store shows then
            try:
                stands = self._pin_stands(table, version, lease, handed=handed)
            except BaseException:
                self.store.pins.release(lease)
                raise
            if stands:
                return lease
            self.store.pins.release(lease)  # lost its version: take the newest
        raise ContentionError(
            table, PIN_ATTEMPTS, self.retry.clock() - started, doing="pinning a version retention left alone"
        )

    def _pin_stands(self, table: str, version: int | None, lease: Lease, *, handed: bool) -> bool:
        """Whether ``lease`` holds what :meth:`pin_readable` was asked for,
        checked against the head read after it exists; False when pinning
        again may help, raising when it cannot (a past version gone)."""
        then = lease.state
        if version is not None and then.version != version:
            raise LineageError(
                f"pinned version {then.version} of table {table!r} instead of version {version}"
            )
        # Read after the lease exists (see pin_readable): with it, one round trip.
        current = lease.after if lease.after is not None else self._read(table)
        if handed and current.version != then.version:
            return False  # built on a read the table moved past: see pin_readable
        asked = (then,) if version is not None else ()  # the head: pinning again helps
        with self._past(*asked):
            if version is not None:
                self.check_readable(then, current)
            elif self._gone(then, current) is not None:
                return False  # condemned between our read and our lease
            then.loaded()  # a reader holds the state past the store's life, maybe
            return True

    def readable_versions(self, table: str, lo: int = 0, hi: int | None = None) -> list[int]:
        """The retained versions from ``lo`` to ``hi`` a reader can still read
        now (``read --as-of``, rollback targets): those every segment of which
        is still registered where it was. Loads each (the newest
        MAX_EXAMINED of them at most): for pictures and reports."""
        current = self._read(table)
        out = []
        wanted = [v for v in self.store.versions(table) if lo <= v and (hi is None or v <= hi)]
        for version in wanted[-MAX_EXAMINED:]:
            if self._shows_what_stays(table, version, current, columns_known(current.config, version)):
                out.append(version)
        return out

    def _shows_what_stays(self, table: str, version: int, current: TableState, known: bool) -> bool:
        """Whether retained version ``version`` shows only segments ``current``
        still holds where they were (:meth:`_gone`); False once it is no longer
        kept, or when its columns are not ``known`` (read first all the same:
        the simulation's schedules count every read)."""
        try:
            then = current if version == current.version else self._as_of(table, version)
            with self._past(then):
                return known and self._gone(then, current) is None
        except VersionGoneError:
            return False

    def check_readable(self, then: TableState, current: TableState) -> None:
        """Refuse a past version whose files retention took or is taking:
        every segment it shows must still be registered in ``current`` (a
        head read after the reader's lease exists) at the same location; one
        queued in ``pending`` is condemned, so not readable. Names the oldest
        readable version after it."""
        replaced_at = current.config.schema_replaced_at
        if not columns_known(current.config, then.version) and replaced_at is not None:
            raise VersionGoneError(
                then.config.name,
                then.version,
                replaced_at,
                why=f"has the columns the schema had before version {replaced_at} replaced it, "
                "and they are no longer recorded",
            )
        gone = self._gone(then, current)
        if gone is None:
            return
        table = then.config.name
        raise VersionGoneError(
            table,
            then.version,
            self._oldest_readable_after(then, current),
            why=f"can no longer be read: segment {gone} it shows was cleaned up (no longer "
            "registered as it was, or its file queued for deletion)",
            keep=f"replaced segments stay readable for the table's --replaced-retention and, in a "
            f"REFRESH table, its --max-snapshots ('lineage table show {table}'; "
            f"'lineage table alter {table}' to keep more)",
        )

    def _oldest_readable_after(self, then: TableState, current: TableState) -> int | None:
        """The oldest retained version after ``then`` that still shows only what ``current`` holds."""
        table = then.config.name
        later = (v for v in self.store.versions(table) if v > then.version)
        return next((v for v in later if not self._gone(self._as_of(table, v), current)), None)

    @staticmethod
    def _gone(then: TableState, current: TableState) -> str | None:
        """The first segment ``then`` shows that ``current`` does not hold
        registered at the same location, or whose location waits in pending."""
        if then.version == current.version:
            return None  # one version: what it shows is registered, and nothing registered is pending
        for seg in visible_segments(then):
            now = current.segments.get(seg.name)
            if now is None or seg.location in current.pending or not _same_file(now, seg):
                return seg.name
        return None


def _before_entry(table: str, entry_id: str, ends: Iterator[HistoryRecord]) -> int:
    """The version just before entry ``entry_id``'s push completed (``ends``:
    the history's END_REPLACE records, newest first)."""
    for record in ends:
        if record.entry_id == entry_id:
            return record.version - 1
    raise NotFoundError(f"entry {entry_id} never completed on table {table!r}")


def _check_prefix(text: str, raw: str) -> None:
    """Refuse an entry prefix too short to look for, longer than an id, or
    not hexadecimal (``raw``: ``text`` as read)."""
    if not MIN_ENTRY_PREFIX <= len(raw) < ENTRY_ID_LENGTH or any(c not in "0123456789abcdef-" for c in raw):
        shown = text if len(text) <= 48 else f"{text[:40]}... ({len(text)} characters)"
        raise InvalidInputError(
            f"invalid entry id {shown!r}: a whole id ({ENTRY_ID_LENGTH} characters), or at least "
            f"{MIN_ENTRY_PREFIX} of its first hexadecimal digits"
        )


def _only_match(table: str, text: str, found: set[str]) -> str:
    """The one entry id prefix ``text`` matched: NotFoundError for none, InvalidInputError for several."""
    if not found:
        raise NotFoundError(f"no entry of table {table!r} starts with {text!r}")
    if len(found) > 1:
        shown = ", ".join(sorted(found)[:5])
        raise InvalidInputError(
            f"entry prefix {text!r} matches {len(found)} entries ({shown}): give more digits"
        )
    return found.pop()


def _bucket_blobs(state: TableState) -> set[str]:
    """The blobs of the maps of ``state`` that load when first wanted."""
    maps = (state.segments, state.entries, state.pending)
    return {blob for records in maps if isinstance(records, BucketMap) for blob in records.ids}


def _same_file(now: Segment, then: Segment) -> bool:
    """The same registration of a segment: a name and location deleted,
    reclaimed and registered again hold other data."""
    return (now.location, now.created_ms, now.checksum, now.size_bytes) == (
        then.location,
        then.created_ms,
        then.checksum,
        then.size_bytes,
    )


def _checked(table: str, version: int, state: TableState) -> TableState:
    if state.version != version:  # a store bug must not hand a reader another snapshot
        raise LineageError(
            f"asked for version {version} of table {table!r}, the store answered version {state.version}"
        )
    return state
