"""What one process holds while it runs; built and torn down by the lifespan in `main.py`."""

from __future__ import annotations

from dataclasses import dataclass

import anyio
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.core.config import Settings
from app.engine.agents import AgentCommands
from app.engine.bus import EventBus
from app.engine.pg_listener import PgListener
from app.engine.runs import RunCommands
from app.engine.task_engine import TaskEngine
from app.engine.workers import WorkerPool


@dataclass
class Runtime:
    settings: Settings
    database_url: str
    db: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    bus: EventBus
    listener: PgListener
    tasks: TaskEngine
    agents: AgentCommands
    runs: RunCommands
    workers: WorkerPool | None
    shutting_down: anyio.Event
