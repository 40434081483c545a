"""When a routine's ticks fall: `--every DURATION` (30s, 10m, 2h, 1d) or `--cron EXPR [--tz ZONE]`.

Pure: no clock, no I/O. Times are POSIX seconds (UTC). A schedule answers one question,
`after(t)`: the first tick strictly after `t`.

- `every`: ticks at `anchor + k * period` (the anchor is when the routine was added), so a restart
  never shifts them.
- `cron`: the usual five fields, minute hour day-of-month month day-of-week (0-7, 0 and 7 are
  Sunday), each `*`, a number, a range `a-b`, a list `a,b` and a step `*/n` or `a-b/n`. As in cron,
  when both day fields are restricted a day matches either. Times are wall-clock times in the zone
  (zoneinfo; UTC by default): a time the zone skips (spring forward) does not fire; a time it repeats
  (fall back) fires once, at its first occurrence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mam.errors import UsageError

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MIN_PERIOD_S = 1
MAX_PERIOD_S = 366 * 86400
SEARCH_DAYS = 8 * 366  # a cron expression that matches no day in 8 years (Feb 30) never fires
FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 7))


def parse_duration(text: str) -> int:
    """Seconds from `30s`, `10m`, `2h` or `1d` (a whole number and one unit)."""
    m = re.fullmatch(r"\s*(\d{1,9})\s*([smhd])\s*", text or "")
    if m is None:
        raise UsageError(f"--every {text!r}: use a whole number and a unit: 30s, 10m, 2h or 1d")
    seconds = int(m.group(1)) * UNITS[m.group(2)]
    if not MIN_PERIOD_S <= seconds <= MAX_PERIOD_S:
        raise UsageError(f"--every {text!r}: use between {MIN_PERIOD_S} s and 366 days")
    return seconds


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise UsageError(f"--tz {name!r}: not a time zone this system knows (e.g. UTC, Europe/Paris)") from e


def _field(text: str, name: str, low: int, high: int) -> frozenset[int]:
    out: set[int] = set()
    for part in text.split(","):
        m = re.fullmatch(r"(\*|(\d+)(?:-(\d+))?)(?:/(\d+))?", part)
        if m is None:
            raise UsageError(f"cron {name} {text!r}: use *, N, A-B, lists A,B and steps */N or A-B/N")
        if m.group(1) == "*":
            a, b = low, high
        else:
            a = int(m.group(2))
            b = int(m.group(3)) if m.group(3) is not None else (high if m.group(4) else a)
        step = int(m.group(4) or 1)
        if not (low <= a <= b <= high) or step < 1:
            raise UsageError(
                f"cron {name} {text!r}: values are {low}-{high}, a range goes upwards, a step is 1 or more"
            )
        out.update(range(a, b + 1, step))
    return frozenset(out)


@dataclass(frozen=True)
class Cron:
    text: str
    tz: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day of month is '*'
    any_weekday: bool  # day of week is '*'

    @classmethod
    def parse(cls, text: str, tz: str = "UTC") -> Cron:
        parts = (text or "").split()
        if len(parts) != 5:
            raise UsageError(f"--cron {text!r}: give five fields: minute hour day-of-month month day-of-week")
        zone(tz)
        sets = [_field(p, name, low, high) for p, (name, low, high) in zip(parts, FIELDS, strict=True)]
        weekdays = frozenset(d % 7 for d in sets[4])
        return cls(" ".join(parts), tz, sets[0], sets[1], sets[2], sets[3], weekdays, parts[2] == "*", parts[4] == "*")

    def _day_matches(self, d: date) -> bool:
        if d.month not in self.months:
            return False
        in_month = d.day in self.days
        in_week = (d.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week

    def after(self, t: float) -> float | None:
        tz = zone(self.tz)
        start = datetime.fromtimestamp(t, tz)
        day = start.date()
        first = (start.hour, start.minute)
        for n in range(SEARCH_DAYS):
            if self._day_matches(day):
                for hour in sorted(self.hours):
                    if n == 0 and hour < first[0]:
                        continue
                    for minute in sorted(self.minutes):
                        if n == 0 and (hour, minute) < first:
                            continue
                        local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz)
                        if local.fold or _skipped(local):
                            continue
                        at = local.timestamp()
                        if at > t:
                            return at
            day += timedelta(days=1)
        return None


def _skipped(local: datetime) -> bool:
    """A wall-clock time the zone skips (spring forward): it does not survive a round trip through UTC."""
    back = local.astimezone(timezone.utc).astimezone(local.tzinfo)
    return (back.hour, back.minute) != (local.hour, local.minute)


@dataclass(frozen=True)
class Every:
    period_s: int
    anchor: float

    def after(self, t: float) -> float:
        if t < self.anchor:
            return self.anchor
        k = int((t - self.anchor) // self.period_s) + 1
        return self.anchor + k * self.period_s


Schedule = Every | Cron


def schedule_of(kind: str, spec: str, tz: str, anchor: float) -> Schedule:
    """The schedule a routine row stores: kind `every` (spec: seconds) or `cron` (spec: the expression)."""
    if kind == "every":
        return Every(int(spec), anchor)
    return Cron.parse(spec, tz)


def describe(kind: str, spec: str, tz: str) -> str:
    if kind == "every":
        seconds = int(spec)
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if seconds % size == 0:
                return f"every {seconds // size}{unit}"
        return f"every {seconds}s"
    if kind == "cron":
        return f"cron {spec}" + ("" if tz == "UTC" else f" {tz}")
    return "webhook only"


@dataclass(frozen=True)
class Due:
    ticks: list[float]  # the ticks in [start, now], oldest first: at most the last `limit`
    dropped: int  # how many earlier ones there were beyond `limit`
    following: float | None  # the first tick after now (None: a cron that never fires again)


def due(schedule: Schedule, start: float, now: float, *, limit: int) -> Due:
    """The ticks from `start` (the routine's next tick not yet decided) to `now`."""
    if isinstance(schedule, Every):
        if start > now:
            return Due([], 0, start)
        n = int((now - start) // schedule.period_s) + 1
        first = max(0, n - limit)
        return Due([start + k * schedule.period_s for k in range(first, n)], first, start + n * schedule.period_s)
    ticks: list[float] = []
    dropped = 0
    t: float | None = start
    while t is not None and t <= now:
        ticks.append(t)
        if len(ticks) > limit:
            del ticks[0]
            dropped += 1
        t = schedule.after(t)
    return Due(ticks, dropped, t)


def period_at(schedule: Schedule, t: float) -> float:
    """The distance from tick `t` to the next one (how late a tick may fire and still be on time)."""
    following = schedule.after(t)
    return (following - t) if following is not None else 60.0


def iso(t: float) -> str:
    """A tick's time as its idempotency key and receipts show it: UTC, to the second."""
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
