"""Reclaiming N replaced segments: our retention pass beside deltalake's vacuum.

For each N, in the same run and on the same disk:

* ours: a table of N one-kilobyte segment files, all replaced by one new
  segment; timed: one retention pass with zero retention (plan, intent
  recorded in ZooKeeper, N fenced file deletes, intent cleared, metadata
  garbage pass), without and with the orphan scan of the root;
* deltalake: a Delta table of N files (one per partition), overwritten;
  timed: ``vacuum(retention_hours=0)``. At a million files the table's log
  is written directly (``write_deltalake`` would make a million folders),
  with the files where ours has them: a thousand folders.

At a million files, ours runs without the orphan scan only, and is not
profiled: each such round builds a table of a million files first.

Both start after ``sync`` and a pause, from a quiet disk.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import BATCH, OURS, Context, Suite, close_and_drop, fresh_manager, register_many
from benchmarks.measure import case, measure
from benchmarks.peers import delta_table, overwritten_delta_log, rows
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.retention.executor import PassOptions, run_table

PAYLOAD = b"x" * 1024
WITH_ORPHANS = "ours, with orphan scan"
LARGE = 1_000_000  # from this size: the peer's log written directly, one round of ours


def settle() -> None:
    """Every system starts from the same quiet disk: set-up writes flushed."""
    os.sync()
    time.sleep(2)


def ours(ctx: Context, n: int, orphans: bool, made: list[Any]) -> Callable[[], Callable[[], Any]]:
    def prepare() -> Callable[[], Any]:
        m = fresh_manager(ctx.hosts)
        made.append(m)
        # A root of its own: each manager is a lineage store of its own (a
        # chroot), and a root claimed by one is refused to the others.
        root = ctx.work / f"ours-{n}-{uuid.uuid4().hex}"
        m.create_table(
            TableConfig.build(
                "bench",
                str(root),
                "APPEND",
                replaced_segments_retention="0s",
                lineage_entry_cleanup_retention="0s",
            )
        )
        names = [f"seg_{i:07d}" for i in range(n)]
        locations = write_files(root, names)
        segments = [
            Segment(name, location, rows=1, size_bytes=len(PAYLOAD))
            for name, location in zip(names, locations, strict=True)
        ]
        register_many(m, "bench", segments, 50_000 if n >= LARGE else BATCH)
        entry = m.start_replace("bench", names, ["seg_new"])
        (root / "new.parquet").write_bytes(PAYLOAD)
        m.register_segments("bench", [Segment("seg_new", "new.parquet", rows=1, size_bytes=len(PAYLOAD))])
        m.end_replace("bench", entry)
        settle()

        return lambda: run_table(m, "bench", PassOptions(min_grace_ms=0, orphans=orphans))

    return prepare


def write_files(root: Path, names: list[str]) -> list[str]:
    """One file of ``PAYLOAD`` per name under ``root``, in a thousand
    folders (by the name's last three characters); their locations."""
    locations = [f"push_old/{name[-3:]}/{name}.parquet" for name in names]
    for folder in {location.rsplit("/", 1)[0] for location in locations}:
        (root / folder).mkdir(parents=True, exist_ok=True)
    for location in locations:
        (root / location).write_bytes(PAYLOAD)
    return locations


def reclaimed(n: int) -> Callable[[Any], None]:
    def check(report: Any) -> None:
        assert report.files_deleted == n and not report.errors, report.line()

    return check


def delta(ctx: Context, n: int) -> Callable[[], Callable[[], Any]]:
    from deltalake import DeltaTable, write_deltalake

    built = iter(range(10**6))

    def prepare() -> Callable[[], Any]:
        path = ctx.work / f"delta-vacuum-{n}-{next(built)}"
        if n >= LARGE:
            locations = write_files(path, [f"seg_{i:07d}" for i in range(n)])
            overwritten_delta_log(path, locations, len(PAYLOAD))
        else:
            delta_table(path, n)
            write_deltalake(str(path), rows(0, 1, 2), mode="overwrite", partition_by=["k"])
        table = DeltaTable(str(path))
        settle()
        return lambda: table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)

    return prepare


def run(ctx: Context) -> list[Suite]:
    suite = Suite("retention", "Retention: reclaiming replaced segments", "segments", __doc__ or "")
    for n in [1_000, 4_000] if ctx.quick else [10_000, 100_000, LARGE]:
        made: list[Any] = []
        suite.add(case("reclaim", n, OURS, measure(ours(ctx, n, False, made), 1, reclaimed(n))))
        if n < LARGE:
            suite.add(case("reclaim", n, WITH_ORPHANS, measure(ours(ctx, n, True, made), 1, reclaimed(n))))

        def vacuumed(gone: Any, n: int = n) -> None:
            assert len(gone) == n, len(gone)

        suite.add(case("reclaim", n, "deltalake", measure(delta(ctx, n), 1, vacuumed)))
        if n < LARGE:
            suite.profile_if_slower("reclaim", n, ours(ctx, n, False, made))
        for m in made:
            close_and_drop(m)
        for leftover in ctx.work.glob(f"*-{n}-*"):
            shutil.rmtree(leftover, ignore_errors=True)
    suite.notes.append(
        "One run per size and system: each needs a fresh table of N files. "
        "The disk's latency varies between runs; compare ratios within one run."
    )
    return [suite]
