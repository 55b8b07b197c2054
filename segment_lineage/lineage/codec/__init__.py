"""The one codec for everything the project stores in ZooKeeper.

Four formats, each with a name and a format version:

* ``head``: a table's small root record, the only node a commit swaps;
* ``bucket``: an immutable blob holding one hash bucket of segments,
  entries or pending deletions;
* ``names``: an immutable blob holding a chunk of a long segment-name list;
* ``history``: an immutable blob holding sealed history records;
* ``gc``: a table's metadata-sweep marks; ``lease``: a pinned or retained
  version; ``acl``: the ACL policy (digest ids per role).

Decoding fails closed: bad JSON (bytes that are not UTF-8, or nesting too
deep to parse), an unknown format or version, an unknown state, a missing
field, a wrong type or a duplicate id raise :class:`CorruptRecordError`,
naming the node. Nothing else in the project serializes records; two small
records are bare UTF-8 text rather than JSON: a table name guard and the
store id.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from segment_lineage.lineage.core.acl import ADMIN_ROLE, ROLES, AclPolicy
from segment_lineage.lineage.core.errors import CorruptRecordError, LineageError
from segment_lineage.lineage.core.model import (
    Audit,
    DeletionReason,
    EntryState,
    HistoryRecord,
    LineageEntry,
    Operation,
    PendingDeletion,
    Segment,
    TableConfig,
    TableType,
    TimeUnit,
)
from segment_lineage.lineage.core.names import (
    check_entry_id,
    check_location,
    check_segment_name,
    check_table_name,
)

FORMAT_VERSION = 1
HEAD = "segment-lineage.head"
BUCKET = "segment-lineage.bucket"
NAMES = "segment-lineage.names"
HISTORY = "segment-lineage.history"
ROOTS = "segment-lineage.roots"
CLAIM = "segment-lineage.root-claim"

SEGMENTS = "segments"
ENTRIES = "entries"
PENDING = "pending"
KINDS = (SEGMENTS, ENTRIES, PENDING)

T = TypeVar("T")


def dumps(obj: object) -> bytes:
    """Compact JSON in UTF-8: text costs its UTF-8 size (an escaped astral
    character would cost 12 bytes). Records written as ASCII escapes decode the same."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, sort_keys=False).encode("utf-8")


class _Bad(Exception):
    """Internal: a field failed to decode. Turned into CorruptRecordError."""


@contextmanager
def _decoding(where: str) -> Iterator[None]:
    try:
        yield
    except _Bad as exc:
        raise CorruptRecordError(where, str(exc)) from None
    except LineageError as exc:  # a validator inside a record constructor
        raise CorruptRecordError(where, exc.message) from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptRecordError(where, f"{type(exc).__name__}: {exc}") from None
    except RecursionError:
        raise CorruptRecordError(where, "nested too deeply") from None


def _get(d: Mapping[str, Any], key: str, kind: type[T] | tuple[type, ...]) -> T:
    if key not in d:
        raise _Bad(f"missing field {key!r}")
    value = d[key]
    if isinstance(value, bool) and kind is int:
        raise _Bad(f"field {key!r} must be {getattr(kind, '__name__', kind)}")
    if not isinstance(value, kind):
        raise _Bad(f"field {key!r} must be {getattr(kind, '__name__', kind)}, found {type(value).__name__}")
    return value  # type: ignore[return-value]


def _opt(d: Mapping[str, Any], key: str, kind: type[T]) -> T | None:
    value = d.get(key)
    if value is None:
        return None
    return _get(d, key, kind)


def _str_list(d: Mapping[str, Any], key: str) -> list[str]:
    values = _get(d, key, list)
    if not all(isinstance(v, str) for v in values):
        raise _Bad(f"field {key!r} must be a list of strings")
    return values


def _enum(enum: Callable[[str], T], value: object, what: str) -> T:
    try:
        return enum(value)  # type: ignore[arg-type]
    except ValueError:
        raise _Bad(f"unknown {what} {value!r}") from None


