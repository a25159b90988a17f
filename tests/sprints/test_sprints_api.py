"""Sprints through the real service: the linear lifecycle and its refusals, the backlog's
planning gate, one active sprint a project (also when two activations race), points
committed and completed as tasks complete, the velocity fixed at completion and its
rolling average over a window, bad input named by field, and the `sprints` stream."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.core.streams import SPRINTS_STREAM
from app.events import store as event_store
from tests.support.api import assert_problem
from tests.support.event_schemas import stored_events_documented
from tests.support.factories import create_task, project, unique
from tests.support.sse import SseMessage, own_events

LIFECYCLE = ["active", "in_review", "retrospective", "completed"]


async def make_sprint(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    """A sprint in planning (on a shared server, give it a `project` of the test's own)."""
    body = {
        "project": "atlas",
        "name": "Sprint 1",
        "goal": "ship it",
        "start_date": "2026-12-01",
        "end_date": "2026-12-14",
        **fields,
    }
    response = await client.post("/v1/sprints", json=body)
    assert response.status_code == 201, response.text
    sprint: dict[str, Any] = response.json()
    return sprint


async def add(client: httpx.AsyncClient, sprint_id: str, points: dict[str, int]) -> httpx.Response:
    tasks = [{"task_id": t, "story_points": p} for t, p in points.items()]
    return await client.post(f"/v1/sprints/{sprint_id}/tasks", json={"tasks": tasks})


async def move(client: httpx.AsyncClient, sprint_id: str, *targets: str) -> dict[str, Any]:
    sprint: dict[str, Any] = {}
    for target in targets:
        response = await client.post(f"/v1/sprints/{sprint_id}/transitions", json={"to": target})
        assert response.status_code == 200, response.text
        sprint = response.json()
    return sprint


async def finish_task(client: httpx.AsyncClient, task_id: str) -> None:
    """Work a task to completion as a person would: it was created assigned to one."""
    for target in ("in_progress", "in_review", "completed"):
        response = await client.post(f"/v1/tasks/{task_id}/transitions", json={"to": target})
        assert response.status_code == 200, response.text


async def test_the_lifecycle_is_linear_and_refuses_skips_and_returns(
    client: httpx.AsyncClient,
) -> None:
    sprint = await make_sprint(client, project=project())
    assert sprint["status"] == "planning" and sprint["version"] == 1
    assert sprint["duration_days"] == 14 and sprint["tasks"] == []
    path = f"/v1/sprints/{sprint['id']}/transitions"

    skip = assert_problem(
        await client.post(path, json={"to": "in_review"}), 409, "invalid_transition"
    )
    assert skip["allowed"] == ["active"] and skip["current"] == "planning"

    for step, target in enumerate(LIFECYCLE):
        response = await client.post(path, json={"to": target})
        assert response.status_code == 200, response.text
        assert response.json()["status"] == target
        assert response.headers["ETag"] == f'"{step + 2}"'
        if target != "completed":
            back = await client.post(path, json={"to": "planning"})
            assert assert_problem(back, 409, "invalid_transition")["allowed"] == [
                LIFECYCLE[step + 1]
            ]

    done = assert_problem(await client.post(path, json={"to": "active"}), 409, "invalid_transition")
    assert done["allowed"] == []
    stale = await client.post(
        f"/v1/sprints/{sprint['id']}/transitions",
        json={"to": "active"},
        headers={"If-Match": '"1"'},
    )
    assert assert_problem(stale, 409, "version_conflict")["current_version"] == 5


async def test_tasks_join_and_leave_only_while_planning(client: httpx.AsyncClient) -> None:
    atlas = project()
    sprint = await make_sprint(client, project=atlas)
    one = await create_task(client, project=atlas)
    two = await create_task(client, project=atlas)

    joined = await add(client, sprint["id"], {one["id"]: 3, two["id"]: 5})
    assert joined.status_code == 200, joined.text
    body = joined.json()
    assert [(t["task_id"], t["story_points"], t["status"]) for t in body["tasks"]] == [
        (one["id"], 3, "created"),
        (two["id"], 5, "created"),
    ]
    assert body["committed_points"] == 8 and body["completed_points"] == 0
    assert body["version"] == 2

    repointed = (await add(client, sprint["id"], {one["id"]: 2})).json()
    assert repointed["committed_points"] == 7 and len(repointed["tasks"]) == 2

    left = await client.delete(f"/v1/sprints/{sprint['id']}/tasks/{two['id']}")
    assert left.status_code == 200 and left.json()["committed_points"] == 2
    missing = await client.delete(f"/v1/sprints/{sprint['id']}/tasks/{two['id']}")
    assert_problem(missing, 404, "not_found")

    await move(client, sprint["id"], "active")
    late = assert_problem(await add(client, sprint["id"], {two["id"]: 1}), 409, "sprint_locked")
    assert late["sprint_status"] == "active"
    leave = await client.delete(f"/v1/sprints/{sprint['id']}/tasks/{one['id']}")
    assert_problem(leave, 409, "sprint_locked")
    dates = await client.patch(f"/v1/sprints/{sprint['id']}", json={"end_date": "2026-12-20"})
    assert_problem(dates, 409, "sprint_locked")
    renamed = await client.patch(f"/v1/sprints/{sprint['id']}", json={"goal": "ship less"})
    assert renamed.status_code == 200 and renamed.json()["goal"] == "ship less"


async def test_tasks_must_exist_be_of_the_project_and_be_in_one_open_sprint(
    client: httpx.AsyncClient,
) -> None:
    atlas, hermes = project(), project()
    sprint = await make_sprint(client, project=atlas)
    other_project = await create_task(client, project=hermes)
    no_project = await create_task(client)
    cancelled = await create_task(client, project=atlas, assigned_to=unique("ann"))
    await client.post(f"/v1/tasks/{cancelled['id']}/cancel")

    refused = await add(
        client,
        sprint["id"],
        {"task_nope": 1, other_project["id"]: 2, no_project["id"]: 3, cancelled["id"]: 1},
    )
    problem = assert_problem(refused, 422, "validation_error")
    assert [e["field"] for e in problem["errors"]] == [
        "tasks[0].task_id",
        "tasks[1].task_id",
        "tasks[2].task_id",
        "tasks[3].task_id",
    ]
    assert hermes in problem["errors"][1]["message"]
    assert "no project" in problem["errors"][2]["message"]
    assert (await client.get(f"/v1/sprints/{sprint['id']}")).json()["tasks"] == []

    task = await create_task(client, project=atlas)
    assert (await add(client, sprint["id"], {task["id"]: 1})).status_code == 200
    other = await make_sprint(client, project=atlas, name="Sprint 2")
    taken = assert_problem(
        await add(client, other["id"], {task["id"]: 1}), 409, "task_in_another_sprint"
    )
    assert taken["task_id"] == task["id"] and taken["sprint_id"] == sprint["id"]

    # Once its sprint completed, an unfinished task may be carried over to the next.
    await move(client, sprint["id"], *LIFECYCLE)
    carried = await add(client, other["id"], {task["id"]: 2})
    assert carried.status_code == 200, carried.text


async def test_one_active_sprint_a_project(client: httpx.AsyncClient) -> None:
    atlas = project()
    first = await make_sprint(client, project=atlas)
    second = await make_sprint(client, project=atlas, name="Sprint 2")
    elsewhere = await make_sprint(client, project=project())

    await move(client, first["id"], "active")
    refused = await client.post(f"/v1/sprints/{second['id']}/transitions", json={"to": "active"})
    problem = assert_problem(refused, 409, "sprint_already_active")
    assert problem["active_sprint_id"] == first["id"] and problem["project"] == atlas
    assert (await move(client, elsewhere["id"], "active"))["status"] == "active"

    # Once the first is out of `active`, the next may start.
    await move(client, first["id"], "in_review")
    assert (await move(client, second["id"], "active"))["status"] == "active"


async def test_racing_activations_exactly_one_wins(client: httpx.AsyncClient) -> None:
    atlas = project()
    sprints = [await make_sprint(client, project=atlas, name=f"Sprint {i}") for i in range(8)]
    answers = await asyncio.gather(
        *(client.post(f"/v1/sprints/{s['id']}/transitions", json={"to": "active"}) for s in sprints)
    )
    won = [a for a in answers if a.status_code == 200]
    assert len(won) == 1
    for lost in answers:
        if lost.status_code != 200:
            problem = assert_problem(lost, 409, "sprint_already_active")
            assert problem["active_sprint_id"] == won[0].json()["id"]
    listed = (await client.get("/v1/sprints", params={"project": atlas, "status": "active"})).json()
    assert [s["id"] for s in listed["items"]] == [won[0].json()["id"]]


async def test_points_follow_the_tasks_and_completion_fixes_the_velocity(
    client: httpx.AsyncClient,
) -> None:
    atlas, ann = project(), unique("ann")
    sprint = await make_sprint(client, project=atlas)
    tasks = [await create_task(client, project=atlas, assigned_to=ann) for _ in range(3)]
    await add(client, sprint["id"], {tasks[0]["id"]: 3, tasks[1]["id"]: 5, tasks[2]["id"]: 8})
    await move(client, sprint["id"], "active")

    await finish_task(client, tasks[0]["id"])
    await finish_task(client, tasks[1]["id"])
    running = (await client.get(f"/v1/sprints/{sprint['id']}")).json()
    assert running["committed_points"] == 16 and running["completed_points"] == 8
    assert [t["status"] for t in running["tasks"]] == ["completed", "completed", "assigned"]

    done = await move(client, sprint["id"], "in_review", "retrospective", "completed")
    assert done["committed_points"] == 16 and done["completed_points"] == 8
    assert done["completed_at"] is not None

    # The record is fixed: the last task completing later does not change it.
    await finish_task(client, tasks[2]["id"])
    after = (await client.get(f"/v1/sprints/{sprint['id']}")).json()
    assert after["committed_points"] == 16 and after["completed_points"] == 8
    assert after["tasks"][2]["status"] == "completed"
    locked = await client.patch(f"/v1/sprints/{sprint['id']}", json={"name": "renamed"})
    assert_problem(locked, 409, "sprint_locked")

    velocity = (await client.get(f"/v1/projects/{atlas}/velocity")).json()
    assert velocity["records"][0]["sprint_id"] == sprint["id"]
    assert velocity["average_completed_points"] == 8 and velocity["sprints_averaged"] == 1


async def _completed_sprint(
    client: httpx.AsyncClient, name: str, done: int, left: int, project: str = "atlas"
) -> str:
    """A sprint of `project` completed with one finished task of `done` points, one open
    of `left`."""
    sprint = await make_sprint(client, name=name, project=project)
    ann = unique("ann")
    finished = await create_task(client, project=project, assigned_to=ann)
    open_task = await create_task(client, project=project, assigned_to=ann)
    await add(client, sprint["id"], {finished["id"]: done, open_task["id"]: left})
    await move(client, sprint["id"], "active")
    await finish_task(client, finished["id"])
    await move(client, sprint["id"], "in_review", "retrospective", "completed")
    return str(sprint["id"])


async def test_velocity_averages_over_a_window_of_the_newest_sprints(
    client: httpx.AsyncClient,
) -> None:
    atlas = project()
    velocity = f"/v1/projects/{atlas}/velocity"
    empty = (await client.get(velocity)).json()
    assert empty["records"] == [] and empty["average_completed_points"] is None

    ids = [
        await _completed_sprint(client, f"Sprint {i}", done, 2, atlas)
        for i, done in enumerate([10, 20, 30, 40])
    ]
    await make_sprint(client, project=atlas, name="planned, not counted")

    default = (await client.get(velocity)).json()
    assert [r["sprint_id"] for r in default["records"]] == ids[::-1]
    assert [r["completed_points"] for r in default["records"]] == [40, 30, 20, 10]
    assert default["window"] == 3 and default["sprints_averaged"] == 3
    assert default["average_completed_points"] == 30  # (40 + 30 + 20) / 3
    assert default["average_committed_points"] == 32

    two = (await client.get(velocity, params={"window": 2})).json()
    assert two["average_completed_points"] == 35
    wide = (await client.get(velocity, params={"window": 10})).json()
    assert wide["sprints_averaged"] == 4 and wide["average_completed_points"] == 25
    short = (await client.get(velocity, params={"limit": 1})).json()
    assert len(short["records"]) == 1 and short["average_completed_points"] == 30

    for bad in (0, 51):
        refused = await client.get(velocity, params={"window": bad})
        assert assert_problem(refused, 422, "validation_error")["errors"][0]["field"] == (
            "query.window"
        )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"end_date": "2026-11-30"}, "end_date"),
        ({"name": " "}, "name"),
        ({"project": ""}, "project"),
        ({"start_date": "not a date"}, "start_date"),
        ({"points": 3}, "points"),
    ],
)
async def test_bad_sprints_are_refused_by_field(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    base = {"project": project(), "name": "S", "start_date": "2026-12-01", "end_date": "2026-12-14"}
    response = await client.post("/v1/sprints", json=base | body)
    problem = assert_problem(response, 422, "validation_error")
    assert [e["field"] for e in problem["errors"]] == [field]


async def test_bad_backlogs_and_patches_are_refused_by_field(client: httpx.AsyncClient) -> None:
    atlas = project()
    sprint = await make_sprint(client, project=atlas)
    task = await create_task(client, project=atlas)
    path = f"/v1/sprints/{sprint['id']}"
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("tasks", {"tasks": []}, "tasks"),
        ("tasks", {"tasks": [{"task_id": task["id"], "story_points": -1}]}, "tasks.0.story_points"),
        (
            "tasks",
            {"tasks": [{"task_id": task["id"], "story_points": 1001}]},
            "tasks.0.story_points",
        ),
        (
            "tasks",
            {"tasks": [{"task_id": task["id"], "story_points": 1}] * 2},
            "tasks",
        ),
    ]
    for suffix, body, field in cases:
        response = await client.post(f"{path}/{suffix}", json=body)
        problem = assert_problem(response, 422, "validation_error")
        assert [e["field"] for e in problem["errors"]] == [field], body

    before_start = await client.patch(path, json={"end_date": "2026-11-01"})
    assert assert_problem(before_start, 422, "validation_error")["errors"][0]["field"] == "end_date"
    after_end = await client.patch(path, json={"start_date": "2026-12-20"})
    assert assert_problem(after_end, 422, "validation_error")["errors"][0]["field"] == "start_date"
    null = await client.patch(path, json={"name": None})
    assert assert_problem(null, 422, "validation_error")["errors"][0]["field"] == "name"
    nothing = await client.patch(path, json={})
    assert assert_problem(nothing, 422, "validation_error")["errors"][0]["field"] == "body"
    moved = await client.patch(
        path,
        json={"start_date": "2026-12-02", "end_date": "2026-12-05"},
        headers={"If-Match": '"1"'},
    )
    assert moved.status_code == 200 and moved.json()["duration_days"] == 4
    stale = await client.patch(path, json={"goal": "x"}, headers={"If-Match": '"1"'})
    assert_problem(stale, 409, "version_conflict")
    bad_to = await client.post(f"{path}/transitions", json={"to": "done"})
    assert assert_problem(bad_to, 422, "validation_error")["errors"][0]["field"] == "to"
    assert_problem(await client.get("/v1/sprints/sprint_nope"), 404, "not_found")


