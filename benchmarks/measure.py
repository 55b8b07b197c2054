"""Time and peak memory of one operation, the results they make, and profiles.

Memory is the peak resident memory the operation added to this process and
its descendants (Spark's JVM in local mode, writer processes), not counting
the ZooKeeper server, whose heap is a fixed deployment cost reported once.
Before the operation: a garbage collection and ``malloc_trim`` (so the
operation cannot reuse what set-up freed), then each process's high-water
mark is reset to its current resident size (``/proc/PID/clear_refs``).
Afterwards, the sum of the high-water marks minus the sum of the sizes before
is the peak. Summing per-process peaks can only overstate a peak that did not
coincide. Where the kernel refuses the reset, the high-water mark since the
process started is used, which overstates too; the report says which method
ran.
"""

from __future__ import annotations

import cProfile
import ctypes
import gc
import io
import os
import pstats
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROC = Path("/proc")
_LIBC = ctypes.CDLL("libc.so.6")


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def process_tree(root: int | None = None, exclude: frozenset[int] = frozenset()) -> list[int]:
    """This process (or ``root``) and every live descendant, but not ``exclude`` and theirs."""
    tree = _children()
    out, stack = [], [root or os.getpid()]
    while stack:
        pid = stack.pop()
        if pid in exclude:
            continue
        out.append(pid)
        stack.extend(tree.get(pid, ()))
    return out


def resident_mb(pid: int) -> float:
    memory = _memory_kb(pid)
    return 0.0 if memory is None else memory[0] / 1024


def _memory_kb(pid: int) -> tuple[int, int] | None:
    """(VmRSS, VmHWM) in kB, or None for a process that is gone."""
    try:
        lines = (PROC / str(pid) / "status").read_text().splitlines()
    except OSError:
        return None
    values = dict(line.split(":", 1) for line in lines if line.startswith(("VmRSS", "VmHWM")))
    try:
        return int(values["VmRSS"].split()[0]), int(values["VmHWM"].split()[0])
    except (KeyError, ValueError):
        return None


def _reset_peak(pid: int) -> bool:
    try:
        (PROC / str(pid) / "clear_refs").write_text("5")
    except OSError:
        return False
    return True


class Meter:
    """Wall time and peak added memory of what runs between start() and stop()."""

    method = "per-process high-water mark, reset before each operation"
    exclude: frozenset[int] = frozenset()  # the run's ZooKeeper server: reported on its own

    def start(self) -> None:
        # Freed memory goes back to the system first, so what the operation
        # allocates shows as growth instead of reusing what set-up left.
        gc.collect()
        _LIBC.malloc_trim(0)
        self.before: dict[int, int] = {}
        for pid in process_tree(exclude=self.exclude):
            if not _reset_peak(pid):
                Meter.method = "per-process high-water mark since start (reset refused)"
            memory = _memory_kb(pid)
            if memory is not None:
                self.before[pid] = memory[0]
        self.began = time.perf_counter()

    def stop(self) -> tuple[float, int]:
        seconds = time.perf_counter() - self.began
        added = 0
        for pid in process_tree(exclude=self.exclude):
            memory = _memory_kb(pid)
            if memory is not None:
                added += memory[1] - self.before.get(pid, 0)
        return seconds, max(0, added) * 1024


# A round: untimed set-up returning the timed operation.
Round = Callable[[], Callable[[], Any]]


def measure(
    prepare: Round, rounds: int, check: Callable[[Any], None] | None = None, *, warm: bool = False
) -> tuple[list[float], list[int]]:
    """Run ``rounds`` rounds; time and meter only the operation; check each
    result untimed. With ``warm``, one round first, untimed (every system
    of a case alike): the first call of an operation in a process pays for
    what later ones find ready (code paths, a library's caches, a peer's
    first file handles), which a long-lived client does not."""
    times, peaks = [], []
    meter = Meter()
    if warm:
        first = prepare()()
        if check is not None:
            check(first)
    for _ in range(rounds):
        operation = prepare()
        meter.start()
        result = operation()
        seconds, peak = meter.stop()
        if check is not None:
            check(result)
        times.append(seconds)
        peaks.append(peak)
    return times, peaks


