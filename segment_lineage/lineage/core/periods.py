"""Periods (``0s``, ``30m``, ``12h``, ``7d``, ``1d12h``) and moments (epoch
milliseconds or ISO-8601) as users write them."""

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


def parse_time(text: str) -> int:
    """Epoch milliseconds, or an ISO-8601 date or date-time (UTC when no zone)."""
    raw = text.strip()
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        moment = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInputError(
            f"invalid time {text!r}: use epoch milliseconds or ISO-8601 such as 2026-11-22T00:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def parse_version_or_time(text: str) -> tuple[int | None, int | None]:
    """``--as-of`` and friends: a bare number up to 10 digits is a table
    version; anything else is a time (ISO-8601, or ``ms:<epoch ms>``)."""
    raw = text.strip()
    if raw.isdigit() and len(raw) <= 10:
        return int(raw), None
    if raw.startswith("ms:"):
        return None, parse_time(raw[3:])
    if raw.isdigit():
        raise InvalidInputError(
            f"ambiguous {text!r}: a version has at most 10 digits; write ms:{raw} for epoch milliseconds"
        )
    return None, parse_time(raw)
