"""Kanban boards through the real service: a project's board, every column move (several
steps audited as one change, refused moves), WIP limits strict and advisory under fifty
racing moves, a transition made another way counted, and a run held in `ready` until its
column has room."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.routing.test_routing_api import Event, task_events, tasks_stream_end
from tests.support.api import assert_problem
from tests.support.factories import create_task, make_agent, project, unique

TIMEOUT_S = 20


async def move(client: httpx.AsyncClient, task_id: str, column: str, **body: Any) -> httpx.Response:
    return await client.post(f"/v1/tasks/{task_id}/move", json={"column": column, **body})


async def board(client: httpx.AsyncClient, project: str) -> dict[str, Any]:
    response = await client.get(f"/v1/projects/{project}/board")
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def of_project(own: str) -> Callable[[Event], bool]:
    """The events of a project's board: its tasks' and its WIP limits'."""
    return lambda event: own in (event[1].get("project"), event[1].get("task", {}).get("project"))


def column(found: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in found["columns"] if c["column"] == name)


async def limit(
    client: httpx.AsyncClient, project: str, name: str, wip: int, mode: str = "strict"
) -> None:
    response = await client.put(
        f"/v1/projects/{project}/wip-limits/{name}", json={"limit": wip, "mode": mode}
    )
    assert response.status_code == 200, response.text


async def test_moves_walk_the_state_machine_and_the_board_follows(
    client: httpx.AsyncClient,
) -> None:
    atlas, ann = project(), unique("ann")
    task = await create_task(client, title="Write docs", project=atlas)
    other = await create_task(client, title="Elsewhere", project=project())
    found = await board(client, atlas)
    assert [c["column"] for c in found["columns"]] == [
        "backlog",
        "ready",
        "in_progress",
        "review",
        "done",
    ]
    assert [t["id"] for t in column(found, "backlog")["tasks"]] == [task["id"]]
    assert other["id"] not in str(found)

    # Backlog to in progress: through ready, which needs an assignee.
    nobody = assert_problem(
        await move(client, task["id"], "in_progress"), 409, "invalid_transition"
    )
    assert "needs an assignee" in nobody["detail"]
    moved = await move(client, task["id"], "in_progress", assigned_to=ann, reason="go")
    assert moved.status_code == 200, moved.text
    assert (moved.json()["status"], moved.json()["version"]) == ("in_progress", 3)
    trail = (await client.get(f"/v1/tasks/{task['id']}/transitions")).json()
    assert [(t["from_status"], t["to_status"], t["reason"]) for t in trail] == [
        (None, "created", "created"),
        ("created", "assigned", "go"),
        ("assigned", "in_progress", "go"),
    ]
    found = await board(client, atlas)
    assert (column(found, "backlog")["count"], column(found, "in_progress")["count"]) == (0, 1)

    for name, status in (("review", "in_review"), ("in_progress", "in_progress")):
        response = await move(client, task["id"], name)
        assert response.json()["status"] == status, response.text
    assert (await move(client, task["id"], "done")).json()["status"] == "completed"
    # Done is final; a move to the column it is in says so.
    refused = assert_problem(await move(client, task["id"], "backlog"), 409, "invalid_transition")
    assert refused["allowed"] == []
    same = assert_problem(await move(client, task["id"], "done"), 409, "invalid_transition")
    assert "in that column" in same["detail"]
    assert_problem(await move(client, "task_none", "done"), 404, "not_found")
    assert_problem(await move(client, task["id"], "nowhere"), 422, "validation_error")

    blocked = await create_task(client, title="Waiting", project=atlas, assigned_to=unique("bob"))
    await client.post(f"/v1/tasks/{blocked['id']}/transitions", json={"to": "blocked"})
    found = await board(client, atlas)
    assert [t["id"] for t in found["off_board"]] == [blocked["id"]]
    assert column(found, "done")["count"] == 1


async def test_a_stale_version_moves_nothing(client: httpx.AsyncClient) -> None:
    task = await create_task(client, title="T", project=project(), assigned_to=unique("ann"))
    stale = await move(client, task["id"], "review", expected_version=task["version"] + 1)
    assert_problem(stale, 409, "version_conflict")
    after = (await client.get(f"/v1/tasks/{task['id']}")).json()
    assert (after["status"], after["version"]) == ("assigned", task["version"])


