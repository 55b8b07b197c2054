"""SIGTERM and SIGINT during a push, as a KeyboardInterrupt the push
catches to revert its entry and say which signal stopped it."""

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


@contextlib.contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """SIGTERM or SIGINT during a push raises KeyboardInterrupt so the push
    can revert: SIGINT too, since a push started in the background of a
    script inherits SIGINT ignored, and Python then raises nothing for it."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated(signum)

    with signals_handled(handler):
        yield
