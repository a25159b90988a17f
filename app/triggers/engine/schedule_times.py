"""When a schedule fires: the fire times of a cron expression in an IANA time zone or of a
fixed interval, and which of them are due at a given moment under the misfire policy.

Pure functions of a `ScheduleConfig` and aware datetimes (UTC out); the caller passes the
clock. The scheduler keeps `next_fire_at` on the trigger, set to `next_fire(config, now)`
when the schedule is saved, enabled or resumed, and asks `due()` what to do once it passes.

A cron expression is evaluated by cronsim in the schedule's zone, the way Debian's cron
handles a daylight-saving change:

- Set times (neither the minute nor the hour field starts with `*`: `30 2 * * *`,
  `0 9-17 * * MON-FRI`) keep to the wall clock. A time the spring change skips fires once,
  at the first minute after the gap: 02:30 on the day Berlin jumps from 02:00 to 03:00
  fires at 03:00 CEST. A time the autumn change repeats fires once, on its first pass:
  01:30 on the day New York falls back from 02:00 to 01:00 fires at 01:30 EDT, not EST.
- A minute or hour field starting with `*` (`0 * * * *`, `*/15 * * * *`, `0 */2 * * *`)
  follows the real hours: `0 * * * *` fires 23 times on the spring day and 25 on the
  autumn day (01:00 EDT and 01:00 EST); a local hour the spring change skips has no fire.
- Five fields only (a schedule fires at most once a minute). `check()` refuses what
  cronsim refuses (`0 0 30 2 *`) and an expression with no fire time in the next 50 years,
  cronsim's horizon (`0 0 */30 4 MON#5`), so no walk over fire times runs unbounded.

An interval schedule fires every `interval_s` seconds of real time (the zone plays no
part), at the multiples of `interval_s` since the Unix epoch: 3600 s fires on the hour UTC,
86400 s at midnight UTC. The epoch, not the trigger's creation, is the anchor so that the
times depend on the config alone: every process computes the same ones (a fire's key is
its trigger and time), and a pause or an edit does not shift them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import chain, islice
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from app.core.errors import FieldError, ValidationFailed
from app.core.vocabulary import MisfirePolicy
from app.triggers.schemas import ScheduleConfig

# A fire this much late at most is on time, as Quartz's default misfire threshold; the
# scheduler must look more often than that. At most 60 s, the shortest period, so that at
# most one passed fire time is ever on time.
DEFAULT_GRACE_S = 60.0
# `due()` walks at most this many passed fire times (about 0.3 s; 70 days of a schedule
# that fires every minute), then walks on from one day before `now` only.
CATCHUP_SCAN_LIMIT = 100_000
_LAST_DAY = timedelta(days=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Names that load but stand for this machine's own settings, not for a zone.
_MACHINE_ZONES = frozenset({"localtime", "posixrules"})
_CRON_FIELDS = "minute hour day-of-month month day-of-week"


class NeverFires(ValueError):
    """A cron expression has no fire time in the 50 years after the given moment. `check()`
    refuses such an expression, so a saved schedule does not raise it."""


@dataclass(frozen=True)
class FirePlan:
    """What the scheduler does once `next_fire_at` has passed: fire `fire_times` (oldest
    first; the fire time is part of each run's key), record `skipped` fire times passed and
    not fired, and store `next_fire_at`."""

    fire_times: list[datetime]
    skipped: int
    next_fire_at: datetime


def check(config: ScheduleConfig, *, now: datetime | None = None) -> None:
    """Refuse, naming the field, a schedule that cannot fire: a time zone that is not an
    IANA zone, or a cron expression that does not parse or has no fire time in the 50 years
    after `now` (the current time unless given)."""
    now = datetime.now(UTC) if now is None else now
    _require_aware(now)
    errors: list[FieldError] = []
    try:
        zone = _zone(config.timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        errors.append(
            FieldError(
                "body.config.timezone",
                f"{config.timezone!r} is not an IANA time zone (such as 'Europe/Berlin')",
            )
        )
        zone = ZoneInfo("UTC")  # the expression is still worth checking
    if config.cron is not None:
        problem = _cron_problem(config.cron, zone, now)
        if problem is not None:
            errors.append(FieldError("body.config.cron", problem))
    if errors:
        raise ValidationFailed(errors)


def next_fire(config: ScheduleConfig, after: datetime) -> datetime:
    """The first fire time strictly after `after`, in UTC."""
    return next(_fires_after(config, after))


def next_fires(config: ScheduleConfig, after: datetime, n: int) -> list[datetime]:
    """The first `n` fire times strictly after `after`, in UTC, oldest first."""
    if n < 0:
        raise ValueError(f"n must not be negative, got {n}")
    return list(islice(_fires_after(config, after), n))


def upcoming(config: ScheduleConfig, after: datetime, n: int) -> list[datetime]:
    """`next_fires`, stopping short instead of raising `NeverFires` (what the API shows:
    a saved expression fires within 50 years, but its fifth time may be further off)."""
    times: list[datetime] = []
    try:
        for at in islice(_fires_after(config, after), n):
            times.append(at)
    except NeverFires:
        pass
    return times


def due(
    config: ScheduleConfig,
    next_fire_at: datetime,
    now: datetime,
    *,
    grace_s: float = DEFAULT_GRACE_S,
) -> FirePlan:
    """What to fire at `now`, the trigger's stored next fire time being `next_fire_at`.

    The passed fire times are `next_fire_at` and each later one up to `now` inclusive. The
    latest, if less than `grace_s` old, is on time and fires under every policy; the others
    were missed (no process was up) and the misfire policy decides:

    - `skip`: none of them; only an on-time fire fires.
    - `run_once`: one fire, at the latest time passed, on time or not.
    - `run_all`: each, oldest first, at most the newest `max_catchup`.

    Every passed time not fired counts in `skipped` (past `CATCHUP_SCAN_LIMIT` passed times,
    the ones between the limit and the last day are not counted: a floor). Before
    `next_fire_at` nothing is due and the plan keeps it.
    """
    _require_aware(next_fire_at, now)
    if not 0 < grace_s <= 60:
        raise ValueError(f"grace_s must be in (0, 60], got {grace_s}")
    next_fire_at = next_fire_at.astimezone(UTC)
    if now < next_fire_at:
        return FirePlan(fire_times=[], skipped=0, next_fire_at=next_fire_at)
    keep = config.max_catchup if config.misfire is MisfirePolicy.RUN_ALL else 1
    newest: deque[datetime] = deque(maxlen=keep)
    passed = 0
    fires: Iterator[datetime] = chain((next_fire_at,), _fires_after(config, next_fire_at))
    while (at := next(fires)) <= now:
        passed += 1
        newest.append(at)
        if passed == CATCHUP_SCAN_LIMIT and at < now - _LAST_DAY:
            fires = _fires_after(config, now - _LAST_DAY)
    late = now - newest[-1] >= timedelta(seconds=grace_s)
    if config.misfire is MisfirePolicy.SKIP and late:
        newest.clear()
    return FirePlan(fire_times=list(newest), skipped=passed - len(newest), next_fire_at=at)


def _fires_after(config: ScheduleConfig, after: datetime) -> Iterator[datetime]:
    _require_aware(after)
    if config.interval_s is not None:
        return _interval_fires(timedelta(seconds=config.interval_s), after)
    assert config.cron is not None  # ScheduleConfig holds exactly one of the two
    return _cron_fires(config.cron, _zone(config.timezone), after)


def _interval_fires(step: timedelta, after: datetime) -> Iterator[datetime]:
    at = _EPOCH + ((after - _EPOCH) // step + 1) * step
    while True:
        yield at
        at += step


def _cron_fires(cron: str, zone: ZoneInfo, after: datetime) -> Iterator[datetime]:
    times = CronSim(cron, after.astimezone(zone))
    last = after
    while True:
        try:
            at = next(times).astimezone(UTC)
        except StopIteration:
            raise NeverFires(f"{cron!r} has no fire time in the 50 years after {last}") from None
        # Keeping to the wall clock, cronsim drops the fold of the time it starts from:
        # from 01:15 EST on the autumn day it gives 01:30 EDT, which is already behind.
        if at > last:
            last = at
            yield at


def _cron_problem(cron: str, zone: ZoneInfo, now: datetime) -> str | None:
    fields = len(cron.split())
    if fields != 5:
        return f"has {fields} fields; a cron expression has 5: {_CRON_FIELDS}"
    try:
        next(_cron_fires(cron, zone, now))
    except NeverFires:
        return "never fires: no date matches in the next 50 years"
    except CronSimError as exc:  # "Bad day-of-month", also for 30 February
        return f"is not a valid cron expression ({str(exc).lower()})"
    return None


def _zone(name: str) -> ZoneInfo:
    if name in _MACHINE_ZONES:
        raise ZoneInfoNotFoundError(f"{name!r} names this machine's zone, not an IANA zone")
    return ZoneInfo(name)


def _require_aware(*moments: datetime) -> None:
    for moment in moments:
        if moment.utcoffset() is None:
            raise ValueError(f"{moment} has no time zone; schedule times are aware")
