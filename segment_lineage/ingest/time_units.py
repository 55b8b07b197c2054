"""The unit of an integer time column: declared with the table, or inferred
from a push's values. Pure: no pyarrow, no Spark.

Integers carry no unit. Read in the wrong one, epoch seconds look like
January 1970 and time retention condemns the whole table. So a table may
declare its unit (``--time-unit``); when it does not, a push infers the unit
from its values, and refuses to guess when they could be more than one unit
or none.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from segment_lineage.ingest.errors import PushRefusedError
from segment_lineage.lineage.core.model import TimeUnit

log = logging.getLogger(__name__)

NAMES = {
    TimeUnit.S: "seconds",
    TimeUnit.MS: "milliseconds",
    TimeUnit.US: "microseconds",
    TimeUnit.NS: "nanoseconds",
}
PER_SECOND = {TimeUnit.S: 1, TimeUnit.MS: 1_000, TimeUnit.US: 1_000_000, TimeUnit.NS: 1_000_000_000}

# Values a unit may plausibly hold: instants from 1980 up to (not including) 2200.
FIRST_YEAR, END_YEAR = 1980, 2200
_LO_S = int(dt.datetime(FIRST_YEAR, 1, 1, tzinfo=dt.UTC).timestamp())
_HI_S = int(dt.datetime(END_YEAR, 1, 1, tzinfo=dt.UTC).timestamp())


def to_ms(value: int, unit: TimeUnit) -> int:
    """``value`` in ``unit`` as epoch milliseconds, sub-millisecond digits
    dropped rounding down (as for timestamp columns, and as Spark does)."""
    if unit is TimeUnit.S:
        return value * 1_000
    if unit is TimeUnit.MS:
        return value
    per_ms = PER_SECOND[unit] // 1_000
    return value // per_ms


def plausible_units(lo: int, hi: int) -> tuple[TimeUnit, ...]:
    """The units in which every value from ``lo`` to ``hi`` is an instant
    between 1980 and 2200."""
    return tuple(u for u in TimeUnit if _LO_S * PER_SECOND[u] <= lo and hi < _HI_S * PER_SECOND[u])


def resolve_time_unit(
    column: str,
    lo: int | None,
    hi: int | None,
    declared: TimeUnit | None,
    say: Callable[[str], None] | None = None,
) -> TimeUnit:
    """The unit to read an integer time column in, for a push whose values
    span ``lo``..``hi`` (None: the column holds no values).

    A declared unit is used as declared, unless the values read after the
    plausible window in it while they fit it in another unit (milliseconds
    pushed into a table of seconds): PushRefusedError. Otherwise the unit is
    inferred and reported (a log line, and ``say``); PushRefusedError when
    the values fit no unit's window or more than one (nothing has been
    written then). The push's last commit records an inferred unit in the
    table, so later pushes read their values in the same one.
    """
    if declared is not None:
        _check_declared(column, lo, hi, declared)
        return declared
    if lo is None or hi is None:
        return TimeUnit.MS  # no values: every unit reads the same nothing
    unit = _inferred(column, lo, hi)
    message = (
        f"time column {column!r}: integers from {lo} to {hi} read as epoch {NAMES[unit]} "
        "(inferred: the table declares no --time-unit)"
    )
    log.info("%s", message)
    if say is not None:
        say(message)
    return unit


def _check_declared(column: str, lo: int | None, hi: int | None, declared: TimeUnit) -> None:
    """Refuse values the declared unit reads after the window while another
    unit reads them inside it. Past the window is refused (milliseconds
    pushed as seconds read as the year 50,000); before it is trusted: it may
    be old data."""
    if lo is None or hi is None:
        return
    fits = plausible_units(lo, hi)
    if fits and declared not in fits and hi >= _HI_S * PER_SECOND[declared]:
        raise PushRefusedError(
            f"the integer time column {column!r} holds values up to {hi}, which the table's unit "
            f"({NAMES[declared]}) reads after {END_YEAR}, and {NAMES[fits[0]]} reads inside "
            f"{FIRST_YEAR} to {END_YEAR}: convert them to {NAMES[declared]}; nothing was written"
        )


def _inferred(column: str, lo: int, hi: int) -> TimeUnit:
    """The one unit that reads every value inside the window; PushRefusedError
    when none does or more than one."""
    fits = plausible_units(lo, hi)
    if len(fits) != 1:
        found = "no unit" if not fits else "more than one unit (" + ", ".join(u.value for u in fits) + ")"
        raise PushRefusedError(
            f"cannot tell the unit of the integer time column {column!r}: its values run from {lo} to "
            f"{hi}, which read as instants from {FIRST_YEAR} to {END_YEAR} in {found}; declare the "
            "unit with 'lineage table alter TABLE --time-unit s|ms|us|ns'; nothing was written",
            remedy="lineage table alter TABLE --time-unit s|ms|us|ns (while none is set); "
            "timestamp-typed values carry their own",
        )
    return fits[0]
