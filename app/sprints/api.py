"""`/v1/sprints`: a project's sprints, their backlogs, lifecycle and burn-up, and their
stream; `/v1/projects/{project}/velocity`: what the completed ones delivered."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status
from sse_starlette import EventSourceResponse

from app.core.bounds import MAX_VELOCITY_WINDOW
from app.core.errors import NotFound, ValidationFailed
from app.core.shapes import Page
from app.core.states import SprintStatus
from app.core.streams import SPRINTS_STREAM
from app.db.connection import one_snapshot
from app.db.idempotency import request_hash
from app.events.api.stream_docs import SPRINTS
from app.events.api.streams import LastEventIdHeader, LastEventIdQuery, open_stream, resume_point
from app.http.deps import PrincipalDep, ServicesDep, SessionDep, get_principal
from app.http.headers import IdempotencyKeyHeader, IfMatchHeader, etag, expected_version
from app.http.pagination import CursorQuery, decode_cursor, page
from app.sprints.schemas.burn_up import SprintBurnUp
from app.sprints.schemas.sprints import (
    SprintCreate,
    SprintPatch,
    SprintRead,
    SprintTasksAdd,
    SprintTransitionRequest,
    VelocityRead,
)
from app.sprints.store import burn_up as burn_up_store
from app.sprints.store import sprints as store

router = APIRouter(prefix="/v1/sprints", tags=["sprints"], dependencies=[Depends(get_principal)])
projects = APIRouter(prefix="/v1/projects", tags=["sprints"], dependencies=[Depends(get_principal)])

_GATES = {
    "409": "`sprint_locked`: tasks join or leave a sprint only while it is `planning`; "
    "`task_in_another_sprint`: a task is in another sprint not completed yet; "
    "`version_conflict`: `If-Match` names an older version.",
}


def _sent(response: Response, sprint: SprintRead) -> SprintRead:
    response.headers["ETag"] = etag(sprint.version)
    return sprint


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=SprintRead,
    summary="Create a sprint",
)
async def create_sprint(
    body: SprintCreate,
    request: Request,
    response: Response,
    services: ServicesDep,
    actor: PrincipalDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> SprintRead:
    """Created `planning`, with no tasks. Nothing starts or repeats a sprint by itself: the
    next sprint is created when someone wants one, and any number may be planned while
    another is active. With `auto_transition`, the sprint clock moves it from `active` to
    `in_review` once its end date is past (00:00 UTC the day after); nothing else. With
    `Idempotency-Key`, a repeat of the request gets the sprint as it is now
    (`Idempotent-Replayed: true`); another body is a 409 `idempotency_key_reused`."""
    digest = request_hash(body.model_dump(mode="json")) if idempotency_key else None
    sprint, replayed = await services.sprints.create_keyed(
        body, actor, idempotency_key=idempotency_key, request_hash=digest
    )
    response.headers["Location"] = str(request.url_for("get_sprint", sprint_id=sprint.id))
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return _sent(response, sprint)


@router.get("", response_model=Page[SprintRead], summary="List sprints")
async def list_sprints(
    session: SessionDep,
    project: Annotated[str | None, Query(max_length=200)] = None,
    status: SprintStatus | None = None,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Page[SprintRead]:
    """Oldest first, each with its backlog."""
    rows = await store.list_sprints(
        session, project=project, status=status, after_id=decode_cursor(cursor), limit=limit + 1
    )
    return page(rows, limit)


@router.get(
    "/events",
    response_class=EventSourceResponse,
    summary="Stream sprint changes (SSE)",
    responses={200: SPRINTS.response()},
)
async def stream_sprint_events(
    services: ServicesDep,
    last_event_id: LastEventIdHeader = None,
    last_event_id_query: LastEventIdQuery = None,
) -> EventSourceResponse:
    """Every sprint's changes: created, fields updated, backlog changed, status moved.
    Without a resume point only new events are sent."""
    after = resume_point(last_event_id, last_event_id_query)
    return await open_stream(services, SPRINTS_STREAM, after)


@router.get("/{sprint_id}", response_model=SprintRead, summary="Get a sprint")
async def get_sprint(sprint_id: str, session: SessionDep, response: Response) -> SprintRead:
    sprint = await store.get_sprint(session, sprint_id)
    if sprint is None:
        raise NotFound("sprint", sprint_id)
    return _sent(response, sprint)


@router.get(
    "/{sprint_id}/burn-up",
    response_model=SprintBurnUp,
    summary="A sprint's burn-up: its scope and its completed points, day by day",
)
async def get_sprint_burn_up(
    sprint_id: str, session: SessionDep, services: ServicesDep
) -> SprintBurnUp:
    """A point a day from `start_date` to `end_date` (to today while the sprint runs, none
    before it starts): the points of the tasks in its backlog by the day's end, and of those
    completed by then, as the tasks' audit trail dates their completion. A completed
    sprint's last point is its velocity record."""
    await one_snapshot(session)
    found = await burn_up_store.burn_up(session, sprint_id, services.sprints.now())
    if found is None:
        raise NotFound("sprint", sprint_id)
    return found


