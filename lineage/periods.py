"""Retention periods: strings such as ``0s``, ``30m``, ``12h``, ``7d`` or ``1d12h``."""

from __future__ import annotations

import re

from lineage.errors import InvalidPeriodError

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
