"""The end-to-end demo on the embedded defaults: Spark pushes, consistent reads,
a rollback and its undo, DuckDB reading the table's Delta mirror (now, and
time-travelling to the version before the rollback), and a retention pass
that reclaims the replaced snapshots."""

from __future__ import annotations

import contextlib
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage.config import state_dir
from segment_lineage.lineage.core.errors import LineageError, TableNotFoundError
from segment_lineage.lineage.core.model import TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
from segment_lineage.mirror.admin import drop_table
from segment_lineage.mirror.hook import publish_after
from segment_lineage.mirror.views import mirror_commits, published_as
from segment_lineage.retention.executor import PassOptions, run_pass

if TYPE_CHECKING:
    from segment_lineage.lineage.config import Settings

DEMO_TABLE = "demo_events"
SNAPSHOTS = (("v1", 1000), ("v2", 1500), ("v3", 800))
MIRROR_WINDOW_S = 1


def _read(m: LineageManager) -> tuple[int, dict[str, int]]:
    with SnapshotReader(m, DEMO_TABLE) as reader:
        data = reader.to_arrow()
        labels = Counter(data.column("label").to_pylist()) if data.num_rows else Counter()
        return reader.version, dict(sorted(labels.items()))


def _engines(m: LineageManager, root: Path, echo: Callable[[str], None]) -> None:
    """DuckDB reads the table through its Delta mirror: the same rows as our
    reader now, and the version before the last rollback by time travel."""
    try:
        from segment_lineage.ingest.readers import duckdb_connection

        con = duckdb_connection()
    except (ImportError, LineageError) as exc:
        echo(f"   (DuckDB skipped: {exc}; pip install 'segment-lineage[engines]')")
        return
    query = "SELECT label, count(*) FROM delta_scan(?{}) GROUP BY label ORDER BY label"
    version, seen = _read(m)
    published = published_as(mirror_commits(m, DEMO_TABLE))
    now = dict(con.execute(query.format(""), [str(root)]).fetchall())
    echo(f"   DuckDB over the Delta mirror (Delta version {published.get(version)}): {now}")
    assert now == seen, "DuckDB must read through the mirror what our reader reads"
    before = version - 1  # the version the last rollback replaced
    delta = published.get(before)
    then = dict(con.execute(query.format(", version => ?"), [str(root), delta]).fetchall())
    echo(f"   DuckDB time travel to version {before}, before the rollback (Delta version {delta}): {then}")
    assert then == {"v3": 800}, "time travel must show the version before the rollback whole"


def _push_snapshots(m: LineageManager, spark: Any, echo: Callable[[str], None]) -> None:
    """The three snapshots pushed with Spark, a reader looking during each."""
    from segment_lineage.ingest.spark_job import push_dataframe, sample_frame

    for step, (label, count) in enumerate(SNAPSHOTS, start=1):
        df = sample_frame(spark, label, count)

        def during(message: str, label: str = label) -> None:
            if message.startswith("wrote"):
                version, seen = _read(m)
                echo(f"   a reader during the push of {label} sees version {version}: {seen}")

        result = push_dataframe(m, DEMO_TABLE, df, segments=2, reason=f"snapshot {label}", progress=during)
        version, seen = _read(m)
        echo(f"{step}. {result.summary()}")
        echo(f"   read after the push: version {version}: {seen}")


def _rollbacks(m: LineageManager, echo: Callable[[str], None]) -> None:
    """The last push rolled back, forward again, and back for good."""
    undo = m.rollback(DEMO_TABLE, m.resolve_version(DEMO_TABLE), reason="bad data in v3")
    pushed = undo.from_version  # the version the v3 push made
    version, seen = _read(m)
    echo(f"4. rolled back the v3 push (one commit): version {version}: {seen}")
    assert seen == {"v2": 1500}, "a rollback must bring back the previous snapshot whole"
    m.rollback(DEMO_TABLE, pushed, reason="v3 was fine after all")
    version, seen = _read(m)
    echo(f"   undid the rollback (rolled forward to version {pushed}): version {version}: {seen}")
    assert seen == {"v3": 800}, "rolling forward must bring the newer snapshot back whole"
    m.rollback(DEMO_TABLE, undo.target_version, reason="bad data in v3 after all")
    version, seen = _read(m)
    echo(f"   and back for good: version {version}: {seen}")