def parse(raw: bytes, fmt: str, where: str) -> dict[str, Any]:
    """Parse raw bytes and check the format name and version."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptRecordError(where, f"not valid JSON ({exc})") from None
    except RecursionError:
        # Any record of ours is a few levels deep; a deeper one is not ours,
        # and must fail closed like any other bad record, not crash the caller.
        raise CorruptRecordError(where, "not valid JSON (nested too deeply to parse)") from None
    if not isinstance(doc, dict):
        raise CorruptRecordError(where, "not a JSON object")
    if doc.get("format") != fmt:
        raise CorruptRecordError(where, f"expected format {fmt!r}, found {doc.get('format')!r}")
    version = doc.get("v")
    if version != FORMAT_VERSION:
        raise CorruptRecordError(
            where, f"unknown format version {version!r} (this build reads version {FORMAT_VERSION})"
        )
    return doc


def _envelope(fmt: str, **body: object) -> dict[str, object]:
    return {"format": fmt, "v": FORMAT_VERSION, **body}


# ---- table config -----------------------------------------------------------


def config_to_dict(config: TableConfig) -> dict[str, object]:
    d: dict[str, object] = {
        "name": config.name,
        "root": config.root,
        "type": config.table_type.value,
        "time_column": config.time_column,
        "replaced_segments_retention_ms": config.replaced_segments_retention_ms,
        "lineage_entry_cleanup_retention_ms": config.lineage_entry_cleanup_retention_ms,
        "max_snapshots": config.max_snapshots,
        "exclusive_delete": config.exclusive_delete,
        "time_retention_ms": config.time_retention_ms,
    }
    # Optional within format version 1: a record without it (every table
    # created before units were declared) reads as "not declared".
    if config.time_unit is not None:
        d["time_unit"] = config.time_unit.value
    return d


def config_from_dict(d: Mapping[str, Any]) -> TableConfig:
    return TableConfig(
        name=_get(d, "name", str),
        root=_get(d, "root", str),
        table_type=_enum(TableType, d.get("type"), "table type"),
        time_column=_opt(d, "time_column", str),
        replaced_segments_retention_ms=_get(d, "replaced_segments_retention_ms", int),
        lineage_entry_cleanup_retention_ms=_get(d, "lineage_entry_cleanup_retention_ms", int),
        max_snapshots=_get(d, "max_snapshots", int),
        exclusive_delete=_get(d, "exclusive_delete", bool),
        time_retention_ms=_opt(d, "time_retention_ms", int),
        time_unit=None if d.get("time_unit") is None else _enum(TimeUnit, d["time_unit"], "time unit"),
    )


# ---- records in buckets -----------------------------------------------------


def segment_to_dict(seg: Segment) -> dict[str, object]:
    d: dict[str, object] = {
        "name": seg.name,
        "loc": seg.location,
        "rows": seg.rows,
        "bytes": seg.size_bytes,
        "sum": seg.checksum,
        "created": seg.created_ms,
    }
    if seg.min_time is not None:
        d["tmin"] = seg.min_time
        d["tmax"] = seg.max_time
    if seg.entry_id is not None:
        d["entry"] = seg.entry_id
    return d


def segment_from_dict(d: Mapping[str, Any]) -> Segment:
    # Fast path for the common record (a cold read of a large table decodes
    # every segment): the same checks as below, inline; anything unusual
    # takes the field-by-field path, which names what is wrong.
    name, loc, rows, size, checksum, created = (
        d.get("name"),
        d.get("loc"),
        d.get("rows"),
        d.get("bytes"),
        d.get("sum"),
        d.get("created"),
    )
    tmin, tmax, entry = d.get("tmin"), d.get("tmax"), d.get("entry")
    if (
        type(name) is str
        and type(loc) is str
        and type(rows) is int
        and type(size) is int
        and type(checksum) is str
        and type(created) is int
        and (tmin is None or type(tmin) is int)
        and (tmax is None or type(tmax) is int)
        and (entry is None or type(entry) is str)
    ):
        return Segment(
            name=check_segment_name(name),
            location=check_location(loc),
            rows=rows,
            size_bytes=size,
            checksum=checksum,
            min_time=tmin,
            max_time=tmax,
            entry_id=entry,
            created_ms=created,
        )
    return _segment_checked(d)


def _segment_checked(d: Mapping[str, Any]) -> Segment:
    return Segment(
        name=check_segment_name(_get(d, "name", str)),
        location=check_location(_get(d, "loc", str)),
        rows=_get(d, "rows", int),
        size_bytes=_get(d, "bytes", int),
        checksum=_get(d, "sum", str),
        min_time=_opt(d, "tmin", int),
        max_time=_opt(d, "tmax", int),
        entry_id=_opt(d, "entry", str),
        created_ms=_get(d, "created", int),
    )


def pending_to_dict(p: PendingDeletion) -> dict[str, object]:
    d: dict[str, object] = {
        "loc": p.location,
        "segment": p.segment,
        "reason": p.reason.value,
        "marked": p.marked_ms,
    }
    if p.entry_id is not None:
        d["entry"] = p.entry_id
    if p.size_bytes:
        d["bytes"] = p.size_bytes
    return d


def pending_from_dict(d: Mapping[str, Any]) -> PendingDeletion:
    return PendingDeletion(
        location=check_location(_get(d, "loc", str)),
        segment=check_segment_name(_get(d, "segment", str)),
        reason=_enum(DeletionReason, d.get("reason"), "deletion reason"),
        marked_ms=_get(d, "marked", int),
        entry_id=_opt(d, "entry", str),
        size_bytes=_opt(d, "bytes", int) or 0,
    )


@dataclass(frozen=True)
class NameList:
    """A segment-name list as stored: inline, or in ``names`` blobs."""

    names: tuple[str, ...] | None
    chunks: tuple[str, ...]
    count: int


def entry_to_dict(entry: LineageEntry, src: NameList, dst: NameList) -> dict[str, object]:
    d: dict[str, object] = {
        "id": entry.entry_id,
        "state": entry.state.value,
        "ts": entry.timestamp_ms,
        "created": entry.created_ms,
        "actor": entry.audit.actor,
        "job": entry.audit.job_id,
        "reason": entry.audit.reason,
    }
    if entry.interval is not None:
        d["interval"] = list(entry.interval)
    if entry.held_until_ms is not None:
        d["held"] = entry.held_until_ms
    for key, names in (("from", src), ("to", dst)):
        if names.names is not None:
            d[key] = list(names.names)
        else:
            d[key + "_chunks"] = list(names.chunks)
            d[key + "_count"] = names.count
    return d


@dataclass(frozen=True)
class StoredEntry:
    """An entry record as read from a bucket, before its name chunks are loaded."""

    entry_id: str
    state: EntryState
    timestamp_ms: int
    created_ms: int
    audit: Audit
    src: NameList
    dst: NameList
    interval: tuple[int, int] | None = None
    held_until_ms: int | None = None

    def resolve(self, src: tuple[str, ...], dst: tuple[str, ...]) -> LineageEntry:
        return LineageEntry(
            self.entry_id,
            src,
            dst,
            self.state,
            self.timestamp_ms,
            self.created_ms,
            self.audit,
            self.interval,
            self.held_until_ms,
        )


def _names(d: Mapping[str, Any], key: str) -> NameList:
    if key in d:
        names = tuple(_str_list(d, key))
        return NameList(names=names, chunks=(), count=len(names))
    chunks = tuple(_str_list(d, key + "_chunks"))
    return NameList(names=None, chunks=chunks, count=_get(d, key + "_count", int))


def stored_entry_from_dict(d: Mapping[str, Any]) -> StoredEntry:
    return StoredEntry(
        entry_id=check_entry_id(_get(d, "id", str)),
        state=_enum(EntryState, d.get("state"), "entry state"),
        timestamp_ms=_get(d, "ts", int),
        created_ms=_get(d, "created", int),
        audit=Audit(_get(d, "actor", str), _opt(d, "job", str), _opt(d, "reason", str)),
        src=_names(d, "from"),
        dst=_names(d, "to"),
        interval=_interval(d),
        held_until_ms=_opt(d, "held", int),  # absent in records written before holds existed
    )


def _interval(d: Mapping[str, Any]) -> tuple[int, int] | None:
    raw = d.get("interval")
    if raw is None:
        return None
    if (
        not isinstance(raw, list)
        or len(raw) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in raw)
        or raw[0] >= raw[1]
    ):
        raise _Bad(f"bad interval {raw!r}")
    return (raw[0], raw[1])


def encode_bucket(kind: str, records: Sequence[Mapping[str, object]]) -> bytes:
    return dumps(_envelope(BUCKET, kind=kind, records=list(records)))


def decode_bucket(raw: bytes, kind: str, where: str) -> list[dict[str, Any]]:
    doc = parse(raw, BUCKET, where)
    with _decoding(where):
        if doc.get("kind") != kind:
            raise _Bad(f"expected a {kind} bucket, found {doc.get('kind')!r}")
        records = _get(doc, "records", list)
        if not all(isinstance(r, dict) for r in records):
            raise _Bad("records must be objects")
        return records


def decode_records(kind: str, records: Sequence[Mapping[str, Any]], where: str) -> list[Any]:
    """Decode bucket records into Segment, StoredEntry or PendingDeletion."""
    decoder: Callable[[Mapping[str, Any]], Any] = {
        SEGMENTS: segment_from_dict,
        ENTRIES: stored_entry_from_dict,
        PENDING: pending_from_dict,
    }[kind]
    with _decoding(where):
        return [decoder(r) for r in records]


def encode_names(names: Sequence[str]) -> bytes:
    return dumps(_envelope(NAMES, names=list(names)))


def decode_names(raw: bytes, where: str) -> list[str]:
    doc = parse(raw, NAMES, where)
    with _decoding(where):
        return _str_list(doc, "names")


# ---- history ----------------------------------------------------------------


def history_to_dict(h: HistoryRecord) -> dict[str, object]:
    return {
        "version": h.version,
        "commit": h.commit_id,
        "at": h.at_ms,
        "op": h.operation.value,
        "entry": h.entry_id,
        "actor": h.actor,
        "job": h.job_id,
        "reason": h.reason,
        "segments": h.segments,
        "rows": h.rows,
        "bytes": h.size_bytes,
        **({"cleaned": list(h.cleaned)} if h.cleaned else {}),
    }


def history_from_dict(d: Mapping[str, Any]) -> HistoryRecord:
    return HistoryRecord(
        version=_get(d, "version", int),
        commit_id=_get(d, "commit", str),
        at_ms=_get(d, "at", int),
        operation=_enum(Operation, d.get("op"), "operation"),
        entry_id=_opt(d, "entry", str),
        actor=_get(d, "actor", str),
        job_id=_opt(d, "job", str),
        reason=_opt(d, "reason", str),
        segments=_get(d, "segments", int),
        rows=_get(d, "rows", int),
        size_bytes=_get(d, "bytes", int),
        cleaned=tuple(check_entry_id(e) for e in _str_list(d, "cleaned")) if "cleaned" in d else (),
    )


@dataclass(frozen=True)
class HistoryChunk:
    """Sealed history records, oldest first, and the id of the chunk before."""

    records: tuple[HistoryRecord, ...]
    prev: str | None


def history_size(records: Sequence[HistoryRecord]) -> int:
    """Encoded bytes of ``records`` in a head's tail or a history chunk."""
    return sum(len(dumps(history_to_dict(r))) + 1 for r in records)


