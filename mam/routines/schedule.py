"""When a routine's ticks fall: `--every DURATION` (30s, 10m, 2h, 1d) or `--cron EXPR [--tz ZONE]`.

Pure: no clock, no I/O. Times are POSIX seconds (UTC). A schedule answers one question,
`after(t)`: the first tick strictly after `t`.

- `every`: ticks at `anchor + k * period` (the anchor is when the routine was added), so a restart
  never shifts them.
- `cron`: the usual five fields, minute hour day-of-month month day-of-week (0-7, 0 and 7 are
  Sunday; names such as `mon` and `jan` too), each `*`, a number, a range `a-b`, a list `a,b` and a
  step `*/n` or `a-b/n`, read by cronsim (a maintained library tested against cron's corner cases).
  As in (Debian) cron, when both day fields are restricted and neither starts with `*`, a day matches
  either. cronsim's extensions `L`, `W`, `#` and `?` are refused. Times are wall-clock times in the zone
  (zoneinfo; UTC by default): a time the zone skips (spring forward) does not fire; an expression with
  a fixed minute and hour fires once at a time the zone repeats (fall back), at its first occurrence,
  while one whose minute or hour starts with `*` follows the clock as it passes (a repeated hour's
  ticks fire in both occurrences).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from mam.errors import UsageError

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MIN_PERIOD_S = 1
MAX_PERIOD_S = 366 * 86400


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


# cronsim's extensions, refused: L (last day), W (nearest weekday), # (nth weekday), ? (any).
EXTENSIONS = re.compile(r"^(L|LW|\d*W|\?)$|L$|#", re.I)


@dataclass(frozen=True)
class Cron:
    text: str
    tz: str

    @classmethod
    def parse(cls, text: str, tz: str = "UTC") -> Cron:
        parts = (text or "").split()
        if len(parts) != 5:
            raise UsageError(f"--cron {text!r}: give five fields: minute hour day-of-month month day-of-week")
        zone(tz)
        if any(EXTENSIONS.search(item) for part in parts for item in part.split(",")):
            raise UsageError(
                f"--cron {text!r}: L, W, # and ? (last day, nearest weekday, nth weekday) are not supported; "
                "use numbers, ranges, lists and steps"
            )
        expr = " ".join(parts)
        try:
            CronSim(expr, datetime(2000, 1, 1, tzinfo=timezone.utc))
        except CronSimError as e:
            raise UsageError(f"--cron {text!r}: {str(e).rstrip('.')}") from None
        return cls(expr, tz)

    def after(self, t: float) -> float | None:
        """The first tick strictly after `t`; None if none falls within cronsim's 50 years."""
        sim = CronSim(self.text, datetime.fromtimestamp(t, zone(self.tz)))
        for at in sim:
            if at.hour not in sim.hours or at.minute not in sim.minutes:
                continue  # cronsim moved a time the zone skips to the first one after it: no tick then
            if at.timestamp() > t:
                return at.timestamp()
        return None


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
