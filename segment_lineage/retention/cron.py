"""Crontab expressions as cron reads them, for the retention daemon's
schedule, as the fields APScheduler's ``CronTrigger`` takes. Its own
``from_crontab`` reads day of the week 0 as Monday; here 0 and 7 are
Sunday, as in cron. Pure: no clock, no scheduler."""

from __future__ import annotations

DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def crontab_fields(expression: str) -> dict[str, str]:
    """A crontab expression (five fields) as CronTrigger's keyword fields,
    read as crontab reads it. A day of the month and a day of the week both
    restricted are refused (cron runs on either, APScheduler only on both).
    ValueError names what is wrong."""
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(
            f"a crontab expression has 5 fields (minute hour day month weekday), not {len(fields)}"
        )
    minute, hour, day, month, weekday = fields
    if day != "*" and weekday != "*":
        raise ValueError("give a day of the month or a day of the week, not both (cron runs on either)")
    return {"minute": minute, "hour": hour, "day": day, "month": month, "day_of_week": _weekdays(weekday)}


def _weekdays(field: str) -> str:
    """A crontab day-of-week field (numbers 0-7, 0 and 7 Sunday, or names;
    lists, ranges, steps) as the day names APScheduler reads."""
    if field == "*":
        return "*"
    days: set[int] = set()
    for token in field.lower().split(","):
        days.update(_token_days(token))
    return ",".join(DAY_NAMES[d] for d in sorted(days))


def _token_days(token: str) -> set[int]:
    """The days of one item of the list: a day, a range or ``*``, each
    with a step or none (``sun/2``: from Sunday to Saturday)."""
    body, slash, step_text = token.partition("/")
    step = _step(token, step_text) if slash else 1
    low, high = _span(body, stepped=bool(slash))
    if low > high:
        raise ValueError(f"invalid range in day of the week {token!r}")
    return {d % 7 for d in range(low, high + 1, step)}


def _step(token: str, text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"invalid step in day of the week {token!r}")
    return int(text)


def _span(body: str, *, stepped: bool) -> tuple[int, int]:
    """The first and last day of an item (before its step): a day alone
    is a range to Saturday when it has a step."""
    if body == "*":
        return 0, 6
    if "-" in body:
        first, _, last = body.partition("-")
        return _day(first), _day(last)
    low = _day(body)
    return low, 6 if stepped else low


def _day(text: str) -> int:
    if text in DAY_NAMES:
        return DAY_NAMES.index(text)
    if not text.isdigit() or int(text) > 7:
        raise ValueError(f"invalid day of the week {text!r}: 0-7 (0 and 7 are Sunday) or sun-sat")
    return int(text)
