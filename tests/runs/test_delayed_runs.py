"""Delayed runs through real HTTP: `not_before` on `POST /v1/runs` queues the run at once,
no worker claims it before that time, and it keeps its place in its lane meanwhile."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx

from tests.support.api import assert_problem
from tests.support.factories import make_agent, settle, start_run, unique
from tests.support.sse import messages


def _at(run: dict[str, str]) -> datetime:
    return datetime.fromisoformat(run["not_before"])


async def test_a_delayed_run_starts_no_sooner_than_asked(client: httpx.AsyncClient) -> None:
    agent_id = (await make_agent(client, {"text": "on time"}))["id"]
    # The database's clock decides when a run is due; this machine's is the same clock.
    not_before = datetime.now(UTC) + timedelta(seconds=1.5)
    run = await start_run(client, agent_id=agent_id, not_before=not_before.isoformat())
    assert run["status"] == "queued" and _at(run) == not_before
    final = await settle(client, run["id"])
    assert final["status"] == "completed" and final["result"] == "on time"
    assert datetime.fromisoformat(final["started_at"]) >= not_before
    assert final["not_before"] is None  # claimed: nothing left to wait for
    async with asyncio.timeout(10), client.stream("GET", f"/v1/runs/{run['id']}/events") as sse:
        received = [m async for m in messages(sse) if m.id is not None]
    opened = received[0]
    assert opened.event == "agent_run.queued"
    assert datetime.fromisoformat(opened.data["not_before"]) == not_before


async def test_a_delayed_run_holds_its_lane_and_nothing_else(client: httpx.AsyncClient) -> None:
    agent_id = (await make_agent(client, {"text": "done"}))["id"]
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    nightly = unique("nightly")
    delayed = await start_run(client, agent_id=agent_id, lane=nightly, not_before=later)
    behind = await start_run(client, agent_id=agent_id, lane=nightly)
    elsewhere = await start_run(client, agent_id=agent_id)
    # Workers claimed and finished the other lane's run, and passed the delayed one by.
    assert (await settle(client, elsewhere["id"]))["status"] == "completed"
    assert (await client.get(f"/v1/runs/{delayed['id']}")).json()["status"] == "queued"
    assert (await client.get(f"/v1/runs/{behind['id']}")).json()["status"] == "queued"
    cancelled = await client.post(f"/v1/runs/{delayed['id']}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    assert (await settle(client, behind["id"]))["status"] == "completed"


async def test_a_time_already_past_starts_the_run_at_once(client: httpx.AsyncClient) -> None:
    agent_id = (await make_agent(client, {"text": "late is now"}))["id"]
    run = await start_run(client, agent_id=agent_id, not_before="2020-01-01T00:00:00Z")
    assert (await settle(client, run["id"]))["result"] == "late is now"


async def test_an_unstorable_time_is_a_422_naming_it(client: httpx.AsyncClient) -> None:
    agent_id = (await make_agent(client, {"text": "x"}))["id"]
    body = {"agent_id": agent_id, "input": "go", "not_before": "2030-01-01T00:00:00-19:00"}
    problem = assert_problem(await client.post("/v1/runs", json=body), 422, "validation_error")
    assert [e["field"] for e in problem["errors"]] == ["not_before"]
    assert (await client.get("/v1/runs", params={"agent_id": agent_id})).json()["items"] == []
