"""Routing through real HTTP: `POST /v1/tasks/{id}/route`, thirty routes racing for six
places, an unroutable task staying `created` with its event, a workflow's agent
assignment routing its tasks, agents' reporting lines, reviewers who alone may decide,
and `loopwright tasks route`."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api.test_approvals_api import in_review, requested
from tests.api.test_runs_api import make_agent
from tests.api.test_workflow_executions_api import activate
from tests.api.test_workflows_api import create as create_workflow
from tests.support.api import assert_problem
from tests.support.cli import cli
from tests.support.factories import create_task
from tests.support.server import make_settings, running_server
from tests.support.sse import SseReader

pytestmark = pytest.mark.own_server  # SHARED-TODO: names, projects or lists shared with other tests

SCRIPT = {"provider": "scripted", "name": "s", "script": [{"text": "done"}]}


async def agent(client: httpx.AsyncClient, name: str, **fields: Any) -> str:
    return await make_agent(client, {"name": name, "model": SCRIPT, **fields})


async def route(client: httpx.AsyncClient, task_id: str, **body: Any) -> httpx.Response:
    return await client.post(f"/v1/tasks/{task_id}/route", json=body)


async def task_events(client: httpx.AsyncClient, count: int) -> list[tuple[str, dict[str, Any]]]:
    """The first `count` events of the tasks stream (each checked against the docs)."""
    async with (
        asyncio.timeout(20),
        client.stream("GET", "/v1/tasks/events", params={"last_event_id": 0}) as stream,
    ):
        messages = await SseReader(stream).take(count)
    return [(str(m.event), m.data) for m in messages]


async def routed(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    """The task once routing assigned it, read from the tasks stream."""
    async with (
        asyncio.timeout(20),
        client.stream("GET", "/v1/tasks/events", params={"last_event_id": 0}) as stream,
    ):
        reader = SseReader(stream)
        while True:
            [message] = await reader.take(1)
            task: dict[str, Any] = message.data["task"]
            if task["id"] == task_id and message.data.get("strategy") and task["assigned_to"]:
                return task


async def routing_failures(client: httpx.AsyncClient, tasks: set[str]) -> set[str]:
    """Read the tasks stream until each of `tasks` has had its `task.routing_failed`."""
    failed: set[str] = set()
    async with (
        asyncio.timeout(20),
        client.stream("GET", "/v1/tasks/events", params={"last_event_id": 0}) as stream,
    ):
        reader = SseReader(stream)
        while not tasks <= failed:
            [message] = await reader.take(1)
            if message.event == "task.routing_failed":
                failed.add(message.data["task"]["id"])
    return failed


async def test_a_task_is_routed_through_the_api(client: httpx.AsyncClient) -> None:
    await agent(client, "writer-1", role="writer", skills=["prose"], max_concurrent_tasks=2)
    chosen = await agent(client, "writer-2", role="writer", skills=["prose", "sql"])
    task = await create_task(client, title="Query and write up")
    response = await route(client, task["id"], strategy="role_based", role="writer", skills=["sql"])
    assert response.status_code == 200, response.text
    routed = response.json()
    assert (routed["status"], routed["assigned_to"]) == ("assigned", chosen)
    assert response.headers["ETag"] == f'"{routed["version"]}"'
    again = await route(client, task["id"], strategy="role_based", role="writer")
    problem = assert_problem(again, 409, "invalid_transition")
    assert problem["current"] != "created"  # its run may have started
    assert_problem(await route(client, "task_nope", strategy="manual"), 404, "not_found")
    assert_problem(await route(client, task["id"], strategy="by_vibes"), 422, "validation_error")


async def test_thirty_routes_at_once_never_put_an_agent_over_its_capacity(
    client: httpx.AsyncClient,
) -> None:
    agents = [await agent(client, f"worker-{i}", max_concurrent_tasks=2) for i in range(3)]
    tasks = [await create_task(client, title=f"job {i}") for i in range(30)]
    responses = await asyncio.gather(
        *(route(client, t["id"], strategy="load_balanced") for t in tasks)
    )
    routed = [r.json() for r in responses if r.status_code == 200]
    refused = [assert_problem(r, 409, "unroutable") for r in responses if r.status_code != 200]
    assert len(routed) == 6 and len(refused) == 24
    assert {p["reason"] for p in refused} == {"every agent available is at capacity (3 of them)"}
    assert {p["strategy"] for p in refused} == {"load_balanced"}
    listed = (await client.get("/v1/tasks", params={"limit": 200})).json()["items"]
    held = {a: sum(t["assigned_to"] == a for t in listed) for a in agents}
    assert held == dict.fromkeys(agents, 2)
    waiting = {t["id"] for t in listed if t["status"] == "created"}
    assert len(waiting) == 24
    assert await routing_failures(client, waiting) == waiting


async def test_an_unroutable_task_stays_created_with_the_reason(
    client: httpx.AsyncClient,
) -> None:
    await agent(client, "designer", role="designer")
    task = await create_task(client, title="Write the API")
    response = await route(client, task["id"], strategy="role_based", role="engineer")
    problem = assert_problem(response, 409, "unroutable")
    assert problem["reason"] == "no agent is of role 'engineer'"
    assert (await client.get(f"/v1/tasks/{task['id']}")).json()["status"] == "created"
    [created, failed] = await task_events(client, 2)
    assert created[0] == "task.created"
    assert failed[0] == "task.routing_failed"
    assert failed[1]["reason"] == "no agent is of role 'engineer'"
    assert (failed[1]["strategy"], failed[1]["task"]["status"]) == ("role_based", "created")


async def test_a_task_created_with_routing_is_routed_and_may_not_name_an_assignee(
    client: httpx.AsyncClient,
) -> None:
    cheap = await agent(client, "cheap", model={**SCRIPT, "name": "cheap"}, cost_tier="low")
    await agent(client, "dear", cost_tier="high")
    task = await create_task(client, title="Sort it", routing={"strategy": "cost_optimised"})
    assert (await routed(client, task["id"]))["assigned_to"] == cheap
    both = await client.post(
        "/v1/tasks",
        json={"title": "x", "assigned_to": "ann", "routing": {"strategy": "auction"}},
    )
    assert_problem(both, 422, "validation_error")


async def test_a_workflow_assignment_routes_its_tasks_once_they_are_ready(
    client: httpx.AsyncClient,
) -> None:
    writer = await agent(client, "writer", role="writer", max_concurrent_tasks=1)
    await agent(client, "editor", role="editor")
    workflow = await create_workflow(
        client,
        {
            "name": "Routed",
            "nodes": [
                {"id": "s", "type": "start"},
                {
                    "id": "who",
                    "type": "agent_assignment",
                    "config": {"strategy": "role_based", "role": "writer"},
                },
                {"id": "draft", "type": "task", "config": {"title": "Draft"}},
                {"id": "polish", "type": "task", "config": {"title": "Polish"}},
                {"id": "e", "type": "end"},
            ],
            "edges": [
                {"id": "e1", "source": "s", "target": "who"},
                {"id": "e2", "source": "who", "target": "draft"},
                {"id": "e3", "source": "draft", "target": "polish"},
                {"id": "e4", "source": "polish", "target": "e"},
            ],
        },
    )
    execution = await activate(client, workflow["id"])
    draft, polish = execution["node_tasks"]["draft"], execution["node_tasks"]["polish"]
    assert (await routed(client, draft))["assigned_to"] == writer
    waiting = (await client.get(f"/v1/tasks/{polish}")).json()
    assert (waiting["status"], waiting["assigned_to"]) == ("created", None)
    assert waiting["routing"] == {
        "strategy": "role_based",
        "role": "writer",
        "skills": [],
        "agent": None,
    }
    node = {"id": "w", "type": "agent_assignment", "config": {"strategy": "by_vibes"}}
    bad = await client.post("/v1/workflows", json={"name": "Bad", "nodes": [node]})
    assert_problem(bad, 422, "validation_error")


async def test_reporting_lines_name_real_agents_and_never_loop(client: httpx.AsyncClient) -> None:
    lead = await agent(client, "lead")
    dev = await agent(client, "dev", reports_to=lead)
    unknown = await client.post(
        "/v1/agents", json={"name": "x", "model": SCRIPT, "reports_to": "agt_nobody"}
    )
    problem = assert_problem(unknown, 422, "validation_error")
    assert problem["errors"][0]["field"] == "body.reports_to"
    looping = await client.patch(f"/v1/agents/{lead}", json={"reports_to": dev})
    problem = assert_problem(looping, 422, "validation_error")
    assert "lead" not in problem["errors"][0]["message"]  # ids, as stored
    assert f"{lead} → {dev} → {lead}" in problem["errors"][0]["message"]
    itself = await client.patch(f"/v1/agents/{dev}", json={"reports_to": dev})
    assert_problem(itself, 422, "validation_error")
    cleared = await client.patch(f"/v1/agents/{dev}", json={"reports_to": None})
    assert cleared.status_code == 200 and cleared.json()["reports_to"] is None
    await client.patch(f"/v1/agents/{dev}", json={"reports_to": lead})
    assert (await client.delete(f"/v1/agents/{lead}")).status_code == 204
    assert (await client.get(f"/v1/agents/{dev}")).json()["reports_to"] is None


async def test_only_a_listed_reviewer_decides_a_review(
    database_url: str, clean_db: AsyncEngine
) -> None:
    settings = make_settings(database_url, auth={"api_keys": ["k-zero", "k-one"]})
    async with running_server(settings) as url:
        zero = httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer k-zero"})
        one = httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer k-one"})
        async with zero, one:
            task = await create_task(zero, title="Ship it", assigned_to="ann", reviewers=["key-1"])
            for status in ("in_progress", "in_review"):
                await zero.post(f"/v1/tasks/{task['id']}/transitions", json={"to": status})
            review = await requested(zero, task["id"])
            refused = await zero.post(f"/v1/approvals/{review['id']}/approve", json={})
            problem = assert_problem(refused, 403, "not_a_reviewer")
            assert problem["reviewers"] == ["key-1"]
            rejected = await zero.post(
                f"/v1/approvals/{review['id']}/reject", json={"reason": "no"}
            )
            assert_problem(rejected, 403, "not_a_reviewer")
            approved = await one.post(f"/v1/approvals/{review['id']}/approve", json={})
            assert approved.status_code == 200, approved.text
            assert approved.json()["decided_by"] == "key-1"


async def test_without_api_keys_the_operator_decides_any_review(
    client: httpx.AsyncClient,
) -> None:
    task = await in_review(client, "Check the numbers")
    await client.patch(f"/v1/tasks/{task['id']}", json={"reviewers": ["key-3"]})
    review = await requested(client, task["id"])
    approved = await client.post(f"/v1/approvals/{review['id']}/approve", json={})
    assert approved.status_code == 200, approved.text


async def test_tasks_are_routed_and_listed_from_the_command_line(
    client: httpx.AsyncClient, base_url: str
) -> None:
    lead = await agent(client, "lead", role="engineer", max_concurrent_tasks=1)
    await agent(client, "dev", role="engineer", reports_to=lead)
    task = await create_task(client, title="Fix the build")
    usage = await cli(base_url, "tasks", "route", task["id"])
    assert usage.code == 2 and "--strategy" in usage.err
    routed = await cli(
        base_url, "tasks", "route", task["id"], "--strategy", "hierarchical", "--role", "engineer"
    )
    assert routed.code == 0, routed
    assert routed.out.strip().startswith(f"task {task['id']}: assigned to agent_")
    assert f"(via {lead} → " in routed.out
    other = await create_task(client, title="Review the docs")
    refused = await cli(
        base_url, "tasks", "route", other["id"], "--strategy", "manual", "--agent", "nobody"
    )
    assert refused.code == 6 and "nobody" in refused.err
    listed = await cli(base_url, "tasks", "--status", "created")
    assert listed.code == 0, listed
    assert "Review the docs" in listed.out and "Fix the build" not in listed.out
