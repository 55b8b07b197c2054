"""segment-lineage's public Python API: what a script imports (docs/python-api.md).

``from segment_lineage import LineageManager, open_store, push_arrow, ...``:
the names in ``__all__`` are the API; every module below this package is
private by convention and may move.

The names load on first use (PEP 562), so ``import segment_lineage`` (which
runs before every ``lineage`` command) loads neither pyspark, pyarrow nor
kazoo: each comes in with the first name that needs it.
"""

from __future__ import annotations

import importlib

# Not typing.TYPE_CHECKING: importing typing would add about 2 ms to every
# `import segment_lineage`; type checkers take any constant of this name for True.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from segment_lineage.ingest.arrow_push import prepare_arrow, push_arrow
    from segment_lineage.ingest.audit import Audit, AuditFailedError, AuditView
    from segment_lineage.ingest.errors import PushError, SnapshotTooOldError
    from segment_lineage.ingest.push_set import SetResult, push_set
    from segment_lineage.ingest.readers import Cut, SnapshotReader
    from segment_lineage.ingest.spark_job import prepare_dataframe, push_dataframe
    from segment_lineage.ingest.spark_readers import pinned_table
    from segment_lineage.ingest.stage import publish
    from segment_lineage.lineage.core.errors import (
        ConflictError,
        ContentionError,
        InvalidInputError,
        LineageError,
        NotFoundError,
        OutcomeUnknownError,
        RefusedError,
        StoreUnavailableError,
        TableExistsError,
        TableNotFoundError,
    )
    from segment_lineage.lineage.core.model import Segment, TableConfig
    from segment_lineage.lineage.core.retry import RetryPolicy
    from segment_lineage.lineage.manager import LineageManager
    from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
    from segment_lineage.lineage.store.memory import MemoryStore
    from segment_lineage.lineage.zk.connect import open_store
    from segment_lineage.retention.executor import PassOptions, run_pass

# Each public name and the module it lives in; the block above says the same
# to the type checker (tests/test_public_api.py holds the two together).
_HOMES: dict[str, str] = {
    # a store, and the manager of the tables in it
    "open_store": "segment_lineage.lineage.zk.connect",
    "MemoryStore": "segment_lineage.lineage.store.memory",
    "LineageManager": "segment_lineage.lineage.manager",
    "RetryPolicy": "segment_lineage.lineage.core.retry",
    "RootClaimFiles": "segment_lineage.lineage.storage.claim_marker",
    # tables and their segments
    "TableConfig": "segment_lineage.lineage.core.model",
    "Segment": "segment_lineage.lineage.core.model",
    # writing and reading
    "push_arrow": "segment_lineage.ingest.arrow_push",
    "push_dataframe": "segment_lineage.ingest.spark_job",
    "SnapshotReader": "segment_lineage.ingest.readers",
    "pinned_table": "segment_lineage.ingest.spark_readers",
    # several tables as one: a push set, and a cut that reads them together
    "push_set": "segment_lineage.ingest.push_set",
    "SetResult": "segment_lineage.ingest.push_set",
    "prepare_arrow": "segment_lineage.ingest.arrow_push",
    "prepare_dataframe": "segment_lineage.ingest.spark_job",
    "Cut": "segment_lineage.ingest.readers",
    # checks a push's rows pass before they show (write-audit-publish)
    "Audit": "segment_lineage.ingest.audit",
    "AuditView": "segment_lineage.ingest.audit",
    "publish": "segment_lineage.ingest.stage",
    # cleaning up
    "run_pass": "segment_lineage.retention.executor",
    "PassOptions": "segment_lineage.retention.executor",
    # the errors a script catches, under one root
    "LineageError": "segment_lineage.lineage.core.errors",
    "InvalidInputError": "segment_lineage.lineage.core.errors",
    "NotFoundError": "segment_lineage.lineage.core.errors",
    "TableNotFoundError": "segment_lineage.lineage.core.errors",
    "TableExistsError": "segment_lineage.lineage.core.errors",
    "RefusedError": "segment_lineage.lineage.core.errors",
    "ConflictError": "segment_lineage.lineage.core.errors",
    "ContentionError": "segment_lineage.lineage.core.errors",
    "OutcomeUnknownError": "segment_lineage.lineage.core.errors",
    "StoreUnavailableError": "segment_lineage.lineage.core.errors",
    "PushError": "segment_lineage.ingest.errors",
    "SnapshotTooOldError": "segment_lineage.ingest.errors",
    "AuditFailedError": "segment_lineage.ingest.audit",
}

__all__ = [
    "Audit",
    "AuditFailedError",
    "AuditView",
    "ConflictError",
    "ContentionError",
    "Cut",
    "InvalidInputError",
    "LineageError",
    "LineageManager",
    "MemoryStore",
    "NotFoundError",
    "OutcomeUnknownError",
    "PassOptions",
    "PushError",
    "RefusedError",
    "RetryPolicy",
    "RootClaimFiles",
    "Segment",
    "SetResult",
    "SnapshotReader",
    "SnapshotTooOldError",
    "StoreUnavailableError",
    "TableConfig",
    "TableExistsError",
    "TableNotFoundError",
    "open_store",
    "pinned_table",
    "prepare_arrow",
    "prepare_dataframe",
    "publish",
    "push_arrow",
    "push_dataframe",
    "push_set",
    "run_pass",
]


if not TYPE_CHECKING:
    # Hidden from the type checker, which would otherwise take any name at
    # all (a misspelt one too) for an attribute of this module.

    def __getattr__(name: str) -> object:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value  # loaded once: later look-ups do not come here
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
