"""A pushing process for crash tests: python -m tests.helpers.push_once HOSTS TABLE LABEL ROWS.
Its push is audited (checks that pass), so it meets every step a push can."""

from __future__ import annotations

import sys

import pyarrow as pa

from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.audit import Audit
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.zk.client import connect, settings_from_env
from segment_lineage.lineage.zk.store import ZkStore


def main() -> None:
    hosts, table, label, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    settings = settings_from_env(hosts)
    assert settings is not None
    store = ZkStore(connect(settings))
    parts = [pa.table({"label": [label] * count, "i": list(range(count))}) for _ in range(2)]
    audit = Audit(min_rows=1, not_null=("label",))
    result = push_arrow(LineageManager(store), table, parts, owner_wait_s=30, audit=audit)
    print(result.summary())
    store.close()


if __name__ == "__main__":
    main()
