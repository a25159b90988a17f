"""A lane's stream through real HTTP: the lifecycle events of every run on the lane, in the
order they happened, replayed without gap or duplicate after a dropped connection; and
the lane routes for names with `:` and `/`."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import httpx

from tests.runs.test_runs_api import make_agent, scripted, settle, start
from tests.support.api import assert_problem
from tests.support.sse import SseMessage, SseReader

LANE = "team:alpha/reviews"  # both characters a lane's route must carry as they are
HOLDER = scripted(
    {"tool_calls": [{"name": "ask_human", "input": {"question": "hold the lane?"}}]},
    {"text": "released"},
    tools=["ask_human"],
)
QUICK = scripted({"text": "done"})


async def read_until(reader: SseReader, done: Any) -> list[SseMessage]:
    """Persisted events until one satisfies `done` (that one included)."""
    taken: list[SseMessage] = []
    while not taken or not done(taken[-1]):
        taken += await reader.take(1, persisted_only=True)
    return taken


def is_event(run_id: str, event: str) -> Any:
    return lambda m: m.event == event and m.data["run_id"] == run_id


async def test_a_lane_stream_carries_its_runs_lifecycle_in_order_and_resumes_without_a_gap(
    client: httpx.AsyncClient,
) -> None:
    holder_agent = await make_agent(client, HOLDER)
    quick_agent = await make_agent(client, QUICK)
    path = f"/v1/lanes/{LANE}/events"
    snapshot = (await client.get(f"/v1/lanes/{LANE}")).json()
    assert snapshot["lane"] == LANE and snapshot["last_event_id"] == 0
    async with asyncio.timeout(30):
        async with client.stream("GET", path) as live:  # no resume point: from now on
            assert live.headers["content-type"].startswith("text/event-stream")
            reader = SseReader(live)
            # A run waiting on a person holds the lane, so `a` and `b` both queue behind it.
            holder = await start(client, agent_id=holder_agent, lane=LANE)
            assert (await settle(client, holder["id"]))["status"] == "waiting_on_human"
            a = await start(client, agent_id=quick_agent, lane=LANE)
            b = await start(client, agent_id=quick_agent, lane=LANE)
            seen = await read_until(reader, is_event(b["id"], "agent_run.queued"))
        # Dropped: everything from here happens while no client listens.
        cancelled = await client.post(f"/v1/runs/{holder['id']}/cancel")
        assert cancelled.json()["status"] == "cancelled"
        assert (await settle(client, b["id"]))["status"] == "completed"
        last = seen[-1].id
        assert last is not None
        async with client.stream("GET", path, headers={"Last-Event-ID": last}) as resumed:
            rest = await read_until(SseReader(resumed), is_event(b["id"], "agent_run.completed"))
        async with client.stream("GET", path, params={"last_event_id": 0}) as everything:
            full = await SseReader(everything).take(len(seen) + len(rest), persisted_only=True)
        run_a = f"/v1/runs/{a['id']}/events"
        async with client.stream("GET", run_a) as own:
            a_own = await read_until(SseReader(own), is_event(a["id"], "agent_run.completed"))

    got = [*seen, *rest]
    assert [int(m.id or 0) for m in got] == list(range(1, len(got) + 1))  # no gap, no dup
    assert [(m.id, m.event, m.data) for m in full] == [(m.id, m.event, m.data) for m in got]
    assert all(m.event and m.event.startswith("agent_run.") for m in got)  # lifecycle only
    names = {holder["id"]: "holder", a["id"]: "a", b["id"]: "b"}
    lifecycle = [
        (names[m.data["run_id"]], (m.event or "").removeprefix("agent_run."))
        for m in got
        if m.event in {"agent_run.queued", "agent_run.started", "agent_run.completed"}
    ]
    assert lifecycle == [
        ("holder", "queued"),
        ("holder", "started"),
        ("a", "queued"),
        ("b", "queued"),
        ("a", "started"),
        ("a", "completed"),
        ("b", "started"),
        ("b", "completed"),
    ]
    # Each is the run's own lifecycle event as its run stream has it (ids apart).
    a_on_lane = [(m.event, m.data) for m in got if m.data["run_id"] == a["id"]]
    a_lifecycle = [(m.event, m.data) for m in a_own if (m.event or "").startswith("agent_run.")]
    assert a_on_lane == a_lifecycle
    after = (await client.get(f"/v1/lanes/{LANE}")).json()
    assert after["active"] is None and after["queued"] == []
    assert after["last_event_id"] == len(got)


async def test_lane_routes_take_names_with_colons_and_slashes(client: httpx.AsyncClient) -> None:
    agent_id = await make_agent(client, QUICK)
    run = await start(client, agent_id=agent_id)  # on `conversation:<id>`
    done = await settle(client, run["id"])
    lane = done["lane"]
    assert lane.startswith("conversation:")
    # Before the fix the `path` converter read `…/events` as part of the lane's name.
    json_view = await client.get(f"/v1/lanes/{lane}")
    assert json_view.status_code == 200 and json_view.json()["lane"] == lane
    assert json_view.json()["last_event_id"] == 3  # queued, started, completed
    async with asyncio.timeout(30):
        async with client.stream("GET", f"/v1/lanes/{lane}/events?last_event_id=0") as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = await SseReader(stream).take(3, persisted_only=True)
    assert [m.event for m in events] == [
        "agent_run.queued",
        "agent_run.started",
        "agent_run.completed",
    ]
    assert {m.data["run_id"] for m in events} == {run["id"]}

    # `/` in a name; escaped or not, it is the same lane.
    for spelled in ("team/alpha", quote("team/alpha", safe="")):
        view = await client.get(f"/v1/lanes/{spelled}")
        assert view.status_code == 200 and view.json()["lane"] == "team/alpha"
    # A lane named `…/events` could never be read, so it cannot be made.
    refused = await client.post(
        "/v1/runs", json={"agent_id": agent_id, "input": "x", "lane": "team/events"}
    )
    assert assert_problem(refused, 422, "validation_error")["errors"][0]["field"] == "lane"
    bad = await client.get(f"/v1/lanes/{lane}/events", headers={"Last-Event-ID": "soon"})
    assert_problem(bad, 422, "validation_error")
    too_long = await client.get(f"/v1/lanes/{'x' * 301}")
    assert_problem(too_long, 422, "validation_error")
