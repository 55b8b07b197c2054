"""The one codec for everything the project stores in ZooKeeper.

Each format has a name and a format version, and one module per family:

* ``head``: a table's small root record, the only node a commit swaps
  (with the table config inside), and the table's ``floor``;
* ``buckets``: immutable ``bucket`` blobs holding one hash bucket of
  segments, entries or pending deletions, and ``names`` blobs holding a
  chunk of a long segment-name list (``segments`` and ``pending`` hold their
  records' two formats, ``columnar`` what the columns share);
* ``history``: immutable blobs holding sealed history records;
* ``leases``: a pinned or retained version (``lease``), and a table's
  metadata-sweep marks (``gc``);
* ``registry``: the registry of table ``roots``, the ``root-claim`` marker
  written under a root, and two small records that are bare UTF-8 text
  rather than JSON: a table name guard and the store id;
* ``acl``: the ACL policy (digest ids per role);
* ``envelope``: what they share (the envelope, the JSON, the field readers).

Decoding fails closed: bad JSON (bytes that are not UTF-8, or nesting too
deep to parse), an unknown format or version, an unknown state, a missing
field, a wrong type or a duplicate id raise :class:`CorruptRecordError`,
naming the node. Nothing else in the project serializes records. Callers use
the names re-exported here (``codec.decode_head``); ``export`` writes Pinot's
ZNRecord JSON for operators and is imported by name.
"""

from __future__ import annotations

from segment_lineage.lineage.codec.acl import (
    decode_policy,
    encode_policy,
)
from segment_lineage.lineage.codec.buckets import (
    BUCKET,
    ENTRIES,
    KINDS,
    PENDING,
    SEGMENTS,
    NameList,
    StoredEntry,
    bucket_ids,
    decode_bucket,
    decode_names,
    decode_records,
    empty_bucket,
    encode_bucket,
    encode_names,
    encode_pending_bucket,
    encode_segment_bucket,
    entry_to_dict,
)
from segment_lineage.lineage.codec.columnar import Columns
from segment_lineage.lineage.codec.envelope import (
    dumps,
)
from segment_lineage.lineage.codec.head import (
    Head,
    decode_floor,
    decode_head,
    encode_floor,
    encode_head,
)
from segment_lineage.lineage.codec.history import (
    HISTORY,
    HistoryChunk,
    decode_history,
    encode_history,
    history_from_dict,
    history_size,
    history_to_dict,
)
from segment_lineage.lineage.codec.leases import (
    LeaseRecord,
    decode_gc,
    decode_lease,
    encode_gc,
    encode_lease,
)
from segment_lineage.lineage.codec.pending import pending_from_dict, pending_to_dict
from segment_lineage.lineage.codec.registry import (
    decode_claim,
    decode_guard,
    decode_roots,
    decode_store_id,
    encode_claim,
    encode_guard,
    encode_roots,
)
from segment_lineage.lineage.codec.segments import (
    lazy_segments,
    segment_from_dict,
    segment_to_dict,
)

__all__ = [
    "BUCKET",
    "ENTRIES",
    "HISTORY",
    "KINDS",
    "PENDING",
    "SEGMENTS",
    "Columns",
    "Head",
    "HistoryChunk",
    "LeaseRecord",
    "NameList",
    "StoredEntry",
    "bucket_ids",
    "decode_bucket",
    "decode_claim",
    "decode_floor",
    "decode_gc",
    "decode_guard",
    "decode_head",
    "decode_history",
    "decode_lease",
    "decode_names",
    "decode_policy",
    "decode_records",
    "decode_roots",
    "decode_store_id",
    "dumps",
    "empty_bucket",
    "encode_bucket",
    "encode_claim",
    "encode_floor",
    "encode_gc",
    "encode_guard",
    "encode_head",
    "encode_history",
    "encode_lease",
    "encode_names",
    "encode_pending_bucket",
    "encode_policy",
    "encode_roots",
    "encode_segment_bucket",
    "entry_to_dict",
    "history_from_dict",
    "history_size",
    "history_to_dict",
    "lazy_segments",
    "pending_from_dict",
    "pending_to_dict",
    "segment_from_dict",
    "segment_to_dict",
]
