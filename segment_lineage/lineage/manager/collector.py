"""Fewer runs of Python's cycle collector while a step builds many objects.

A retention pass over 100,000 files, or a read of a whole table, makes
hundreds of thousands of small objects that live until it ends, none of them
in a reference cycle. The collector runs after every 700 new objects, and
now and then looks at every object in the process: at 100,000 files that
was a tenth of a pass (19 full collections). Inside :func:`fewer_collections`
it runs after every 100,000 instead; the thresholds come back when the last
step using it ends (steps on several threads share one count), unless
someone set thresholds of their own meanwhile (theirs stay). A process
whose collector is off (a zero threshold) keeps it off.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

GEN0 = 100_000  # new objects between two collections of the youngest generation


class _Collector:
    """The process's collector thresholds, raised while anyone is inside."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved: tuple[int, int, int] | None = None
        self._set: tuple[int, int, int] | None = None  # what entering set, to restore only that

    def enter(self) -> None:
        with self._lock:
            if self._users == 0:
                self._saved = gc.get_threshold()
                if self._saved[0] != 0:
                    gc.set_threshold(max(GEN0, self._saved[0]), *self._saved[1:])
                self._set = gc.get_threshold()
            self._users += 1

    def leave(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._saved is not None:
                if gc.get_threshold() == self._set:  # else someone set their own meanwhile: theirs stays
                    gc.set_threshold(*self._saved)
                self._saved = self._set = None


_COLLECTOR = _Collector()


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """The youngest generation collected every :data:`GEN0` new objects
    while inside (the thresholds restored when the last user leaves)."""
    _COLLECTOR.enter()
    try:
        yield
    finally:
        _COLLECTOR.leave()
