"""Periods (``0s``, ``30m``, ``12h``, ``7d``, ``1d12h``) and moments
(ISO-8601, or ``ms:`` epoch milliseconds) as users write them, and the one
way a moment is printed."""

from __future__ import annotations

import datetime as dt
import re

from segment_lineage.lineage.core.errors import InvalidInputError, InvalidPeriodError

_UNITS_MS = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1_000}
_PERIOD = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
MAX_PERIOD_MS = 3650 * _UNITS_MS["d"]


def parse_period(text: object) -> int:
    """Parse a period into milliseconds; raise InvalidPeriodError on anything else."""
    if not isinstance(text, str):
        raise InvalidPeriodError(text, "must be a string")
    match = _PERIOD.fullmatch(text.strip().lower()) if text.strip() == text else None
    if not text or match is None or not any(match.groups()):
        raise InvalidPeriodError(text, "not understood")
    total = sum(int(v) * _UNITS_MS[u] for v, u in zip(match.groups(), "dhms", strict=True) if v)
    if total > MAX_PERIOD_MS:
        raise InvalidPeriodError(text, "longer than 3650 days")
    return total


def format_period(ms: int) -> str:
    """The shortest period string for ``ms`` (a whole number of seconds)."""
    if ms == 0:
        return "0s"
    parts: list[str] = []
    rest = ms
    for unit in "dhms":
        size = _UNITS_MS[unit]
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    if rest:
        parts.append(f"{rest}ms")
    return "".join(parts)


_MONTH = re.compile(r"(\d{4})-(\d{2})")
_FRACTION = re.compile(r"[.,](\d+)")  # a date-time's fraction of a second
_OFFSET_FRACTION = re.compile(r"[+-]\d{2}:?\d{2}:?\d{2}[.,]\d")  # a zone offset's
TIME_FORMS = (
    "ISO-8601 such as 2013-02-01, 2013-02 or 2013-02-01T05:00:00-05:00 (UTC when no zone is given), "
    "or ms:EPOCH_MS"
)


def parse_time(text: str) -> int:
    """The one parser of every time a user gives (``--interval``, ``--as-of``,
    ``--to-time``): an ISO-8601 date, month (``2013-02``: its first day) or
    date-time, in UTC unless it names its zone; or ``ms:`` and epoch
    milliseconds. A bare number is refused: a version, or seconds, or
    milliseconds? ``ms:`` says."""
    raw = text.strip() if isinstance(text, str) else ""
    if not raw or not raw.isascii() or not raw.isprintable():
        raise InvalidInputError(f"invalid time {text!r}: use {TIME_FORMS}")
    if raw.startswith("ms:"):
        return _epoch_ms(text, raw[3:])
    if raw.lstrip("-").isdigit():
        if len(raw) <= 25 and not _in_range(int(raw)):
            _out_of_range(text, int(raw))
        raise InvalidInputError(
            f"ambiguous time {text!r}: write ms:{raw} for epoch milliseconds, or a date such as 2013-02-01"
        )
    moment = _iso_moment(text, raw)
    _check_precision(text, raw)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    ms = (moment - _EPOCH) // dt.timedelta(milliseconds=1)
    if not _in_range(ms):  # a date at a calendar's edge, moved past it by its zone
        raise InvalidInputError(f"invalid time {text[:64]!r}: in UTC it is past the years 1 to 9999")
    return ms


# The moments a date can name (years 1 to 9999), in epoch milliseconds: an
# ms: time is held to the same range, so microseconds or nanoseconds given as
# milliseconds (an interval's end 56,000 years away) are refused, not taken.
MIN_TIME_MS = -62_135_596_800_000
MAX_TIME_MS = 253_402_300_799_999


def _in_range(ms: int) -> bool:
    return MIN_TIME_MS <= ms <= MAX_TIME_MS


