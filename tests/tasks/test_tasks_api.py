"""The tasks API through real HTTP: create, read, list, update, transition, cancel, delete."""

from __future__ import annotations

import asyncio

import httpx

from tests.support.api import assert_problem
from tests.support.factories import create_task, project, unique


async def test_create_returns_the_task_with_location_and_etag(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/tasks",
        json={
            "title": "Implement user authentication API",
            "description": "Create REST endpoints for login",
            "type": "development",
            "priority": "high",
            "project": project(),
            "created_by": "product_manager_1",
            "assigned_to": unique("sarah_chen"),
            "reviewers": ["engineering_lead"],
            "dependencies": ["task-120"],
            "artifacts_expected": [{"type": "code", "path": "src/auth/"}],
            "acceptance_criteria": ["JWT-based auth"],
            "estimated_complexity": "medium",
            "task_structure": "parallel",
            "coordination_topology": "auto",
            "budget_limit": 2.0,
            "max_retries": 1,
            "delegation_chain": ["ceo"],
        },
    )
    assert response.status_code == 201, response.text
    task = response.json()
    assert task["status"] == "assigned"  # an assignee was given
    assert task["version"] == 1 and task["retry_count"] == 0
    assert task["created_by"] == "product_manager_1"
    assert task["artifacts_expected"] == [{"type": "code", "path": "src/auth/"}]
    assert response.headers["etag"] == '"1"'
    assert response.headers["location"].endswith(f"/v1/tasks/{task['id']}")

    fetched = await client.get(f"/v1/tasks/{task['id']}")
    assert fetched.status_code == 200
    assert fetched.json() == task
    assert fetched.headers["etag"] == '"1"'


async def test_a_task_without_assignee_starts_created_by_the_caller(
    client: httpx.AsyncClient,
) -> None:
    task = await create_task(client)
    assert task["status"] == "created"
    assert task["created_by"] == "local"


