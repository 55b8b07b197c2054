"""SIGTERM and SIGINT during a push, as a KeyboardInterrupt the push
catches to revert its entry and say which signal stopped it; and from the
command's first line (:func:`interrupts_from_the_start`). Standard library
only: the command imports it before anything else."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType


class Terminated(KeyboardInterrupt):
    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


@contextlib.contextmanager
def signals_handled(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """``handler`` for SIGTERM and SIGINT while the block runs (in the main
    thread only, where Python delivers signals), the previous ones after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, before in previous.items():
            # None means a handler installed outside Python: fall back to the default.
            signal.signal(signum, before if before is not None else signal.SIG_DFL)


_STOPPED: list[int] = []  # the signal that stopped the push under way (one at most)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    """The first signal stops the push; those after it are let go: the push
    is undoing its work and saying so, and a second interrupt would cut that
    short (or make the exit code name one signal and the message another)."""
    if _STOPPED:
        return
    _STOPPED.append(signum)
    raise Terminated(signum)


@contextlib.contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """SIGTERM or SIGINT during a push raises KeyboardInterrupt so the push
    can revert: SIGINT too, since a push started in the background of a
    script inherits SIGINT ignored, and Python then raises nothing for it.
    Only the first signal does: the push then reverts and exits."""
    _STOPPED.clear()  # a push after an earlier one was stopped (in one process) is stopped afresh
    with signals_handled(_interrupt):
        yield


PUSHING = frozenset({"push", "push-set"})  # the commands a signal must stop from their first line


def interrupts_from_the_start(argv: list[str]) -> None:
    """For a push (``argv`` naming one), SIGINT and SIGTERM raise an
    interrupt from now on, until the push's own handler takes over."""
    if PUSHING & set(argv[1:]):
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, _interrupt)
