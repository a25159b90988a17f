"""`/v1/tasks`: commands go to the TaskEngine, queries straight to the store."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query, Request, Response, status
from sse_starlette import EventSourceResponse

from app.coordination.engine.dag import SubtaskDag
from app.coordination.schemas import CoordinationRequest
from app.core.errors import NotFound, ValidationFailed
from app.core.shapes import Page
from app.core.states import TaskStatus
from app.core.streams import TASK_STREAM
from app.core.vocabulary import Priority
from app.db import idempotency
from app.events.api.stream_docs import TASKS
from app.events.api.streams import LastEventIdHeader, LastEventIdQuery, open_stream, resume_point
from app.http.deps import PrincipalDep, ServicesDep, SessionDep, TaskEngineDep, get_principal
from app.http.headers import IdempotencyKeyHeader, IfMatchHeader, etag, expected_version
from app.http.pagination import CursorQuery, decode_cursor, page, present
from app.tasks.engine.task_engine import MutationResult
from app.tasks.engine.task_mutations import (
    CancelTask,
    CreateTask,
    DeleteTask,
    MoveTask,
    TransitionTask,
    UpdateTask,
)
from app.tasks.schemas.boards import MoveRequest
from app.tasks.schemas.tasks import (
    CancelRequest,
    RouteRequest,
    TaskCreate,
    TaskPatch,
    TaskRead,
    TransitionRead,
    TransitionRequest,
)
from app.tasks.store import tasks as task_store

router = APIRouter(prefix="/v1/tasks", tags=["tasks"], dependencies=[Depends(get_principal)])


def _check_coordination(request: CoordinationRequest | None, where: str) -> None:
    """A coordination the task carries has a decomposition that is a DAG (422 naming each
    field), so that it starts when the task is ready instead of failing then."""
    if request is not None and request.decomposition is not None:
        SubtaskDag.of(request.decomposition, f"{where}.decomposition")


def _respond(response: Response, result: MutationResult) -> TaskRead:
    response.headers["ETag"] = etag(result.task.version)
    return result.task


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=TaskRead,
    summary="Create a task",
)
async def create_task(
    body: TaskCreate,
    request: Request,
    response: Response,
    engine: TaskEngineDep,
    actor: PrincipalDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> TaskRead:
    _check_coordination(body.coordination, "body.coordination")
    digest = idempotency.request_hash(body.model_dump(mode="json")) if idempotency_key else None
    result = await engine.submit(CreateTask(body, actor, idempotency_key, digest))
    response.headers["Location"] = str(request.url_for("get_task", task_id=result.task.id))
    if result.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return _respond(response, result)


@router.get(
    "/events",
    response_class=EventSourceResponse,
    summary="Stream task changes (SSE)",
    responses={200: TASKS.response()},
)
async def stream_task_events(
    services: ServicesDep,
    last_event_id: LastEventIdHeader = None,
    last_event_id_query: LastEventIdQuery = None,
) -> EventSourceResponse:
    """Events `task.created`, `task.updated`, `task.transitioned`, `task.deleted`,
    `task.routing_failed` (no agent could take it: `reason`); each `id` is the event's
    sequence number. Without a resume point only new events are sent."""
    after = resume_point(last_event_id, last_event_id_query)
    return await open_stream(services, TASK_STREAM, after)


@router.get("", response_model=Page[TaskRead], summary="List tasks")
async def list_tasks(
    session: SessionDep,
    status: TaskStatus | None = None,
    assigned_to: Annotated[str | None, Query(max_length=200)] = None,
    project: Annotated[str | None, Query(max_length=200)] = None,
    priority: Priority | None = None,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Page[TaskRead]:
    filters = present(
        status=status,
        assigned_to=assigned_to,
        project=project,
        priority=priority,
    )
    rows = await task_store.list_tasks(
        session, after_id=decode_cursor(cursor), limit=limit + 1, filters=filters
    )
    return page(rows, limit)


@router.get("/{task_id}", response_model=TaskRead, summary="Get a task")
async def get_task(task_id: str, session: SessionDep, response: Response) -> TaskRead:
    task = await task_store.get_task(session, task_id)
    if task is None:
        raise NotFound("task", task_id)
    response.headers["ETag"] = etag(task.version)
    return task


@router.patch("/{task_id}", response_model=TaskRead, summary="Update a task's fields")
async def update_task(
    task_id: str,
    body: TaskPatch,
    response: Response,
    engine: TaskEngineDep,
    actor: PrincipalDep,
    if_match: IfMatchHeader = None,
) -> TaskRead:
    changes = body.model_dump(exclude_unset=True)
    if not changes:
        raise ValidationFailed.field("body", "names no field to change")
    _check_coordination(body.coordination, "body.coordination")
    result = await engine.submit(UpdateTask(task_id, changes, actor, expected_version(if_match)))
    return _respond(response, result)


@router.post(
    "/{task_id}/transitions", response_model=TaskRead, summary="Move a task to another status"
)
async def transition_task(
    task_id: str,
    body: TransitionRequest,
    response: Response,
    engine: TaskEngineDep,
    actor: PrincipalDep,
) -> TaskRead:
    overrides = body.model_dump(
        exclude_unset=True, include={"assigned_to", "reviewers", "priority", "deadline"}
    )
    mutation = TransitionTask(
        task_id, body.to, actor, body.expected_version, body.reason, overrides
    )
    return _respond(response, await engine.submit(mutation))


@router.post(
    "/{task_id}/move",
    response_model=TaskRead,
    summary="Move a task to a board column",
    openapi_extra={
        "x-problem-descriptions": {
            "409": "`wip_limit_reached` (with `project`, `column`, `wip_limit`, `count`): the "
            "column is at its strict limit; `invalid_transition` (with `allowed`): the state "
            "machine has no way from the task's status to the column's, or the way goes "
            "through `assigned` and nobody is named.",
        }
    },
)
async def move_task(
    task_id: str,
    body: MoveRequest,
    response: Response,
    engine: TaskEngineDep,
    actor: PrincipalDep,
) -> TaskRead:
    """The task walks the shortest path of allowed transitions to the column's status
    (backlog = created, ready = assigned, in_progress, review = in_review, done =
    completed), each step in its audit trail, all of it in one change or none (a step to
    ready needs an assignee: the task's, or `assigned_to`). The column's WIP limit is
    counted against the project's tasks at the commit. A move to done is a review's
    decision passed over: the task's reviewers are not asked."""
    mutation = MoveTask(
        task_id, body.column, actor, body.expected_version, body.reason, body.assigned_to
    )
    return _respond(response, await engine.submit(mutation))


@router.post(
    "/{task_id}/route",
    response_model=TaskRead,
    summary="Route a task to an agent",
    openapi_extra={
        "x-problem-descriptions": {
            "409": "`unroutable` (with `reason` and `strategy`): no agent can take it now; "
            "`invalid_transition`: the task is not `created`.",
        }
    },
)
async def route_task(
    task_id: str,
    body: RouteRequest,
    response: Response,
    services: ServicesDep,
    actor: PrincipalDep,
) -> TaskRead:
    """Assign a `created` task to the agent the strategy chooses, among agents with room
    (fewer held tasks than their `max_concurrent_tasks`; checked atomically with the
    assignment). When none fits, the task stays `created`, its stream gets
    `task.routing_failed`, and the answer is 409 `unroutable` with the reason."""
    task = await services.router.route(task_id, body, actor)
    response.headers["ETag"] = etag(task.version)
    return task


@router.post("/{task_id}/cancel", response_model=TaskRead, summary="Cancel a task")
async def cancel_task(
    task_id: str,
    response: Response,
    engine: TaskEngineDep,
    actor: PrincipalDep,
    body: Annotated[CancelRequest | None, Body()] = None,
) -> TaskRead:
    body = body or CancelRequest()
    mutation = CancelTask(task_id, actor, body.expected_version, body.reason)
    return _respond(response, await engine.submit(mutation))


@router.delete("/{task_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a task")
async def delete_task(
    task_id: str, engine: TaskEngineDep, actor: PrincipalDep, if_match: IfMatchHeader = None
) -> Response:
    """The task disappears; its audit trail and events are kept."""
    await engine.submit(DeleteTask(task_id, actor, expected_version(if_match)))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/{task_id}/transitions",
    response_model=list[TransitionRead],
    summary="A task's status history",
)
async def list_task_transitions(task_id: str, session: SessionDep) -> list[TransitionRead]:
    if await task_store.get_task(session, task_id) is None:
        raise NotFound("task", task_id)
    return await task_store.list_transitions(session, task_id)