@pytest.mark.parametrize("mode", ["strict", "advisory"])
async def test_fifty_racing_moves_into_a_limited_column(
    client: httpx.AsyncClient, db_engine: AsyncEngine, mode: str
) -> None:
    race, ann = project(), unique("ann")
    since = await tasks_stream_end(db_engine)
    tasks = [
        await create_task(client, title=f"T{i}", project=race, assigned_to=ann) for i in range(50)
    ]
    await limit(client, race, "in_progress", 3, mode)
    answers = await asyncio.gather(*(move(client, t["id"], "in_progress") for t in tasks))
    moved = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code != 200]
    found = await board(client, race)
    if mode == "strict":
        assert (len(moved), column(found, "in_progress")["count"]) == (3, 3)
        for answer in refused:
            problem = assert_problem(answer, 409, "wip_limit_reached")
            assert (problem["column"], problem["wip_limit"], problem["count"]) == (
                "in_progress",
                3,
                3,
            )
        assert column(found, "in_progress")["wip_limit"] == {"limit": 3, "mode": "strict"}
    else:
        assert (len(moved), column(found, "in_progress")["count"]) == (50, 50)
        # The limit set, 50 creates, 50 moves, and a note for each move past the limit.
        events = await task_events(client, since, of_project(race), 1 + 50 + 50 + 47)
        kinds = [kind for kind, _ in events]
        assert kinds.count("board.wip_limit_changed") == 1
        assert kinds.count("task.wip_limit_exceeded") == 47
        assert kinds.count("task.transitioned") == 50


