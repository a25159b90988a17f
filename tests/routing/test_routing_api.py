"""Routing through real HTTP: `POST /v1/tasks/{id}/route`, thirty routes racing for six
places, an unroutable task staying `created` with its event, a workflow's agent
assignment routing its tasks, agents' reporting lines, reviewers who alone may decide,
and `loopwright tasks route`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.core.streams import TASK_STREAM
from app.events import store as event_store
from tests.approvals.test_approvals_api import requested
from tests.support.api import assert_problem
from tests.support.cli import cli
from tests.support.factories import (
    agent_body,
    create_task,
    create_workflow,
    make_agent,
    project,
    unique,
)
from tests.support.server import make_settings, running_server
from tests.support.sse import SseMessage, SseReader, own_events
from tests.workflows.test_workflow_executions_api import activate

Event = tuple[str, dict[str, Any]]


async def agent(client: httpx.AsyncClient, name: str, **fields: Any) -> str:
    """A scripted agent named `name` (a name of the test's own on a shared server): its id."""
    return str((await make_agent(client, name=name, **fields))["id"])


async def route(client: httpx.AsyncClient, task_id: str, **body: Any) -> httpx.Response:
    return await client.post(f"/v1/tasks/{task_id}/route", json=body)


async def tasks_stream_end(engine: AsyncEngine) -> int:
    """The last event of the tasks stream now: a test reads its own events after it (the
    shared database's stream holds other tests' events before them)."""
    async with AsyncSession(engine) as session:
        return await event_store.last_seq(session, TASK_STREAM)


def of_tasks(ids: set[str]) -> Callable[[Event], bool]:
    return lambda event: event[1].get("task", {}).get("id") in ids


async def task_events(
    client: httpx.AsyncClient, since: int, mine: Callable[[Event], bool], count: int
) -> list[Event]:
    """The first `count` events of the tasks stream after `since` that are the test's own
    (`mine`), each checked against the docs."""
    messages = await own_events(
        client, "/v1/tasks/events", since, lambda m: mine((str(m.event), m.data)), count
    )
    return [(str(m.event), m.data) for m in messages]


async def routed(client: httpx.AsyncClient, task_id: str, since: int) -> dict[str, Any]:
    """The task once routing assigned it, read from the tasks stream after `since`."""

    def assigned(m: SseMessage) -> bool:
        task = m.data["task"]
        return bool(task["id"] == task_id and m.data.get("strategy") and task["assigned_to"])

    [message] = await own_events(client, "/v1/tasks/events", since, assigned, 1)
    task: dict[str, Any] = message.data["task"]
    return task


async def routing_failures(client: httpx.AsyncClient, tasks: set[str], since: int) -> set[str]:
    """Read the tasks stream after `since` until each of `tasks` has had its
    `task.routing_failed`; the failures of the test's tasks (any other task's are not)."""
    failed: set[str] = set()
    async with (
        asyncio.timeout(20),
        client.stream("GET", "/v1/tasks/events", params={"last_event_id": since}) as stream,
    ):
        reader = SseReader(stream)
        while not tasks <= failed:
            [message] = await reader.take(1)
            if message.event == "task.routing_failed" and message.data["task"]["id"] in tasks:
                failed.add(message.data["task"]["id"])
    return failed


async def test_a_task_is_routed_through_the_api(client: httpx.AsyncClient) -> None:
    writer, sql = unique("writer"), unique("sql")  # routing looks at every agent
    await agent(client, unique("writer-1"), role=writer, skills=["prose"], max_concurrent_tasks=2)
    chosen = await agent(client, unique("writer-2"), role=writer, skills=["prose", sql])
    task = await create_task(client, title="Query and write up")
    response = await route(client, task["id"], strategy="role_based", role=writer, skills=[sql])
    assert response.status_code == 200, response.text
    routed = response.json()
    assert (routed["status"], routed["assigned_to"]) == ("assigned", chosen)
    assert response.headers["ETag"] == f'"{routed["version"]}"'
    again = await route(client, task["id"], strategy="role_based", role=writer)
    problem = assert_problem(again, 409, "invalid_transition")
    assert problem["current"] != "created"  # its run may have started
    assert_problem(await route(client, "task_nope", strategy="manual"), 404, "not_found")
    assert_problem(await route(client, task["id"], strategy="by_vibes"), 422, "validation_error")


async def test_thirty_routes_at_once_never_put_an_agent_over_its_capacity(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    # Of a role of the test's own: the shared server's other agents are no candidates.
    worker, own = unique("worker"), project()
    agents = [
        await agent(client, unique(f"worker-{i}"), role=worker, max_concurrent_tasks=2)
        for i in range(3)
    ]
    tasks = [await create_task(client, title=f"job {i}", project=own) for i in range(30)]
    since = await tasks_stream_end(db_engine)
    responses = await asyncio.gather(
        *(route(client, t["id"], strategy="load_balanced", role=worker) for t in tasks)
    )
    routed = [r.json() for r in responses if r.status_code == 200]
    refused = [assert_problem(r, 409, "unroutable") for r in responses if r.status_code != 200]
    assert len(routed) == 6 and len(refused) == 24
    assert {p["reason"] for p in refused} == {
        f"every agent of role {worker!r} is at capacity (3 of them)"
    }
    assert {p["strategy"] for p in refused} == {"load_balanced"}
    listed = (await client.get("/v1/tasks", params={"project": own, "limit": 200})).json()["items"]
    held = {a: sum(t["assigned_to"] == a for t in listed) for a in agents}
    assert held == dict.fromkeys(agents, 2)
    waiting = {t["id"] for t in listed if t["status"] == "created"}
    assert len(waiting) == 24
    assert await routing_failures(client, waiting, since) == waiting


async def test_an_unroutable_task_stays_created_with_the_reason(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    engineer = unique("engineer")  # a role no agent has, on any test's part
    await agent(client, unique("designer"), role=unique("designer"))
    since = await tasks_stream_end(db_engine)
    task = await create_task(client, title="Write the API")
    response = await route(client, task["id"], strategy="role_based", role=engineer)
    problem = assert_problem(response, 409, "unroutable")
    assert problem["reason"] == f"no agent is of role {engineer!r}"
    assert (await client.get(f"/v1/tasks/{task['id']}")).json()["status"] == "created"
    [created, failed] = await task_events(client, since, of_tasks({task["id"]}), 2)
    assert created[0] == "task.created"
    assert failed[0] == "task.routing_failed"
    assert failed[1]["reason"] == f"no agent is of role {engineer!r}"
    assert (failed[1]["strategy"], failed[1]["task"]["status"]) == ("role_based", "created")


async def test_a_task_created_with_routing_is_routed_and_may_not_name_an_assignee(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    sorter = unique("sorter")  # the cheapest of the test's own agents, not of the server's
    model = {"provider": "scripted", "name": "cheap", "script": [{"text": "done"}]}
    cheap = await agent(client, unique("cheap"), role=sorter, model=model, cost_tier="low")
    await agent(client, unique("dear"), role=sorter, cost_tier="high")
    since = await tasks_stream_end(db_engine)
    routing = {"strategy": "cost_optimised", "role": sorter}
    task = await create_task(client, title="Sort it", routing=routing)
    assert (await routed(client, task["id"], since))["assigned_to"] == cheap
    both = await client.post(
        "/v1/tasks",
        json={"title": "x", "assigned_to": unique("ann"), "routing": {"strategy": "auction"}},
    )
    assert_problem(both, 422, "validation_error")


async def test_a_workflow_assignment_routes_its_tasks_once_they_are_ready(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    role = unique("writer")
    writer = await agent(client, unique("writer"), role=role, max_concurrent_tasks=1)
    await agent(client, unique("editor"), role=unique("editor"))
    since = await tasks_stream_end(db_engine)
    workflow = await create_workflow(
        client,
        **{
            "name": "Routed",
            "nodes": [
                {"id": "s", "type": "start"},
                {
                    "id": "who",
                    "type": "agent_assignment",
                    "config": {"strategy": "role_based", "role": role},
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
    assert (await routed(client, draft, since))["assigned_to"] == writer
    waiting = (await client.get(f"/v1/tasks/{polish}")).json()
    assert (waiting["status"], waiting["assigned_to"]) == ("created", None)
    assert waiting["routing"] == {
        "strategy": "role_based",
        "role": role,
        "skills": [],
        "agent": None,
    }
    node = {"id": "w", "type": "agent_assignment", "config": {"strategy": "by_vibes"}}
    bad = await client.post("/v1/workflows", json={"name": "Bad", "nodes": [node]})
    assert_problem(bad, 422, "validation_error")


async def test_reporting_lines_name_real_agents_and_never_loop(client: httpx.AsyncClient) -> None:
    lead_name = unique("lead")
    lead = await agent(client, lead_name)
    dev = await agent(client, unique("dev"), reports_to=lead)
    unknown = await client.post(
        "/v1/agents", json=agent_body(name=unique("x"), reports_to="agt_nobody")
    )
    problem = assert_problem(unknown, 422, "validation_error")
    assert problem["errors"][0]["field"] == "body.reports_to"
    looping = await client.patch(f"/v1/agents/{lead}", json={"reports_to": dev})
    problem = assert_problem(looping, 422, "validation_error")
    assert lead_name not in problem["errors"][0]["message"]  # ids, as stored
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
    task = await create_task(client, title="Check the numbers", assigned_to=unique("ann"))
    for status in ("in_progress", "in_review"):  # a person's task, worked and handed in
        moved = await client.post(f"/v1/tasks/{task['id']}/transitions", json={"to": status})
        assert moved.status_code == 200, moved.text
    await client.patch(f"/v1/tasks/{task['id']}", json={"reviewers": ["key-3"]})
    review = await requested(client, task["id"])
    approved = await client.post(f"/v1/approvals/{review['id']}/approve", json={})
    assert approved.status_code == 200, approved.text


async def test_tasks_are_routed_and_listed_from_the_command_line(
    client: httpx.AsyncClient, base_url: str
) -> None:
    engineer = unique("engineer")
    lead = await agent(client, unique("lead"), role=engineer, max_concurrent_tasks=1)
    await agent(client, unique("dev"), role=engineer, reports_to=lead)
    fix, review = unique("Fix the build"), unique("Review the docs")
    task = await create_task(client, title=fix)
    usage = await cli(base_url, "tasks", "route", task["id"])
    assert usage.code == 2 and "--strategy" in usage.err
    routed = await cli(
        base_url, "tasks", "route", task["id"], "--strategy", "hierarchical", "--role", engineer
    )
    assert routed.code == 0, routed
    assert routed.out.strip().startswith(f"task {task['id']}: assigned to agent_")
    assert f"(via {lead} → " in routed.out
    other = await create_task(client, title=review)
    nobody = unique("nobody")
    refused = await cli(
        base_url, "tasks", "route", other["id"], "--strategy", "manual", "--agent", nobody
    )
    assert refused.code == 6 and nobody in refused.err
    listed = await cli(base_url, "tasks", "--status", "created")
    assert listed.code == 0, listed
    assert review in listed.out and fix not in listed.out
