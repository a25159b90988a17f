"""Approvals through real HTTP: a task entering review is listed as a pending approval
with a summary to decide from; approving completes it, rejecting (a reason is required)
sends it back and an agent's task gets a rework run with that reason; decided approvals
refuse a second answer; an approval past its deadline is `expired`, decided by its
policy, and refuses answers with `approval_expired`; the approvals stream replays what a
disconnected client missed; a gated tool call's summary carries what the model said."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.anthropic_wire import Reply, Text, ToolUse, anthropic_wire
from tests.support.api import assert_problem
from tests.support.factories import agent_body, create_task, create_workflow, unique
from tests.support.server import make_settings, running_server
from tests.support.sse import SseMessage, SseReader

TIMEOUT_S = 20


async def in_review(client: httpx.AsyncClient, title: str) -> dict[str, Any]:
    """A person's task (a name no agent has), worked and handed in for review through the
    task API."""
    task = await create_task(client, title=title, assigned_to=unique("ann"))
    for status in ("in_progress", "in_review"):
        moved = await client.post(f"/v1/tasks/{task['id']}/transitions", json={"to": status})
        assert moved.status_code == 200, moved.text
    return task


async def requested(
    client: httpx.AsyncClient, task_id: str, review_round: int = 1
) -> dict[str, Any]:
    """The task's review once asked (in the background), read from the approvals stream."""
    async with (
        asyncio.timeout(TIMEOUT_S),
        client.stream("GET", "/v1/approvals/events", headers={"Last-Event-ID": "0"}) as stream,
    ):
        reader = SseReader(stream)
        while True:
            [message] = await reader.take(1)
            approval: dict[str, Any] = message.data["approval"]
            if (
                message.event == "approval.requested"
                and approval["task_id"] == task_id
                and approval["review_round"] == review_round
            ):
                return approval


async def _events_of(
    client: httpx.AsyncClient, task_id: str, count: int, **resume: Any
) -> list[SseMessage]:
    """The next `count` events of the approvals stream about the task's approvals (the
    stream is the whole server's), from the resume point (`last_event_id`), else from the
    start."""
    params = {"last_event_id": resume.get("last_event_id", "0")}
    async with client.stream("GET", "/v1/approvals/events", params=params) as stream:
        reader = SseReader(stream)
        mine: list[SseMessage] = []
        while len(mine) < count:
            [message] = await reader.take(1)
            if message.data["approval"]["task_id"] == task_id:
                mine.append(message)
    return mine


async def task_status(client: httpx.AsyncClient, task_id: str) -> str:
    return str((await client.get(f"/v1/tasks/{task_id}")).json()["status"])


async def test_a_review_is_listed_read_and_approved_once(client: httpx.AsyncClient) -> None:
    task = await in_review(client, "Write the release notes")
    review = await requested(client, task["id"])
    assert (review["kind"], review["status"], review["run_id"]) == ("task_review", "pending", None)
    assert (review["timeout_s"], review["timeout_policy"]) == (86_400, "escalate")
    assert review["decision"] is None
    assert review["summary"] == (
        "Task: Write the release notes\nAcceptance criteria: (none given)\n"
        "Result: (no agent run: the task was handed in by a person)"
    )

    pending = {"status": "pending", "task_id": task["id"]}  # the inbox, for this task
    inbox = (await client.get("/v1/approvals", params=pending)).json()
    assert [a["id"] for a in inbox["items"]] == [review["id"]]
    got = await client.get(f"/v1/approvals/{review['id']}")
    assert got.status_code == 200 and got.headers["ETag"] == '"1"'
    assert got.json() == review

    approved = await client.post(
        f"/v1/approvals/{review['id']}/approve",
        json={"comment": "Ship it."},
        headers={"If-Match": '"1"'},
    )
    assert approved.status_code == 200, approved.text
    assert approved.headers["ETag"] == '"2"'
    body = approved.json()
    assert (body["status"], body["decision"], body["comment"], body["decided_by"]) == (
        "approved",
        "approved",
        "Ship it.",
        "local",
    )
    assert body["decided_at"] is not None
    assert await task_status(client, task["id"]) == "completed"
    assert (await client.get("/v1/approvals", params=pending)).json()["items"] == []

    again = await client.post(f"/v1/approvals/{review['id']}/approve")
    problem = assert_problem(again, 409, "invalid_transition")
    assert (problem["current"], problem["target"], problem["allowed"]) == (
        "approved",
        "approved",
        [],
    )
    late = await client.post(f"/v1/approvals/{review['id']}/reject", json={"reason": "Too late"})
    assert_problem(late, 409, "invalid_transition")


