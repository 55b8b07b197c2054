"""A process pushing a set for crash tests:
python -m tests.helpers.push_set_once HOSTS LABEL TABLE... (two segments of
three rows per table, the first table audited, so it meets every step a set can)."""

from __future__ import annotations

import sys

import pyarrow as pa

from segment_lineage.ingest.arrow_push import prepare_arrow
from segment_lineage.ingest.audit import Audit
from segment_lineage.ingest.push_set import push_set
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.zk.client import connect, settings_from_env
from segment_lineage.lineage.zk.store import ZkStore


def main() -> None:
    hosts, label, tables = sys.argv[1], sys.argv[2], sys.argv[3:]
    settings = settings_from_env(hosts)
    assert settings is not None
    store = ZkStore(connect(settings))
    manager = LineageManager(store)
    parts = [pa.table({"label": [label] * 3, "i": [0, 1, 2]}) for _ in range(2)]
    audit = Audit(min_rows=1, not_null=("label",))
    prepared = [
        prepare_arrow(manager, t, parts, audit=audit if i == 0 else None) for i, t in enumerate(tables)
    ]
    result = push_set(manager, prepared, owner_wait_s=30)
    print(result.set_id)
    store.close()


if __name__ == "__main__":
    main()
