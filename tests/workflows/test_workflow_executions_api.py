"""Workflow executions through real HTTP: activation, branches, joins, tasks driven through
the task API moving their execution, cancel, and the execution's event stream."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from tests.support.api import assert_problem
from tests.support.factories import create_workflow, project, unique
from tests.support.sse import SseMessage, SseReader
from tests.workflows.test_workflows_api import diamond


def gated(ann: str | None = None, bob: str | None = None, **fields: Any) -> dict[str, Any]:
    """start -> who(ann) -> gate -(true)-> deploy -> notify -> end; gate -(false)-> hold.
    `ann` and `bob` are names of the test's own (an agent of that name would work them)."""
    ann, bob = ann or unique("ann"), bob or unique("bob")
    return {
        "name": "Gated",
        "nodes": [
            {"id": "s", "type": "start"},
            {"id": "who", "type": "agent_assignment", "config": {"agent_name": ann}},
            {
                "id": "gate",
                "type": "conditional",
                "config": {"condition_expression": "env == 'prod'"},
            },
            {"id": "deploy", "type": "task", "config": {"title": "Deploy", "max_retries": 1}},
            {"id": "hold", "type": "task", "config": {"title": "Hold", "assigned_to": bob}},
            {"id": "notify", "type": "task", "config": {"title": "Notify"}},
            {"id": "e", "type": "end"},
        ],
        "edges": [
            {"id": "e1", "source": "s", "target": "who"},
            {"id": "e2", "source": "who", "target": "gate"},
            {"id": "e3", "source": "gate", "target": "deploy", "type": "conditional_true"},
            {"id": "e4", "source": "gate", "target": "hold", "type": "conditional_false"},
            {"id": "e5", "source": "deploy", "target": "notify"},
            {"id": "e6", "source": "hold", "target": "notify"},
            {"id": "e7", "source": "notify", "target": "e"},
        ],
        **fields,
    }


async def activate(client: httpx.AsyncClient, workflow_id: str, **body: Any) -> dict[str, Any]:
    response = await client.post(f"/v1/workflow-executions/activate/{workflow_id}", json=body)
    assert response.status_code == 201, response.text
    execution: dict[str, Any] = response.json()
    return execution


