"""Reading the visible set, and rolling back, on tables of N data files beside peers.

Each system gets a table of N one-row data files (ours: N registered segments
on ZooKeeper; deltalake: one write of N partitions; pyiceberg: one append of N
partitions on a SQL catalog on SQLite).

Visible set, cold (a client that has read nothing yet):
* ours: ``visible_segments`` on a new ZooKeeper client;
* deltalake: ``DeltaTable(path).file_uris()``;
* pyiceberg: ``catalog.load_table(t).scan().plan_files()``.

Visible files, cold: the same set as the files an engine's file list takes:
ours ``visible_files`` on a new client (from the stored names and
locations, no segment object built); deltalake ``file_uris()`` as above.

Visible set, warm (a long-lived reader asking again, with nothing changed):
* ours: ``WatchedTable.visible()``: memory, kept fresh by a data watch;
* deltalake: ``update_incremental()`` then ``file_uris()`` on the loaded table;
* pyiceberg: ``refresh()`` then ``scan().plan_files()`` on the loaded table.
The peers have no change notification, so a fresh answer costs them a look
at storage or the catalog.

Rollback: per round, one more file pushed (untimed), then a timed rollback of
it: ours ``rollback(table, resolve_version(table))``, deltalake
``restore(previous version)``, pyiceberg ``rollback_to_snapshot(parent)``.
Rollback, cold: the same from a client that has read nothing yet (what a CLI
command is): ours on a new ZooKeeper client (connected untimed); deltalake
``DeltaTable(path).restore(...)``; pyiceberg ``load_table(...)`` then the
rollback.

One-row push on a table of N (a warm client, as a long-lived job): ours
``start_replace``, the file written, ``complete_replace`` (what ``lineage
push --mode append`` of one file commits); deltalake ``write_deltalake`` of
one row in append mode (one new partition file); pyiceberg ``append`` of one
row on the loaded table. Its cost should follow the change, not the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq

from benchmarks.common import OURS, Context, Suite, chroot, close_and_drop, register_many
from benchmarks.measure import case, measure
from benchmarks.peers import delta_table, iceberg_table, one_row, rows
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.zk.client import ZkSettings, connect
from segment_lineage.lineage.zk.store import ZkStore
from segment_lineage.lineage.zk.watch import WatchedTable


def znodes(store: ZkStore) -> tuple[int, int]:
    """The number of znodes under the store's root and the largest one's size in bytes."""
    count = largest = 0
    stack = [store.root]
    while stack:
        path = stack.pop()
        data, stat = store.client.get(path)
        count += 1
        largest = max(largest, len(data))
        if stat.numChildren:
            stack.extend(f"{path}/{c}" for c in store.client.get_children(path))
    return count, largest


def run(ctx: Context) -> list[Suite]:
    visible = Suite("visible", "Reading the visible set", "segments", __doc__ or "")
    rollback = Suite("rollback", "Rollback", "segments", __doc__ or "")
    append = Suite("append", "One-row push on a table of N", "segments", __doc__ or "")
    sizes = [300, 3_000] if ctx.quick else [1_000, 10_000, 100_000]
    for n in sizes:
        one_size(ctx, visible, rollback, append, n)
    visible.notes.append(
        "Warm reads of ours send no request to ZooKeeper until the table's head changes; "
        "a cold read fetches the head and the bucket blobs and decodes them."
    )
    return [visible, rollback, append]


def one_size(ctx: Context, visible: Suite, rollback: Suite, append: Suite, n: int) -> None:
    from deltalake import DeltaTable, write_deltalake

    cold_rounds, warm_rounds, rollback_rounds = (3, 20, 3) if ctx.quick else (5, 50, 7)
    hosts = chroot(ctx.hosts)
    store = ZkStore(connect(ZkSettings(hosts=hosts)))
    m = LineageManager(store)
    m.create_table(TableConfig.build("bench", "/bench", "APPEND"))
    register_many(m, "bench", [Segment(f"seg_{i:07d}", f"seg_{i:07d}.parquet", rows=1) for i in range(n)])
    delta = ctx.work / f"delta-{n}"
    delta_table(delta, n)
    catalog = iceberg_table(ctx.work, f"tables{n}", n)

    def count(expected: int) -> Callable[[Any], None]:
        def check(found: Any) -> None:
            assert len(found) == expected, (len(found), expected)

        return check

    # ---- visible set, cold and warm
    clients: list[ZkStore] = []

    def fresh(read: Callable[[LineageManager], Any]) -> Callable[[], Callable[[], Any]]:
        """A round of ``read`` on a client connected untimed, its manager made in the round."""

        def prepare() -> Callable[[], Any]:
            client = ZkStore(connect(ZkSettings(hosts=hosts)))
            clients.append(client)
            return lambda: read(LineageManager(client))

        return prepare

    def delta_files() -> Callable[[], Any]:
        return lambda: DeltaTable(str(delta)).file_uris()

    ours_cold = fresh(lambda m: m.visible_segments("bench"))
    systems: list[tuple[str, Callable[[], Callable[[], Any]]]] = [
        (OURS, ours_cold),
        ("deltalake", delta_files),
        ("pyiceberg", lambda: lambda: list(catalog.load_table("bench.t").scan().plan_files())),
    ]
    for system, prepare in systems:
        visible.add(case("cold", n, system, measure(prepare, cold_rounds, count(n), warm=True)))
    visible.profile_if_slower("cold", n, ours_cold)
    ours_files = fresh(lambda m: m.visible_files("bench"))  # the same set as files an engine opens
    for system, prepare in ((OURS, ours_files), ("deltalake", delta_files)):
        visible.add(case("files", n, system, measure(prepare, cold_rounds, count(n), warm=True)))
    visible.profile_if_slower("files", n, ours_files)
    for client in clients:
        client.close()

    watched = WatchedTable(store, "bench")
    loaded_delta = DeltaTable(str(delta))
    loaded_iceberg = catalog.load_table("bench.t")

    def delta_warm() -> list[str]:
        loaded_delta.update_incremental()
        return loaded_delta.file_uris()

    def iceberg_warm() -> list[Any]:
        loaded_iceberg.refresh()
        return list(loaded_iceberg.scan().plan_files())

    warm: list[tuple[str, Callable[[], Callable[[], Any]]]] = [
        (OURS, lambda: watched.visible),
        ("deltalake", lambda: delta_warm),
        ("pyiceberg", lambda: iceberg_warm),
    ]
    for system, prepare in warm:
        visible.add(case("warm", n, system, measure(prepare, warm_rounds, count(n), warm=True)))
    visible.profile_if_slower("warm", n, lambda: watched.visible)
    watched.close()

    # ---- rollback of the last push
    pushed = iter(range(10**6))

    def push_one() -> int:
        """One more one-row push (untimed); the version before it."""
        extra = f"extra_{next(pushed):05d}"
        entry = m.start_replace("bench", [], [extra])
        m.complete_replace("bench", entry, [Segment(extra, f"{extra}.parquet", rows=1)])
        return m.resolve_version("bench")

    def ours_round() -> Callable[[], Any]:
        target = push_one()
        return lambda: m.rollback("bench", target)

    def delta_round() -> Callable[[], Any]:
        write_deltalake(str(delta), rows(n + next(pushed), 1, 2), mode="append", partition_by=["k"])
        table = DeltaTable(str(delta))
        previous = table.version() - 1
        return lambda: table.restore(previous)

    def iceberg_round() -> Callable[[], Any]:
        table = catalog.load_table("bench.t")
        table.append(rows(n + next(pushed), 1, 2))
        table = catalog.load_table("bench.t")
        parent = table.current_snapshot().parent_snapshot_id
        return lambda: table.manage_snapshots().rollback_to_snapshot(parent).commit()

    for system, prepare in ((OURS, ours_round), ("deltalake", delta_round), ("pyiceberg", iceberg_round)):
        rollback.add(case("rollback", n, system, measure(prepare, rollback_rounds, warm=True)))

    # ---- the same, from a client that has read nothing yet (what a CLI command is)
    cold_clients: list[ZkStore] = []

    def ours_cold_round() -> Callable[[], Any]:
        target = push_one()
        client = ZkStore(connect(ZkSettings(hosts=hosts)))
        cold_clients.append(client)
        return lambda: LineageManager(client).rollback("bench", target)

    def delta_cold_round() -> Callable[[], Any]:
        write_deltalake(str(delta), rows(n + next(pushed), 1, 2), mode="append", partition_by=["k"])
        previous = DeltaTable(str(delta)).version() - 1
        return lambda: DeltaTable(str(delta)).restore(previous)

    def iceberg_cold_round() -> Callable[[], Any]:
        table = catalog.load_table("bench.t")
        table.append(rows(n + next(pushed), 1, 2))
        parent = catalog.load_table("bench.t").current_snapshot().parent_snapshot_id

        def roll() -> Any:
            return catalog.load_table("bench.t").manage_snapshots().rollback_to_snapshot(parent).commit()

        return roll

    cold = ((OURS, ours_cold_round), ("deltalake", delta_cold_round), ("pyiceberg", iceberg_cold_round))
    for system, prepare in cold:
        rollback.add(case("cold", n, system, measure(prepare, rollback_rounds, warm=True)))
    for client in cold_clients:
        client.close()
    assert len(m.visible_segments("bench")) == n
    assert len(DeltaTable(str(delta)).file_uris()) == n
    assert len(list(catalog.load_table("bench.t").scan().plan_files())) == n
    rollback.profile_if_slower("rollback", n, ours_round)
    count_nodes, largest = znodes(store)
    rollback.notes.append(f"{n:,} segments: {count_nodes} znodes in all, the largest {largest:,} bytes.")
    one_row_pushes(ctx, append, n, m, str(delta), catalog)
    close_and_drop(m)


def _always(operation: Callable[[], None]) -> Callable[[], Callable[[], None]]:
    """A round that times ``operation`` (nothing to prepare)."""
    return lambda: operation


def one_row_pushes(ctx: Context, append: Suite, n: int, m: LineageManager, delta: str, catalog: Any) -> None:
    """One more one-row file per round, on the table of ``n`` files (the tables grow by a round each)."""
    from deltalake import write_deltalake

    rounds = 5 if ctx.quick else 20
    files = ctx.work / f"append-{n}"
    files.mkdir()
    pushed = iter(range(10**6))

    def ours_push() -> None:
        name = f"one_{next(pushed):05d}"
        entry = m.start_replace("bench", [], [name])
        pq.write_table(one_row(), files / f"{name}.parquet")
        m.complete_replace("bench", entry, [Segment(name, f"{name}.parquet", rows=1)])

    loaded = catalog.load_table("bench.t")
    systems: list[tuple[str, Callable[[], None]]] = [
        (OURS, ours_push),
        ("deltalake", lambda: write_deltalake(delta, one_row(), mode="append", partition_by=["k"])),
        ("pyiceberg", lambda: loaded.append(one_row())),
    ]
    for system, push in systems:
        push()  # one untimed first push: each client warm, as a long-lived job's
        append.add(case("push", n, system, measure(_always(push), rounds)))
    append.profile_if_slower("push", n, lambda: ours_push)