async def test_creates_are_idempotent_and_lists_paginate(client: httpx.AsyncClient) -> None:
    atlas = project()
    body = {"project": atlas, "name": "S", "start_date": "2026-12-01", "end_date": "2026-12-14"}
    key = {"Idempotency-Key": unique("sprint-1")}
    first = await client.post("/v1/sprints", json=body, headers=key)
    again = await client.post("/v1/sprints", json=body, headers=key)
    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    reused = await client.post("/v1/sprints", json=body | {"name": "T"}, headers=key)
    assert_problem(reused, 409, "idempotency_key_reused")

    for i in range(4):
        await make_sprint(client, project=atlas, name=f"more {i}")
    await make_sprint(client, project=project())
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"project": atlas, "limit": 2}
        if cursor:
            params["cursor"] = cursor
        listed = (await client.get("/v1/sprints", params=params)).json()
        seen += [s["id"] for s in listed["items"]]
        cursor = listed["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 5 and seen == sorted(seen) and first.json()["id"] == seen[0]


async def sprints_stream_end(engine: AsyncEngine) -> int:
    """The last event of the sprints stream now: a test reads its own events after it."""
    async with AsyncSession(engine) as session:
        return await event_store.last_seq(session, SPRINTS_STREAM)


async def sprint_events(
    client: httpx.AsyncClient, since: int, sprint_id: str, count: int
) -> list[SseMessage]:
    """The first `count` events of the sprints stream after `since` about the sprint."""
    return await own_events(
        client, "/v1/sprints/events", since, lambda m: m.data["sprint"]["id"] == sprint_id, count
    )


async def test_the_stream_tells_each_change(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    atlas = project()
    since = await sprints_stream_end(db_engine)
    sprint = await make_sprint(client, project=atlas)
    task = await create_task(client, project=atlas)
    await add(client, sprint["id"], {task["id"]: 2})
    await client.patch(f"/v1/sprints/{sprint['id']}", json={"goal": "new"})
    await move(client, sprint["id"], "active")
    events = await sprint_events(client, since, sprint["id"], 4)
    assert [e.event for e in events] == [
        "sprint.created",
        "sprint.tasks_changed",
        "sprint.updated",
        "sprint.transitioned",
    ]
    last = events[-1].data
    assert (last["from"], last["to"], last["actor"]) == ("planning", "active", "local")
    assert last["sprint"]["version"] == 4 and last["sprint"]["committed_points"] == 2
    assert {e.event for e in events} <= await stored_events_documented(
        db_engine, {sprint["id"]}, runs=set()
    )