def encode_history(records: Sequence[HistoryRecord], prev: str | None) -> bytes:
    return dumps(_envelope(HISTORY, prev=prev, records=[history_to_dict(r) for r in records]))


def decode_history(raw: bytes, where: str) -> HistoryChunk:
    doc = parse(raw, HISTORY, where)
    with _decoding(where):
        return HistoryChunk(
            records=tuple(history_from_dict(r) for r in _get(doc, "records", list)),
            prev=_opt(doc, "prev", str),
        )


GC = "segment-lineage.gc"


def encode_gc(candidates: Mapping[str, int]) -> bytes:
    """Metadata blobs seen unreferenced, with when they were first seen so."""
    return dumps(_envelope(GC, candidates=dict(candidates)))


def decode_gc(raw: bytes, where: str) -> dict[str, int]:
    doc = parse(raw, GC, where)
    with _decoding(where):
        candidates = _get(doc, "candidates", dict)
        if not all(isinstance(k, str) and isinstance(v, int) for k, v in candidates.items()):
            raise _Bad("candidates must map blob ids to times")
        return dict(candidates)


FLOOR = "segment-lineage.floor"


def encode_floor(holder: str | None, until_ms: int) -> bytes:
    """A table's floor: the commit holding the table's commits, and until when."""
    return dumps(_envelope(FLOOR, holder=holder, until=until_ms))


