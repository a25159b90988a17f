"""`create_app(settings)` and the lifespan: the composition root of a process.

Start order: database (embedded when no URL) → migrations → bus and NOTIFY listener →
TaskEngine. Shutdown runs in reverse: streams are told to end, the TaskEngine drains its
queue, the listener stops, the pool is disposed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI

from app import migrate
from app.api import health, problems, tasks
from app.api.body_limit import BodyLimit
from app.api.openapi import build_openapi, operation_id
from app.config import Settings, load_settings
from app.db import libpq_url, make_engine, make_sessionmaker
from app.embedded_pg import start_embedded
from app.engine.bus import EventBus
from app.engine.pg_listener import PgListener
from app.engine.task_engine import TaskEngine
from app.runtime import Runtime

log = logging.getLogger(__name__)

DESCRIPTION = """\
Loopwright runs LLM agent loops and task workflows durably on Postgres and streams what
they do over Server-Sent Events.

Errors are RFC 9457 problem documents (`application/problem+json`) with a stable `code`.
Lists are paginated by cursor: pass `next_cursor` back as `cursor`.
"""


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    embedded = None
    url = settings.database.url
    if url is None:
        embedded = await asyncio.to_thread(start_embedded, settings.database.embedded_data_dir)
        url = embedded.url
    db = make_engine(
        url,
        pool_size=settings.database.pool_size,
        pool_timeout_s=settings.database.pool_timeout_s,
    )
    if settings.database.migrate_on_start:
        await migrate.upgrade(db)
    sessionmaker = make_sessionmaker(db)
    bus = EventBus()
    listener = PgListener(libpq_url(url), bus)
    engine_settings = settings.task_engine
    task_engine = TaskEngine(
        sessionmaker,
        bus,
        queue_size=engine_settings.queue_size,
        max_batch=engine_settings.max_batch,
        queue_full_retry_after_s=engine_settings.queue_full_retry_after_s,
    )
    runtime = Runtime(
        settings=settings,
        database_url=url,
        db=db,
        sessionmaker=sessionmaker,
        bus=bus,
        listener=listener,
        tasks=task_engine,
        shutting_down=anyio.Event(),
    )
    app.state.runtime = runtime
    listener.start()
    task_engine.start()
    try:
        yield
    finally:
        runtime.shutting_down.set()
        await task_engine.stop(engine_settings.drain_timeout_s)
        await listener.stop()
        await db.dispose()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_settings()
    app = FastAPI(
        title="Loopwright",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=_lifespan,
        generate_unique_id_function=operation_id,
    )
    app.state.settings = settings
    problems.install(app)
    app.add_middleware(BodyLimit, max_body_bytes=settings.server.max_body_bytes)
    app.include_router(health.router)
    app.include_router(tasks.router)
    app.openapi = lambda: build_openapi(app)  # type: ignore[method-assign]
    return app