def _look_back(m: LineageManager, echo: Callable[[str], None]) -> None:
    """The entries, and the history."""
    echo("5. lineage entries")
    for e in m.entries(DEMO_TABLE):
        moved = f"{len(e.segments_from)} -> {len(e.segments_to)}"
        echo(f"   {e.entry_id}  {e.state.value:<11}  {moved}  {e.audit.reason or ''}")
    echo("6. history (newest first)")
    for h in m.history(DEMO_TABLE, limit=6):
        echo(
            f"   v{h.version:<3} {h.operation.value:<15} segments={h.segments:<3} rows={h.rows:<5} "
            f"{h.reason or ''}"
        )


def _clean(m: LineageManager, root: Path, echo: Callable[[str], None]) -> None:
    """A retention pass that reclaims the replaced snapshots' files."""
    before = sum(1 for _ in root.rglob("*.parquet"))
    time.sleep(MIRROR_WINDOW_S)  # past the mirror's retention: its old versions pin nothing more
    reports = run_pass(m, [DEMO_TABLE], PassOptions(min_grace_ms=0))
    after = sum(1 for _ in root.rglob("*.parquet"))
    version, seen = _read(m)
    echo(f"7. retention pass: {reports[0].line()}")
    echo(f"   parquet files on disk: {before} -> {after}; read: version {version}: {seen}")
    assert not reports[0].errors and after < before and seen == {"v2": 1500}


def run_demo(
    zk: str | None = None, echo: Callable[[str], None] = print, *, settings: Settings | None = None
) -> None:
    """The demo on ``zk`` (else the settings', by default the environment's, else the embedded server)."""
    from segment_lineage.ingest.spark_job import spark_session
    from segment_lineage.lineage.zk.client import zk_settings
    from segment_lineage.lineage.zk.connect import open_store

    embedded = zk is None and zk_settings(Settings.from_env() if settings is None else settings) is None
    store = open_store(zk, settings=settings)
    spark = None
    try:
        m = LineageManager(store, job_id="demo", claims=RootClaimFiles(settings))
        echo(f"ZooKeeper ready; table {DEMO_TABLE!r}")
        with contextlib.suppress(TableNotFoundError):
            drop_table(m, DEMO_TABLE, force=True, reason="demo restart")  # and its mirror's log
        root = state_dir() / "deep-store" / DEMO_TABLE
        shutil.rmtree(root, ignore_errors=True)
        # Zero retention, so that the demo's retention pass can reclaim at once;
        # the mirror keeps what engines may time-travel to for a second only.
        config = TableConfig.build(
            DEMO_TABLE,
            str(root),
            "REFRESH",
            replaced_segments_retention="0s",
            lineage_entry_cleanup_retention="0s",
            mirror="delta",
            mirror_retention=f"{MIRROR_WINDOW_S}s",
        )
        m.create_table(config, reason="demo")
        m.after_commit = publish_after(lambda text: echo(f"warning: {text}"))
        echo("starting Spark (local mode) ...")
        spark = spark_session(settings=settings)

        _push_snapshots(m, spark, echo)
        _rollbacks(m, echo)
        _engines(m, root, echo)
        _look_back(m, echo)
        _clean(m, root, echo)
        echo(
            "demo finished: try 'lineage read demo_events', 'lineage history demo_events' or "
            "'lineage mirror versions demo_events' (docs/engines.md: DuckDB, Polars, Spark, Trino)"
        )
        if embedded:
            echo("the embedded ZooKeeper keeps running for those commands: 'lineage zk stop' stops it")
    finally:
        if spark is not None:
            spark.stop()
        store.close()
