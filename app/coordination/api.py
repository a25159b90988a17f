"""Coordinations: `POST /v1/tasks/{id}/coordinate` splits a task into subtasks run by
several agents; `/v1/coordinations/{id}` follows one (its phases, subtasks, runs and
events)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from sse_starlette import EventSourceResponse

from app.coordination import store
from app.coordination.schemas import CoordinationRead, CoordinationRequest
from app.core.errors import NotFound
from app.core.streams import coordination_stream
from app.db import idempotency
from app.events.api.stream_docs import COORDINATION
from app.events.api.streams import LastEventIdHeader, LastEventIdQuery, open_stream, resume_point
from app.http.deps import ServicesDep, SessionDep, get_principal
from app.http.headers import IdempotencyKeyHeader
from app.tasks.store import tasks as task_store

router = APIRouter(tags=["coordinations"], dependencies=[Depends(get_principal)])


@router.post(
    "/v1/tasks/{task_id}/coordinate",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=CoordinationRead,
    summary="Coordinate a task: split it into subtasks that agents run in waves",
)
async def coordinate_task(
    task_id: str,
    body: CoordinationRequest,
    request: Request,
    response: Response,
    services: ServicesDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> CoordinationRead:
    """Accepted at once; the coordinator then runs the phases decompose → route →
    topology → validate → dispatch → roll_up → update_parent (follow them on
    `GET /v1/coordinations/{id}/events`). The task must be `created`: the coordination
    owns it until it settles, moving it `in_progress`, then `in_review` (all subtasks
    completed), `failed` or `cancelled`. Subtasks become child tasks (`parent_task_id`)
    run on their own lanes, each with its review. Cancelling the task calls the
    coordination off. A DAG the request gives is checked whole (422 naming each field:
    unknown or self dependencies, cycles, duplicate keys); a task already being
    coordinated is a 409 `coordination_running`."""
    digest = None
    if idempotency_key:  # a key names one coordination, of one task
        digest = idempotency.request_hash([task_id, body.model_dump(mode="json")])
    started = await services.coordinations.start(
        task_id, body, idempotency_key=idempotency_key, request_hash=digest
    )
    coordination = started.coordination
    response.headers["Location"] = str(
        request.url_for("get_coordination", coordination_id=coordination.id)
    )
    if started.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return coordination


@router.get(
    "/v1/tasks/{task_id}/coordinations",
    response_model=list[CoordinationRead],
    summary="List a task's coordinations",
)
async def list_task_coordinations(
    task_id: str,
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> list[CoordinationRead]:
    """Newest first: the running one (at most one) and those that settled."""
    if await task_store.get_task(session, task_id) is None:
        raise NotFound("task", task_id)
    return await store.of_task(session, task_id, limit=limit)


@router.get(
    "/v1/coordinations/{coordination_id}",
    response_model=CoordinationRead,
    summary="Get a coordination",
)
async def get_coordination(coordination_id: str, session: SessionDep) -> CoordinationRead:
    """Its phase, each phase's result so far, the subtasks (child task, agent, wave), the
    topology per wave, the runs it made (peers' rounds, the synthesis) and, once rolled
    up, the outcome for the parent."""
    found = await store.get_coordination(session, coordination_id)
    if found is None:
        raise NotFound("coordination", coordination_id)
    return found


@router.get(
    "/v1/coordinations/{coordination_id}/events",
    response_class=EventSourceResponse,
    summary="Stream a coordination's events (SSE)",
    responses={200: COORDINATION.response()},
)
async def stream_coordination_events(
    coordination_id: str,
    services: ServicesDep,
    last_event_id: LastEventIdHeader = None,
    last_event_id_query: LastEventIdQuery = None,
) -> EventSourceResponse:
    """`coordination.started`, `coordination.phase.completed` (phase, outcome,
    duration_ms, detail), `coordination.subtask.started`, `coordination.run.created` and
    `coordination.completed|failed|cancelled`. Without a resume point the stream starts
    from its first event. The subtasks' own progress is on the tasks stream and their
    runs' streams."""
    after = resume_point(last_event_id, last_event_id_query)
    async with services.sessionmaker() as session:
        if await store.get_coordination(session, coordination_id) is None:
            raise NotFound("coordination", coordination_id)
    return await open_stream(services, coordination_stream(coordination_id), after or 0)
