"""Sprint ceremonies through the real service: a schedule whose time has come starts the
facilitator agent's run with the sprint's data (goal, points, velocity) in its input; with
no sprint to be about, the fire fails and says why."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.core.streams import TRIGGERS_STREAM
from app.events import store as event_store
from tests.support.factories import create_task, make_agent, project, unique
from tests.support.sse import SseReader
from tests.triggers.test_triggers_api import create


async def fire_now(engine: AsyncEngine, trigger: dict[str, Any]) -> None:
    """Make a daily schedule due, as if a day had passed (its own next time never comes
    during the test)."""
    due = datetime.fromisoformat(trigger["next_fire_at"]) - timedelta(days=1)
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE triggers SET next_fire_at = :due WHERE id = :id"),
            {"due": due, "id": trigger["id"]},
        )


async def triggers_stream_end(engine: AsyncEngine) -> int:
    """The last event of the triggers stream now: the test reads its own after it."""
    async with AsyncSession(engine) as session:
        return await event_store.last_seq(session, TRIGGERS_STREAM)


async def fires(
    client: httpx.AsyncClient, since: int, triggers: set[str], count: int
) -> list[tuple[str, dict[str, Any]]]:
    """The first `count` events after `since` of the test's own `triggers`."""
    found: list[tuple[str, dict[str, Any]]] = []
    async with (
        asyncio.timeout(20),
        client.stream(
            "GET", "/v1/triggers/events", headers={"Last-Event-ID": str(since)}
        ) as stream,
    ):
        reader = SseReader(stream)
        while len(found) < count:
            [event] = await reader.take(1)
            if event.data.get("trigger_id") in triggers:
                found.append((str(event.event), event.data))
    return found


def ceremony(agent_id: str, kind: str, atlas: str) -> dict[str, Any]:
    return {
        "kind": "schedule",
        "name": unique(f"{kind} every day"),
        "config": {"interval_s": 86_400},
        "target": {
            "kind": "run",
            "agent_id": agent_id,
            "input": "Facilitate the "
            + kind
            + " of {{ sprint.name }} ({{ sprint.goal }}): {{ sprint.completed_points }} of "
            "{{ sprint.committed_points }} points; velocity {{ velocity.average_completed }}",
            "sprint": {"project": atlas, "ceremony": kind},
        },
    }


async def test_a_scheduled_retrospective_starts_the_facilitator_with_the_sprints_data(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    atlas = project()
    facilitator = (await make_agent(client, {"text": "let us look back"}))["id"]
    task = await create_task(client, title="Ship", project=atlas, assigned_to=unique("ann"))
    sprint = (
        await client.post(
            "/v1/sprints",
            json={
                "project": atlas,
                "name": "S1",
                "goal": "ship the beta",
                "start_date": "2026-11-16",
                "end_date": "2026-11-27",
            },
        )
    ).json()
    version = sprint["version"]
    joined = await client.post(
        f"/v1/sprints/{sprint['id']}/tasks",
        json={"tasks": [{"task_id": task["id"], "story_points": 8}]},
    )
    version = joined.json()["version"]
    for status in ("active", "in_review"):
        moved = await client.post(
            f"/v1/sprints/{sprint['id']}/transitions",
            json={"to": status},
            headers={"If-Match": f'"{version}"'},
        )
        assert moved.status_code == 200, moved.text
        version = moved.json()["version"]
    trigger = await create(client, ceremony(facilitator, "retrospective", atlas))
    planning = await create(client, ceremony(facilitator, "planning", atlas))
    mine = {trigger["id"], planning["id"]}
    since = await triggers_stream_end(db_engine)
    await fire_now(db_engine, trigger)
    [(kind, fired)] = await fires(client, since, mine, 1)
    assert kind == "trigger.fired"
    run = (await client.get(f"/v1/runs/{fired['run_id']}")).json()
    assert run["input"] == (
        "Facilitate the retrospective of S1 (ship the beta): 0 of 8 points; velocity "
    )

    await fire_now(db_engine, planning)  # no sprint is being planned
    [_, (kind, failed)] = await fires(client, since, mine, 2)
    assert (kind, failed["trigger_id"], failed["run_id"]) == (
        "trigger.fire_failed",
        planning["id"],
        None,
    )
    assert "no sprint planning for a planning" in failed["error"]
