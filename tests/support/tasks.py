"""Tasks run by agents, for engine tests: a Harness with a TaskEngine, the task-runs
bridge and a worker pool, and ways to create tasks and watch them move."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from app.core.states import TaskStatus
from app.core.streams import TASK_STREAM
from app.runs.engine.workers import WorkerPool
from app.runs.schemas.runs import RunRead
from app.tasks.engine.task_engine import TaskEngine
from app.tasks.engine.task_mutations import CreateTask
from app.tasks.engine.task_runs import TaskRuns
from app.tasks.schemas.tasks import TaskCreate, TaskRead
from app.tasks.store import task_runs as task_run_store
from app.tasks.store import tasks as task_store
from tests.support.runs import SAFETY_S, Harness


@dataclass
class TaskWorld:
    h: Harness
    tasks: TaskEngine
    bridge: TaskRuns
    pool: WorkerPool

    async def create(self, title: str, assignee: str, **fields: Any) -> TaskRead:
        body = TaskCreate.model_validate({"title": title, "assigned_to": assignee, **fields})
        return (await self.tasks.submit(CreateTask(body, actor="tester"))).task

    async def task(self, task_id: str) -> TaskRead:
        async with self.h.sessionmaker() as session:
            found = await task_store.get_task(session, task_id)
        assert found is not None
        return found

    async def reach(self, task_id: str, status: TaskStatus) -> TaskRead:
        """The task once it has this status (woken by each committed task change)."""
        with self.h.bus.subscribe(TASK_STREAM) as wake:
            async with asyncio.timeout(SAFETY_S):
                while (task := await self.task(task_id)).status is not status:
                    await wake.wait(0.05)
        return task

    async def runs(self, task_id: str) -> list[RunRead]:
        """The task's runs, oldest first."""
        async with self.h.sessionmaker() as session:
            return await task_run_store.lane_runs(session, task_id)

    async def trail(self, task_id: str) -> list[tuple[TaskStatus | None, TaskStatus]]:
        """The task's transitions after its creation."""
        async with self.h.sessionmaker() as session:
            records = await task_store.list_transitions(session, task_id)
        return [(r.from_status, r.to_status) for r in records][1:]
