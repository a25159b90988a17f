"""A sprint's burn-up through the real service: scope from when each task joined the
backlog, completed points from when the tasks' audit trail says each completed, day by
day; a completed sprint ends on its velocity record; today bounds a running sprint; an
unknown sprint is a 404 problem.

The backlog and the tasks' moves are written by a SprintCommands and a TaskEngine of the
test's own on an injected clock (the same commands the service runs, against its
database, the shared one: on its own project's sprints and tasks), so that each lands on
the day the test says; the service reads them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.states import SprintStatus, TaskStatus
from app.db.connection import make_sessionmaker
from app.events.engine.bus import EventBus
from app.sprints.engine.sprints import SprintCommands
from app.sprints.schemas.sprints import SprintCreate, SprintTaskIn, SprintTasksAdd
from app.tasks.engine.task_engine import TaskEngine
from app.tasks.engine.task_mutations import TransitionTask
from tests.sprints.test_sprints_api import make_sprint
from tests.support.api import assert_problem
from tests.support.engine import ManualClock
from tests.support.factories import create_task, project, unique


def at(day: date, hour: int = 12, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute), UTC)


def iso(moment: datetime) -> str:
    """As the API writes a UTC time."""
    return moment.isoformat().replace("+00:00", "Z")


@dataclass
class Timed:
    """Sprint and task commands on the test's clock, for its own project."""

    clock: ManualClock
    sprints: SprintCommands
    tasks: TaskEngine
    project: str

    async def sprint(self, start: date, end: date) -> str:
        body = SprintCreate(project=self.project, name="Sprint 7", start_date=start, end_date=end)
        sprint, _ = await self.sprints.create_keyed(body, "test")
        return sprint.id

    async def commit(self, sprint_id: str, points: dict[str, int], on: datetime) -> None:
        self.clock.now = on
        tasks = [SprintTaskIn(task_id=t, story_points=p) for t, p in points.items()]
        await self.sprints.add_tasks(
            sprint_id, SprintTasksAdd(tasks=tasks), "test", expected_version=None
        )

    async def move(self, sprint_id: str, on: datetime, *targets: SprintStatus) -> None:
        self.clock.now = on
        for target in targets:
            await self.sprints.transition(sprint_id, target, "test", expected_version=None)

    async def finish(self, task_id: str, on: datetime) -> None:
        """Worked and approved: its transition to `completed` is stamped `on`."""
        self.clock.now = on - timedelta(hours=1)
        for target in (TaskStatus.IN_PROGRESS, TaskStatus.IN_REVIEW):
            await self.tasks.submit(TransitionTask(task_id, target, "ann"))
        self.clock.now = on
        await self.tasks.submit(TransitionTask(task_id, TaskStatus.COMPLETED, "ann"))


@pytest.fixture
async def timed(db_engine: AsyncEngine) -> AsyncIterator[Timed]:
    sessions, bus, clock = make_sessionmaker(db_engine), EventBus(), ManualClock()
    engine = TaskEngine(sessions, bus, clock=clock)
    engine.start()
    yield Timed(clock, SprintCommands(sessions, bus, clock=clock), engine, project())
    await engine.stop(drain_timeout_s=5)


