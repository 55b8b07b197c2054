"""How a long command says how it is going: on a terminal, a live status line
(rich) that each progress message replaces, with the messages that mark a
step kept as lines above it; otherwise (a pipe, a file) each message as a
plain line on stderr. With ``--json`` nothing (stderr holds only an error's
one JSON object), unless ``--verbose`` asks for the lines too."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import typer

from segment_lineage.cli.context import current

# Messages that only say how far a step is: shown in the status line, not kept.
TRANSIENT = ("writing:",)


@contextmanager
def progress(doing: str) -> Iterator[Callable[[str], None]]:
    """A callback for ``doing``'s progress messages, live while the block runs."""
    run = current()
    if run.json and not run.verbose:  # scripts read one JSON object on stderr, an error's
        yield lambda _message: None
        return
    if run.json or not sys.stderr.isatty():
        closed: list[bool] = []

        def plain(message: str) -> None:
            # Best effort: a reader that went away (stderr piped into 'head')
            # stops the lines, never the work (a push reverted for it).
            if closed:
                return
            try:
                typer.echo(message, err=True)
            except BrokenPipeError:
                closed.append(True)

        yield plain
        return
    from rich.console import Console

    console = Console(stderr=True, highlight=False)
    with console.status(doing) as status:

        def live(message: str) -> None:
            if not message.startswith(TRANSIENT):
                console.print(message, markup=False)
            status.update(f"{doing}: {message}")

        yield live
