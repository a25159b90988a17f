"""plan_execute through the real service: a scripted agent whose script plays the planner's
`submit_plan` call first, then the executor's turns (the script is played by LLM call). The
plan is on `GET /v1/runs/{id}` and its moves on the run's event stream."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from tests.runs.test_runs_api import make_agent, settle, start
from tests.support.sse import SseReader, messages


def step(goal: str) -> dict[str, Any]:
    return {"goal": goal, "acceptance_criteria": [f"{goal}: done"]}


def submit(*goals: str) -> dict[str, Any]:
    plan = {"steps": [step(g) for g in goals]}
    return {"tool_calls": [{"name": "submit_plan", "input": plan}]}


def give_up(reason: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "step_failed", "input": {"reason": reason}}]}


ECHO = {"tool_calls": [{"name": "echo", "input": {"x": 1}}]}


def planned(*turns: dict[str, Any], **settings: Any) -> dict[str, Any]:
    return {
        "name": "planner",
        "tools": ["echo"],
        "execution_loop": "plan_execute",
        "plan_execute": {"planner_model": "big", "executor_model": "small", **settings},
        "model": {"provider": "scripted", "name": "scripted", "script": list(turns)},
    }


async def run_to_end(client: httpx.AsyncClient, agent: dict[str, Any]) -> dict[str, Any]:
    agent_id = await make_agent(client, agent)
    run = await settle(client, (await start(client, agent_id=agent_id))["id"])
    return run


async def plan_events(client: httpx.AsyncClient, run_id: str) -> list[tuple[str, Any]]:
    """The run's plan events (each checked against the published schema), in order."""
    async with asyncio.timeout(10), client.stream("GET", f"/v1/runs/{run_id}/events") as sse:
        received = [m async for m in messages(sse) if m.id is not None]  # ends by itself
    found = []
    for m in received:
        if m.event is not None and m.event.startswith("plan."):
            found.append((m.event, m.data.get("step")))
    return found


async def transcript(client: httpx.AsyncClient, run: dict[str, Any]) -> str:
    """The run's conversation, as JSON text."""
    path = f"/v1/conversations/{run['conversation_id']}/messages"
    return json.dumps((await client.get(path)).json())


async def test_a_plan_of_two_steps_runs_them_in_order(client: httpx.AsyncClient) -> None:
    run = await run_to_end(
        client, planned(submit("find", "report"), ECHO, {"text": "found"}, {"text": "report"})
    )
    assert run["status"] == "completed", run
    assert run["stop_reason"] == "end_turn" and run["result"] == "report"
    plan = run["plan"]
    assert [(s["goal"], s["status"], s["result"]) for s in plan["steps"]] == [
        ("find", "completed", "found"),
        ("report", "completed", "report"),
    ]
    assert plan["current_step"] is None and plan["replans"] == 0
    assert await plan_events(client, run["id"]) == [
        ("plan.created", None),
        ("plan.step.started", 0),
        ("plan.step.completed", 0),
        ("plan.step.started", 1),
        ("plan.step.completed", 1),
    ]
    texts = await transcript(client, run)
    assert "Step 1 of 2 of the plan: find" in texts and "Step 2 of 2 of the plan: report" in texts


async def test_a_failed_step_is_replanned_keeping_what_was_done(
    client: httpx.AsyncClient,
) -> None:
    run = await run_to_end(
        client,
        planned(
            submit("find", "fetch"),
            {"text": "found"},
            give_up("the server is gone"),
            submit("fetch from the mirror"),
            {"text": "fetched"},
        ),
    )
    assert run["status"] == "completed", run
    assert run["result"] == "fetched"
    plan = run["plan"]
    assert [(s["goal"], s["status"]) for s in plan["steps"]] == [
        ("find", "completed"),
        ("fetch from the mirror", "completed"),
    ]
    assert plan["replans"] == 1
    assert await plan_events(client, run["id"]) == [
        ("plan.created", None),
        ("plan.step.started", 0),
        ("plan.step.completed", 0),
        ("plan.step.started", 1),
        ("plan.step.failed", 1),
        ("plan.replanned", None),
        ("plan.step.started", 1),
        ("plan.step.completed", 1),
    ]


async def test_a_run_fails_when_its_replans_run_out(client: httpx.AsyncClient) -> None:
    run = await run_to_end(
        client,
        planned(
            submit("fetch"),
            give_up("gone"),
            submit("fetch again"),
            give_up("still gone"),
            max_replans=1,
        ),
    )
    assert run["status"] == "failed", run
    assert run["stop_reason"] == "plan_failed"
    assert "still gone" in run["error"]["message"] and "max_replans 1" in run["error"]["message"]
    assert run["plan"]["replans"] == 1
    assert run["plan"]["steps"][0]["status"] == "failed"


async def test_a_run_out_of_replans_goes_on_when_retried_with_more(
    client: httpx.AsyncClient,
) -> None:
    """A retry as it stands fails again at once (no replan is left); a person who raises
    `max_replans` and retries gets the replan, and the run goes on from its plan."""
    agent = planned(
        submit("fetch"), give_up("gone"), submit("fetch from the mirror"), {"text": "fetched"}
    )
    agent_id = await make_agent(client, {**agent, "plan_execute": {"max_replans": 0}})
    run = await settle(client, (await start(client, agent_id=agent_id))["id"])
    assert run["stop_reason"] == "plan_failed" and run["plan"]["replans"] == 0

    assert (await client.post(f"/v1/runs/{run['id']}/retry")).status_code == 200
    again = await settle(client, run["id"])
    assert again["stop_reason"] == "plan_failed" and again["plan"]["replans"] == 0

    raised = await client.patch(f"/v1/agents/{agent_id}", json={"plan_execute": {"max_replans": 1}})
    assert raised.status_code == 200, raised.text
    assert (await client.post(f"/v1/runs/{run['id']}/retry")).status_code == 200
    done = await settle(client, run["id"])
    assert done["status"] == "completed", done
    assert done["result"] == "fetched" and done["plan"]["replans"] == 1
    assert [s["goal"] for s in done["plan"]["steps"]] == ["fetch from the mirror"]