def decode_floor(raw: bytes, where: str) -> tuple[str | None, int]:
    doc = parse(raw, FLOOR, where)
    with _decoding(where):
        return _opt(doc, "holder", str), _get(doc, "until", int)


def encode_roots(roots: Mapping[str, str]) -> bytes:
    """The registry of table roots: table name -> canonical root."""
    return dumps(_envelope(ROOTS, roots=dict(sorted(roots.items()))))


def encode_claim(store_id: str, table: str) -> bytes:
    """The marker under a table's root: which store and table the root is claimed by."""
    return dumps(_envelope(CLAIM, store=store_id, table=table))


def decode_claim(raw: bytes, where: str) -> tuple[str, str]:
    """(store id, table) of a root's marker."""
    doc = parse(raw, CLAIM, where)
    with _decoding(where):
        return _get(doc, "store", str), _get(doc, "table", str)


def decode_roots(raw: bytes, where: str) -> dict[str, str]:
    doc = parse(raw, ROOTS, where)
    with _decoding(where):
        roots = _get(doc, "roots", dict)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in roots.items()):
            raise _Bad("roots must map table names to roots")
        return dict(roots)


# ---- bare text records --------------------------------------------------------


def encode_guard(table: str) -> bytes:
    """A table-name guard (``names/<casefolded name>``): the table's name as spelled."""
    return table.encode("utf-8")


