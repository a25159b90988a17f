"""Issue 6 end to end, through HTTP only: workflows executed by scripted agents, reviewed
and approved by a person, retried, cancelled, and a side-effecting tool call that waits
for a person's consent. Every wait follows a server stream (the execution's, the
approvals', the runs board) or the server's own `/wait`; nothing here sleeps."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.core.config import Settings
from tests.approvals.test_approvals_api import requested
from tests.support.server import make_settings
from tests.support.sse import SseMessage, SseReader
from tests.workflows.test_workflow_executions_api import (
    activate,
    follow,
    settled,
    stream_events,
)
from tests.workflows.test_workflows_api import create

pytestmark = pytest.mark.own_server  # settings of its own (`settings` below)

TIMEOUT_S = 20
SETTLED = {"completed", "failed", "cancelled", "timed_out", "dead_letter"}
LaneRuns = dict[str, list[dict[str, Any]]]  # task id -> the runs of its lane, oldest first


@pytest.fixture
def settings(database_url: str) -> Settings:
    """http_request may reach the recording server on loopback (and nothing else private);
    a failed run is not retried by the workers (their backoff is 30 s and more), so that a
    failed run fails its task at once and the task's own retries are what is tested."""
    return make_settings(
        database_url,
        tools={"http_allowed_networks": ["127.0.0.0/8"]},
        workers={"max_retries": 0},
    )


# -- helpers -------------------------------------------------------------------------


async def scripted_agent(
    client: httpx.AsyncClient, name: str, *turns: dict[str, Any], tools: list[str] | None = None
) -> dict[str, Any]:
    response = await client.post(
        "/v1/agents",
        json={
            "name": name,
            "tools": tools or [],
            "model": {"provider": "scripted", "name": "scripted", "script": list(turns)},
        },
    )
    assert response.status_code == 201, response.text
    agent: dict[str, Any] = response.json()
    return agent


def task_node(node_id: str, title: str, **config: Any) -> dict[str, Any]:
    return {"id": node_id, "type": "task", "config": {"title": title, **config}}


def edge(edge_id: str, source: str, target: str, kind: str = "sequential") -> dict[str, Any]:
    return {"id": edge_id, "source": source, "target": target, "type": kind}


def one_task(name: str, agent: str, max_retries: int) -> dict[str, Any]:
    """start -> ship (assigned to `agent`) -> end"""
    return {
        "name": name,
        "nodes": [
            {"id": "s", "type": "start"},
            task_node("ship", "Ship the release", assigned_to=agent, max_retries=max_retries),
            {"id": "e", "type": "end"},
        ],
        "edges": [edge("e1", "s", "ship"), edge("e2", "ship", "e")],
    }


