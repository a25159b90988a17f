"""A run's history through real HTTP: its steps in cursor pages, forks from a tool-call
step, a waiting step and a settled run (the original untouched), a fork refused for a
step the run does not have, and a long run's stream replayed whole after a dropped
connection."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.runs.test_runs_api import make_agent, scripted, settle, start
from tests.support.api import assert_problem
from tests.support.sse import SseMessage, SseReader


def echo(i: int) -> dict[str, Any]:
    return {"tool_calls": [{"name": "echo", "input": {"i": i}}]}


async def history(client: httpx.AsyncClient, run_id: str, limit: int = 50) -> list[dict[str, Any]]:
    """Every step, page by page."""
    steps: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        response = await client.get(f"/v1/runs/{run_id}/history", params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        assert len(body["items"]) <= limit
        steps += body["items"]
        cursor = body["next_cursor"]
        if cursor is None:
            return steps


async def messages(client: httpx.AsyncClient, conversation_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/conversations/{conversation_id}/messages")
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()
    return found


async def fork(client: httpx.AsyncClient, run_id: str, **body: Any) -> httpx.Response:
    return await client.post(f"/v1/runs/{run_id}/fork", json=body)


async def test_a_runs_history_pages_through_every_boundary(client: httpx.AsyncClient) -> None:
    agent = await make_agent(client, scripted(echo(1), echo(2), {"text": "done"}))
    run = await settle(client, (await start(client, agent_id=agent))["id"])
    assert run["status"] == "completed" and run["iteration"] == 3

    steps = await history(client, run["id"], limit=2)
    assert [s["seq"] for s in steps] == list(range(1, len(steps) + 1))
    assert [s["kind"] for s in steps] == [
        "note",  # queued
        "input",
        "llm_response",
        "tool_result",
        "llm_response",
        "tool_result",
        "final",
    ]
    assert steps[0]["events"] == ["agent_run.queued"]
    assert steps[1]["events"][0] == "agent_run.started"
    first_call = steps[2]
    (started,) = first_call["started"]
    assert started["tool"] == "echo" and started["idempotent"] is True
    assert first_call["messages"][0]["content"][0]["id"] == started["id"]
    assert first_call["iteration"] == 1 and first_call["usage"]["input_tokens"] > 0
    (answered,) = steps[3]["answered"]
    assert answered["id"] == started["id"] and answered["is_error"] is False
    assert steps[-1]["status"] == "completed" and steps[-1]["iteration"] == 3
    # The steps' messages are the conversation's transcript, in order.
    transcript = await messages(client, run["conversation_id"])
    assert [m for s in steps for m in s["messages"]] == transcript


async def test_a_fork_from_a_tool_call_step_runs_the_call_again_as_a_new_call(
    client: httpx.AsyncClient,
) -> None:
    agent = await make_agent(client, scripted(echo(1), {"text": "done"}, echo(2), {"text": "b"}))
    original = await settle(client, (await start(client, agent_id=agent))["id"])
    steps = await history(client, original["id"])
    call_step = next(s for s in steps if s["kind"] == "llm_response")
    before = await messages(client, original["conversation_id"])

    response = await fork(client, original["id"], from_seq=call_step["seq"])
    assert response.status_code == 202, response.text
    forked = await settle(client, response.json()["id"])

    assert forked["status"] == "completed"
    assert forked["conversation_id"] != original["conversation_id"]
    transcript = await messages(client, forked["conversation_id"])

    # The transcript up to the call, then the call run again (its result), then the rest.
    def said(ms: list[dict[str, Any]]) -> list[tuple[str, Any]]:
        return [(m["role"], m["content"]) for m in ms]

    assert said(transcript[:2]) == said(before[:2])
    assert {m["run_id"] for m in transcript} == {forked["id"]}
    (use,) = [b for b in transcript[1]["content"] if b["type"] == "tool_use"]
    results = [b for m in transcript for b in m["content"] if b["type"] == "tool_result"]
    assert [r["tool_use_id"] for r in results] == [use["id"]]
    fork_steps = await history(client, forked["id"])
    assert fork_steps[0]["events"] == ["agent_run.queued", "agent_run.forked"] + [
        "message.created"
    ] * len(fork_steps[0]["messages"])
    restarted = [s for s in fork_steps if s["started"]]
    assert [c["id"] for s in restarted for c in s["started"]] == [use["id"]]
    # The original is untouched.
    assert await messages(client, original["conversation_id"]) == before
    assert await history(client, original["id"]) == steps


async def test_a_fork_from_a_waiting_step_asks_again_and_of_a_settled_run_needs_input(
    client: httpx.AsyncClient,
) -> None:
    ask = {"tool_calls": [{"name": "ask_human", "input": {"question": "colour?"}}]}
    agent = await make_agent(
        client, scripted(ask, {"text": "blue it is"}, ask, tools=["ask_human"])
    )
    run = await start(client, agent_id=agent)
    waiting = await settle(client, run["id"])
    assert waiting["status"] == "waiting_on_human"
    paused = (await history(client, run["id"]))[-1]
    assert paused["kind"] == "human_pause"

    asked_again = await settle(
        client, (await fork(client, run["id"], from_seq=paused["seq"])).json()["id"]
    )
    assert asked_again["status"] == "waiting_on_human"
    assert asked_again["waiting_for"]["question"] == "colour?"

    answered = await client.post(f"/v1/runs/{run['id']}/human-response", json={"response": "b"})
    assert answered.status_code == 200, answered.text
    done = await settle(client, run["id"])
    final = (await history(client, run["id"]))[-1]
    assert done["status"] == "completed" and final["kind"] == "final"

    refused = await fork(client, run["id"], from_seq=final["seq"])
    assert_problem(refused, 422, "validation_error")
    assert refused.json()["errors"][0]["field"] == "body.input"
    again = await fork(client, run["id"], from_seq=final["seq"], input="and green?")
    assert again.status_code == 202, again.text
    continued = await settle(client, again.json()["id"])
    transcript = await messages(client, continued["conversation_id"])
    assert transcript[-2]["content"] == [{"type": "text", "text": "and green?"}]


async def test_a_fork_from_a_step_the_run_does_not_have_is_refused(
    client: httpx.AsyncClient,
) -> None:
    agent = await make_agent(client, scripted({"text": "done"}))
    run = await settle(client, (await start(client, agent_id=agent))["id"])
    last = (await history(client, run["id"]))[-1]["seq"]
    refused = await fork(client, run["id"], from_seq=last + 1)
    assert_problem(refused, 422, "validation_error")
    assert refused.json()["errors"][0]["field"] == "body.from_seq"
    missing = await fork(client, "run_nope", from_seq=1)
    assert_problem(missing, 404, "not_found")
    assert (await client.get("/v1/runs/run_nope/history")).status_code == 404


async def test_a_long_runs_stream_replays_whole_from_the_start_after_a_dropped_connection(
    client: httpx.AsyncClient,
) -> None:
    turns = [{**echo(i), "latency_ms": 5} for i in range(40)]
    agent = await make_agent(client, scripted(*turns, {"text": "end"}))
    run = await start(client, agent_id=agent)
    path = f"/v1/runs/{run['id']}/events"
    async with asyncio.timeout(60):
        async with client.stream("GET", path) as first:
            await SseReader(first).take(7, persisted_only=True)  # dropped mid-step, mid-run
        assert (await settle(client, run["id"]))["status"] == "completed"
        async with client.stream("GET", path, headers={"Last-Event-ID": "0"}) as again:
            reader = SseReader(again)
            replayed: list[SseMessage] = []
            while not replayed or replayed[-1].event != "agent_run.completed":
                replayed += await reader.take(1, persisted_only=True)
    steps = await history(client, run["id"])
    assert [e for s in steps for e in s["events"]] == [m.event for m in replayed]
    last_ids = [m.id for m in replayed if m.id and "." not in m.id]
    assert last_ids == [str(s["seq"]) for s in steps]
