"""The coordinator, a component of `serve`: at each wake-up (a coordination started in
this process, a task change or a run's lifecycle event, else its poll interval) it starts
the coordinations tasks ask for and drives each running one through its phases
(`phases.py`), one pass at a time per coordination: a wake-up during a pass asks for one
more after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.coordination import store
from app.coordination.engine.commands import CoordinationCommands
from app.coordination.engine.decomposer import Decomposer
from app.coordination.engine.log import CoordinationLog
from app.coordination.engine.phases import Phases
from app.coordination.engine.synthesis import Synthesis
from app.core.errors import AppError
from app.core.streams import (
    COORDINATIONS_STARTED,
    RUNS_STREAM,
    TASK_STREAM,
)
from app.events.engine.bus import EventBus
from app.routing.engine.router import TaskRouter
from app.runs.engine.runs import RunCommands
from app.runtime.components import Loop, Wakes
from app.tasks.engine.task_engine import TaskEngine
from app.tasks.engine.task_runs import execution_stopped
from app.tasks.store import task_runs as task_run_store
from app.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

BATCH = 100


class Coordinator:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        tasks: TaskEngine,
        runs: RunCommands,
        router: TaskRouter,
        decomposer: Decomposer,
        commands: CoordinationCommands,
        *,
        poll_interval_s: float = 5.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: Metrics | None = None,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._commands = commands
        coordination_log = CoordinationLog(sessionmaker, bus, clock, metrics)
        synthesis = Synthesis(sessionmaker, runs, coordination_log, clock)
        self._phases = Phases(sessionmaker, tasks, router, decomposer, coordination_log, synthesis)
        # A pass at each wake-up: a coordination started in this process, any task change or
        # run lifecycle event (the subtasks' progress), else every poll interval (what
        # other processes did).
        self.loop = Loop(
            "coordinator",
            self.run_pass,
            Wakes(poll_interval_s, (COORDINATIONS_STARTED, TASK_STREAM, RUNS_STREAM)),
            bus=bus,
            clock=clock,
        )
        self._driving: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Resume every running coordination, then follow the task and run boards."""
        self.loop.start()

    async def stop(self) -> None:
        """Unfinished passes are dropped; the next start resumes each at its phase."""
        await self.loop.stop()
        pending = list(self._driving.values())
        for job in pending:
            job.cancel()
        for job in pending:
            with contextlib.suppress(asyncio.CancelledError):
                await job

    async def run_pass(self) -> None:
        """A pass over every running coordination: kicked, and the tasks that ask for a
        coordination started."""
        try:
            async with self._sessionmaker() as session:
                running = await store.running_ids(session)
        except Exception:  # the database is not reachable yet: try again
            log.exception("coordinator: listing running coordinations failed")
            running = []
        for coordination_id in running:
            self.kick(coordination_id)
        try:
            await self._start_ready()
        except Exception:  # the next pass tries again
            log.exception("coordinator: starting tasks' coordinations failed")

    async def _start_ready(self) -> None:
        """Start the coordination of each task that asks for one (its `coordination`),
        once its dependencies are completed and its workflow execution, if any, runs. A
        start that races another process's is refused by the one-running index."""
        async with self._sessionmaker() as session:
            waiting = await store.awaiting_coordination(session, limit=BATCH)
        for task in waiting:
            assert task.coordination is not None  # what awaiting_coordination selects
            async with self._sessionmaker() as session:
                if await task_run_store.unfinished_dependencies(session, task):
                    continue
                if await execution_stopped(session, task.id):
                    continue
            try:
                started = await self._commands.start(task.id, task.coordination)
            except AppError as exc:  # moved, or coordinated meanwhile
                log.info("task %s not coordinated: %s", task.id, exc)
                continue
            self.kick(started.coordination.id)

    def kick(self, coordination_id: str) -> None:
        """Advance the coordination now, or once more after the pass under way."""
        if coordination_id in self._driving:
            self._again.add(coordination_id)
            return
        job = asyncio.create_task(
            self._drive(coordination_id), name=f"coordinate:{coordination_id}"
        )
        self._driving[coordination_id] = job

    async def _drive(self, coordination_id: str) -> None:
        try:
            while True:
                self._again.discard(coordination_id)
                try:
                    await self.advance(coordination_id)
                except asyncio.CancelledError:
                    raise
                except Exception:  # the next wake-up tries again
                    log.exception("coordination %s: pass failed", coordination_id)
                if coordination_id not in self._again:
                    return
        finally:
            self._driving.pop(coordination_id, None)

    async def advance(self, coordination_id: str) -> None:
        """Run the coordination's phases until one has to wait or it settles."""
        await self._phases.advance(coordination_id)