async def burn_up(client: httpx.AsyncClient, sprint_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/sprints/{sprint_id}/burn-up")
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def series(found: dict[str, Any]) -> list[tuple[str, int, int]]:
    return [(p["date"], p["scope_points"], p["completed_points"]) for p in found["points"]]


async def test_scope_and_completed_points_land_on_the_days_they_happened(
    client: httpx.AsyncClient, timed: Timed
) -> None:
    # A week that ended before today, whichever day the test runs on.
    start = datetime.now(UTC).date() - timedelta(days=12)
    end = start + timedelta(days=6)
    day = [start + timedelta(days=n) for n in range(8)]
    ann = unique("ann")
    a, b, c, d = [await create_task(client, project=timed.project, assigned_to=ann) for _ in "abcd"]
    timed.clock.now = at(start - timedelta(days=2))
    sprint_id = await timed.sprint(start, end)
    await timed.commit(
        sprint_id, {a["id"]: 3, b["id"]: 5, c["id"]: 8}, at(start - timedelta(days=1))
    )
    await timed.commit(sprint_id, {d["id"]: 2}, at(day[1], 10))  # planned late, truthfully
    await timed.move(sprint_id, at(day[1], 11), SprintStatus.ACTIVE)
    await timed.finish(a["id"], at(day[2], 15))
    await timed.finish(b["id"], datetime.combine(day[5], time.max, UTC))  # its last instant
    await timed.finish(c["id"], at(day[7], 9))  # the day after its end, in review
    await timed.move(sprint_id, at(day[7], 8), SprintStatus.IN_REVIEW)

    running = await burn_up(client, sprint_id)
    assert running["sprint_id"] == sprint_id and running["status"] == "in_review"
    assert series(running) == [
        (str(day[0]), 16, 0),
        (str(day[1]), 18, 0),
        (str(day[2]), 18, 3),
        (str(day[3]), 18, 3),
        (str(day[4]), 18, 3),
        (str(day[5]), 18, 8),
        (str(day[6]), 18, 8),  # its end: c completed the next day, after it
    ]
    assert running["points"][0]["as_of"] == iso(at(day[1], 0) - timedelta(microseconds=1))
    # As the sprint stands now (c completed since): the burn-up keeps to its dates.
    assert (running["committed_points"], running["completed_points"]) == (18, 16)

    await timed.move(sprint_id, at(day[7], 12), SprintStatus.RETROSPECTIVE, SprintStatus.COMPLETED)
    completed = await burn_up(client, sprint_id)
    velocity = (await client.get(f"/v1/projects/{timed.project}/velocity")).json()["records"][0]
    assert velocity["sprint_id"] == sprint_id
    last = completed["points"][-1]
    assert last["date"] == str(end)  # it ended on its end date, counted to its completion
    assert (
        (last["scope_points"], last["completed_points"])
        == (
            velocity["committed_points"],
            velocity["completed_points"],
        )
        == (18, 16)
    )
    assert last["as_of"] == velocity["completed_at"]
    assert series(completed)[:-1] == series(running)[:-1]


async def test_a_sprint_completed_early_ends_on_its_completion_day(
    client: httpx.AsyncClient, timed: Timed
) -> None:
    start = datetime.now(UTC).date() - timedelta(days=30)
    task = await create_task(client, project=timed.project, assigned_to=unique("ann"))
    timed.clock.now = at(start - timedelta(days=1))
    sprint_id = await timed.sprint(start, start + timedelta(days=13))
    await timed.commit(sprint_id, {task["id"]: 5}, at(start - timedelta(days=1)))
    await timed.move(sprint_id, at(start, 9), SprintStatus.ACTIVE)
    await timed.finish(task["id"], at(start + timedelta(days=1)))
    done = at(start + timedelta(days=2), 16)
    await timed.move(
        sprint_id,
        done,
        SprintStatus.IN_REVIEW,
        SprintStatus.RETROSPECTIVE,
        SprintStatus.COMPLETED,
    )
    found = await burn_up(client, sprint_id)
    assert series(found) == [
        (str(start), 5, 0),
        (str(start + timedelta(days=1)), 5, 5),
        (str(start + timedelta(days=2)), 5, 5),
    ]
    assert found["points"][-1]["as_of"] == iso(done)


async def test_a_running_sprint_reaches_today_and_one_not_started_has_no_points(
    client: httpx.AsyncClient,
) -> None:
    today = datetime.now(UTC).date()
    atlas = project()
    started = await make_sprint(
        client,
        project=atlas,
        start_date=str(today - timedelta(days=2)),
        end_date=str(today + timedelta(days=5)),
    )
    task = await create_task(client, project=atlas, assigned_to=unique("ann"))
    response = await client.post(
        f"/v1/sprints/{started['id']}/tasks",
        json={"tasks": [{"task_id": task["id"], "story_points": 4}]},
    )
    assert response.status_code == 200, response.text
    found = await burn_up(client, started["id"])
    # Joined today: the days before had nothing committed yet.
    assert series(found) == [
        (str(today - timedelta(days=2)), 0, 0),
        (str(today - timedelta(days=1)), 0, 0),
        (str(today), 4, 0),
    ]
    later = await make_sprint(
        client,
        project=atlas,
        name="Later",
        start_date=str(today + timedelta(days=3)),
        end_date=str(today + timedelta(days=9)),
    )
    assert (await burn_up(client, later["id"]))["points"] == []


async def test_an_unknown_sprint_is_a_404_problem(client: httpx.AsyncClient) -> None:
    problem = assert_problem(await client.get("/v1/sprints/sprint_nope/burn-up"), 404, "not_found")
    assert "sprint_nope" in problem["detail"]
