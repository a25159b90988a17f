"""Settings for tests and the app behind a real uvicorn server on a free port."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI

from app.core.config import Settings
from app.core.net import listening_socket
from app.main import create_app


def make_settings(database_url: str, **groups: dict[str, object]) -> Settings:
    base: dict[str, object] = {
        "database": {"url": database_url, "migrate_on_start": False, "pool_size": 5},
        "streams": {"keepalive_s": 1.0, "poll_interval_s": 1.0},
    }
    for group, values in groups.items():
        merged = dict(base.get(group, {}))  # type: ignore[call-overload]
        merged.update(values)
        base[group] = merged
    return Settings.model_validate(base)


@asynccontextmanager
async def running_server(settings: Settings) -> AsyncIterator[str]:
    """The app behind a real uvicorn server on a free loopback port; yields its base URL."""
    async with running_app(settings) as (url, _app):
        yield url


@asynccontextmanager
async def running_app(settings: Settings, **options: Any) -> AsyncIterator[tuple[str, FastAPI]]:
    """As `running_server`, also yielding the app (its `state.services` once started);
    `options` go to `create_app` (tools, pages or background components of the test's own)."""
    app = create_app(settings, **options)
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():
            serving.result()
            raise RuntimeError("the server stopped during start-up")
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        await serving
        sock.close()


@contextmanager
def serving_in_thread(settings: Settings) -> Iterator[str]:
    """`running_server` in a thread with its own event loop, for a server that outlives
    one test: each test's coroutines run in a loop of their own, and reach it over HTTP
    only. Yields its base URL; stops it gracefully on exit."""
    started: queue.Queue[str | BaseException] = queue.Queue()
    loops: queue.Queue[asyncio.AbstractEventLoop] = queue.Queue()
    stop = asyncio.Event()

    async def serve() -> None:
        try:
            async with running_server(settings) as url:
                started.put(url)
                await stop.wait()
        except BaseException as error:
            started.put(error)
            raise

    def run() -> None:
        # A Runner cancels what the app left pending (streams' waits) when it closes.
        with asyncio.Runner() as runner:
            loops.put(runner.get_loop())
            runner.run(serve())

    thread = threading.Thread(target=run, name="shared-server", daemon=True)
    thread.start()
    loop = loops.get(timeout=60)
    outcome = started.get(timeout=60)
    if isinstance(outcome, BaseException):
        thread.join()
        raise RuntimeError("the shared server did not start") from outcome
    try:
        yield outcome
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
