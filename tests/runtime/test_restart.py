"""What a restart must keep: versions, the audit trail and the event history."""

from __future__ import annotations

import asyncio

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.support.factories import create_task
from tests.support.server import running_server
from tests.support.sse import SseReader


async def test_versions_audit_and_events_survive_a_restart(
    settings: Settings, clean_db: AsyncEngine
) -> None:
    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
        task = await create_task(http, assigned_to="ann")
        await http.post(f"/v1/tasks/{task['id']}/transitions", json={"to": "in_progress"})
        await http.patch(f"/v1/tasks/{task['id']}", json={"title": "v3"})

    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
        stale = await http.patch(
            f"/v1/tasks/{task['id']}", json={"title": "x"}, headers={"If-Match": '"2"'}
        )
        assert stale.status_code == 409
        fresh = await http.patch(
            f"/v1/tasks/{task['id']}", json={"title": "v4"}, headers={"If-Match": '"3"'}
        )
        assert fresh.status_code == 200 and fresh.json()["version"] == 4
        trail = (await http.get(f"/v1/tasks/{task['id']}/transitions")).json()
        assert [t["to_status"] for t in trail] == ["assigned", "in_progress"]
        async with (
            asyncio.timeout(10),
            http.stream("GET", "/v1/tasks/events", params={"last_event_id": 0}) as stream,
        ):
            history = await SseReader(stream).take(4)
    assert [m.event for m in history] == [
        "task.created",
        "task.transitioned",
        "task.updated",
        "task.updated",
    ]
    assert [m.id for m in history] == ["1", "2", "3", "4"]
