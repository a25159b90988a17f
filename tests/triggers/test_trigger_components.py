"""The scheduler and the chain relay of a running server fire through the fire path: a
schedule whose time has come starts its run (the fire time in its metadata) and is armed
for its next time; a run that settles starts the chained run, with the source mapped in.
On the shared server each test reads the fires of its own trigger from the stream."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.factories import create_workflow, make_agent, start_run, unique
from tests.support.sse import SseReader
from tests.triggers.test_triggers_api import create


async def next_fire(client: httpx.AsyncClient, trigger_id: str) -> dict[str, Any]:
    """The trigger's first event in the triggers stream (read from its start)."""
    async with (
        asyncio.timeout(20),
        client.stream("GET", "/v1/triggers/events", headers={"Last-Event-ID": "0"}) as stream,
    ):
        reader = SseReader(stream)
        while True:
            (event,) = await reader.take(1)
            if event.data["trigger_id"] == trigger_id:
                break
    data: dict[str, Any] = event.data
    assert event.event == "trigger.fired", data
    return data


async def test_a_due_schedule_fires_and_is_armed_again(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    agent_id = (await make_agent(client))["id"]
    trigger = await create(
        client,
        {
            "kind": "schedule",
            # Daily: its own next time (the next midnight, UTC) never comes during the
            # test, so the only fire is the one made due here.
            "name": unique("every day"),
            "config": {"interval_s": 86_400},
            "target": {"kind": "run", "agent_id": agent_id, "input": "tick {{ fire_time }}"},
        },
    )
    due = datetime.fromisoformat(trigger["next_fire_at"]) - timedelta(days=1)
    async with db_engine.begin() as conn:  # as if a day had passed
        await conn.execute(
            text("UPDATE triggers SET next_fire_at = :due WHERE id = :id"),
            {"due": due, "id": trigger["id"]},
        )

    fired = await next_fire(client, trigger["id"])

    assert fired["trigger_id"] == trigger["id"]
    assert datetime.fromisoformat(fired["scheduled_for"]) == due
    run = (await client.get(f"/v1/runs/{fired['run_id']}")).json()
    assert run["input"] == f"tick {due.isoformat()}"
    assert run["metadata"]["trigger"]["fire_time"] == due.isoformat()
    async with asyncio.timeout(10):
        while True:  # the scheduler moves the time on after the fire's commit
            armed = (await client.get(f"/v1/triggers/{trigger['id']}")).json()["next_fire_at"]
            if datetime.fromisoformat(armed) > due:
                break
            await asyncio.sleep(0.05)
    assert datetime.fromisoformat(armed) == due + timedelta(days=1)
    # Paused: the shared server would fire it at the next midnight (UTC).
    assert (await client.post(f"/v1/triggers/{trigger['id']}/disable")).status_code == 200


async def test_a_settled_run_fires_its_chain(client: httpx.AsyncClient) -> None:
    first = (await make_agent(client, {"text": "the first answer"}))["id"]
    second = (await make_agent(client))["id"]
    chain = await create(
        client,
        {
            "kind": "chain",
            "name": unique("then"),
            "config": {"source": "run", "agent_id": first},
            "target": {"kind": "run", "agent_id": second, "input": "go on: {{ source.result }}"},
        },
    )

    source = await start_run(client, first)
    fired = await next_fire(client, chain["id"])

    assert fired["trigger_id"] == chain["id"] and fired["kind"] == "chain"
    run = (await client.get(f"/v1/runs/{fired['run_id']}")).json()
    assert run["input"] == "go on: the first answer"
    assert run["metadata"]["trigger"]["depth"] == 1
    assert fired["fire_key"].startswith("runs:")
    # The link, both ways: the chained run names its source, the source lists its chains.
    assert run["metadata"]["trigger"]["source"] == {"kind": "run", "id": source["id"]}
    assert fired["source_id"] == source["id"]
    chained = (await client.get(f"/v1/runs/{source['id']}/chained")).json()
    assert [(f["trigger_id"], f["run_id"], f["source_id"]) for f in chained] == [
        (chain["id"], run["id"], source["id"])
    ]
    assert (await client.get(f"/v1/runs/{run['id']}/chained")).json() == []
    missing = await client.get("/v1/runs/run_nope/chained")
    assert missing.status_code == 404


async def test_a_finished_execution_fires_its_chain_and_lists_it(
    client: httpx.AsyncClient,
) -> None:
    """A workflow with no task nodes completes on activation: its end fires the chain."""
    workflow = await create_workflow(
        client,
        nodes=[{"id": "s", "type": "start"}, {"id": "e", "type": "end"}],
        edges=[{"id": "e1", "source": "s", "target": "e"}],
    )
    agent_id = (await make_agent(client))["id"]
    chain = await create(
        client,
        {
            "kind": "chain",
            "name": unique("after the release"),
            "config": {"source": "workflow", "workflow_id": workflow["id"]},
            "target": {
                "kind": "run",
                "agent_id": agent_id,
                "input": "the release {{ source.id }} ended {{ source.status }}",
            },
        },
    )
    activated = await client.post(
        f"/v1/workflow-executions/activate/{workflow['id']}", json={"context": {}}
    )
    assert activated.status_code == 201, activated.text
    execution = activated.json()

    fired = await next_fire(client, chain["id"])

    assert (fired["trigger_id"], fired["source_id"]) == (chain["id"], execution["id"])
    run = (await client.get(f"/v1/runs/{fired['run_id']}")).json()
    assert run["input"] == f"the release {execution['id']} ended completed"
    assert run["metadata"]["trigger"]["source"] == {"kind": "workflow", "id": execution["id"]}
    url = f"/v1/workflow-executions/{execution['id']}/chained"
    assert [f["run_id"] for f in (await client.get(url)).json()] == [run["id"]]
    assert (await client.get("/v1/workflow-executions/wfx_nope/chained")).status_code == 404