def _out_of_range(text: str, value: int, first: str = "") -> None:
    """Refuse ``value`` as epoch milliseconds, naming the unit it looks like
    (``first``: what else it is not)."""
    units = (
        f"; if it is in {unit}: ms:{value // scale} ({format_time(value // scale)})"
        for unit, scale in _FINER
        if _in_range(value // scale)
    )
    guess = next(units, "")
    raise InvalidInputError(
        f"invalid time {text[:64]!r}: {first}{value} epoch milliseconds is past the years 1 to 9999{guess}"
    )


_FINER = (("microseconds", 1_000), ("nanoseconds", 1_000_000))


def _epoch_ms(text: str, digits: str) -> int:
    """The milliseconds an ``ms:`` time gives: no space, no sign but a minus
    (one way to write a number), within the years 1 to 9999."""
    if not digits.lstrip("-").isdigit() or digits.startswith("--"):
        raise InvalidInputError(f"invalid time {text[:64]!r}: ms: takes whole epoch milliseconds")
    if len(digits) > 25:
        raise InvalidInputError(f"invalid time {text[:64]!r}: past the years 1 to 9999")
    value = int(digits)
    if not _in_range(value):
        _out_of_range(text, value)
    return value


def _iso_moment(text: str, raw: str) -> dt.datetime:
    """The moment an ISO-8601 month, date or date-time names (naive when it names no zone)."""
    month = _MONTH.fullmatch(raw)
    try:
        if month:
            return dt.datetime(int(month[1]), int(month[2]), 1, tzinfo=dt.UTC)
        return dt.datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidInputError(f"invalid time {text!r}: use {TIME_FORMS}") from None


def _check_precision(text: str, raw: str) -> None:
    """Refuse what an ISO time says finer than its moment keeps: an offset's
    fraction of a second (fromisoformat drops it), or a time's past the millisecond."""
    if _OFFSET_FRACTION.search(raw):
        raise InvalidInputError(
            f"invalid time {text[:64]!r}: a zone offset finer than a second; give it as +HH:MM or +HH:MM:SS"
        )
    if any(digits[3:].strip("0") for digits in _FRACTION.findall(raw)):
        # Times are kept in milliseconds: cut, a range's start would take in
        # what the given time left out.
        raise InvalidInputError(
            f"invalid time {text[:64]!r}: finer than a millisecond (times are kept in milliseconds); "
            "give at most 3 digits after the second"
        )


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def chunk_start(ms: int, granularity: str) -> int:
    """The start (epoch ms) of the UTC hour, day or month ``ms`` lies in."""
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)
    if granularity == "hour":
        start = moment.replace(minute=0, second=0, microsecond=0)
    elif granularity == "day":
        start = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    elif granularity == "month":
        start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    else:
        raise InvalidInputError(f"invalid time granularity {granularity!r}: use hour, day or month")
    return (start - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)


def format_time(ms: int) -> str:
    """The one formatter of a time in every message and view: ISO-8601 in UTC
    (``2013-02-01T00:00:00Z``; milliseconds only when there are some)."""
    try:
        moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)
    except OverflowError:
        return f"ms:{ms}"  # outside the years a calendar can print
    text = f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}"
    return text + (f".{ms % 1000:03d}Z" if ms % 1000 else "Z")


VERSION_DIGITS = 10  # a version record is named by its version in this many digits
MAX_VERSION = 10**VERSION_DIGITS - 1


def check_version(version: object) -> int:
    """A table version a user gave: a whole number from 1 to MAX_VERSION, or
    InvalidInputError (bad input, whichever command took it)."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidInputError(f"invalid version {version!r}: a whole number from 1 to {MAX_VERSION}")
    if version > MAX_VERSION:
        raise InvalidInputError(
            f"invalid version {version}: out of range (a version has at most {VERSION_DIGITS} digits, "
            f"up to {MAX_VERSION})",
            remedy="'lineage history TABLE' lists the table's versions",
        )
    return version


def parse_version(text: str) -> int:
    """A table version typed on the command line (``--to-version``), checked
    as :func:`check_version` does; a number too long for a version is refused
    by its length, never echoed in full (nor converted: Python refuses to
    convert numbers past 4,300 digits)."""
    raw = text.strip()
    if not (raw.isascii() and raw.isdigit()):  # ASCII digits: int() takes others too
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise InvalidInputError(f"invalid version {shown!r}: a whole number from 1 to {MAX_VERSION}")
    if len(raw.lstrip("0")) > VERSION_DIGITS:
        raise InvalidInputError(
            f"invalid version: {len(raw)} digits, out of range (a version has at most {VERSION_DIGITS} "
            f"digits, up to {MAX_VERSION})",
            remedy="'lineage history TABLE' lists the table's versions",
        )
    return check_version(int(raw))


def parse_version_or_time(text: str) -> tuple[int | None, int | None]:
    """``--as-of`` and friends: a bare number up to VERSION_DIGITS digits is
    a table version; anything else is a time (:func:`parse_time`)."""
    raw = text.strip()
    if raw.isascii() and raw.isdigit() and len(raw) <= VERSION_DIGITS:  # ASCII digits: int() takes others too
        return int(raw), None
    if raw.isascii() and raw.isdigit():
        if len(raw) <= 25 and not _in_range(int(raw)):  # not milliseconds either: which unit it looks like
            not_a_version = f"not a version (a version has at most {VERSION_DIGITS} digits), and "
            _out_of_range(text, int(raw), not_a_version)
        raise InvalidInputError(
            f"ambiguous {text!r}: a version has at most {VERSION_DIGITS} digits; write ms:{raw} for "
            "epoch milliseconds"
        )
    return None, parse_time(raw)
