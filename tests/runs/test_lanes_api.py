"""`GET /v1/lanes`: the lanes a run holds or waits on, in the order of their oldest
unfinished run, with the holder and the queue's counts, in cursor pages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.runs.test_runs_api import make_agent, scripted, settle, start
from tests.support.api import assert_problem

ASKS = (
    {"tool_calls": [{"name": "ask_human", "input": {"question": "ok?"}}]},
    {"text": "thanks"},
)


@pytest.mark.own_server  # no lane busy at all: only on a database of its own
async def test_no_busy_lane_is_an_empty_page(client: httpx.AsyncClient) -> None:
    agent_id = await make_agent(client, scripted({"text": "done"}))
    await settle(client, (await start(client, agent_id=agent_id, lane="finished"))["id"])
    listed = await client.get("/v1/lanes")
    assert listed.status_code == 200
    assert listed.json() == {"items": [], "next_cursor": None}  # an idle lane is not busy


@pytest.mark.own_server  # the order of every busy lane: only on a database of its own
async def test_lanes_page_in_the_order_of_their_oldest_run(client: httpx.AsyncClient) -> None:
    asker = await make_agent(client, scripted(*ASKS, tools=["ask_human"]))
    holder = await start(client, agent_id=asker, lane="zeta")
    assert (await settle(client, holder["id"]))["status"] == "waiting_on_human"
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    delayed = await start(client, agent_id=asker, lane="alpha", not_before=later)
    queued = [(await start(client, agent_id=asker, lane="zeta"))["id"] for _ in range(2)]
    alone = await start(client, agent_id=asker, lane="mid")
    await settle(client, alone["id"])

    first = (await client.get("/v1/lanes", params={"limit": 2})).json()
    zeta, alpha = first["items"]
    assert (zeta["lane"], zeta["active"]["id"], zeta["queued"], zeta["delayed"]) == (
        "zeta",
        holder["id"],
        2,
        0,
    )
    assert zeta["oldest_run_id"] == holder["id"] and queued[0] > holder["id"]
    assert (alpha["lane"], alpha["active"], alpha["queued"], alpha["delayed"]) == (
        "alpha",
        None,
        1,
        1,
    )
    assert alpha["oldest_run_id"] == delayed["id"]

    rest = (await client.get("/v1/lanes", params={"cursor": first["next_cursor"]})).json()
    assert [lane["lane"] for lane in rest["items"]] == ["mid"]
    assert rest["items"][0]["active"]["status"] == "waiting_on_human"
    assert rest["next_cursor"] is None


async def test_a_cursor_that_is_none_is_a_422(client: httpx.AsyncClient) -> None:
    refused = await client.get("/v1/lanes", params={"cursor": "zz"})
    assert_problem(refused, 422, "validation_error")
