"""The commit: one multi that compare-and-sets the head, creates the new
blobs the change needs (each uniquely named, invisible until referenced),
records the version and checks the floor. That single versioned ``set`` is
the atomic commit; its results are checked element by element. A change too
large for one request writes its blobs first, and the multi checks each is
still there instead."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError

from segment_lineage.lineage import codec
from segment_lineage.lineage.codec import ENTRIES, PENDING, SEGMENTS, Head, NameList
from segment_lineage.lineage.core import buckets as layout
from segment_lineage.lineage.core.acl import Place
from segment_lineage.lineage.core.env import SYSTEM
from segment_lineage.lineage.core.errors import LineageError, TooLargeError
from segment_lineage.lineage.core.failpoints import failpoint
from segment_lineage.lineage.core.history import HistoryRecord
from segment_lineage.lineage.core.model import Audit, Change, LineageEntry, TableState
from segment_lineage.lineage.store.contract import (
    Snapshot,
    VersionConflict,
    Write,
    WriteOutcomeUnknown,
)
from segment_lineage.lineage.zk.connection import ZkConnection, translated
from segment_lineage.lineage.zk.store.blobs import REQUEST_LIMIT, BlobStore, Bucket, NewBlobs
from segment_lineage.lineage.zk.store.gc import Sweeper
from segment_lineage.lineage.zk.store.heads import Heads
from segment_lineage.lineage.zk.store.loaded import Loaded
from segment_lineage.lineage.zk.store.nodes import Nodes
from segment_lineage.lineage.zk.store.outcome import (
    Results,
    cause_first,
    outcome,
    refused_by_role,
    split_results,
)
from segment_lineage.lineage.zk.store.paths import Paths
from segment_lineage.lineage.zk.store.versions import Versions

HEAD_LIMIT = 448 * 1024  # leaves room for the blob checks in the commit multi
INLINE_MULTI_BYTES = 128 * 1024  # blobs, head and version record up to this go in the one multi
INLINE_NAMES_BYTES = 4 * 1024  # shorter name lists live inside the entry record
HISTORY_TAIL = 64  # history records kept in the head before sealing a blob
HISTORY_TAIL_BYTES = 64 * 1024  # ... or fewer, when their text makes them this large
Known = Bucket | tuple[str, ...]  # a decoded bucket, or a name chunk's names
PATH_OVERHEAD = 160  # an operation's path beside the table's name, its ACL and its framing, at most


def name_list(names: tuple[str, ...], blobs: NewBlobs) -> NameList:
    """A list of segment names, inline when short, else in chunk blobs added to ``blobs``."""
    if len(codec.dumps(list(names))) <= INLINE_NAMES_BYTES:
        return NameList(names=names, chunks=(), count=len(names))
    chunk_ids: list[str] = []
    current: list[str] = []
    size = 0
    for name in names:
        if current and size + len(name) + 3 > layout.BLOB_LIMIT - 128:
            chunk_ids.append(blobs.add(codec.encode_names(current), tuple(current)))
            current, size = [], 0
        current.append(name)
        size += len(name) + 3
    if current:
        chunk_ids.append(blobs.add(codec.encode_names(current), tuple(current)))
    return NameList(names=None, chunks=tuple(chunk_ids), count=len(names))


def encode_record(kind: str, obj: Any, base: Loaded, blobs: NewBlobs) -> dict[str, object]:
    """One record of a bucket; an entry reuses the name lists of ``base``
    that it still has, else writes new ones into ``blobs``."""
    if kind == SEGMENTS:
        return codec.segment_to_dict(obj)
    entry: LineageEntry = obj
    old = base.lists.get(entry.entry_id)
    src = (
        old[1] if old is not None and old[0] is entry.segments_from else name_list(entry.segments_from, blobs)
    )
    dst = old[3] if old is not None and old[2] is entry.segments_to else name_list(entry.segments_to, blobs)
    return codec.entry_to_dict(entry, src, dst)


def _encoded(kind: str, objs: list[Any], base: Loaded, blobs: NewBlobs) -> bytes:
    """A bucket of ``kind`` holding ``objs``: segments and pending deletions straight into columns."""
    if kind == SEGMENTS:
        return codec.encode_segment_bucket(objs)
    if kind == PENDING:
        return codec.encode_pending_bucket(objs)
    return codec.encode_bucket(kind, [encode_record(kind, obj, base, blobs) for obj in objs])


def _buckets(
    kind: str,
    new: Mapping[str, Any],
    base: Loaded,
    blobs: NewBlobs,
    table: str,
    decoded: dict[str, Known],
) -> tuple[str, ...]:
    """The bucket ids of ``kind`` after the change; new buckets go into ``blobs``."""
    old_ids = base.head.buckets[kind]
    found = layout.relayout(
        f"table {table!r}: {kind} metadata",
        base.maps[kind],
        new,
        base.bucket_keys[kind],
        lambda keys: _encoded(kind, [new[k] for k in keys], base, blobs),
    )
    if found is None:
        return old_ids
    count = found.count
    ids = list(old_ids) if len(old_ids) == count else [""] * count
    for i, (keys, raw) in found.rewritten.items():
        blob = blobs.add(raw)
        ids[i] = blob
        if kind != ENTRIES:  # records stored as they are: what reading the blob would give
            decoded[blob] = Bucket(i, count, tuple(zip(keys, map(new.__getitem__, keys), strict=True)))
        else:  # stored with their name lists' chunks: decoded as a reader would (a few small records)
            where = f"new entries bucket {blob}"
            records = codec.decode_records(kind, codec.decode_bucket(raw, kind, where), where)
            decoded[blob] = Bucket(i, count, tuple(zip(keys, records, strict=True)))
    return tuple(ids)


@dataclass(frozen=True)
class CommitPlan:
    """What one commit writes, computed from the base and the change alone:
    the head, the version's record, the new blobs (inline in the multi or
    written before it), and the buckets as the writer already knows them."""

    table: str
    base: Loaded
    state: TableState  # the table after the commit
    head: bytes
    version_record: bytes
    blobs: Mapping[str, bytes]
    decoded: Mapping[str, Known]  # the new blobs as reading them would give
    sealed: bool  # the history tail was sealed into a blob
    inline: bool  # the blobs go in the multi itself
    buckets: Mapping[str, tuple[str, ...]]  # kind -> the bucket ids of the version written

    @property
    def version(self) -> int:
        return self.state.version

    @property
    def request_bytes(self) -> int:
        """What this commit adds to a multi: its data and, per operation, a path."""
        data = len(self.head) + len(self.version_record)
        if self.inline:
            data += sum(map(len, self.blobs.values()))
        return data + (len(self.blobs) + 5) * (len(self.table) + PATH_OVERHEAD)


def plan_commit(
    table: str,
    loaded: Loaded,
    change: Change,
    audit: Audit,
    commit_id: str,
    now_ms: int,
    new_id: Callable[[], str] = SYSTEM.hex_id,
    *,
    small: bool = False,
) -> CommitPlan:
    """The commit's writes, as data (no ZooKeeper call); new blobs are named by ``new_id``.
    ``small``: the head as small as it can be (its history tail sealed into a
    blob) and every blob written before the multi, for a request that carries
    many tables' commits."""
    state = change.state
    blobs = NewBlobs(new_id)
    decoded: dict[str, Known] = {}
    buckets = {
        SEGMENTS: _buckets(SEGMENTS, state.segments, loaded, blobs, table, decoded),
        ENTRIES: _buckets(ENTRIES, state.entries, loaded, blobs, table, decoded),
        PENDING: _buckets(PENDING, state.pending, loaded, blobs, table, decoded),
    }
    version = loaded.head.version + 1
    record = HistoryRecord.of(version, commit_id, now_ms, change, audit)
    last, tail = loaded.head.history_last, loaded.head.history_tail
    # Sealed by count and by size: long reasons in any script never push
    # the head past its limit.
    sealed = bool(tail) and (
        small or len(tail) >= HISTORY_TAIL or codec.history_size((*tail, record)) > HISTORY_TAIL_BYTES
    )
    if sealed:
        last, tail = blobs.add(codec.encode_history(tail, last)), ()
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
    used = codec.bucket_ids(buckets) | ({last} if sealed else set())
    chunks = loaded.chunk_blobs() | (set(blobs.raw) - used)
    version_record = codec.encode_lease(codec.LeaseRecord(version, buckets, tuple(sorted(chunks))))
    # A small change's blobs go in the multi itself (one round trip, and
    # a lost race leaves nothing behind); a large one's are written first.
    size = sum(map(len, blobs.raw.values())) + len(raw) + len(version_record)
    inline = not small and size <= INLINE_MULTI_BYTES
    after = TableState(state.config, version, state.segments, state.entries, state.pending)
    decoded.update(blobs.decoded)  # the name chunks, as their names
    return CommitPlan(table, loaded, after, raw, version_record, blobs.raw, decoded, sealed, inline, buckets)


