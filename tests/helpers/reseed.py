"""Find a replay test's seed again, after a change moved the simulation's
schedules (a different number of store calls moves every switch point).

A replay test in ``tests/test_simulation.py`` breaks a fix and runs one
seed, asserting the checker finds the bug. This runs that test's body with
each candidate seed in turn and prints the first that still finds it::

    PYTHONPATH=. PYTHONHASHSEED=0 python -m tests.helpers.reseed TEST_NAME \\
        [--cast KIND | --sets] [--after SEED] [--count N]

``--cast KIND`` tries only seeds whose cast has an actor of that kind
(``rerun``, ``foreign``, ``create``, ...); ``--sets`` only the push-set
seeds (4 modulo 6). Bounded: at most ``--count`` seeds, and 50 minutes.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from _pytest.monkeypatch import MonkeyPatch

import tests.test_simulation as replays
from simulation.actors import plan_actors

BUDGET_S = 3000


def candidates(after: int, count: int, cast: str | None, sets: bool) -> Iterator[int]:
    seed, given = after, 0
    while given < count:
        seed += 1
        if sets and seed % 6 != 4:
            continue
        if cast is not None and cast not in {kind for kind, _ in plan_actors(seed)}:
            continue
        given += 1
        yield seed


def finds(test: Callable[..., None], seed: int) -> bool:
    """The test's body passes with every run it makes on ``seed``."""
    real = replays.RunConfig
    patch = MonkeyPatch()
    replays.RunConfig = lambda _seed, **kw: real(seed, **kw)  # type: ignore[assignment,misc]
    try:
        params = inspect.signature(test).parameters
        kwargs: dict[str, Any] = {"monkeypatch": patch} if "monkeypatch" in params else {}
        if "seed" in params:
            kwargs["seed"] = seed
        test(**kwargs)
        return True
    except AssertionError:
        return False
    finally:
        patch.undo()
        replays.RunConfig = real  # type: ignore[misc]


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("test")
    parser.add_argument("--cast")
    parser.add_argument("--sets", action="store_true")
    parser.add_argument("--after", type=int, default=0)
    parser.add_argument("--count", type=int, default=100)
    args = parser.parse_args()
    test = getattr(replays, args.test)
    logging.disable(logging.WARNING)
    began = time.monotonic()
    for tried, seed in enumerate(candidates(args.after, args.count, args.cast, args.sets), 1):
        if time.monotonic() - began > BUDGET_S:
            print(f"out of time after {tried - 1} seed(s)")
            return
        if finds(test, seed):
            print(f"{args.test}: seed {seed} finds it ({tried} seed(s) tried)")
            return
        print(f"seed {seed}: not found", flush=True)
    print(f"none of {args.count} seed(s) after {args.after} finds it")


if __name__ == "__main__":
    main()
