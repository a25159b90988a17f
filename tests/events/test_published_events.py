"""The events the service stores and streams are the ones its OpenAPI document publishes:
a run that calls a tool, asks a person, is answered and completes; a run that fails and is
retried; a run cancelled while it waits; a task reviewed and approved; a workflow run to its
end. Every event of every stream validates against its published model, with no field the
model leaves out (`tests/support/event_schemas.py`; SSE tests check what they read the
same way). The database is shared with other tests: the events checked are this test's,
those that name one of the things it made."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.approvals.test_approvals_api import requested
from tests.support.event_schemas import stored_events_documented
from tests.support.factories import agent_body, create_task, create_workflow, unique


async def _agent(client: httpx.AsyncClient, *turns: dict[str, Any]) -> str:
    body = agent_body(*turns, name=unique("published"), tools=["echo", "ask_human"])
    response = await client.post("/v1/agents", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _run(client: httpx.AsyncClient, agent_id: str, status: str) -> dict[str, Any]:
    started = await client.post("/v1/runs", json={"agent_id": agent_id, "input": "go"})
    assert started.status_code == 202, started.text
    return await _settled(client, started.json()["id"], status)


async def _settled(client: httpx.AsyncClient, run_id: str, status: str) -> dict[str, Any]:
    response = await client.get(f"/v1/runs/{run_id}/wait", params={"timeout_s": 20})
    run: dict[str, Any] = response.json()
    assert run["status"] == status, run
    return run


async def _move(client: httpx.AsyncClient, task_id: str, *targets: str, **fields: Any) -> None:
    for target in targets:
        moved = await client.post(f"/v1/tasks/{task_id}/transitions", json={"to": target, **fields})
        assert moved.status_code == 200, moved.text


async def test_every_stored_event_is_published(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    asks = await _agent(
        client,
        {"tool_calls": [{"name": "echo", "input": {"x": 1}}]},
        {"tool_calls": [{"name": "ask_human", "input": {"question": "ok?"}}]},
        {"text": "done"},
    )
    waiting = await _run(client, asks, "waiting_on_human")
    answered = await client.post(
        f"/v1/runs/{waiting['id']}/human-response", json={"response": "yes"}
    )
    assert answered.status_code == 200, answered.text
    await _settled(client, waiting["id"], "completed")

    cancelled = await _run(client, asks, "waiting_on_human")  # a new conversation: it asks
    assert (await client.post(f"/v1/runs/{cancelled['id']}/cancel")).status_code == 200

    refused = {"text": "never", "fault": {"status": 400, "message": "bad request"}}
    failed = await _run(client, await _agent(client, refused), "failed")
    assert (await client.post(f"/v1/runs/{failed['id']}/retry")).status_code == 200

    ann = unique("ann")
    task = await create_task(client, title="reviewed", assigned_to=ann, reviewers=[unique("bob")])
    await _move(client, task["id"], "in_progress", "in_review")
    approval = await requested(client, task["id"])  # asked in the background
    approved = await client.post(f"/v1/approvals/{approval['id']}/approve", json={})
    assert approved.status_code == 200, approved.text

    workflow = await create_workflow(
        client,
        nodes=[
            {"id": "s", "type": "start"},
            {"id": "t", "type": "task", "config": {"title": "Step", "assigned_to": ann}},
            {"id": "e", "type": "end"},
        ],
        edges=[
            {"id": "e1", "source": "s", "target": "t"},
            {"id": "e2", "source": "t", "target": "e"},
        ],
    )
    execution = await client.post(f"/v1/workflow-executions/activate/{workflow['id']}", json={})
    assert execution.status_code == 201, execution.text
    [step] = execution.json()["node_tasks"].values()
    await _move(client, step, "in_progress", "in_review", "completed")

    runs = {waiting["id"], cancelled["id"], failed["id"]}
    ids = runs | {task["id"], approval["id"], execution.json()["id"], step}
    seen = await stored_events_documented(db_engine, mentioning=ids, runs=runs)
    assert {
        "agent_run.queued",
        "agent_run.started",
        "message.created",
        "tool_call.started",
        "tool_call.completed",
        "agent_run.waiting_on_human",
        "agent_run.human_response",
        "agent_run.completed",
        "agent_run.cancelled",
        "agent_run.failed",
        "agent_run.retry",
        "task.created",
        "task.transitioned",
        "approval.requested",
        "approval.approved",
        "workflow.execution.started",
        "workflow.node.changed",
    } <= seen, seen
