"""A process starts its components in order and stops them in reverse; a start-up that
fails halfway stops what it started, leaves no task running and disposes of the pool,
against a real database of its own."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.db.connection import libpq_url
from app.runs.tools.base import Tool
from app.runtime.lifecycle import Component, Components
from app.wiring import Runtime, build_runtime, running
from tests.support.database import admin, with_database
from tests.support.server import make_settings


@pytest.fixture
async def own_database(pg_server_url: str) -> AsyncIterator[str]:
    """An empty database nobody else connects to; the process migrates it at start."""
    name = f"lw_lifespan_{secrets.token_hex(4)}"
    await admin(pg_server_url, f'CREATE DATABASE "{name}"')
    try:
        yield with_database(pg_server_url, name)
    finally:
        await admin(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _settings(url: str) -> Settings:
    return make_settings(url, database={"migrate_on_start": True})


async def _connections(url: str) -> int:
    """Sessions open on the database, other than the one asking."""
    conn = await asyncpg.connect(libpq_url(url))
    try:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return count
    finally:
        await conn.close()


class Recorder:
    """Builds the real runtime, its components wrapped to record their starts and stops;
    `fail_at`: the name of a last component whose start raises."""

    def __init__(self, fail_at: str | None = None) -> None:
        self.fail_at = fail_at
        self.log: list[str] = []

    def build(
        self, settings: Settings, url: str, db: AsyncEngine, tools: Sequence[Tool]
    ) -> Runtime:
        runtime = build_runtime(settings, url, db, tools)
        components = [self._wrapped(c) for c in runtime.components]
        if self.fail_at is not None:
            components.append(self._wrapped(Component(self.fail_at, self._fail, self._never)))
        return replace(runtime, components=Components(components))

    def _wrapped(self, component: Component) -> Component:
        def start() -> None:
            component.start()
            self.log.append(f"start {component.name}")

        async def stop() -> None:
            self.log.append(f"stop {component.name}")
            await component.stop()

        return Component(component.name, start, stop)

    def _fail(self) -> None:
        raise RuntimeError(f"{self.fail_at} could not start")

    async def _never(self) -> None:
        raise AssertionError("a component that did not start is not stopped")


async def test_components_stop_in_the_reverse_order_of_their_start(own_database: str) -> None:
    recorder = Recorder()
    async with running(_settings(own_database), build=recorder.build) as runtime:
        assert runtime.services.tasks.running
        started = list(recorder.log)
    stopped = recorder.log[len(started) :]
    names = [entry.removeprefix("start ") for entry in started]
    assert "start workers" in started and "start reconciler" in started
    assert stopped == [f"stop {name}" for name in reversed(names)]
    assert stopped[0] == "stop streams"  # open streams are told to end first
    assert await _connections(own_database) == 0


async def test_a_start_up_that_fails_at_its_last_step_leaves_nothing_running(
    own_database: str,
) -> None:
    recorder = Recorder(fail_at="last step")
    before = asyncio.all_tasks()
    with pytest.raises(RuntimeError, match="last step could not start"):
        async with running(_settings(own_database), build=recorder.build):
            pytest.fail("the process must not run")
    started = [e.removeprefix("start ") for e in recorder.log if e.startswith("start ")]
    stopped = [e.removeprefix("stop ") for e in recorder.log if e.startswith("stop ")]
    assert "workers" in started  # it got as far as the last step
    assert stopped == list(reversed(started))  # everything that started, in reverse
    await asyncio.sleep(0)
    assert {t for t in asyncio.all_tasks() - before if not t.done()} == set()
    assert await _connections(own_database) == 0  # the listener's and the pool's: all closed