@dataclass(frozen=True)
class Case:
    """One system doing one operation at one size, measured once per round."""

    operation: str
    size: int
    system: str
    times_s: tuple[float, ...]
    peaks_b: tuple[int, ...]
    extra: Mapping[str, float | int | str] = field(default_factory=dict)

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def p99_s(self) -> float:
        return percentile(self.times_s, 0.99)

    @property
    def peak_mb(self) -> float:
        return max(self.peaks_b) / 2**20

    def as_json(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "size": self.size,
            "system": self.system,
            "rounds": len(self.times_s),
            "median_s": self.median_s,
            "p50_s": percentile(self.times_s, 0.5),
            "p99_s": self.p99_s,
            "peak_mb": self.peak_mb,
            "times_s": list(self.times_s),
            "peaks_b": list(self.peaks_b),
            **dict(self.extra),
        }


def case(
    operation: str, size: int, system: str, measured: tuple[list[float], list[int]], **extra: Any
) -> Case:
    times, peaks = measured
    return Case(operation, size, system, tuple(times), tuple(peaks), extra)


# ---- profiles ------------------------------------------------------------------------

AREAS = (
    ("waiting on another thread (ZooKeeper replies, the delete pool)", ("'acquire' of '_thread.lock'",)),
    ("sleeping (retry back-off)", ("time.sleep",)),
    ("waiting on Spark's JVM (py4j socket)", ("'recv_into' of '_socket.socket'",)),
    ("our lineage code", ("/lineage/",)),
    ("our retention code", ("/retention/",)),
    ("our ingest code", ("/ingest/",)),
    ("kazoo client", ("/kazoo/",)),
    ("Spark (py4j)", ("py4j", "pyspark")),
    ("file system calls", ("posix.", "/os.py", "/shutil.py", "/pathlib.py")),
    ("JSON and compression", ("/json/", "zlib")),
)


@dataclass(frozen=True)
class Profile:
    """Where the calling thread's time went in one profiled round of ours."""

    operation: str
    size: int
    total_s: float
    areas: tuple[tuple[str, float], ...]  # share of own time per area, largest first
    top: tuple[tuple[str, float], ...]  # functions by own time (s)
    text: str  # the full pstats listing

    def as_json(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "size": self.size,
            "total_s": self.total_s,
            "areas": dict(self.areas),
            "top": [{"function": f, "own_s": s} for f, s in self.top],
        }


def _area(where: str) -> str:
    for name, needles in AREAS:
        if any(needle in where for needle in needles):
            return name
    return "other"


def profile(operation: str, size: int, prepare: Round) -> Profile:
    """One more round of ``prepare`` under cProfile (the calling thread only)."""
    run = prepare()
    profiler = cProfile.Profile()
    began = time.perf_counter()
    profiler.runcall(run)
    total = time.perf_counter() - began
    stats = pstats.Stats(profiler)
    own: dict[str, float] = {}
    by_area: dict[str, float] = {}
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    here = os.getcwd() + "/"  # our files are named from the repository, in the table and the listing
    for (filename, line, name), (_calls, _prim, tottime, _cum, _callers) in raw.items():
        where = f"{filename}:{line}({name})" if line else f"{filename}{name}"
        short = where.replace(here, "")
        own[short] = own.get(short, 0.0) + tottime
        area = _area(where)
        by_area[area] = by_area.get(area, 0.0) + tottime
    spent = sum(by_area.values()) or 1.0
    areas = tuple(sorted(((a, s / spent) for a, s in by_area.items()), key=lambda x: -x[1]))
    top = tuple(sorted(own.items(), key=lambda x: -x[1])[:8])
    buffer = io.StringIO()
    pstats.Stats(profiler, stream=buffer).sort_stats("tottime").print_stats(40)
    return Profile(operation, size, total, areas, top, buffer.getvalue().replace(here, ""))
