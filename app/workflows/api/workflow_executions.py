"""`/v1/workflow-executions`: activate a definition, follow and cancel its executions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query, Request, Response, status
from sse_starlette import EventSourceResponse

from app.core.errors import NotFound
from app.core.shapes import Page
from app.core.streams import execution_stream
from app.db import idempotency
from app.events.api.stream_docs import WORKFLOW_EXECUTION
from app.events.api.streams import LastEventIdHeader, LastEventIdQuery, open_stream, resume_point
from app.http.deps import PrincipalDep, ServicesDep, SessionDep, WorkflowCommandsDep, get_principal
from app.http.headers import IdempotencyKeyHeader, etag
from app.http.pagination import CursorQuery, decode_cursor, page
from app.runs.api.runs import CHAINED_LIMIT
from app.triggers.schemas import FireRead
from app.triggers.store import triggers as trigger_store
from app.workflows import store
from app.workflows.schemas.workflows import ActivateRequest, ExecutionCancel, ExecutionRead

router = APIRouter(
    prefix="/v1/workflow-executions",
    tags=["workflow executions"],
    dependencies=[Depends(get_principal)],
)


@router.get(
    "/{execution_id}/chained",
    response_model=list[FireRead],
    summary="What an execution's end started through chain triggers",
)
async def list_execution_chained(execution_id: str, session: SessionDep) -> list[FireRead]:
    """The fires of chain triggers this execution's end matched, oldest first (see
    `GET /v1/runs/{id}/chained`)."""
    if await store.get_execution(session, execution_id) is None:
        raise NotFound("workflow execution", execution_id)
    return await trigger_store.fires_of_source(session, execution_id, limit=CHAINED_LIMIT)


@router.post(
    "/activate/{workflow_id}",
    status_code=status.HTTP_201_CREATED,
    response_model=ExecutionRead,
    summary="Activate a workflow definition",
)
async def activate_workflow(
    workflow_id: str,
    request: Request,
    response: Response,
    commands: WorkflowCommandsDep,
    actor: PrincipalDep,
    body: Annotated[ActivateRequest | None, Body()] = None,
    idempotency_key: IdempotencyKeyHeader = None,
) -> ExecutionRead:
    """Validates the definition (422 `workflow_invalid` listing every broken rule), then
    makes one task per task node on the paths the conditions take, with dependencies
    wired through the control nodes; untaken branches are `skipped`."""
    body = body or ActivateRequest()
    digest = None
    if idempotency_key:  # a key names one activation, of one workflow
        digest = idempotency.request_hash([workflow_id, body.model_dump(mode="json")])
    activation = await commands.activate(
        workflow_id, body, actor, idempotency_key=idempotency_key, request_hash=digest
    )
    execution = activation.execution
    response.headers["Location"] = str(
        request.url_for("get_workflow_execution", execution_id=execution.id)
    )
    if activation.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    response.headers["ETag"] = etag(execution.version)
    return execution


@router.get(
    "/by-definition/{workflow_id}",
    response_model=Page[ExecutionRead],
    summary="List the executions of a workflow definition",
)
async def list_workflow_executions(
    workflow_id: str,
    session: SessionDep,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Page[ExecutionRead]:
    rows = await store.list_executions(
        session, workflow_id, after_id=decode_cursor(cursor), limit=limit + 1
    )
    return page(rows, limit)


@router.get("/{execution_id}", response_model=ExecutionRead, summary="Get a workflow execution")
async def get_workflow_execution(
    execution_id: str, session: SessionDep, response: Response
) -> ExecutionRead:
    execution = await store.get_execution(session, execution_id)
    if execution is None:
        raise NotFound("workflow execution", execution_id)
    response.headers["ETag"] = etag(execution.version)
    return execution


@router.post(
    "/{execution_id}/cancel",
    response_model=ExecutionRead,
    summary="Cancel a workflow execution",
)
async def cancel_workflow_execution(
    execution_id: str,
    response: Response,
    commands: WorkflowCommandsDep,
    actor: PrincipalDep,
    body: Annotated[ExecutionCancel | None, Body()] = None,
) -> ExecutionRead:
    """Its open nodes become `cancelled` and its open tasks are cancelled. A finished
    execution is a 409 `invalid_transition`."""
    reason = body.reason if body else None
    execution = await commands.cancel(execution_id, reason, actor)
    response.headers["ETag"] = etag(execution.version)
    return execution


@router.get(
    "/{execution_id}/events",
    response_class=EventSourceResponse,
    summary="Stream a workflow execution's events (SSE)",
    responses={200: WORKFLOW_EXECUTION.response()},
)
async def stream_workflow_execution_events(
    execution_id: str,
    services: ServicesDep,
    last_event_id: LastEventIdHeader = None,
    last_event_id_query: LastEventIdQuery = None,
) -> EventSourceResponse:
    """`workflow.execution.started`, `workflow.node.changed` (node_id, task_id, from, to)
    and `workflow.execution.completed|failed|cancelled`. Without a resume point the stream
    starts from its first event, so a client that opens it late still sees the start."""
    after = resume_point(last_event_id, last_event_id_query)
    async with services.sessionmaker() as session:
        if await store.get_execution(session, execution_id) is None:
            raise NotFound("workflow execution", execution_id)
    return await open_stream(services, execution_stream(execution_id), after or 0)
