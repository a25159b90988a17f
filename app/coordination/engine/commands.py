"""Starting a coordination (`POST /v1/tasks/{id}/coordinate`): the request is checked
whole before anything is written (a client's DAG, the agents it names), then the
coordination row, its first event and the idempotency key commit together. The
coordinator (`coordinator.py`) takes it from there."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.coordination import store
from app.coordination.engine.dag import SubtaskDag
from app.coordination.schemas import CoordinationRead, CoordinationRequest
from app.core.errors import (
    Conflict,
    FieldError,
    InvalidTransition,
    NotFound,
    ProblemCode,
    ValidationFailed,
)
from app.core.ids import new_id
from app.core.states import TaskStatus, allowed_targets
from app.core.streams import COORDINATIONS_STARTED, coordination_stream
from app.db import idempotency
from app.db.idempotent_create import CreateKey, keyed_create
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.events.engine.published import Written, published
from app.tasks.store import task_runs as task_run_store
from app.tasks.store import tasks as task_store

CREATE_SCOPE = "coordinations.create"
TOOL_SCOPE = "coordinations.coordinate_task"  # the agents' tool's


class CoordinationRunning(Conflict):
    """The task is being coordinated already; follow that coordination, or cancel the
    task to stop it."""

    code = ProblemCode.COORDINATION_RUNNING

    def __init__(self, task_id: str, coordination_id: str) -> None:
        self.coordination_id = coordination_id
        super().__init__(f"task {task_id!r} is being coordinated by {coordination_id!r}")

    def extensions(self) -> dict[str, Any]:
        return {"coordination_id": self.coordination_id}


@dataclass(frozen=True)
class Started:
    coordination: CoordinationRead
    replayed: bool


def started_event(coordination: CoordinationRead) -> event_store.NewEvent:
    return event_store.NewEvent(
        "coordination.started",
        {
            "coordination_id": coordination.id,
            "parent_task_id": coordination.parent_task_id,
            "decomposition_given": coordination.request.decomposition is not None,
        },
    )


class CoordinationCommands:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        idempotency_retention: timedelta = idempotency.DEFAULT_RETENTION,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._bus = bus
        self._clock = clock
        self._retention = idempotency_retention

    async def start(
        self,
        task_id: str,
        request: CoordinationRequest,
        *,
        idempotency_key: str | None = None,
        request_hash: str | None = None,
        run_id: str | None = None,
    ) -> Started:
        """A running coordination of a `created` task. With a key, a repeat gets the
        coordination as it is now; a key made by a run's tool call (`run_id`) is kept while
        that run may run again."""
        if request.decomposition is not None:
            SubtaskDag.of(request.decomposition, "body.decomposition")  # 422 naming each field
        scope = CREATE_SCOPE if run_id is None else TOOL_SCOPE
        key = CreateKey.of(scope, idempotency_key, request_hash, run_id=run_id)
        now = self._clock()
        async with self._sessionmaker() as session, session.begin():
            keyed = await keyed_create(session, key, now=now, retention=self._retention)
            if keyed.replay is not None:
                replay = await store.get_coordination(session, keyed.replay.resource_id)
                if replay is not None:
                    return Started(replay, replayed=True)
            task = await task_store.get_task(session, task_id)
            if task is None:
                raise NotFound("task", task_id)
            running = await store.running_coordination(session, task_id)
            if running is not None:
                raise CoordinationRunning(task_id, running.id)
            if task.status is not TaskStatus.CREATED:
                allowed = allowed_targets(
                    task.status, retry_count=task.retry_count, max_retries=task.max_retries
                )
                raise InvalidTransition(
                    task.status,
                    TaskStatus.IN_PROGRESS,
                    allowed,
                    " (only a created task is coordinated: an assigned one is an agent's)",
                )
            await _check_agents(session, request)
            try:
                async with session.begin_nested():
                    made = await store.insert_coordination(
                        session, new_id("coord"), task_id, request
                    )
            except IntegrityError:  # another request started one meanwhile
                raced = await store.running_coordination(session, task_id)
                raise CoordinationRunning(task_id, raced.id if raced else "?") from None
            await event_store.append_events(
                session, coordination_stream(made.id), [started_event(made)], now
            )
            await keyed.remember(made.id)
        published(
            self._bus, [Written(coordination_stream(made.id)), Written(COORDINATIONS_STARTED)]
        )
        return Started(made, replayed=False)


async def _check_agents(session: AsyncSession, request: CoordinationRequest) -> None:
    """The agents the options name exist, and a decomposition has somebody to make it."""
    options = request.options
    found: list[FieldError] = []
    if request.decomposition is None and options.decomposer is None:
        found.append(
            FieldError(
                "body.options.decomposer",
                "name the agent whose model decomposes the task, or give a decomposition",
            )
        )
    for field, agent in (
        ("decomposer", options.decomposer),
        ("orchestrator", options.orchestrator),
    ):
        if agent is not None and await task_run_store.resolve_agent(session, agent) is None:
            found.append(
                FieldError(f"body.options.{field}", f"no agent has the id or name {agent!r}")
            )
    if found:
        raise ValidationFailed(found)
