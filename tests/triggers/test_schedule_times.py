"""Schedule time math: cron in a zone across daylight-saving changes, intervals, what is
refused at save, and what is due after a downtime under each misfire policy."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from app.core.errors import ValidationFailed
from app.core.vocabulary import MisfirePolicy
from app.triggers.engine import schedule_times
from app.triggers.engine.schedule_times import (
    FirePlan,
    NeverFires,
    check,
    due,
    next_fire,
    next_fires,
    upcoming,
)
from app.triggers.schemas import ScheduleConfig

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
# 2026's changes: Berlin 29 March (02:00 CET -> 03:00 CEST) and 25 October (03:00 CEST ->
# 02:00 CET); New York 8 March (02:00 EST -> 03:00 EDT) and 1 November (02:00 EDT -> 01:00
# EST).
SPRING = {"Europe/Berlin": (3, 29), "America/New_York": (3, 8)}
AUTUMN = {"Europe/Berlin": (10, 25), "America/New_York": (11, 1)}


def cron(expr: str, zone: str = "UTC", **fields: Any) -> ScheduleConfig:
    return ScheduleConfig(cron=expr, timezone=zone, **fields)


def every(interval_s: int, **fields: Any) -> ScheduleConfig:
    return ScheduleConfig(interval_s=interval_s, **fields)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, s: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, s, tzinfo=UTC)


def refusal(config: ScheduleConfig) -> dict[str, str]:
    with pytest.raises(ValidationFailed) as caught:
        check(config, now=NOW)
    return {e.field: e.message for e in caught.value.errors}


def day_fires(config: ScheduleConfig, zone: ZoneInfo, month: int, day: int) -> list[datetime]:
    """The fire times within one local calendar day."""
    start = datetime(2026, month, day, tzinfo=zone)
    end = start + timedelta(days=1)  # wall-clock arithmetic: the next local midnight
    return [t for t in next_fires(config, start - timedelta(seconds=1), 60) if t < end]


# --- check: refused at save, naming the field ---


@pytest.mark.parametrize(
    "config",
    [
        cron("0 9 * * MON-FRI", "Europe/Berlin"),
        cron("*/15 * * * *", "America/New_York"),
        cron("0 0 29 2 *"),  # leap days only
        cron("0 0 * 2 MON#5"),  # a fifth Monday in February: 2044
        every(3600, timezone="Asia/Kolkata"),
    ],
)
def test_check_accepts_schedules_that_fire(config: ScheduleConfig) -> None:
    check(config, now=NOW)


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("61 * * * *", "bad minute"),
        ("0 0 * * 8", "bad day-of-week"),
        ("0 0 1-2-3 * *", "bad day-of-month"),
        ("0 0 30 2 *", "bad day-of-month"),  # cronsim refuses 30 February outright
        ("0 0 */30 4 MON#5", "never fires"),  # 1 or 31 April and a fifth Monday
        ("0 0 0 * * *", "has 6 fields"),  # seconds: not a schedule's granularity
        ("every day at 9", "has 4 fields"),
    ],
)
def test_check_refuses_a_cron_that_cannot_fire(expr: str, says: str) -> None:
    assert says in refusal(cron(expr, "Europe/Berlin"))["body.config.cron"]


@pytest.mark.parametrize(
    "zone", ["Mars/Olympus", "Europe/Berlin ", "europe/berlin", "America", "../etc/passwd",
             "/etc/localtime", "localtime", "posixrules", "zone.tab"]
)  # fmt: skip
def test_check_refuses_a_zone_that_is_not_iana(zone: str) -> None:
    assert refusal(cron("0 9 * * *", zone)) == {
        "body.config.timezone": f"{zone!r} is not an IANA time zone (such as 'Europe/Berlin')"
    }
    assert "body.config.timezone" in refusal(every(60, timezone=zone))


def test_check_names_both_fields_at_fault() -> None:
    assert set(refusal(cron("0 0 30 2 *", "Mars/Olympus"))) == {
        "body.config.timezone",
        "body.config.cron",
    }


def test_check_uses_the_current_time_unless_given_one() -> None:
    check(cron("0 9 * * *"))
    with pytest.raises(ValueError, match="no time zone"):
        check(cron("0 9 * * *"), now=datetime(2026, 1, 1))


def test_an_unchecked_cron_that_never_fires_raises_instead_of_looping() -> None:
    with pytest.raises(NeverFires):
        next_fire(cron("0 0 */30 4 MON#5"), NOW)


# --- cron: next fire times ---


def test_next_fire_is_strictly_after() -> None:
    weekdays = cron("0 9 * * MON-FRI")
    friday = utc(2026, 5, 29, 9)
    assert next_fire(weekdays, friday - timedelta(microseconds=1)) == friday
    assert next_fire(weekdays, friday) == utc(2026, 6, 1, 9)  # Monday
    assert next_fire(weekdays, friday + timedelta(microseconds=500)) == utc(2026, 6, 1, 9)


def test_times_are_aware_utc_in_and_out() -> None:
    nine = cron("0 9 * * *", "Europe/Berlin")
    fire = next_fire(nine, datetime(2026, 1, 10, 12, tzinfo=NEW_YORK))  # 18:00 in Berlin
    assert fire == utc(2026, 1, 11, 8)
    assert fire.tzinfo is UTC
    with pytest.raises(ValueError, match="no time zone"):
        next_fire(nine, datetime(2026, 1, 10, 12))


def test_cron_keeps_to_the_zones_wall_clock() -> None:
    nine = cron("0 9 * * *", "Europe/Berlin")
    assert next_fire(nine, utc(2026, 1, 10)) == utc(2026, 1, 10, 8)  # CET, +01:00
    assert next_fire(nine, utc(2026, 7, 10)) == utc(2026, 7, 10, 7)  # CEST, +02:00


def test_next_fires_gives_n_increasing_times() -> None:
    hourly = cron("0 * * * *")
    assert next_fires(hourly, utc(2026, 6, 1, 9, 30), 3) == [
        utc(2026, 6, 1, 10),
        utc(2026, 6, 1, 11),
        utc(2026, 6, 1, 12),
    ]
    quarter = next_fires(cron("*/15 * * * *", "Europe/Berlin"), NOW, 100)
    assert len(quarter) == 100
    assert all(b - a == timedelta(minutes=15) for a, b in pairwise(quarter))
    assert next_fires(hourly, NOW, 0) == []
    with pytest.raises(ValueError, match="negative"):
        next_fires(hourly, NOW, -1)


def test_upcoming_stops_short_instead_of_raising() -> None:
    hourly = cron("0 * * * *")
    assert upcoming(hourly, NOW, 5) == next_fires(hourly, NOW, 5)
    assert upcoming(cron("0 0 */30 4 MON#5"), NOW, 5) == []  # never fires (not saved)


# --- cron across daylight-saving changes ---


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        # 02:30 local the day before, at 03:00 on the day (02:30 does not exist), 02:30 after
        ("Europe/Berlin", [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)]),
        ("America/New_York", [utc(2026, 3, 7, 7, 30), utc(2026, 3, 8, 7), utc(2026, 3, 9, 6, 30)]),
    ],
)
def test_spring_forward_a_set_time_in_the_gap_fires_once_right_after_it(
    zone: str, expected: list[datetime]
) -> None:
    fires = next_fires(cron("30 2 * * *", zone), expected[0] - timedelta(hours=1), 3)
    assert fires == expected
    assert fires[1].astimezone(ZoneInfo(zone)).strftime("%H:%M") == "03:00"


@pytest.mark.parametrize(
    ("zone", "expr", "expected"),
    [
        # Berlin repeats 02:00-03:00: 02:30 CEST on the day, not 02:30 CET as well
        ("Europe/Berlin", "30 2 * * *",
         [utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]),
        # New York repeats 01:00-02:00: 01:30 EDT on the day, not 01:30 EST as well
        ("America/New_York", "30 1 * * *",
         [utc(2026, 10, 31, 5, 30), utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]),
    ],
)  # fmt: skip
def test_fall_back_a_set_time_in_the_repeated_hour_fires_once(
    zone: str, expr: str, expected: list[datetime]
) -> None:
    assert next_fires(cron(expr, zone), expected[0] - timedelta(hours=1), 3) == expected


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (utc(2026, 11, 1, 5, 15), utc(2026, 11, 1, 5, 30)),  # 01:15 EDT: 01:30 EDT is ahead
        (utc(2026, 11, 1, 5, 45), utc(2026, 11, 2, 6, 30)),  # 01:45 EDT: not 01:30 EST
        # 01:15 EST: cronsim's wall clock says 01:30 (EDT), already behind: tomorrow's
        (utc(2026, 11, 1, 6, 15), utc(2026, 11, 2, 6, 30)),
    ],
)
def test_fall_back_from_inside_the_repeated_hour(after: datetime, expected: datetime) -> None:
    assert next_fire(cron("30 1 * * *", "America/New_York"), after) == expected


@pytest.mark.parametrize("zone", [BERLIN, NEW_YORK], ids=str)
@pytest.mark.parametrize(
    ("change", "count"), [(SPRING, 23), (AUTUMN, 25), ({}, 24)], ids=["spring", "autumn", "plain"]
)
def test_hourly_fires_every_real_hour(
    zone: ZoneInfo, change: dict[str, tuple[int, int]], count: int
) -> None:
    month, day = change.get(str(zone), (6, 15))
    fires = day_fires(cron("0 * * * *", str(zone)), zone, month, day)
    assert len(fires) == count
    assert all(b - a == timedelta(hours=1) for a, b in pairwise(fires))


def test_hourly_fires_both_one_oclocks_when_new_york_falls_back() -> None:
    fires = day_fires(cron("0 * * * *", "America/New_York"), NEW_YORK, 11, 1)
    ones = [t.astimezone(NEW_YORK) for t in fires if t.astimezone(NEW_YORK).hour == 1]
    assert [t.strftime("%H:%M %Z") for t in ones] == ["01:00 EDT", "01:00 EST"]


def test_hourly_has_no_fire_in_the_hour_berlin_skips() -> None:
    fires = day_fires(cron("0 * * * *", "Europe/Berlin"), BERLIN, 3, 29)
    assert [t.astimezone(BERLIN).hour for t in fires][:4] == [0, 1, 3, 4]


@pytest.mark.parametrize("zone", [BERLIN, NEW_YORK], ids=str)
@pytest.mark.parametrize(
    ("change", "count"), [(SPRING, 23), (AUTUMN, 24)], ids=["spring", "autumn"]
)
def test_set_hours_keep_to_the_wall_clock(
    zone: ZoneInfo, change: dict[str, tuple[int, int]], count: int
) -> None:
    # `0 0-23` names its hours, so Debian's rule applies: the skipped hour's fire moves to
    # the end of the gap (and merges with the next), the repeated hour fires once.
    fires = day_fires(cron("0 0-23 * * *", str(zone)), zone, *change[str(zone)])
    assert len(fires) == count
    assert len({t.astimezone(zone).hour for t in fires}) == count


def test_a_stepped_hour_follows_the_clock_and_skips_the_missing_hour() -> None:
    fires = next_fires(cron("0 */2 * * *", "Europe/Berlin"), utc(2026, 3, 28, 22, 30), 3)
    assert [t.astimezone(BERLIN).strftime("%H:%M %Z") for t in fires] == [
        "00:00 CET",
        "04:00 CEST",
        "06:00 CEST",
    ]


def test_every_half_hour_fires_four_times_in_new_yorks_repeated_hour() -> None:
    fires = next_fires(cron("*/30 * * * *", "America/New_York"), utc(2026, 11, 1, 4, 59), 4)
    assert fires == [utc(2026, 11, 1, 5), utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 6),
                     utc(2026, 11, 1, 6, 30)]  # fmt: skip


# --- intervals ---


def test_an_interval_is_anchored_at_the_unix_epoch() -> None:
    assert next_fires(every(3600), utc(2026, 6, 1, 10, 17, 5), 3) == [
        utc(2026, 6, 1, 11),
        utc(2026, 6, 1, 12),
        utc(2026, 6, 1, 13),
    ]
    assert next_fire(every(86_400), utc(2026, 6, 1, 10)) == utc(2026, 6, 2)
    assert next_fire(every(7 * 86_400), NOW).strftime("%A %H:%M") == "Thursday 00:00"
    assert next_fire(every(5400), utc(2026, 6, 1)) == utc(2026, 6, 1, 1, 30)  # 1.5 h steps


def test_an_interval_is_strictly_after_and_ignores_the_zone() -> None:
    assert next_fire(every(600), utc(2026, 6, 1, 10, 10)) == utc(2026, 6, 1, 10, 20)
    berlin_hourly = every(3600, timezone="Europe/Berlin")
    fires = next_fires(berlin_hourly, utc(2026, 3, 28, 22, 30), 6)  # across spring forward
    assert fires[0] == utc(2026, 3, 28, 23)
    assert all(b - a == timedelta(hours=1) for a, b in pairwise(fires))


# --- due: on time, and after a downtime under each policy ---

HOURLY = "0 * * * *"
POLICIES = list(MisfirePolicy)


@pytest.mark.parametrize("misfire", POLICIES)
def test_nothing_is_due_before_next_fire_at(misfire: MisfirePolicy) -> None:
    at = utc(2026, 6, 1, 10)
    plan = due(cron(HOURLY, misfire=misfire), at, at - timedelta(seconds=1))
    assert plan == FirePlan(fire_times=[], skipped=0, next_fire_at=at)


@pytest.mark.parametrize("misfire", POLICIES)
@pytest.mark.parametrize("late_s", [0, 30, 59.999])
def test_on_time_fires_under_every_policy(misfire: MisfirePolicy, late_s: float) -> None:
    at = utc(2026, 6, 1, 10)
    plan = due(cron(HOURLY, misfire=misfire), at, at + timedelta(seconds=late_s))
    assert plan == FirePlan(fire_times=[at], skipped=0, next_fire_at=utc(2026, 6, 1, 11))


@pytest.mark.parametrize(
    ("misfire", "fired"),
    [(MisfirePolicy.SKIP, []), (MisfirePolicy.RUN_ONCE, [0]), (MisfirePolicy.RUN_ALL, [0])],
)
@pytest.mark.parametrize("late_s", [60, 600])  # the grace is 60 s, end excluded
def test_one_late_fire(misfire: MisfirePolicy, fired: list[int], late_s: int) -> None:
    at = utc(2026, 6, 1, 10)
    plan = due(cron(HOURLY, misfire=misfire), at, at + timedelta(seconds=late_s))
    assert plan.fire_times == [at for _ in fired]
    assert plan.skipped == 1 - len(fired)
    assert plan.next_fire_at == utc(2026, 6, 1, 11)


def test_the_grace_is_a_setting() -> None:
    at = utc(2026, 6, 1, 10)
    skip = cron(HOURLY, misfire=MisfirePolicy.SKIP)
    assert due(skip, at, at + timedelta(seconds=20), grace_s=30).fire_times == [at]
    assert due(skip, at, at + timedelta(seconds=30), grace_s=30).fire_times == []
    for grace_s in (0, -1, 61):
        with pytest.raises(ValueError, match="grace_s"):
            due(skip, at, at, grace_s=grace_s)


# Down from before 10:00 to 15:20: 10:00 to 15:00 passed, six fire times.
DOWNTIME = [
    (MisfirePolicy.SKIP, 10, [], 6),
    (MisfirePolicy.RUN_ONCE, 10, [15], 5),
    (MisfirePolicy.RUN_ALL, 10, [10, 11, 12, 13, 14, 15], 0),
    (MisfirePolicy.RUN_ALL, 6, [10, 11, 12, 13, 14, 15], 0),
    (MisfirePolicy.RUN_ALL, 3, [13, 14, 15], 3),  # the oldest beyond the bound dropped
    (MisfirePolicy.RUN_ALL, 1, [15], 5),
]


@pytest.mark.parametrize(("misfire", "max_catchup", "hours", "skipped"), DOWNTIME)
def test_after_a_downtime(
    misfire: MisfirePolicy, max_catchup: int, hours: list[int], skipped: int
) -> None:
    config = cron(HOURLY, misfire=misfire, max_catchup=max_catchup)
    plan = due(config, utc(2026, 6, 1, 10), utc(2026, 6, 1, 15, 20))
    assert plan == FirePlan(
        fire_times=[utc(2026, 6, 1, h) for h in hours],
        skipped=skipped,
        next_fire_at=utc(2026, 6, 1, 16),
    )


@pytest.mark.parametrize(
    ("misfire", "max_catchup", "hours", "skipped"),
    [
        (MisfirePolicy.SKIP, 10, [15], 5),  # the missed ones skipped, the on-time one fires
        (MisfirePolicy.RUN_ONCE, 10, [15], 5),
        (MisfirePolicy.RUN_ALL, 3, [13, 14, 15], 3),
    ],
)
def test_a_downtime_that_ends_on_time(
    misfire: MisfirePolicy, max_catchup: int, hours: list[int], skipped: int
) -> None:
    config = cron(HOURLY, misfire=misfire, max_catchup=max_catchup)
    plan = due(config, utc(2026, 6, 1, 10), utc(2026, 6, 1, 15, 0, 20))
    assert plan.fire_times == [utc(2026, 6, 1, h) for h in hours]
    assert (plan.skipped, plan.next_fire_at) == (skipped, utc(2026, 6, 1, 16))


def test_a_fire_time_equal_to_now_has_passed() -> None:
    config = cron(HOURLY, misfire=MisfirePolicy.RUN_ALL)
    plan = due(config, utc(2026, 6, 1, 10), utc(2026, 6, 1, 12))
    assert plan.fire_times == [utc(2026, 6, 1, 10), utc(2026, 6, 1, 11), utc(2026, 6, 1, 12)]
    assert plan.next_fire_at == utc(2026, 6, 1, 13)


def test_an_interval_downtime() -> None:
    config = every(600, misfire=MisfirePolicy.RUN_ALL, max_catchup=4)
    plan = due(config, utc(2026, 6, 1, 10), utc(2026, 6, 1, 10, 55))
    assert plan.fire_times == [utc(2026, 6, 1, 10, m) for m in (20, 30, 40, 50)]
    assert (plan.skipped, plan.next_fire_at) == (2, utc(2026, 6, 1, 11))


def test_catching_up_across_new_yorks_fall_back() -> None:
    # Hourly, down from 00:00 EDT to 03:30 EST: five real hours passed, two of them 01:00.
    config = cron(HOURLY, "America/New_York", misfire=MisfirePolicy.RUN_ALL)
    start, now = utc(2026, 11, 1, 4), utc(2026, 11, 1, 8, 30)
    plan = due(config, start, now)
    assert plan.fire_times == [utc(2026, 11, 1, h) for h in (4, 5, 6, 7, 8)]
    assert plan.fire_times == next_fires(config, start - timedelta(seconds=1), 5)
    # Daily at 01:30, down for four days over the change: one fire a day.
    daily = cron("30 1 * * *", "America/New_York", misfire=MisfirePolicy.RUN_ALL)
    plan = due(daily, utc(2026, 10, 30, 5, 30), utc(2026, 11, 2, 12))
    assert plan.fire_times == [
        utc(2026, 10, 30, 5, 30),
        utc(2026, 10, 31, 5, 30),
        utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 2, 6, 30),
    ]
    assert plan.next_fire_at == utc(2026, 11, 3, 6, 30)


def test_due_answers_in_utc_and_refuses_naive_times() -> None:
    config = cron(HOURLY, misfire=MisfirePolicy.RUN_ONCE)
    plan = due(config, datetime(2026, 6, 1, 12, tzinfo=BERLIN), utc(2026, 6, 1, 10, 30))
    assert plan.fire_times == [utc(2026, 6, 1, 10)]
    assert plan.fire_times[0].tzinfo is UTC
    with pytest.raises(ValueError, match="no time zone"):
        due(config, datetime(2026, 6, 1, 10), utc(2026, 6, 1, 10, 30))
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.skipped = 3  # type: ignore[misc]


def test_a_very_long_downtime_is_walked_from_its_last_day_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(schedule_times, "CATCHUP_SCAN_LIMIT", 50)
    minutely = cron("* * * * *", misfire=MisfirePolicy.RUN_ALL, max_catchup=5)
    now = utc(2026, 1, 4, 0, 0, 30)
    plan = due(minutely, utc(2026, 1, 1), now)  # 3 days: 4321 fire times passed
    last_five = [now.replace(second=0) - timedelta(minutes=m) for m in range(4, -1, -1)]
    assert plan.fire_times == last_five
    assert plan.next_fire_at == utc(2026, 1, 4, 0, 1)
    assert plan.skipped == 50 + 1440 - 5  # the 50 walked, then the last day's: a floor
    # Within the last day the walk goes on, and the count is exact.
    plan = due(minutely, utc(2026, 1, 3, 23), now)
    assert (len(plan.fire_times), plan.skipped) == (5, 61 - 5)
