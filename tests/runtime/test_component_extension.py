"""A background component added from the test tree, as an embedding application adds one
(`create_app(components=…)`), without editing `app/`: one module with a name, what wakes
it (a bus stream and an interval), a start-up step and one pass. The process wakes it on
the stream and on its interval, restarts it with backoff when its loop dies (counted in
`loopwright_component_restarts_total`), and `/readyz` shows it; against a real server on
a real database, the interval and the backoff slept on an injected sleep."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from app.core.config import Settings
from app.core.streams import TASK_STREAM
from app.runtime.components import Loop, RestartPolicy, Wakes
from app.runtime.lifecycle import Component
from app.services import Services
from app.tasks.models.tasks import Task
from tests.support.server import running_app

INTERVAL_S = 3_600.0  # slept on the injected sleep: it ends when the test says
BACKOFF = RestartPolicy(base_delay_s=2.0, max_delay_s=30.0)
SAFETY_S = 20


class Sleeps:
    """An injected sleep: each call is announced and lasts until `end()`."""

    def __init__(self) -> None:
        self.asked: asyncio.Queue[float] = asyncio.Queue()
        self._gate = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self._gate = gate = asyncio.Event()
        self.asked.put_nowait(seconds)
        await gate.wait()

    def end(self) -> None:
        self._gate.set()

    async def next(self) -> float:
        async with asyncio.timeout(SAFETY_S):
            return await self.asked.get()


class TaskCounter:
    """The component: each pass counts the tasks; its first start-up fails (say, a
    resource it opens is not there yet), which ends its loop."""

    def __init__(self, services: Services, sleeps: Sleeps) -> None:
        self._sessionmaker = services.sessionmaker
        self.counts: asyncio.Queue[int] = asyncio.Queue()
        self.start_ups = 0
        self.loop = Loop(
            "task-counter",
            self.count,
            Wakes(INTERVAL_S, streams=(TASK_STREAM,)),
            bus=services.bus,
            start_up=self.start_up,
            sleep=sleeps.sleep,
            restart=BACKOFF,
        )

    async def start_up(self) -> None:
        self.start_ups += 1
        if self.start_ups == 1:
            raise ConnectionError("not there yet")

    async def count(self) -> None:
        async with self._sessionmaker() as session:
            tasks = await session.scalar(select(func.count()).select_from(Task))
        self.counts.put_nowait(tasks or 0)

    async def next_count(self) -> int:
        async with asyncio.timeout(SAFETY_S):
            return await self.counts.get()


async def _component(http: httpx.AsyncClient, name: str) -> dict[str, object]:
    ready = await http.get("/readyz")
    assert ready.status_code == 200, ready.text
    [found] = [c for c in ready.json()["components"] if c["name"] == name]
    return dict(found)


async def _restarts(http: httpx.AsyncClient, name: str) -> float:
    text = (await http.get("/metrics")).text
    samples = [
        s
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "loopwright_component_restarts_total" and s.labels == {"component": name}
    ]
    return samples[0].value if samples else 0.0


@pytest.mark.usefixtures("clean_db")
async def test_an_added_component_is_woken_restarted_and_shown(
    settings: Settings,
) -> None:
    sleeps = Sleeps()
    made: list[TaskCounter] = []

    def task_counter(services: Services) -> Component:
        made.append(TaskCounter(services, sleeps))
        return Component.of("task counter", made[0].loop)

    async with (
        running_app(settings, components=[task_counter]) as (url, _),
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):
        [counter] = made
        # Its first start-up raised: the loop died, and waits out its backoff.
        assert await sleeps.next() == BACKOFF.base_delay_s
        shown = await _component(http, "task counter")
        assert (shown["state"], shown["restarts"], shown["last_pass"]) == ("restarting", 1, None)
        assert await _restarts(http, "task counter") == 1

        sleeps.end()  # the backoff is over: it starts again, and passes at once
        assert await counter.next_count() == 0
        assert await sleeps.next() == INTERVAL_S
        shown = await _component(http, "task counter")
        assert (shown["state"], shown["restarts"]) == ("running", 1)
        assert shown["last_pass"] is not None and shown["stalled"] is False

        # A task created through the API: its commit wakes the component on the stream.
        created = await http.post("/v1/tasks", json={"title": "count me"})
        assert created.status_code == 201, created.text
        assert await counter.next_count() == 1
        assert await sleeps.next() == INTERVAL_S  # the interval starts over

        sleeps.end()  # nothing on the stream: the interval wakes it
        assert await counter.next_count() == 1
        assert await sleeps.next() == INTERVAL_S
        assert counter.counts.empty()
        assert counter.start_ups == 2
        assert await _restarts(http, "task counter") == 1

        # The overview lists it among the components that restarted.
        page = (await http.get("/ui/overview")).text
        rows = dict(re.findall(r'<tr data-component="([^"]+)">(.*?)</tr>', page, re.S))
        assert list(rows) == ["task counter"]
        assert re.search(r'data-label="Restarts" class="num">1<', rows["task counter"])
