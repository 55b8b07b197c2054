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
        body, slash, step_text = token.partition("/")
        step = int(step_text) if slash and step_text.isdigit() else (1 if not slash else 0)
        if step < 1:
            raise ValueError(f"invalid step in day of the week {token!r}")
        if body == "*":
            low, high = 0, 6
        elif "-" in body:
            first, _, last = body.partition("-")
            low, high = _day(first), _day(last)
        else:
            low = _day(body)
            high = 6 if slash else low
        if low > high:
            raise ValueError(f"invalid range in day of the week {token!r}")
        days.update(d % 7 for d in range(low, high + 1, step))
    return ",".join(DAY_NAMES[d] for d in sorted(days))


def _day(text: str) -> int:
    if text in DAY_NAMES:
        return DAY_NAMES.index(text)
    if not text.isdigit() or int(text) > 7:
        raise ValueError(f"invalid day of the week {text!r}: 0-7 (0 and 7 are Sunday) or sun-sat")
    return int(text)