async def test_a_rejection_needs_a_reason_and_sends_the_task_back(
    client: httpx.AsyncClient,
) -> None:
    task = await in_review(client, "Fix the login bug")
    review = await requested(client, task["id"])
    url = f"/v1/approvals/{review['id']}/reject"
    for body in ({}, {"reason": ""}, {"reason": "   "}):
        assert_problem(await client.post(url, json=body), 422, "validation_error")
    stale = await client.post(url, json={"reason": "No test."}, headers={"If-Match": '"7"'})
    assert assert_problem(stale, 409, "version_conflict")["current_version"] == 1

    rejected = await client.post(url, json={"reason": "No test covers the fix."})
    assert rejected.status_code == 200, rejected.text
    assert (rejected.json()["status"], rejected.json()["reason"]) == (
        "rejected",
        "No test covers the fix.",
    )
    assert await task_status(client, task["id"]) == "in_progress"
    trail = (await client.get(f"/v1/tasks/{task['id']}/transitions")).json()
    assert (trail[-1]["from_status"], trail[-1]["to_status"], trail[-1]["reason"]) == (
        "in_review",
        "in_progress",
        "No test covers the fix.",
    )

    # Handed in again: a new round, a new review.
    await client.post(f"/v1/tasks/{task['id']}/transitions", json={"to": "in_review"})
    second = await requested(client, task["id"], review_round=2)
    assert second["id"] != review["id"] and second["status"] == "pending"


async def test_unknown_approvals_are_404_and_filters_page_by_cursor(
    client: httpx.AsyncClient,
) -> None:
    for response in (
        await client.get("/v1/approvals/apr_missing"),
        await client.post("/v1/approvals/apr_missing/approve"),
        await client.post("/v1/approvals/apr_missing/reject", json={"reason": "no"}),
    ):
        assert assert_problem(response, 404, "not_found")["resource"] == "approval"

    # The first task is reviewed twice (rejected, handed in again): its two approvals are
    # paged one at a time under the task's filter.
    first = await in_review(client, "One")
    second = await in_review(client, "Two")
    once = await requested(client, first["id"])
    rejected = await client.post(f"/v1/approvals/{once['id']}/reject", json={"reason": "Again."})
    assert rejected.status_code == 200, rejected.text
    await client.post(f"/v1/tasks/{first['id']}/transitions", json={"to": "in_review"})
    ids = [once["id"], (await requested(client, first["id"], review_round=2))["id"]]
    mine = {"task_id": first["id"]}
    page = (await client.get("/v1/approvals", params={**mine, "limit": 1})).json()
    assert [a["id"] for a in page["items"]] == sorted(ids)[:1]
    params = {**mine, "cursor": page["next_cursor"]}
    rest = (await client.get("/v1/approvals", params=params)).json()
    assert [a["id"] for a in rest["items"]] == sorted(ids)[1:] and rest["next_cursor"] is None
    await requested(client, second["id"])
    by_task = (await client.get("/v1/approvals", params={"task_id": second["id"]})).json()
    assert [a["task_id"] for a in by_task["items"]] == [second["id"]]
    tools = (await client.get("/v1/approvals", params={**mine, "kind": "tool_call"})).json()
    assert tools["items"] == []
    reviews = (await client.get("/v1/approvals", params={**mine, "kind": "task_review"})).json()
    assert sorted(a["id"] for a in reviews["items"]) == sorted(ids)
    for bad in ({"status": "maybe"}, {"decision": "expired"}):
        assert_problem(await client.get("/v1/approvals", params=bad), 422, "validation_error")


async def test_the_approvals_stream_replays_what_a_client_missed(
    client: httpx.AsyncClient,
) -> None:
    task = await in_review(client, "Publish the post")
    review = await requested(client, task["id"])
    async with asyncio.timeout(TIMEOUT_S):
        [seen] = await _events_of(client, task["id"], 1)
        assert seen.event == "approval.requested" and seen.id is not None
        assert seen.data["approval"]["id"] == review["id"]

        # While nobody listens: the review is rejected, the task handed in again.
        await client.post(f"/v1/approvals/{review['id']}/reject", json={"reason": "Typos."})
        await client.post(f"/v1/tasks/{task['id']}/transitions", json={"to": "in_review"})
        missed = await _events_of(client, task["id"], 2, last_event_id=seen.id)
    # The stream is the server's: other events may come between this task's, never one
    # before the resume point nor one twice.
    numbers = [int(seen.id), *(int(m.id or 0) for m in missed)]
    assert numbers == sorted(set(numbers))
    assert [m.event for m in missed] == ["approval.rejected", "approval.requested"]
    assert missed[0].data["approval"]["id"] == review["id"]
    assert missed[0].data["approval"]["reason"] == "Typos."
    assert missed[1].data["approval"]["review_round"] == 2


