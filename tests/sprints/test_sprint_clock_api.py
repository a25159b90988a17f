"""A sprint's `auto_transition` through the API (set at creation, changed until completed,
shown on every read), and the sprint clock running in the server: an active clocked sprint
whose end date is past moves to in_review, streamed like a person's move but by
`system:sprint_clock`, and counted in the metrics."""

from __future__ import annotations

import asyncio

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.sprints.test_sprints_api import make_sprint, move
from tests.support.api import assert_problem
from tests.support.server import make_settings, running_server
from tests.support.sse import SseReader

# Far off: the server's own clock (the real one) never finds these sprints due.
LATER = {"start_date": "2099-01-01", "end_date": "2099-01-14"}


async def test_auto_transition_is_set_at_creation_and_changes_until_completed(
    client: httpx.AsyncClient,
) -> None:
    plain = await make_sprint(client)
    assert plain["auto_transition"] is False
    clocked = await make_sprint(client, project="borealis", auto_transition=True, **LATER)
    assert clocked["auto_transition"] is True
    path = f"/v1/sprints/{clocked['id']}"

    await move(client, clocked["id"], "active")
    off = await client.patch(path, json={"auto_transition": False}, headers={"If-Match": '"2"'})
    assert off.status_code == 200, off.text
    assert off.json()["auto_transition"] is False and off.json()["version"] == 3
    assert (await client.get(path)).json()["auto_transition"] is False
    cleared = await client.patch(path, json={"auto_transition": None})
    assert assert_problem(cleared, 422, "validation_error")["errors"][0]["field"] == (
        "auto_transition"
    )
    wrong = await client.patch(path, json={"auto_transition": "sometimes"})
    assert_problem(wrong, 422, "validation_error")

    await move(client, clocked["id"], "in_review", "retrospective", "completed")
    late = await client.patch(path, json={"auto_transition": True})
    assert assert_problem(late, 409, "sprint_locked")["sprint_status"] == "completed"


async def test_the_server_clock_moves_an_active_sprint_past_its_end_date(
    database_url: str, clean_db: AsyncEngine
) -> None:
    settings = make_settings(database_url, sprints={"clock_interval_s": 0.05})
    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as client:
        # Ended long ago by the real clock; planned, it waits for a person to start it.
        past = {"start_date": "2026-01-01", "end_date": "2026-01-14"}
        clocked = await make_sprint(client, auto_transition=True, **past)
        plain = await make_sprint(client, project="borealis", **past)
        await move(client, plain["id"], "active")
        await move(client, clocked["id"], "active")
        async with (
            asyncio.timeout(30),
            client.stream("GET", "/v1/sprints/events", params={"last_event_id": 0}) as stream,
        ):
            events = await SseReader(stream).take(5)
        metrics = (await client.get("/metrics")).text
        left = (await client.get(f"/v1/sprints/{plain['id']}")).json()

    assert [e.event for e in events] == ["sprint.created"] * 2 + ["sprint.transitioned"] * 3
    last = events[-1].data
    assert (last["from"], last["to"]) == ("active", "in_review")
    assert last["actor"] == "system:sprint_clock"
    assert last["sprint"]["id"] == clocked["id"] and last["sprint"]["version"] == 3
    assert "loopwright_sprints_auto_transitioned_total 1.0" in metrics
    assert left["status"] == "active"  # not clocked: a person moves it