async def get(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    response = await client.get(url)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def lane_runs(client: httpx.AsyncClient, *task_ids: str) -> LaneRuns:
    """Each task's runs (lane `task:<id>`), oldest first."""
    return {
        task_id: (await get(client, f"/v1/runs?lane=task:{task_id}"))["items"]
        for task_id in task_ids
    }


async def runs_once(
    client: httpx.AsyncClient, *task_ids: str, check: Callable[[LaneRuns], bool]
) -> LaneRuns:
    """The tasks' runs once `check` holds for them, woken by the runs board's events."""
    found: LaneRuns = await follow(
        client, "/v1/runs/events", lambda: lane_runs(client, *task_ids), check
    )
    return found


async def approve(client: httpx.AsyncClient, approval_id: str) -> None:
    response = await client.post(f"/v1/approvals/{approval_id}/approve", json={})
    assert response.status_code == 200, response.text


async def answer(client: httpx.AsyncClient, run_id: str, text: str) -> None:
    response = await client.post(f"/v1/runs/{run_id}/human-response", json={"response": text})
    assert response.status_code == 200, response.text


async def wait_run(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    """The run once settled or waiting on a person (the server's own `/wait`)."""
    return await get(client, f"/v1/runs/{run_id}/wait?timeout_s={TIMEOUT_S}")


def event_ids(messages: list[SseMessage]) -> list[int]:
    return [int(m.id or 0) for m in messages]


# -- 1. parallel split, conditional, review gate --------------------------------------


def release_pipeline() -> dict[str, Any]:
    """start -> who (writer) -> split, then side by side:
        draft
        route: locale == 'en' ? polish : translate
    -> join (all) -> publish -> end"""
    return {
        "name": "Release notes",
        "nodes": [
            {"id": "s", "type": "start"},
            {"id": "who", "type": "agent_assignment", "config": {"agent_name": "writer"}},
            {"id": "split", "type": "parallel_split"},
            task_node("draft", "Draft the notes"),
            {
                "id": "route",
                "type": "conditional",
                "config": {"condition_expression": "locale == 'en'"},
            },
            task_node("polish", "Polish the English"),
            task_node("translate", "Translate the notes"),
            {"id": "join", "type": "parallel_join", "config": {"join_strategy": "all"}},
            task_node("publish", "Publish the notes"),
            {"id": "e", "type": "end"},
        ],
        "edges": [
            edge("e1", "s", "who"),
            edge("e2", "who", "split"),
            edge("e3", "split", "draft", "parallel_branch"),
            edge("e4", "split", "route", "parallel_branch"),
            edge("e5", "route", "polish", "conditional_true"),
            edge("e6", "route", "translate", "conditional_false"),
            edge("e7", "draft", "join"),
            edge("e8", "polish", "join"),
            edge("e9", "translate", "join"),
            edge("e10", "join", "publish"),
            edge("e11", "publish", "e"),
        ],
    }


async def reviewed_run(
    client: httpx.AsyncClient, task_id: str, review_round: int = 1
) -> dict[str, Any]:
    """The task's pending review once its run completed: the task waits in review for the
    run the review names, the newest on its lane."""
    review = await requested(client, task_id, review_round)
    assert (review["kind"], review["status"]) == ("task_review", "pending")
    assert (await get(client, f"/v1/tasks/{task_id}"))["status"] == "in_review"
    runs = (await lane_runs(client, task_id))[task_id]
    assert runs[-1]["id"] == review["run_id"] and runs[-1]["status"] == "completed"
    return review


async def test_a_workflow_runs_by_agents_through_review_to_completion(
    client: httpx.AsyncClient,
) -> None:
    await scripted_agent(client, "writer", {"text": "Done."})
    workflow = await create(client, release_pipeline())
    validation = await client.post(f"/v1/workflows/{workflow['id']}/validate")
    assert validation.json() == {"valid": True, "errors": []}
    execution = await activate(client, workflow["id"], context={"locale": "en"})
    ids = execution["node_tasks"]
    assert set(ids) == {"draft", "polish", "publish"}
    assert execution["node_status"]["translate"] == "skipped"
    url = f"/v1/workflow-executions/{execution['id']}/events"

    # A client follows the execution from its start and loses its connection early on.
    async with asyncio.timeout(TIMEOUT_S), client.stream("GET", url) as stream:
        before_disconnect = await SseReader(stream).take(3)
    assert before_disconnect[0].event == "workflow.execution.started"

    # Both branches run side by side; a person approves each once its run completed.
    for node in ("draft", "polish"):
        await approve(client, (await reviewed_run(client, ids[node]))["id"])

    # After the join: the gated task is sent back once, with a reason the agent reads.
    reason = "Say which versions the notes cover."
    first = await reviewed_run(client, ids["publish"])
    rejected = await client.post(f"/v1/approvals/{first['id']}/reject", json={"reason": reason})
    assert rejected.status_code == 200, rejected.text
    second = await reviewed_run(client, ids["publish"], review_round=2)
    runs = (await lane_runs(client, ids["publish"]))[ids["publish"]]
    assert [r["id"] for r in runs] == [first["run_id"], second["run_id"]]
    assert reason not in runs[0]["input"] and reason in runs[1]["input"]
    assert runs[1]["conversation_id"] == runs[0]["conversation_id"]  # rework continues it
    await approve(client, second["id"])

    done = await settled(client, execution["id"], "completed")
    assert done["node_status"] == {
        **{n: "completed" for n in ("s", "who", "split", "route", "join", "e")},
        **{n: "completed" for n in ("draft", "polish", "publish")},
        "translate": "skipped",
    }
    assert done["finished_at"] is not None and done["ready_task_ids"] == []
    for task_id in ids.values():
        assert (await get(client, f"/v1/tasks/{task_id}"))["status"] == "completed"
    assert (await get(client, "/v1/approvals?status=pending"))["items"] == []

    # Read again from the start: every event once, in order, ending with the completion.
    everything = await stream_events(client, execution["id"])
    seqs = event_ids(everything)
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert everything[0].event == "workflow.execution.started"
    assert everything[-1].event == "workflow.execution.completed"
    changes = [(m.data["node_id"], m.data["to"]) for m in everything[1:-1]]
    assert {n for n, _ in changes} == {"draft", "polish", "publish"}  # translate never moves
    for node in ("draft", "polish", "publish"):
        assert [to for n, to in changes if n == node][-1] == "completed"

    # The client that lost its connection resumes where it stopped: the rest, no gap, no repeat.
    last_seen = before_disconnect[-1].id or ""
    async with asyncio.timeout(TIMEOUT_S):
        async with client.stream("GET", url, headers={"Last-Event-ID": last_seen}) as stream:
            reader = SseReader(stream)
            resumed: list[SseMessage] = []
            while not resumed or resumed[-1].event != "workflow.execution.completed":
                resumed += await reader.take(1)
    stitched = before_disconnect + resumed
    assert event_ids(stitched) == seqs
    assert [(m.event, m.data) for m in stitched] == [(m.event, m.data) for m in everything]


# -- 2. retries -----------------------------------------------------------------------


ASK = {"tool_calls": [{"name": "ask_human", "input": {"question": "Shall I ship?"}}]}
BAD_REQUEST = {"status": 400, "message": "the model refused the request", "times": 1}


async def test_a_failed_run_that_is_retried_does_not_fail_the_execution(
    client: httpx.AsyncClient,
) -> None:
    # Each run asks first (so the test controls when it goes on), then its model call fails
    # with a fault no retry of the call can fix: the run fails.
    agent = await scripted_agent(
        client,
        "shipper",
        ASK,
        {"text": "Shipped.", "fault": BAD_REQUEST},
        tools=["ask_human"],
    )
    workflow = await create(client, one_task("Retried", "shipper", max_retries=1))
    execution = await activate(client, workflow["id"])
    task_id = execution["node_tasks"]["ship"]

    def asking(count: int) -> Callable[[LaneRuns], bool]:
        """The task's `count`-th run is its newest, and it waits on its question."""
        return lambda runs: (
            len(runs[task_id]) == count and (runs[task_id][-1]["status"] == "waiting_on_human")
        )

    [first] = (await runs_once(client, task_id, check=asking(1)))[task_id]
    await answer(client, first["id"], "yes")
    failed_then_retried = (await runs_once(client, task_id, check=asking(2)))[task_id]
    assert failed_then_retried[0]["status"] == "failed"
    assert failed_then_retried[0]["error"]["code"] == "provider_error"
    retry = failed_then_retried[1]
    assert retry["conversation_id"] == first["conversation_id"]
    task = await get(client, f"/v1/tasks/{task_id}")
    assert (task["status"], task["retry_count"]) == ("in_progress", 1)
    current = await get(client, f"/v1/workflow-executions/{execution['id']}")
    assert current["status"] == "running"

    # A retry is a new run, and the scripted fault counts per run, so it would fail the same
    # way: someone fixes the agent while the retry waits, and the retry then completes.
    fixed = await client.patch(
        f"/v1/agents/{agent['id']}",
        json={"model": {**agent["model"], "script": [ASK, {"text": "Shipped."}]}},
    )
    assert fixed.status_code == 200, fixed.text
    await answer(client, retry["id"], "yes")
    review = await requested(client, task_id)
    assert review["run_id"] == retry["id"]
    await approve(client, review["id"])

    done = await settled(client, execution["id"], "completed")
    assert done["node_status"]["ship"] == "completed"
    events = [m.event for m in await stream_events(client, execution["id"])]
    assert "workflow.execution.failed" not in events
    assert events[-1] == "workflow.execution.completed"


async def test_a_task_that_exhausts_its_retries_fails_the_execution(
    client: httpx.AsyncClient,
) -> None:
    await scripted_agent(client, "broken", {"text": "Shipped.", "fault": BAD_REQUEST})
    workflow = await create(client, one_task("Exhausted", "broken", max_retries=1))
    execution = await activate(client, workflow["id"])
    task_id = execution["node_tasks"]["ship"]

    failed = await settled(client, execution["id"], "failed")
    assert failed["node_status"]["ship"] == "failed"
    assert "ship" in failed["reason"]
    runs = (await lane_runs(client, task_id))[task_id]
    assert [r["status"] for r in runs] == ["failed", "failed"]  # the first try and one retry
    task = await get(client, f"/v1/tasks/{task_id}")
    assert (task["status"], task["retry_count"], task["max_retries"]) == ("failed", 1, 1)
    events = [m.event for m in await stream_events(client, execution["id"])]
    assert events.count("workflow.execution.failed") == 1
    assert events[-1] == "workflow.execution.failed"


# -- 3. cancel ------------------------------------------------------------------------


def two_branches() -> dict[str, Any]:
    """start -> split -> (ask: asker | grind: grinder) -> join(all) -> wrap: asker -> end"""
    return {
        "name": "Cancelled",
        "nodes": [
            {"id": "s", "type": "start"},
            {"id": "split", "type": "parallel_split"},
            task_node("ask", "Ask for the go-ahead", assigned_to="asker"),
            task_node("grind", "Crunch the numbers", assigned_to="grinder"),
            {"id": "join", "type": "parallel_join"},
            task_node("wrap", "Wrap up", assigned_to="asker"),
            {"id": "e", "type": "end"},
        ],
        "edges": [
            edge("e1", "s", "split"),
            edge("e2", "split", "ask", "parallel_branch"),
            edge("e3", "split", "grind", "parallel_branch"),
            edge("e4", "ask", "join"),
            edge("e5", "grind", "join"),
            edge("e6", "join", "wrap"),
            edge("e7", "wrap", "e"),
        ],
    }


async def test_cancelling_a_running_execution_leaves_no_run_running(
    client: httpx.AsyncClient,
) -> None:
    await scripted_agent(client, "asker", ASK, {"text": "Thanks."}, tools=["ask_human"])
    slow_turn = {"tool_calls": [{"name": "echo", "input": {}}], "latency_ms": 2_000}
    await scripted_agent(client, "grinder", slow_turn, slow_turn, {"text": "42"}, tools=["echo"])
    workflow = await create(client, two_branches())
    execution = await activate(client, workflow["id"])
    ids = execution["node_tasks"]

    # One run waits on a person; the other is inside a slow model call.
    def working(runs: LaneRuns) -> bool:
        ask, grind = runs[ids["ask"]], runs[ids["grind"]]
        return bool(
            ask
            and ask[-1]["status"] == "waiting_on_human"
            and grind
            and grind[-1]["status"] == "running"
        )

    await runs_once(client, ids["ask"], ids["grind"], check=working)
    response = await client.post(
        f"/v1/workflow-executions/{execution['id']}/cancel", json={"reason": "scope changed"}
    )
    assert response.status_code == 200, response.text
    assert (response.json()["status"], response.json()["reason"]) == ("cancelled", "scope changed")

    def all_settled(runs: LaneRuns) -> bool:
        return all(r["status"] in SETTLED for lane in runs.values() for r in lane)

    runs = await runs_once(client, *ids.values(), check=all_settled)
    assert {task_id: [r["status"] for r in lane] for task_id, lane in runs.items()} == {
        ids["ask"]: ["cancelled"],
        ids["grind"]: ["cancelled"],
        ids["wrap"]: [],  # never dispatched
    }
    for task_id in ids.values():
        assert (await get(client, f"/v1/tasks/{task_id}"))["status"] == "cancelled"
    final = await get(client, f"/v1/workflow-executions/{execution['id']}")
    assert final["status"] == "cancelled"
    assert {final["node_status"][n] for n in ids} == {"cancelled"}


# -- 4. a tool call that waits for a person's consent ----------------------------------


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: str


@dataclass
class Recorder:
    url: str
    received: list[Received] = field(default_factory=list)


@asynccontextmanager
async def recording_server() -> AsyncIterator[Recorder]:
    """A real HTTP server on loopback that records every request it gets."""
    recorder = Recorder(url="")

    async def hook(request: Request) -> Response:
        body = (await request.body()).decode()
        recorder.received.append(
            Received(request.method, request.url.path, dict(request.headers), body)
        )
        return JSONResponse({"accepted": True}, status_code=201)

    app = Starlette(routes=[Route("/{path:path}", hook, methods=["GET", "POST", "PUT"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
            raise RuntimeError("the recording server stopped during start-up")
        await asyncio.sleep(0.01)  # start-up of the server in this loop, not a test wait
    port = server.servers[0].sockets[0].getsockname()[1]
    recorder.url = f"http://127.0.0.1:{port}"
    try:
        yield recorder
    finally:
        server.should_exit = True
        await serving


async def test_a_side_effecting_tool_call_runs_only_with_a_person_s_approval(
    client: httpx.AsyncClient,
) -> None:
    async with recording_server() as hooks:
        call = {
            "url": f"{hooks.url}/deploys",
            "method": "POST",
            "headers": {"content-type": "application/json", "x-release": "1.2"},
            "body": json.dumps({"service": "api", "version": "1.2"}),
        }
        agent = await scripted_agent(
            client,
            "deployer",
            {"tool_calls": [{"name": "http_request", "input": call}]},
            {"text": "Deploy requested."},
            tools=["http_request"],
        )

        async def waiting_run() -> tuple[dict[str, Any], dict[str, Any]]:
            """A run that asked to make the call, and the approval it waits on."""
            started = await client.post(
                "/v1/runs", json={"agent_id": agent["id"], "input": "Deploy"}
            )
            assert started.status_code == 202, started.text
            run = await wait_run(client, started.json()["id"])
            assert run["status"] == "waiting_on_human"
            assert run["waiting_for"]["reason"] == "approval"
            approval = await get(client, f"/v1/approvals/{run['waiting_for']['approval_id']}")
            assert (approval["kind"], approval["status"]) == ("tool_call", "pending")
            assert (approval["run_id"], approval["tool"]) == (run["id"], "http_request")
            assert approval["arguments"] == call  # exactly what will run
            return run, approval

        run, approval = await waiting_run()
        assert hooks.received == []  # nothing happens before consent
        await approve(client, approval["id"])
        done = await wait_run(client, run["id"])
        assert (done["status"], done["result"]) == ("completed", "Deploy requested.")
        [sent] = hooks.received
        assert (sent.method, sent.path, sent.body) == ("POST", "/deploys", call["body"])
        assert sent.headers["x-release"] == "1.2"
        assert sent.headers["content-type"] == "application/json"

        refused, approval = await waiting_run()
        rejected = await client.post(
            f"/v1/approvals/{approval['id']}/reject", json={"reason": "Freeze until Monday."}
        )
        assert rejected.status_code == 200, rejected.text
        assert (await wait_run(client, refused["id"]))["status"] == "completed"
        assert len(hooks.received) == 1  # the refused call never reached the server

    messages = await client.get(f"/v1/conversations/{refused['conversation_id']}/messages")
    results = [
        block
        for message in messages.json()
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    [result] = results
    assert result["is_error"] is True
    assert "rejected" in result["content"] and "Freeze until Monday." in result["content"]