async def test_an_agent_reworks_a_rejected_task_with_the_reason(
    client: httpx.AsyncClient,
) -> None:
    body = agent_body({"text": "Here is the draft."}, name=unique("drafter"), tools=["echo"])
    agent = await client.post("/v1/agents", json=body)
    assert agent.status_code == 201, agent.text
    task = await create_task(client, title="Draft the memo", assigned_to=body["name"])
    review = await requested(client, task["id"])
    rejected = await client.post(
        f"/v1/approvals/{review['id']}/reject", json={"reason": "Cite the budget."}
    )
    assert rejected.status_code == 200, rejected.text

    second = await requested(client, task["id"], review_round=2)  # after the rework run
    runs = (await client.get("/v1/runs", params={"lane": f"task:{task['id']}"})).json()["items"]
    assert [r["status"] for r in runs] == ["completed", "completed"]
    assert (review["run_id"], second["run_id"]) == (runs[0]["id"], runs[1]["id"])
    assert "Cite the budget." in runs[1]["input"]
    approved = await client.post(f"/v1/approvals/{second['id']}/approve")
    assert approved.status_code == 200, approved.text
    assert await task_status(client, task["id"]) == "completed"


async def test_a_workflow_s_review_timeout_and_policy_win_over_the_defaults(
    client: httpx.AsyncClient,
) -> None:
    workflow = await create_workflow(
        client,
        name=unique("Reviewed"),
        review_timeout_s=120,
        review_timeout_policy="auto_deny",
        nodes=[
            {"id": "s", "type": "start"},
            {"id": "t", "type": "task", "config": {"title": "Check", "assigned_to": unique("ann")}},
            {"id": "e", "type": "end"},
        ],
        edges=[
            {"id": "e1", "source": "s", "target": "t"},
            {"id": "e2", "source": "t", "target": "e"},
        ],
    )
    execution = await client.post(f"/v1/workflow-executions/activate/{workflow['id']}")
    assert execution.status_code == 201, execution.text
    task_id = execution.json()["node_tasks"]["t"]
    for status in ("in_progress", "in_review"):
        moved = await client.post(f"/v1/tasks/{task_id}/transitions", json={"to": status})
        assert moved.status_code == 200, moved.text
    review = await requested(client, task_id)
    assert (review["timeout_s"], review["timeout_policy"]) == (120, "auto_deny")
    assert review["workflow_execution_id"] == execution.json()["id"]


async def reviewed_by_workflow(client: httpx.AsyncClient, policy: str) -> tuple[str, str]:
    """A task of a workflow whose reviews wait 120 s then apply `policy`, handed in for
    review: (task id, execution id)."""
    workflow = await client.post(
        "/v1/workflows",
        json={
            "name": unique(f"Reviewed, {policy}"),
            "review_timeout_s": 120,
            "review_timeout_policy": policy,
            "nodes": [
                {"id": "s", "type": "start"},
                {
                    "id": "t",
                    "type": "task",
                    "config": {
                        "title": "Renew the certificate",
                        "assigned_to": unique("ann"),
                        "acceptance_criteria": ["Valid for a year"],
                    },
                },
                {"id": "e", "type": "end"},
            ],
            "edges": [
                {"id": "e1", "source": "s", "target": "t"},
                {"id": "e2", "source": "t", "target": "e"},
            ],
        },
    )
    assert workflow.status_code == 201, workflow.text
    execution = await client.post(f"/v1/workflow-executions/activate/{workflow.json()['id']}")
    assert execution.status_code == 201, execution.text
    task_id = str(execution.json()["node_tasks"]["t"])
    for status in ("in_progress", "in_review"):
        moved = await client.post(f"/v1/tasks/{task_id}/transitions", json={"to": status})
        assert moved.status_code == 200, moved.text
    return task_id, str(execution.json()["id"])