class Commits:
    """Sends a :class:`CommitPlan` as one multi and classifies its results."""

    def __init__(
        self,
        zk: ZkConnection,
        paths: Paths,
        nodes: Nodes,
        blobs: BlobStore,
        versions: Versions,
        sweeper: Sweeper,
        owner_path: Callable[[str, str], str],
        heads: Heads,
    ) -> None:
        self.heads = heads  # told of each version written (Heads.written)
        self.zk = zk
        self.paths = paths
        self.nodes = nodes
        self.blobs = blobs
        self.versions = versions
        self.sweeper = sweeper
        self.owner_path = owner_path  # (table, entry) -> the push's owner node

    def _ops(self, txn: Any, plan: CommitPlan, base: Snapshot, owner: str | None, guard: str | None) -> int:
        """Add one commit's operations to ``txn``: swap the head only if every
        new blob is there (written first, a garbage pass may have taken those
        of a writer paused too long), nobody took the floor, the role may
        write, and the push's claim stands (its session did not end since it
        took it). Returns how many operations it added."""
        table = plan.table
        txn.set_data(self.paths.head(table), plan.head, version=plan.base.zversion)
        for blob, data in plan.blobs.items():
            if plan.inline:
                txn.create(self.paths.blob(table, blob), data, acl=self.nodes.acl_at(Place.BLOB))
            else:
                txn.check(self.paths.blob(table, blob), 0)
        txn.create(
            self.paths.version(table, plan.version), plan.version_record, acl=self.nodes.acl_at(Place.VERSION)
        )
        if base.floor is not None:
            txn.check(self.paths.floor(table), base.floor.version)
        if guard is not None:  # only that role may write it: others are refused the multi
            txn.set_data(guard, b"", -1)
        if owner is not None:
            txn.check(self.owner_path(table, owner), -1)
        return 2 + len(plan.blobs) + (base.floor is not None) + (guard is not None) + (owner is not None)

    def write(
        self,
        table: str,
        base: Snapshot,
        change: Change,
        audit: Audit,
        commit_id: str,
        now_ms: int,
        owner: str | None = None,
        role: str | None = None,
    ) -> TableState:
        return self.write_together([Write(table, base, change, audit, commit_id, now_ms, owner, role)])[0]

    def write_together(self, writes: Sequence[Write], checks: Sequence[Snapshot] = ()) -> list[TableState]:
        """One multi for every table's commit (a single table's is the
        common case): all land, or none; ``checks``' heads compared in it."""
        plans = self._sized(writes)
        for plan in plans:
            if not plan.inline:
                self.blobs.write(plan.table, plan.blobs)
        guards = [self._guard(w.role) for w in writes]
        parts = self._send_made(plans, writes, guards, checks)
        if any(r.refused_whole for r in parts):
            # The multi was refused as a whole: no head, version or lease
            # references this attempt's blobs. Take them away now rather than
            # leave them to the sweep: under contention a big commit's
            # attempts would otherwise fill the server's memory.
            self._discard(plans)
        self._raise_refusal(plans, writes, guards, parts)
        self._keep_written(plans)
        return [plan.state for plan in plans]

    def _raise_refusal(
        self,
        plans: list[CommitPlan],
        writes: Sequence[Write],
        guards: list[str | None],
        parts: list[Results],
    ) -> None:
        """Raise what refused the multi, the table that caused it first."""
        for plan, w, guard, r in sorted(
            zip(plans, writes, guards, parts, strict=True), key=lambda p: cause_first(p[3])
        ):
            error = refused_by_role(self.nodes, w.table, w.role, guard, r) or outcome(
                r, w.owner, table=w.table, version=plan.base.head.version, inline=plan.inline
            )
            if error is not None:
                raise error

    def _keep_written(self, plans: list[CommitPlan]) -> None:
        """After the commit: the writer's next read needs no decoding of the
        buckets it wrote; a sealed history is collected in the background
        (the writer does not wait)."""
        for plan in plans:
            for blob, bucket in plan.decoded.items():
                self.blobs.remember(blob, bucket)
            self.heads.written(plan.table, plan.buckets, plan.state)
            if plan.sealed and self.nodes.may_sweep():
                self.sweeper.request(plan.table)

    def _sized(self, writes: Sequence[Write]) -> list[CommitPlan]:
        """The commits' plans; several tables' over the request limit are
        planned small (history tails sealed, blobs written first), and
        refused (TooLargeError, nothing sent) past the request limit."""
        plans = self._plans(writes, small=False)
        if len(plans) > 1 and sum(p.request_bytes for p in plans) > REQUEST_LIMIT:
            plans = self._plans(writes, small=True)
            size = sum(p.request_bytes for p in plans)
            if size > REQUEST_LIMIT:
                raise TooLargeError(
                    f"the commit of {len(plans)} tables together would send {size} bytes in one request, "
                    f"over the limit of {REQUEST_LIMIT}; nothing was committed"
                )
        return plans

    def _send_made(
        self,
        plans: list[CommitPlan],
        writes: Sequence[Write],
        guards: list[str | None],
        checks: Sequence[Snapshot],
    ) -> list[Results]:
        """``_send``; once more after making the versions folders when the
        multi found one missing (a table made before versions were recorded).
        Asked only then, not before each client's first commit: that would
        cost every fresh client a round trip. ZooKeeper names only the first
        operation that failed, so every table's folder is made (each asked
        first: cheap where it exists)."""
        parts = self._send(plans, writes, guards, checks)
        if not any(r.no_versions_folder for r in parts):
            return parts
        try:
            for plan in plans:
                self.versions.ensure_folder(plan.table)
        except LineageError:
            self._discard(plans)  # nothing references them: the multi applied nothing
            raise
        return self._send(plans, writes, guards, checks)

    def _discard(self, plans: list[CommitPlan]) -> None:
        """Take away blobs written before a multi that applied nothing."""
        for plan in plans:
            if not plan.inline:
                self.blobs.discard(plan.table, plan.blobs)

    def _send(
        self,
        plans: list[CommitPlan],
        writes: Sequence[Write],
        guards: list[str | None],
        checks: Sequence[Snapshot],
    ) -> list[Results]:
        """The one multi, and its results split table by table; VersionConflict
        (nothing applied) when one of ``checks`` moved."""
        txn = self.zk.transaction()
        for snap in checks:  # first: a moved one is the multi's first failure
            loaded = snap.token
            if not isinstance(loaded, Loaded):
                raise TypeError("snapshot was not read from this store")
            txn.check(self.paths.head(snap.state.config.name), loaded.zversion)
        counts = [
            self._ops(txn, plan, w.base, w.owner, guard)
            for plan, w, guard in zip(plans, writes, guards, strict=True)
        ]
        failpoint("store.before-head-swap")
        what = f"table {writes[0].table!r}" if len(writes) == 1 else f"{len(writes)} tables"
        with translated(
            "head swap",
            refused=f"ZooKeeper refused writing {what}: not authorised",
            failure=WriteOutcomeUnknown,
        ):
            results = list(self.zk.commit(txn))
        checked, results = results[: len(checks)], results[len(checks) :]
        moved = [
            s.state.config.name
            for s, r in zip(checks, checked, strict=True)
            if isinstance(r, (BadVersionError, NoNodeError))
        ]
        if moved:
            self._discard(plans)  # the multi applied nothing: no head references them
            raise VersionConflict(f"table(s) {', '.join(moved)} moved since the commit was decided")
        parts: list[Results] = []
        for w, guard, count in zip(writes, guards, counts, strict=True):
            mine, results = results[:count], results[count:]
            parts.append(
                split_results(mine, w.base.floor is not None, w.owner is not None, guard is not None)
            )
        return parts

    def _plans(self, writes: Sequence[Write], *, small: bool) -> list[CommitPlan]:
        plans = []
        for w in writes:
            loaded = w.base.token
            if not isinstance(loaded, Loaded):
                raise TypeError("snapshot was not read from this store")
            plans.append(
                plan_commit(w.table, loaded, w.change, w.audit, w.commit_id, w.now_ms, self.zk.env.hex_id,
                            small=small)
            )  # fmt: skip
        return plans

    def _guard(self, role: str | None) -> str | None:
        return self.paths.guard_node(role) if role is not None and self.nodes.policy() else None