async def test_a_transition_made_any_other_way_counts(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    atlas, ann = project(), unique("ann")
    since = await tasks_stream_end(db_engine)
    first = await create_task(client, title="A", project=atlas, assigned_to=ann)
    second = await create_task(client, title="B", project=atlas, assigned_to=ann)
    await limit(client, atlas, "review", 1)
    for task in (first, second):
        await client.post(f"/v1/tasks/{task['id']}/transitions", json={"to": "in_progress"})
    to_review = {"to": "in_review"}
    done = await client.post(f"/v1/tasks/{first['id']}/transitions", json=to_review)
    assert done.status_code == 200, done.text
    problem = assert_problem(
        await client.post(f"/v1/tasks/{second['id']}/transitions", json=to_review),
        409,
        "wip_limit_reached",
    )
    assert problem["column"] == "review"
    # A new task straight into a full column is refused too.
    await limit(client, atlas, "ready", 2)
    ready = {"title": "C", "project": atlas, "assigned_to": unique("x")}
    for _ in range(2):
        assert (await client.post("/v1/tasks", json=ready)).status_code == 201
    assert_problem(await client.post("/v1/tasks", json=ready), 409, "wip_limit_reached")
    assert (await client.get(f"/v1/projects/{atlas}/wip-limits")).json() == [
        {"limit": 2, "mode": "strict", "project": atlas, "column": "ready"},
        {"limit": 1, "mode": "strict", "project": atlas, "column": "review"},
    ]
    assert (await client.delete(f"/v1/projects/{atlas}/wip-limits/review")).status_code == 204
    gone = await client.delete(f"/v1/projects/{atlas}/wip-limits/review")
    assert_problem(gone, 404, "not_found")
    # Each change of a limit is on the board's stream (the tasks'), once.
    changes = [
        (data["column"], data["limit"], data["mode"], data["actor"])
        for kind, data in await task_events(client, since, of_project(atlas), 10)
        if kind == "board.wip_limit_changed"
    ]
    assert changes == [
        ("review", 1, "strict", "local"),
        ("ready", 2, "strict", "local"),
        ("review", None, None, "local"),
    ]
    retried = await client.post(f"/v1/tasks/{second['id']}/transitions", json=to_review)
    assert retried.status_code == 200, retried.text


async def test_a_full_in_progress_column_holds_runs_back_until_it_has_room(
    client: httpx.AsyncClient,
) -> None:
    agent = (await make_agent(client, max_concurrent_tasks=5))["id"]
    atlas = project()
    await limit(client, atlas, "in_progress", 1)
    first = await create_task(client, title="A", project=atlas, assigned_to=agent)
    second = await create_task(client, title="B", project=atlas, assigned_to=agent)

    async def status(task_id: str) -> str:
        return str((await client.get(f"/v1/tasks/{task_id}")).json()["status"])

    for _ in range(TIMEOUT_S * 10):  # the first runs and waits for its review
        if await status(first["id"]) == "in_review":
            break
        await asyncio.sleep(0.1)
    # The first left in_progress for review: the second was pulled in and ran.
    for _ in range(TIMEOUT_S * 10):
        if await status(second["id"]) == "in_review":
            break
        await asyncio.sleep(0.1)
    trails = {
        t["id"]: (await client.get(f"/v1/tasks/{t['id']}/transitions")).json()
        for t in (first, second)
    }
    started = {
        task_id: next(s["at"] for s in trail if s["to_status"] == "in_progress")
        for task_id, trail in trails.items()
    }
    left = next(s["at"] for s in trails[first["id"]] if s["to_status"] == "in_review")
    assert started[second["id"]] >= left  # never two in progress at once
    runs = (await client.get("/v1/runs", params={"lane": f"task:{second['id']}"})).json()
    assert len(runs["items"]) == 1


async def test_an_agile_board_shows_the_active_sprints_tasks(client: httpx.AsyncClient) -> None:
    atlas = project()
    inside = await create_task(client, title="In the sprint", project=atlas)
    outside = await create_task(client, title="Not in it", project=atlas)
    assert_problem(
        await client.get(f"/v1/projects/{atlas}/board", params={"sprint": "active"}),
        404,
        "not_found",
    )
    sprint = (
        await client.post(
            "/v1/sprints",
            json={
                "project": atlas,
                "name": "S1",
                "goal": "ship",
                "start_date": "2026-11-30",
                "end_date": "2026-12-11",
            },
        )
    ).json()
    joined = await client.post(
        f"/v1/sprints/{sprint['id']}/tasks",
        json={"tasks": [{"task_id": inside["id"], "story_points": 5}]},
    )
    assert joined.status_code == 200, joined.text
    started = await client.post(
        f"/v1/sprints/{sprint['id']}/transitions",
        json={"to": "active"},
        headers={"If-Match": f'"{joined.json()["version"]}"'},
    )
    assert started.status_code == 200, started.text
    found = (await client.get(f"/v1/projects/{atlas}/board", params={"sprint": "active"})).json()
    assert (found["sprint"]["id"], found["sprint"]["committed_points"]) == (sprint["id"], 5)
    assert [t["id"] for c in found["columns"] for t in c["tasks"]] == [inside["id"]]
    whole = await board(client, atlas)
    assert {t["id"] for c in whole["columns"] for t in c["tasks"]} == {inside["id"], outside["id"]}
    assert whole["sprint"] is None
    assert_problem(
        await client.get(f"/v1/projects/{project()}/board", params={"sprint": sprint["id"]}),
        404,
        "not_found",
    )


async def test_a_project_named_with_a_slash_has_its_board(client: httpx.AsyncClient) -> None:
    atlas = project()
    nested, encoded = f"team/{atlas}", f"team%2F{atlas}"
    task = await create_task(client, title="Nested", project=nested)
    await create_task(client, title="Not this one", project=atlas)
    for path in (encoded, nested):  # encoded as clients do, or not
        found = await board(client, path)
        assert found["project"] == nested
        assert [t["id"] for t in column(found, "backlog")["tasks"]] == [task["id"]]
    await limit(client, encoded, "backlog", 1)
    limits = await client.get(f"/v1/projects/{encoded}/wip-limits")
    assert [(w["project"], w["column"]) for w in limits.json()] == [(nested, "backlog")]
    assert (await client.get(f"/v1/projects/{atlas}/wip-limits")).json() == []
    velocity = await client.get(f"/v1/projects/{encoded}/velocity")
    assert velocity.status_code == 200, velocity.text
    assert velocity.json()["project"] == nested
    page = await client.get(f"/ui/projects/{encoded}/board")
    assert page.status_code == 200, page.text
    assert f"Board of {nested}" in page.text