async def task(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    body: dict[str, Any] = (await client.get(f"/v1/tasks/{task_id}")).json()
    return body


async def move(client: httpx.AsyncClient, task_id: str, *targets: str, **fields: Any) -> None:
    for target in targets:
        response = await client.post(
            f"/v1/tasks/{task_id}/transitions", json={"to": target, **fields}
        )
        assert response.status_code == 200, response.text


async def finish(client: httpx.AsyncClient, task_id: str) -> None:
    """Work a task to completion the way a person would, through the task API."""
    if (await task(client, task_id))["status"] == "created":
        await move(client, task_id, "assigned", assigned_to=unique("ann"))
    await move(client, task_id, "in_progress", "in_review", "completed")


async def follow(
    client: httpx.AsyncClient,
    stream_url: str,
    read: Callable[[], Awaitable[dict[str, Any]]],
    check: Callable[[dict[str, Any]], bool],
) -> dict[str, Any]:
    """`read()` again after each event of the stream until `check` holds: woken by the
    server's own events, never by a timer. The stream starts at its end when it opens (a
    shared stream holds other tests' events), before the first `read()`: nothing is missed."""
    async with client.stream("GET", stream_url) as stream:
        reader = SseReader(stream)
        while not check(current := await read()):
            await asyncio.wait_for(reader.take(1), 10)
    return current


async def until(
    client: httpx.AsyncClient, execution_id: str, check: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The execution once `check` holds for it."""

    async def read() -> dict[str, Any]:
        body: dict[str, Any] = (await client.get(f"/v1/workflow-executions/{execution_id}")).json()
        return body

    url = f"/v1/workflow-executions/{execution_id}/events"
    return await follow(client, url, read, check)


async def settled(client: httpx.AsyncClient, execution_id: str, status: str) -> dict[str, Any]:
    return await until(client, execution_id, lambda e: e["status"] == status)


def node_is(node_id: str, status: str) -> Callable[[dict[str, Any]], bool]:
    return lambda execution: bool(execution["node_status"][node_id] == status)


async def stream_events(client: httpx.AsyncClient, execution_id: str) -> list[SseMessage]:
    """Every event the stream holds, up to and including the one that ends the execution."""
    url = f"/v1/workflow-executions/{execution_id}/events"
    seen: list[SseMessage] = []
    async with client.stream("GET", url) as stream:
        reader = SseReader(stream)
        while not seen or seen[-1].event not in ENDINGS:
            [message] = await asyncio.wait_for(reader.take(1), 10)
            seen.append(message)
    return seen


async def tasks_of(client: httpx.AsyncClient, own: str) -> list[dict[str, Any]]:
    """The tasks of the test's own project."""
    response = await client.get("/v1/tasks", params={"project": own, "limit": 200})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


ENDINGS = {f"workflow.execution.{s}" for s in ("completed", "failed", "cancelled")}


async def test_activation_makes_the_tasks_with_their_dependencies(
    client: httpx.AsyncClient,
) -> None:
    workflow = await create_workflow(client, **diamond())
    own = project()
    response = await client.post(
        f"/v1/workflow-executions/activate/{workflow['id']}",
        json={"context": {"release": "1.2"}, "project": own},
    )
    assert response.status_code == 201, response.text
    execution = response.json()
    assert response.headers["location"].endswith(f"/v1/workflow-executions/{execution['id']}")
    assert execution["status"] == "running"
    assert execution["workflow_id"] == workflow["id"] and execution["workflow_version"] == 1
    assert execution["context"] == {"release": "1.2"}
    assert execution["node_status"] == {
        "s": "completed",
        "t1": "pending",
        "split": "completed",
        "t2": "pending",
        "t3": "pending",
        "join": "completed",
        "t4": "pending",
        "e": "completed",
    }
    ids = execution["node_tasks"]
    assert set(ids) == {"t1", "t2", "t3", "t4"}
    assert execution["ready_task_ids"] == [ids["t1"]]

    tasks = {node: await task(client, task_id) for node, task_id in ids.items()}
    assert {n: t["title"] for n, t in tasks.items()} == {n: f"do {n}" for n in ids}
    assert all(t["status"] == "created" and t["project"] == own for t in tasks.values())
    assert tasks["t1"]["dependencies"] == []
    assert tasks["t2"]["dependencies"] == tasks["t3"]["dependencies"] == [ids["t1"]]
    assert tasks["t4"]["dependencies"] == [ids["t2"], ids["t3"]]

    fetched = await client.get(f"/v1/workflow-executions/{execution['id']}")
    assert fetched.status_code == 200 and fetched.json() == execution
    second = await activate(client, workflow["id"])
    listed = (await client.get(f"/v1/workflow-executions/by-definition/{workflow['id']}")).json()
    assert [e["id"] for e in listed["items"]] == [execution["id"], second["id"]]


async def test_activation_refuses_an_invalid_or_missing_workflow(
    client: httpx.AsyncClient,
) -> None:
    own = project()
    draft = diamond(project=own)
    draft["edges"] = draft["edges"][:-1]  # the end is no longer reachable
    workflow = await create_workflow(client, **draft)
    response = await client.post(f"/v1/workflow-executions/activate/{workflow['id']}", json={})
    problem = assert_problem(response, 422, "workflow_invalid")
    assert {"field": "nodes[e]", "message": "node 'e': not reachable from start"} in problem[
        "errors"
    ]
    assert await tasks_of(client, own) == []

    missing = await client.post("/v1/workflow-executions/activate/wf_missing", json={})
    assert_problem(missing, 404, "not_found")
    assert_problem(await client.get("/v1/workflow-executions/wfx_missing"), 404, "not_found")


async def test_activation_with_an_idempotency_key_happens_once(client: httpx.AsyncClient) -> None:
    own = project()
    workflow = await create_workflow(client, **diamond(project=own))
    url = f"/v1/workflow-executions/activate/{workflow['id']}"
    headers = {"Idempotency-Key": unique("release-42")}
    first = await client.post(url, json={"context": {"a": 1}}, headers=headers)
    again = await client.post(url, json={"context": {"a": 1}}, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert len(await tasks_of(client, own)) == 4
    other = await client.post(url, json={"context": {"a": 2}}, headers=headers)
    assert_problem(other, 409, "idempotency_key_reused")
    elsewhere = await create_workflow(client, **diamond(name="Elsewhere"))
    moved = await client.post(
        f"/v1/workflow-executions/activate/{elsewhere['id']}",
        json={"context": {"a": 1}},
        headers=headers,
    )
    assert_problem(moved, 409, "idempotency_key_reused")


async def test_activations_racing_with_one_key_make_one_execution(
    client: httpx.AsyncClient,
) -> None:
    own = project()
    workflow = await create_workflow(client, **diamond(project=own))
    url = f"/v1/workflow-executions/activate/{workflow['id']}"
    headers = {"Idempotency-Key": unique("race")}
    answers = await asyncio.gather(
        *(client.post(url, json={"context": {"a": 1}}, headers=headers) for _ in range(6))
    )
    assert [r.status_code for r in answers] == [201] * 6, [r.text for r in answers]
    assert len({r.json()["id"] for r in answers}) == 1
    assert sum("idempotent-replayed" not in r.headers for r in answers) == 1
    assert len(await tasks_of(client, own)) == 4


@pytest.mark.parametrize(
    ("env", "taken", "skipped"), [("prod", "deploy", "hold"), ("dev", "hold", "deploy")]
)
async def test_a_conditional_branch_is_taken_and_the_other_skipped(
    client: httpx.AsyncClient, env: str, taken: str, skipped: str
) -> None:
    ann, bob = unique("ann"), unique("bob")
    workflow = await create_workflow(client, **gated(ann, bob))
    execution = await activate(client, workflow["id"], context={"env": env})
    assert execution["node_status"][taken] == "pending"
    assert execution["node_status"][skipped] == "skipped"
    assert set(execution["node_tasks"]) == {taken, "notify"}
    ids = execution["node_tasks"]
    made = {n: await task(client, t) for n, t in ids.items()}
    assert made["notify"]["dependencies"] == [ids[taken]]
    # The agent assignment reaches every task after it; a task's own assignee wins.
    expected = ann if taken == "deploy" else bob
    assert made[taken]["assigned_to"] == expected and made[taken]["status"] == "assigned"
    assert made["notify"]["assigned_to"] == ann

    await finish(client, ids[taken])
    await finish(client, ids["notify"])
    done = await settled(client, execution["id"], "completed")
    assert done["node_status"][skipped] == "skipped"
    assert done["node_status"][taken] == done["node_status"]["notify"] == "completed"
    assert done["finished_at"] is not None and done["ready_task_ids"] == []


@pytest.mark.parametrize("strategy", ["all", "any"])
async def test_parallel_join_all_and_any(client: httpx.AsyncClient, strategy: str) -> None:
    body = diamond()
    body["nodes"][5]["config"]["join_strategy"] = strategy
    workflow = await create_workflow(client, **body)
    execution = await activate(client, workflow["id"])
    ids = execution["node_tasks"]

    await finish(client, ids["t1"])
    await finish(client, ids["t2"])
    current = await until(client, execution["id"], node_is("t2", "completed"))
    if strategy == "all":
        assert current["ready_task_ids"] == [ids["t3"]]
        assert (await task(client, ids["t4"]))["dependencies"] == [ids["t2"], ids["t3"]]
    else:
        assert current["ready_task_ids"] == [ids["t3"], ids["t4"]]
        # Narrowed to the branch that met the join, so that t4 can be dispatched now.
        t4 = await follow(
            client,
            "/v1/tasks/events",
            lambda: task(client, ids["t4"]),
            lambda t: bool(t["dependencies"] == [ids["t2"]]),
        )
        assert t4["status"] == "created"

    await finish(client, ids["t3"])
    await finish(client, ids["t4"])
    done = await settled(client, execution["id"], "completed")
    assert set(done["node_status"].values()) == {"completed"}


async def test_a_retried_failure_keeps_the_execution_running_and_a_final_one_fails_it(
    client: httpx.AsyncClient,
) -> None:
    workflow = await create_workflow(client, **gated())
    execution = await activate(client, workflow["id"], context={"env": "prod"})
    deploy = execution["node_tasks"]["deploy"]  # max_retries 1

    await move(client, deploy, "in_progress")
    await until(client, execution["id"], node_is("deploy", "running"))
    await move(client, deploy, "failed")  # one retry left
    current = await until(client, execution["id"], node_is("deploy", "pending"))
    assert current["status"] == "running"
    assert current["ready_task_ids"] == [deploy]  # waiting to be reassigned

    await move(client, deploy, "assigned", "in_progress")  # the retry
    await until(client, execution["id"], node_is("deploy", "running"))
    await move(client, deploy, "failed")  # no retry left
    failed = await settled(client, execution["id"], "failed")
    assert failed["node_status"]["deploy"] == "failed"
    assert failed["node_status"]["notify"] == "cancelled"  # it waited on the failed deploy
    assert failed["progress"] == {"done": 0, "total": 2, "running": 0, "failed": 1}
    assert "deploy" in failed["reason"] and failed["ready_task_ids"] == []
    events = [m.event for m in await stream_events(client, execution["id"])]
    assert events[0] == "workflow.execution.started" and events[-1] == "workflow.execution.failed"
    assert events.count("workflow.execution.failed") == 1


async def test_a_cancelled_task_cancels_its_execution(client: httpx.AsyncClient) -> None:
    workflow = await create_workflow(client, **gated())
    execution = await activate(client, workflow["id"], context={"env": "prod"})
    response = await client.post(f"/v1/tasks/{execution['node_tasks']['deploy']}/cancel")
    assert response.status_code == 200, response.text
    cancelled = await settled(client, execution["id"], "cancelled")
    assert cancelled["node_status"]["deploy"] == "cancelled"


async def test_cancel_cancels_the_open_tasks(client: httpx.AsyncClient) -> None:
    workflow = await create_workflow(client, **gated())
    execution = await activate(client, workflow["id"], context={"env": "prod"})
    ids = execution["node_tasks"]
    await move(client, ids["deploy"], "in_progress")
    await move(client, ids["notify"], "blocked")  # cancelled by way of `assigned`

    response = await client.post(
        f"/v1/workflow-executions/{execution['id']}/cancel", json={"reason": "release pulled"}
    )
    assert response.status_code == 200, response.text
    cancelled = response.json()
    assert cancelled["status"] == "cancelled" and cancelled["reason"] == "release pulled"
    assert cancelled["node_status"]["deploy"] == cancelled["node_status"]["notify"] == "cancelled"
    assert cancelled["node_status"]["hold"] == "skipped"
    assert (await task(client, ids["deploy"]))["status"] == "cancelled"
    assert (await task(client, ids["notify"]))["status"] == "cancelled"

    again = await client.post(f"/v1/workflow-executions/{execution['id']}/cancel")
    problem = assert_problem(again, 409, "invalid_transition")
    assert problem["current"] == "cancelled"
    assert_problem(await client.post("/v1/workflow-executions/wfx_nope/cancel"), 404, "not_found")


async def test_the_execution_stream_replays_what_a_client_missed(
    client: httpx.AsyncClient,
) -> None:
    workflow = await create_workflow(client, **gated())
    execution = await activate(client, workflow["id"], context={"env": "prod"})
    ids = execution["node_tasks"]
    url = f"/v1/workflow-executions/{execution['id']}/events"

    async with client.stream("GET", url) as stream:
        [started] = await asyncio.wait_for(SseReader(stream).take(1), 10)
    assert started.event == "workflow.execution.started"
    assert started.data["execution"]["id"] == execution["id"]

    # While nobody listens, the whole workflow runs to its end.
    await finish(client, ids["deploy"])
    await finish(client, ids["notify"])
    await settled(client, execution["id"], "completed")

    async with client.stream("GET", url, headers={"Last-Event-ID": started.id or ""}) as stream:
        reader = SseReader(stream)
        missed: list[SseMessage] = []
        while not missed or missed[-1].event != "workflow.execution.completed":
            [message] = await asyncio.wait_for(reader.take(1), 10)
            missed.append(message)
    seqs = [int(m.id or 0) for m in missed]
    assert seqs == list(range(int(started.id or 0) + 1, seqs[-1] + 1))  # no gap, no repeat
    changes = [(m.data["node_id"], m.data["to"]) for m in missed[:-1]]
    for node_id in ("deploy", "notify"):
        steps = [to for n, to in changes if n == node_id]
        assert steps[-1] == "completed"
    assert missed[-1].data["execution"]["status"] == "completed"

    assert_problem(await client.get("/v1/workflow-executions/wfx_nope/events"), 404, "not_found")