async def test_an_invalid_plan_is_asked_for_again_once(client: httpx.AsyncClient) -> None:
    empty = {"tool_calls": [{"name": "submit_plan", "input": {"steps": []}}]}
    again = await run_to_end(client, planned(empty, submit("do"), {"text": "did"}))
    assert again["status"] == "completed" and again["result"] == "did", again

    failed = await run_to_end(client, planned(empty, {"text": "no plan from me"}))
    assert failed["status"] == "failed", failed
    assert failed["stop_reason"] == "plan_invalid" and failed["plan"] is None
    assert "No plan was submitted" in failed["error"]["message"]
    assert "The plan is invalid" in await transcript(
        client, failed
    )  # the first answer told the planner why


async def test_a_step_waits_for_an_approval_and_goes_on_in_that_step(
    client: httpx.AsyncClient,
) -> None:
    post = {"method": "POST", "url": "https://status.example.com/notes", "body": "ok"}
    agent = planned(
        submit("post the note", "report"),
        {"tool_calls": [{"name": "http_request", "input": post}]},
        {"text": "not posted"},
        {"text": "reported"},
    )
    agent_id = await make_agent(client, agent | {"tools": ["http_request"]})
    run_id = (await start(client, agent_id=agent_id))["id"]
    waiting = await settle(client, run_id)
    assert waiting["status"] == "waiting_on_human", waiting
    assert waiting["plan"]["current_step"] == 0
    assert waiting["plan"]["steps"][0]["status"] == "running"
    [approval] = (await client.get("/v1/approvals", params={"run_id": run_id})).json()["items"]
    rejected = await client.post(
        f"/v1/approvals/{approval['id']}/reject", json={"reason": "Wait for QA."}
    )
    assert rejected.status_code == 200, rejected.text
    done = await settle(client, run_id)
    assert done["status"] == "completed" and done["result"] == "reported", done
    assert [s["result"] for s in done["plan"]["steps"]] == ["not posted", "reported"]
    moves = await plan_events(client, run_id)
    assert moves.count(("plan.step.started", 0)) == 1  # the step went on where it paused


async def test_the_runs_iteration_limit_counts_the_planner_and_every_step(
    client: httpx.AsyncClient,
) -> None:
    agent = planned(submit("find", "report"), {"text": "found"}, {"text": "report"})
    run = await run_to_end(client, agent | {"limits": {"max_iterations": 2}})
    assert run["status"] == "completed" and run["stop_reason"] == "max_iterations", run
    assert run["result"] == "found"  # the last answer given
    assert [s["status"] for s in run["plan"]["steps"]] == ["completed", "pending"]


async def test_a_cancel_during_a_steps_model_call_ends_the_run_in_that_step(
    client: httpx.AsyncClient,
) -> None:
    agent = planned(submit("wait"), {"text": "too late", "latency_ms": 20_000})
    run_id = (await start(client, agent_id=await make_agent(client, agent)))["id"]
    async with client.stream("GET", f"/v1/runs/{run_id}/events") as events:
        reader = SseReader(events)
        while (await reader.take(1, persisted_only=True))[0].event != "plan.step.started":
            pass
        # The step's model call begins as the step starts; a cancel now lands during it.
        cancelled = await client.post(f"/v1/runs/{run_id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        final = await settle(client, run_id)
    assert (final["status"], final["stop_reason"]) == ("cancelled", "cancelled"), final
    assert final["plan"]["steps"][0]["status"] == "running"  # where it was cut short
    assert final["iteration"] == 1  # the planner's call; the step's was abandoned


async def test_a_fork_goes_on_in_the_plan_as_it_stood_after_its_step(
    client: httpx.AsyncClient,
) -> None:
    """Forked where the second step started, the new run does not plan again: it runs that
    step (the script goes on from the fork's iteration) in the copied plan."""
    run = await run_to_end(
        client, planned(submit("draft", "polish"), {"text": "v1"}, {"text": "v2"})
    )
    assert run["status"] == "completed", run
    steps = (await client.get(f"/v1/runs/{run['id']}/history")).json()["items"]
    second = [s["seq"] for s in steps if "plan.step.started" in s["events"]][1]

    forked = await client.post(f"/v1/runs/{run['id']}/fork", json={"from_seq": second})
    assert forked.status_code == 202, forked.text
    copied = forked.json()["plan"]
    assert [s["status"] for s in copied["steps"]] == ["completed", "running"]
    fork = await settle(client, forked.json()["id"])

    assert fork["status"] == "completed", fork
    assert fork["execution_loop"] == run["execution_loop"]
    assert [(s["goal"], s["status"], s["result"]) for s in fork["plan"]["steps"]] == [
        ("draft", "completed", "v1"),
        ("polish", "completed", "v2"),
    ]
    assert await plan_events(client, fork["id"]) == [("plan.step.completed", 1)]