@router.patch(
    "/{sprint_id}",
    response_model=SprintRead,
    summary="Change a sprint's name, goal, dates or auto_transition",
    openapi_extra={
        "x-problem-descriptions": {
            "409": "`sprint_locked`: dates change only while `planning`, and a completed "
            "sprint not at all; `version_conflict`: `If-Match` names an older version.",
        }
    },
)
async def update_sprint(
    sprint_id: str,
    body: SprintPatch,
    response: Response,
    services: ServicesDep,
    actor: PrincipalDep,
    if_match: IfMatchHeader = None,
) -> SprintRead:
    """The dates as they would be after the change must keep `end_date` on or after
    `start_date` (a 422 naming the field sent)."""
    if not body.model_fields_set:
        raise ValidationFailed.field("body", "names no field to change")
    sprint = await services.sprints.update(
        sprint_id, body, actor, expected_version=expected_version(if_match)
    )
    return _sent(response, sprint)


@router.post(
    "/{sprint_id}/tasks",
    response_model=SprintRead,
    summary="Commit tasks to a planned sprint",
    openapi_extra={"x-problem-descriptions": _GATES},
)
async def add_sprint_tasks(
    sprint_id: str,
    body: SprintTasksAdd,
    response: Response,
    services: ServicesDep,
    actor: PrincipalDep,
    if_match: IfMatchHeader = None,
) -> SprintRead:
    """Each task must exist, be of the sprint's project and not be completed or cancelled
    (a 422 naming `tasks[i].task_id`); all of them join, or none."""
    sprint = await services.sprints.add_tasks(
        sprint_id, body, actor, expected_version=expected_version(if_match)
    )
    return _sent(response, sprint)


@router.delete(
    "/{sprint_id}/tasks/{task_id}",
    response_model=SprintRead,
    summary="Take a task out of a planned sprint",
    openapi_extra={"x-problem-descriptions": _GATES},
)
async def remove_sprint_task(
    sprint_id: str,
    task_id: str,
    response: Response,
    services: ServicesDep,
    actor: PrincipalDep,
    if_match: IfMatchHeader = None,
) -> SprintRead:
    """A 404 when the task is not in the sprint's backlog."""
    sprint = await services.sprints.remove_task(
        sprint_id, task_id, actor, expected_version=expected_version(if_match)
    )
    return _sent(response, sprint)


@router.post(
    "/{sprint_id}/transitions",
    response_model=SprintRead,
    summary="Move a sprint to its next status",
    openapi_extra={
        "x-problem-descriptions": {
            "409": "`invalid_transition` (with `allowed`): not the sprint's next status; "
            "`sprint_already_active` (with `active_sprint_id`): the project has an active "
            "sprint; `version_conflict`: `If-Match` names an older version.",
        }
    },
)
async def transition_sprint(
    sprint_id: str,
    body: SprintTransitionRequest,
    response: Response,
    services: ServicesDep,
    actor: PrincipalDep,
    if_match: IfMatchHeader = None,
) -> SprintRead:
    """planning → active → in_review → retrospective → completed, one step at a time,
    never back. A project has one active sprint at a time (enforced by the database: of
    two racing activations exactly one wins). Completing fixes the sprint's velocity
    (points committed and completed as its tasks stand) and frees its tasks to join
    another sprint."""
    sprint = await services.sprints.transition(
        sprint_id, body.to, actor, expected_version=expected_version(if_match)
    )
    return _sent(response, sprint)


@projects.get(
    "/{project:path}/velocity",
    response_model=VelocityRead,
    summary="A project's velocity: completed sprints and their rolling average",
)
async def project_velocity(
    session: SessionDep,
    project: Annotated[str, Path(max_length=200)],
    window: Annotated[
        int,
        Query(
            ge=1,
            le=MAX_VELOCITY_WINDOW,
            description="How many of the newest completed sprints the averages span.",
        ),
    ] = 3,
    limit: Annotated[
        int, Query(ge=1, le=200, description="How many records to list, newest first.")
    ] = 20,
) -> VelocityRead:
    return await store.velocity_of(session, project, window=window, limit=limit)
