"""``lineage zk``: start, stop and ask after the embedded ZooKeeper server."""

from __future__ import annotations

from typing import Annotated

import typer

from segment_lineage.cli.context import current, emit

zk_app = typer.Typer(help="Run the embedded ZooKeeper server on loopback.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(zk_app, name="zk")


@zk_app.command("start")
def zk_start(
    heap: Annotated[
        str | None,
        typer.Option(
            "--heap",
            envvar="LINEAGE_ZK_HEAP",
            help="The server's Java heap, e.g. 512m or 2g (default: an eighth of the machine's "
            "memory, 256m to 2g). A running server keeps its heap: stop it first to change it.",
        ),
    ] = None,
) -> None:
    """Start the embedded ZooKeeper server (idempotent)."""
    from segment_lineage.lineage.zk.server import embedded_server, parse_heap

    server = embedded_server(parse_heap(heap) if heap else None, settings=current().settings)
    was_running = server.pid() is not None
    server.start()
    state = "already running" if was_running else "started"
    heap_mb = server.running_heap_mb()
    emit(
        {
            "state": state,
            "hosts": server.hosts,
            "pid": server.pid(),
            "heap_mb": heap_mb,
            "directory": str(server.directory),
        },
        f"ZooKeeper {state} at {server.hosts} (pid {server.pid()}, heap {heap_mb or '?'} MB, "
        f"data in {server.directory})",
    )


@zk_app.command("stop")
def zk_stop() -> None:
    """Stop the embedded ZooKeeper server."""
    from segment_lineage.lineage.zk.server import embedded_server

    server = embedded_server(settings=current().settings)
    stopped = server.stop()
    emit({"stopped": stopped}, "ZooKeeper stopped" if stopped else "ZooKeeper was not running")


@zk_app.command("status")
def zk_status() -> None:
    """Say whether the embedded ZooKeeper server is running and answering (exit 0), or not (exit 1)."""
    from segment_lineage.lineage.zk.server import embedded_server

    server = embedded_server(settings=current().settings)
    serving = server.is_serving()
    pid = server.pid()
    heap_mb = server.running_heap_mb()
    data = {
        "running": serving or pid is not None,
        "answering": serving,
        "hosts": server.hosts,
        "pid": pid,
        "heap_mb": heap_mb,
        "directory": str(server.directory),
    }
    process = "" if pid is None else f" (pid {pid}" + (f", heap {heap_mb} MB)" if heap_mb else ")")
    if serving:
        said = f"ZooKeeper running at {server.hosts}{process}"
    elif pid is not None:  # its process is there, and silent: stopped, frozen or overloaded
        said = f"ZooKeeper running at {server.hosts}{process} but not answering: frozen or overloaded"
    else:
        said = f"ZooKeeper not running at {server.hosts}"
    emit(data, said)
    if not serving:
        raise typer.Exit(1)