async def test_list_filters_and_pages_with_a_cursor(client: httpx.AsyncClient) -> None:
    # Three projects of this test's own; every list is read through them.
    p1, p2, p3 = project(), project(), project()
    made = [
        await create_task(client, title=f"t{i}", project=p1 if i % 2 else p2, priority="low")
        for i in range(7)
    ]
    bob = unique("bob")
    await create_task(client, title="other", project=p3, assigned_to=bob, priority="high")

    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, str | int] = {"project": p1, "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get("/v1/tasks", params=params)).json()
        seen += [t["id"] for t in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [t["id"] for t in made if t["project"] == p1]

    async def titles(**params: str | int) -> list[str]:
        pages = [
            (await client.get("/v1/tasks", params={**params, "project": p})).json()
            for p in (p1, p2, p3)
        ]
        assert all(page["next_cursor"] is None for page in pages)
        return [t["title"] for page in pages for t in page["items"]]

    assert await titles(status="assigned") == ["other"]
    by_person = (await client.get("/v1/tasks", params={"assigned_to": bob})).json()
    assert [t["title"] for t in by_person["items"]] == ["other"]
    assert len(await titles(priority="low", limit=200)) == 7


async def test_patch_with_if_match_bumps_the_version(client: httpx.AsyncClient) -> None:
    task = await create_task(client)
    response = await client.patch(
        f"/v1/tasks/{task['id']}",
        json={"title": "renamed", "reviewers": ["ann"]},
        headers={"If-Match": '"1"'},
    )
    assert response.status_code == 200, response.text
    assert response.json()["title"] == "renamed"
    assert response.json()["reviewers"] == ["ann"]
    assert response.json()["version"] == 2
    assert response.headers["etag"] == '"2"'

    stale = await client.patch(
        f"/v1/tasks/{task['id']}", json={"title": "again"}, headers={"If-Match": '"1"'}
    )
    problem = assert_problem(stale, 409, "version_conflict")
    assert problem["expected_version"] == 1 and problem["current_version"] == 2


async def test_fifty_concurrent_patches_with_one_version_let_exactly_one_win(
    client: httpx.AsyncClient,
) -> None:
    task = await create_task(client)
    responses = await asyncio.gather(
        *(
            client.patch(
                f"/v1/tasks/{task['id']}",
                json={"description": f"writer {i}"},
                headers={"If-Match": '"1"'},
            )
            for i in range(50)
        )
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [409] * 49
    for response in responses:
        if response.status_code == 409:
            assert assert_problem(response, 409, "version_conflict")["current_version"] == 2
    winner = next(r.json() for r in responses if r.status_code == 200)
    stored = (await client.get(f"/v1/tasks/{task['id']}")).json()
    assert stored["version"] == 2 and stored["description"] == winner["description"]


async def test_immutable_fields_are_refused_by_name(client: httpx.AsyncClient) -> None:
    task = await create_task(client)
    for field, value in [("id", "task_x"), ("status", "completed"), ("created_by", "eve")]:
        response = await client.patch(f"/v1/tasks/{task['id']}", json={field: value})
        problem = assert_problem(response, 422, "validation_error")
        assert problem["errors"][0]["field"] == field
        assert "immutable" in problem["errors"][0]["message"]
    unchanged = (await client.get(f"/v1/tasks/{task['id']}")).json()
    assert unchanged == task


async def test_transitions_follow_the_state_machine_and_are_audited(
    client: httpx.AsyncClient,
) -> None:
    task = await create_task(client, max_retries=1)
    path = f"/v1/tasks/{task['id']}/transitions"

    refused = await client.post(path, json={"to": "in_progress"})
    problem = assert_problem(refused, 409, "invalid_transition")
    assert problem["allowed"] == ["assigned"]

    ann = unique("ann")
    steps = [
        {"to": "assigned", "assigned_to": ann, "expected_version": 1, "reason": "triage"},
        {"to": "in_progress", "expected_version": 2},
        {"to": "failed", "reason": "tool crashed"},
        {"to": "assigned", "reason": "retry"},
    ]
    for step in steps:
        response = await client.post(path, json=step)
        assert response.status_code == 200, response.text
    current = response.json()
    assert current["status"] == "assigned" and current["assigned_to"] == ann
    assert current["retry_count"] == 1 and current["version"] == 5

    await client.post(path, json={"to": "in_progress"})
    await client.post(path, json={"to": "failed"})
    exhausted = await client.post(path, json={"to": "assigned"})
    problem = assert_problem(exhausted, 409, "invalid_transition")
    assert problem["allowed"] == [] and "retries exhausted" in problem["detail"]

    trail = (await client.get(f"/v1/tasks/{task['id']}/transitions")).json()
    assert [(t["from_status"], t["to_status"]) for t in trail] == [
        (None, "created"),
        ("created", "assigned"),
        ("assigned", "in_progress"),
        ("in_progress", "failed"),
        ("failed", "assigned"),
        ("assigned", "in_progress"),
        ("in_progress", "failed"),
    ]
    assert trail[1]["reason"] == "triage" and trail[1]["actor"] == "local"
    assert [t["task_version"] for t in trail] == [1, 2, 3, 4, 5, 6, 7]


async def test_stale_expected_version_on_a_transition_is_a_conflict(
    client: httpx.AsyncClient,
) -> None:
    task = await create_task(client, assigned_to=unique("ann"))
    response = await client.post(
        f"/v1/tasks/{task['id']}/transitions", json={"to": "in_progress", "expected_version": 9}
    )
    assert assert_problem(response, 409, "version_conflict")["current_version"] == 1


async def test_cancel_and_delete(client: httpx.AsyncClient) -> None:
    task = await create_task(client, assigned_to=unique("ann"))
    cancelled = await client.post(f"/v1/tasks/{task['id']}/cancel", json={"reason": "dup"})
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    again = await client.post(f"/v1/tasks/{task['id']}/cancel")
    assert assert_problem(again, 409, "invalid_transition")["allowed"] == []

    stale = await client.delete(f"/v1/tasks/{task['id']}", headers={"If-Match": '"1"'})
    assert_problem(stale, 409, "version_conflict")
    deleted = await client.delete(f"/v1/tasks/{task['id']}", headers={"If-Match": '"2"'})
    assert deleted.status_code == 204
    assert_problem(await client.get(f"/v1/tasks/{task['id']}"), 404, "not_found")
    assert_problem(await client.delete(f"/v1/tasks/{task['id']}"), 404, "not_found")


async def test_idempotency_key_replays_the_first_response(client: httpx.AsyncClient) -> None:
    mine = project()
    body = {"title": "exactly once", "project": mine}
    headers = {"Idempotency-Key": unique("create")}
    first = await client.post("/v1/tasks", json=body, headers=headers)
    again = await client.post("/v1/tasks", json=body, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    listed = (await client.get("/v1/tasks", params={"project": mine})).json()
    assert len(listed["items"]) == 1

    other = await client.post("/v1/tasks", json={**body, "title": "else"}, headers=headers)
    assert_problem(other, 409, "idempotency_key_reused")
    racing = {"Idempotency-Key": unique("k2")}
    concurrent = await asyncio.gather(
        *(client.post("/v1/tasks", json=body, headers=racing) for _ in range(10))
    )
    assert len({r.json()["id"] for r in concurrent}) == 1