async def test_a_review_past_its_deadline_is_expired_and_refuses_answers(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    task_id, _ = await reviewed_by_workflow(client, "auto_deny")
    review = await requested(client, task_id)
    assert review["summary"].startswith(
        "Task: Renew the certificate\nAcceptance criteria:\n- Valid for a year\n"
    )
    # The server's clock is the real one: the deadline moves into the past instead.
    async with db_engine.begin() as conn:
        await conn.execute(
            text("UPDATE approvals SET expires_at = now() - interval '1 hour' WHERE id = :id"),
            {"id": review["id"]},
        )

    # Expired whether the sweep came first or the answer finds it overdue: the policy
    # decided, and the answer is refused with a code of its own.
    url = f"/v1/approvals/{review['id']}"
    for late in (
        await client.post(f"{url}/approve", headers={"If-Match": '"1"'}),
        await client.post(f"{url}/reject", json={"reason": "Too late anyway."}),
    ):
        problem = assert_problem(late, 409, "approval_expired")
        assert (problem["current"], problem["decision"], problem["allowed"]) == (
            "expired",
            "rejected",
            [],
        )
        assert problem["expires_at"] is not None
    got = (await client.get(url)).json()
    assert (got["status"], got["decision"], got["decided_by"], got["reason"]) == (
        "expired",
        "rejected",
        "system:timeout",
        "review timed out",
    )
    assert await task_status(client, task_id) == "in_progress"  # auto_deny: back to work

    def ids(response: httpx.Response) -> list[str]:
        return [a["id"] for a in response.json()["items"]]

    mine = {"task_id": task_id}
    listed = {
        "expired": ids(await client.get("/v1/approvals", params={**mine, "status": "expired"})),
        "denied": ids(await client.get("/v1/approvals", params={**mine, "decision": "rejected"})),
        "pending": ids(await client.get("/v1/approvals", params={**mine, "status": "pending"})),
        "approved": ids(await client.get("/v1/approvals", params={**mine, "decision": "approved"})),
    }
    assert listed == {
        "expired": [review["id"]],
        "denied": [review["id"]],
        "pending": [],
        "approved": [],
    }

    async with asyncio.timeout(TIMEOUT_S):
        seen = await _events_of(client, task_id, 2)
    assert [(m.event, m.data["decision"]) for m in seen] == [
        ("approval.requested", None),
        ("approval.expired", "rejected"),
    ]
    assert seen[1].data["approval"]["status"] == "expired"


async def test_a_gated_tool_call_is_summarised_with_what_the_model_said(
    database_url: str, clean_db: AsyncEngine
) -> None:
    intent = "The incident is over. I will post the all-clear to the status page."
    body = "All systems are back. " * 200  # long: the summary abbreviates, `arguments` keeps it
    arguments = {"method": "POST", "url": "https://status.example.com/notes", "body": body}
    async with anthropic_wire() as wire:
        wire.plan(
            Reply((Text(intent), ToolUse("http_request", arguments, id="toolu_post"))),
            Reply.text("Understood, I will not post it."),
        )
        settings = make_settings(
            database_url, llm={"anthropic": {"api_key": "sk-test", "base_url": wire.url}}
        )
        # The client waits as long as the `/wait` it asks for (httpx's default is 5 s).
        async with (
            running_server(settings) as url,
            httpx.AsyncClient(base_url=url, timeout=TIMEOUT_S + 5) as http,
        ):
            agent = await http.post(
                "/v1/agents",
                json={
                    "name": "status-bot",
                    "tools": ["http_request"],
                    "model": {"provider": "anthropic", "name": "claude-wire-test"},
                },
            )
            assert agent.status_code == 201, agent.text
            run = await http.post(
                "/v1/runs", json={"agent_id": agent.json()["id"], "input": "Close the incident."}
            )
            run_id = run.json()["id"]
            waiting = await http.get(f"/v1/runs/{run_id}/wait", params={"timeout_s": TIMEOUT_S})
            assert waiting.json()["status"] == "waiting_on_human", waiting.text
            [approval] = (await http.get("/v1/approvals", params={"run_id": run_id})).json()[
                "items"
            ]
            rejected = await http.post(
                f"/v1/approvals/{approval['id']}/reject", json={"reason": "Wait for QA."}
            )
            assert rejected.status_code == 200, rejected.text
            done = await http.get(f"/v1/runs/{run_id}/wait", params={"timeout_s": TIMEOUT_S})

    assert (approval["kind"], approval["tool"], approval["arguments"]) == (
        "tool_call",
        "http_request",
        arguments,
    )
    agent_line, intent_line, arguments_line = approval["summary"].split("\n")
    assert agent_line == "Agent 'status-bot' asks to call 'http_request'."
    assert intent_line == f"Intent: {intent}"
    assert arguments_line.startswith(
        'Arguments: {"method": "POST", "url": "https://status.example.com/notes", '
        '"body": "All systems are back. All systems'
    )
    assert len(approval["summary"]) <= 1_000
    assert (done.json()["status"], done.json()["result"]) == (
        "completed",
        "Understood, I will not post it.",
    )
