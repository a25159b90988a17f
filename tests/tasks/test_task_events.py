"""The task event stream over real SSE: live delivery, replay after a disconnect with
Last-Event-ID (no gap, no duplicate), keep-alives, and wake-ups from another process."""

from __future__ import annotations

import asyncio

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.support.factories import create_task, unique
from tests.support.server import make_settings, running_server
from tests.support.sse import SseMessage, SseReader


def _task_id(message: SseMessage) -> str | None:
    task = message.data.get("task") if isinstance(message.data, dict) else None
    return str(task["id"]) if task else None


async def _mine(reader: SseReader, ids: set[str], count: int) -> list[SseMessage]:
    """The next `count` events about the tasks `ids`: the stream is the whole server's,
    and other tests' tasks change on it too. Every event read on the way, this test's or
    not, comes in order with no id twice."""
    read: list[SseMessage] = []
    mine: list[SseMessage] = []
    while len(mine) < count:
        [message] = await reader.take(1)
        read.append(message)
        if _task_id(message) in ids:
            mine.append(message)
    numbers = [int(m.id or 0) for m in read]
    assert numbers == sorted(set(numbers)), numbers
    return mine


async def test_replay_after_disconnect_sends_exactly_the_missed_events(
    client: httpx.AsyncClient,
) -> None:
    async with asyncio.timeout(20):
        async with client.stream("GET", "/v1/tasks/events", headers={"Last-Event-ID": "0"}) as s:
            first = await create_task(client, title="one")
            second = await create_task(client, title="two")
            ids = {first["id"], second["id"]}
            seen = await _mine(SseReader(s), ids, 2)
        assert [m.event for m in seen] == ["task.created", "task.created"]
        assert [m.data["task"]["id"] for m in seen] == [first["id"], second["id"]]
        last_id = seen[-1].id
        assert last_id is not None

        # While nobody listens: three more changes.
        third = await create_task(client, title="three", assigned_to=unique("ann"))
        await client.post(f"/v1/tasks/{third['id']}/transitions", json={"to": "in_progress"})
        await client.patch(f"/v1/tasks/{first['id']}", json={"title": "one!"})

        async with client.stream(
            "GET", "/v1/tasks/events", headers={"Last-Event-ID": last_id}
        ) as resumed:
            reader = SseReader(resumed)
            [after] = await reader.take(1)  # nothing before the resume point comes again
            assert int(after.id or 0) > int(last_id)
            ids.add(third["id"])
            missed = [after] if _task_id(after) in ids else []
            missed += await _mine(reader, ids, 3 - len(missed))
            fourth = await create_task(client, title="four")
            ids.add(fourth["id"])
            (live,) = await _mine(reader, ids, 1)

    # No gap and no duplicate among this test's events: the three it missed, in order,
    # then the live one.
    numbers = [int(m.id or 0) for m in [*missed, live]]
    assert numbers == sorted(set(numbers)) and numbers[0] > int(last_id)
    assert [m.event for m in missed] == ["task.created", "task.transitioned", "task.updated"]
    assert [m.data["task"]["id"] for m in missed] == [third["id"], third["id"], first["id"]]
    assert missed[1].data["from"] == "assigned" and missed[1].data["to"] == "in_progress"
    assert missed[2].data["task"]["title"] == "one!"
    assert live.event == "task.created" and live.data["task"]["id"] == fourth["id"]


async def test_query_parameter_resume_and_live_only_default(client: httpx.AsyncClient) -> None:
    before = await create_task(client, title="before")
    async with asyncio.timeout(20):
        async with client.stream("GET", "/v1/tasks/events") as live_only:
            after = await create_task(client, title="after")
            # The first of this test's events is the new one: `before` is not sent.
            (event,) = await _mine(SseReader(live_only), {before["id"], after["id"]}, 1)
        assert event.data["task"]["id"] == after["id"]

        async with client.stream("GET", "/v1/tasks/events", params={"last_event_id": 0}) as all_:
            replayed = await _mine(SseReader(all_), {before["id"], after["id"]}, 2)
    assert [m.data["task"]["id"] for m in replayed] == [before["id"], after["id"]]


async def test_idle_streams_send_keep_alive_comments(
    database_url: str, clean_db: AsyncEngine
) -> None:
    settings = make_settings(database_url, streams={"keepalive_s": 0.2})
    async with (
        running_server(settings) as url,
        httpx.AsyncClient(base_url=url) as http,
        asyncio.timeout(10),
        http.stream("GET", "/v1/tasks/events") as stream,
    ):
        assert stream.headers["content-type"].startswith("text/event-stream")
        message = await SseReader(stream).next_message()
        assert message.is_comment_only and message.comments


async def test_changes_made_by_another_process_wake_the_stream(
    database_url: str, clean_db: AsyncEngine, settings: Settings
) -> None:
    # The reader only polls every minute, so the event can only arrive in time through
    # Postgres NOTIFY from the other server.
    reader_settings = make_settings(database_url, streams={"poll_interval_s": 60})
    async with (
        running_server(reader_settings) as reader_url,
        running_server(settings) as writer_url,
        httpx.AsyncClient(base_url=reader_url) as reader,
        httpx.AsyncClient(base_url=writer_url) as writer,
        asyncio.timeout(10),
        reader.stream("GET", "/v1/tasks/events") as stream,
    ):
        task = await create_task(writer, title="from elsewhere")
        (event,) = await SseReader(stream).take(1)
    assert event.data["task"]["id"] == task["id"]