def decode_guard(raw: bytes, where: str, casefolded: str) -> str:
    """The table a name guard stands for. The guard's node is named after the
    casefolded table name, so a record naming another table is corrupt too."""
    with _decoding(where):
        try:
            table = check_table_name(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise _Bad(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        if table.casefold() != casefolded:
            raise _Bad(f"names table {table!r}, which is not a spelling of {casefolded!r}")
        return table


def decode_store_id(raw: bytes, where: str) -> str:
    """The store id (a uuid's hex digits when this project made it)."""
    with _decoding(where):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Bad(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        if not text or len(text) > 200 or not text.isprintable():
            raise _Bad(f"not a store id: {text[:80]!r}")
        return text


# ---- head -------------------------------------------------------------------


def bucket_ids(buckets: Mapping[str, Sequence[str]]) -> set[str]:
    """Every bucket blob id of a head or a version record."""
    return {blob for ids in buckets.values() for blob in ids}


@dataclass(frozen=True)
class Head:
    """A table's root record: the one node every commit compares and swaps."""

    config: TableConfig
    version: int
    commit_id: str
    buckets: Mapping[str, tuple[str, ...]]  # kind -> blob ids, a power of two each
    history_last: str | None  # newest sealed history chunk; each names the one before
    history_tail: tuple[HistoryRecord, ...]
    dropping: bool = False

    def bucket_blobs(self) -> set[str]:
        return bucket_ids(self.buckets)


def encode_head(head: Head) -> bytes:
    return dumps(
        _envelope(
            HEAD,
            table=config_to_dict(head.config),
            version=head.version,
            commit=head.commit_id,
            buckets={k: list(v) for k, v in head.buckets.items()},
            history={
                "last": head.history_last,
                "tail": [history_to_dict(r) for r in head.history_tail],
            },
            dropping=head.dropping,
        )
    )


def decode_head(raw: bytes, where: str) -> Head:
    doc = parse(raw, HEAD, where)
    with _decoding(where):
        buckets_doc = _get(doc, "buckets", dict)
        buckets: dict[str, tuple[str, ...]] = {}
        for kind in KINDS:
            ids = tuple(_str_list(buckets_doc, kind))
            if not ids or len(ids) & (len(ids) - 1):
                raise _Bad(f"{kind} bucket count {len(ids)} is not a power of two")
            buckets[kind] = ids
        history = _get(doc, "history", dict)
        tail = tuple(history_from_dict(r) for r in _get(history, "tail", list))
        head = Head(
            config=config_from_dict(_get(doc, "table", dict)),
            version=_get(doc, "version", int),
            commit_id=_get(doc, "commit", str),
            buckets=buckets,
            history_last=_opt(history, "last", str),
            history_tail=tail,
            dropping=_get(doc, "dropping", bool),
        )
        if head.version < 0:
            raise _Bad("negative version")
        return head


LEASE = "segment-lineage.lease"


@dataclass(frozen=True)
class LeaseRecord:
    """What a reader pinned: a table version, its bucket blobs by kind, and
    the name chunks its entries use. Enough to rebuild that version."""

    version: int
    buckets: Mapping[str, tuple[str, ...]]
    chunks: tuple[str, ...]

    @property
    def blobs(self) -> set[str]:
        return bucket_ids(self.buckets) | set(self.chunks)


def encode_lease(lease: LeaseRecord) -> bytes:
    return dumps(
        _envelope(
            LEASE,
            version=lease.version,
            buckets={k: list(v) for k, v in lease.buckets.items()},
            chunks=list(lease.chunks),
        )
    )


def decode_lease(raw: bytes, where: str) -> LeaseRecord:
    doc = parse(raw, LEASE, where)
    with _decoding(where):
        buckets_doc = _get(doc, "buckets", dict)
        return LeaseRecord(
            version=_get(doc, "version", int),
            buckets={kind: tuple(_str_list(buckets_doc, kind)) for kind in KINDS},
            chunks=tuple(_str_list(doc, "chunks")),
        )


ACL = "segment-lineage.acl"


def encode_policy(policy: AclPolicy) -> bytes:
    return dumps(_envelope(ACL, **{role: list(policy.ids(role)) for role in (ADMIN_ROLE, *ROLES)}))


def decode_policy(raw: bytes, where: str) -> AclPolicy:
    doc = parse(raw, ACL, where)
    with _decoding(where):
        ids = {role: _str_list(doc, role) for role in (ADMIN_ROLE, *ROLES)}
        return AclPolicy.build(ids[ADMIN_ROLE], ids["pusher"], ids["retention"], ids["reader"])
