"""Which days a burn-up shows and up to when each is counted, from the sprint's dates, its
status and the clock; and the points summed up to those moments."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from app.core.states import SprintStatus
from app.sprints.schemas.sprints import SprintRead
from app.sprints.store.burn_up import BacklogEntry, burn_up_of, days_of

START, END = date(2026, 3, 2), date(2026, 3, 8)
LAST_INSTANT = timedelta(days=1, microseconds=-1)


def sprint(status: SprintStatus, completed_at: datetime | None = None) -> SprintRead:
    moment = datetime(2026, 3, 1, tzinfo=UTC)
    done = status is SprintStatus.COMPLETED
    return SprintRead(
        id="sprint_1",
        project="atlas",
        name="S",
        goal="",
        start_date=START,
        end_date=END,
        duration_days=7,
        status=status,
        tasks=[],
        committed_points=10 if done else 0,
        completed_points=7 if done else 0,
        completed_at=completed_at,
        auto_transition=False,
        version=1,
        created_at=moment,
        updated_at=moment,
    )


def noon(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, 12, tzinfo=UTC)


def end_of(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC) + LAST_INSTANT


@pytest.mark.parametrize(
    ("status", "now", "last_day"),
    [
        (SprintStatus.PLANNING, noon(START - timedelta(days=1)), None),  # not started
        (SprintStatus.ACTIVE, noon(START), START),
        (SprintStatus.ACTIVE, noon(date(2026, 3, 5)), date(2026, 3, 5)),
        (SprintStatus.IN_REVIEW, noon(END + timedelta(days=3)), END),  # past its end
    ],
)
def test_a_running_sprint_runs_to_today_counted_to_now(
    status: SprintStatus, now: datetime, last_day: date | None
) -> None:
    days = days_of(sprint(status), now)
    if last_day is None:
        assert days == []
        return
    assert days[0][0] == START and days[-1][0] == last_day
    assert len(days) == (last_day - START).days + 1
    assert all(as_of == end_of(day) for day, as_of in days[:-1])
    assert days[-1][1] == min(now, end_of(last_day))


@pytest.mark.parametrize(
    ("completed_at", "last_day"),
    [
        (noon(date(2026, 3, 4)), date(2026, 3, 4)),  # early: ends on its completion day
        (noon(END + timedelta(days=2)), END),  # after review: ends on its end date
        (noon(START - timedelta(days=3)), START),  # before it began: its first day only
    ],
)
def test_a_completed_sprint_ends_counted_to_its_completion(
    completed_at: datetime, last_day: date
) -> None:
    now = noon(date(2026, 6, 1))
    days = days_of(sprint(SprintStatus.COMPLETED, completed_at), now)
    assert days[-1] == (last_day, completed_at)
    assert all(as_of == min(end_of(day), completed_at) for day, as_of in days[:-1])


def test_points_count_what_happened_by_each_moment_and_the_record_ends_it() -> None:
    entries = [
        BacklogEntry(3, noon(START - timedelta(days=1)), end_of(START)),  # the last instant
        BacklogEntry(4, noon(START - timedelta(days=1)), None),
        BacklogEntry(3, noon(START + timedelta(days=1)), noon(START + timedelta(days=2))),
    ]
    running = burn_up_of(sprint(SprintStatus.ACTIVE), entries, noon(START + timedelta(days=2)))
    assert [(p.scope_points, p.completed_points) for p in running.points] == [
        (7, 3),
        (10, 3),
        (10, 6),
    ]
    done = burn_up_of(
        sprint(SprintStatus.COMPLETED, noon(START + timedelta(days=2))),
        entries,
        noon(date(2026, 6, 1)),
    )
    # The last point is the velocity record (10 and 7 here), whatever the trail says.
    assert [(p.scope_points, p.completed_points) for p in done.points] == [
        (7, 3),
        (10, 3),
        (10, 7),
    ]
