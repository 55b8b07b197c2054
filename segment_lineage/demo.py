"""The end-to-end demo: a replacement's whole life on the embedded ZooKeeper."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from lineage.errors import TableNotFoundError
from lineage.manager import LineageManager
from lineage.model import Segment, TableConfig
from lineage.zk_server import state_dir

DEMO_TABLE = "demo_events"


def _show(m: LineageManager, echo: Callable[[str], None], title: str) -> list[str]:
    visible = m.visible_segments(DEMO_TABLE)
    names = [s.name for s in visible]
    echo(f"  {title}: {', '.join(names) or '(none)'}  [{sum(s.rows for s in visible)} rows]")
    return names


def run_demo(zk: str | None = None, echo: Callable[[str], None] = print) -> None:
    from lineage.connect import open_store

    store = open_store(zk)
    try:
        m = LineageManager(store, job_id="demo")
        echo(f"ZooKeeper ready; table {DEMO_TABLE!r}")
        with contextlib.suppress(TableNotFoundError):
            m.drop_table(DEMO_TABLE, force=True, reason="demo restart")
        root = str(state_dir() / "deep-store" / DEMO_TABLE)
        m.create_table(TableConfig.build(DEMO_TABLE, root, "REFRESH"), reason="demo")
        day1 = [Segment(f"events_day1_{i}", f"events_day1_{i}.parquet", rows=1000 + i) for i in range(3)]
        m.register_segments(DEMO_TABLE, day1, reason="initial load")
        echo("1. registered three segments")
        _show(m, echo, "visible")

        day2 = [Segment(f"events_day2_{i}", f"events_day2_{i}.parquet", rows=2000 + i) for i in range(2)]
        entry = m.start_replace(
            DEMO_TABLE, [s.name for s in day1], [s.name for s in day2], reason="daily refresh"
        )
        echo(f"2. start-replace {entry}: day1 -> day2")
        m.register_segments(DEMO_TABLE, day2)
        _show(m, echo, "visible while uploading (still the old snapshot)")

        m.end_replace(DEMO_TABLE, entry)
        echo("3. end-replace")
        _show(m, echo, "visible after end (the new snapshot, all at once)")

        m.revert_replace(DEMO_TABLE, entry, reason="bad data in day2")
        echo("4. revert")
        after = _show(m, echo, "visible after revert (the old snapshot again)")
        assert after == [s.name for s in day1], "revert must restore the old snapshot"

        echo("5. lineage entries")
        for e in m.entries(DEMO_TABLE):
            moved = f"{len(e.segments_from)} -> {len(e.segments_to)}"
            echo(f"  {e.entry_id}  {e.state.value:<11}  {moved}  by {e.audit.actor}")
        echo("6. history (newest first)")
        for h in m.history(DEMO_TABLE):
            echo(f"  v{h.version:<3} {h.operation.value:<15} segments={h.segments} reason={h.reason or '-'}")
        echo(
            "demo finished: try 'lineage entries demo_events' or 'lineage export demo_events --format pinot'"
        )
    finally:
        store.close()
