"""`/v1/workflows`: workflow definitions, their validation and their YAML export."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status

from app.core.errors import NotFound, ValidationFailed
from app.core.shapes import Page
from app.db.idempotency import request_hash
from app.http.deps import SessionDep, WorkflowCommandsDep, get_principal
from app.http.headers import IdempotencyKeyHeader, IfMatchHeader, etag, expected_version
from app.http.pagination import CursorQuery, decode_cursor, page
from app.workflows import store
from app.workflows.engine.workflow_graph import export_yaml, validate_workflow
from app.workflows.schemas.workflows import (
    WorkflowCreate,
    WorkflowPatch,
    WorkflowRead,
    WorkflowValidation,
)

router = APIRouter(
    prefix="/v1/workflows", tags=["workflows"], dependencies=[Depends(get_principal)]
)


async def _load(session: SessionDep, workflow_id: str) -> WorkflowRead:
    workflow = await store.get_workflow(session, workflow_id)
    if workflow is None:
        raise NotFound("workflow", workflow_id)
    return workflow


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=WorkflowRead,
    summary="Create a workflow definition",
)
async def create_workflow(
    body: WorkflowCreate,
    request: Request,
    response: Response,
    commands: WorkflowCommandsDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> WorkflowRead:
    """Saved when its structure holds: node ids and edge ids unique, and every edge's
    `source` and `target` a node of it (rules the schema cannot state: they compare items;
    a 422 `validation_error` naming the edge or node). Node configs and conditions are in
    the schema (`config` by node `type`; a condition's grammar as its pattern). The other
    rules are checked by
    `validate` and on activation, so an unfinished draft can be saved. With
    `Idempotency-Key`, a repeat of the request (same key, same body) gets the first
    response again (`Idempotent-Replayed: true`); another body is a 409
    `idempotency_key_reused`."""
    digest = request_hash(body.model_dump(mode="json")) if idempotency_key else None
    workflow, replayed = await commands.create_keyed(
        body, idempotency_key=idempotency_key, request_hash=digest
    )
    response.headers["Location"] = str(request.url_for("get_workflow", workflow_id=workflow.id))
    response.headers["ETag"] = etag(workflow.version)
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return workflow


@router.get("", response_model=Page[WorkflowRead], summary="List workflow definitions")
async def list_workflows(
    session: SessionDep,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Page[WorkflowRead]:
    rows = await store.list_workflows(session, after_id=decode_cursor(cursor), limit=limit + 1)
    return page(rows, limit)


@router.get("/{workflow_id}", response_model=WorkflowRead, summary="Get a workflow definition")
async def get_workflow(workflow_id: str, session: SessionDep, response: Response) -> WorkflowRead:
    workflow = await _load(session, workflow_id)
    response.headers["ETag"] = etag(workflow.version)
    return workflow


@router.patch("/{workflow_id}", response_model=WorkflowRead, summary="Update a workflow definition")
async def update_workflow(
    workflow_id: str,
    body: WorkflowPatch,
    response: Response,
    commands: WorkflowCommandsDep,
    if_match: IfMatchHeader = None,
) -> WorkflowRead:
    """Send the version you last read as `If-Match` or as `version` in the body; a stale
    one is a 409 `version_conflict` naming the current version.

    Rules the schema cannot state (they compare fields, or this body with the stored
    definition), each a 422 `validation_error`: `version` and `If-Match`, when both are
    sent, agree; and the definition as it would be after the change keeps its structure:
    node ids and edge ids unique, every edge's `source` and `target` a node of it (edges
    sent without `nodes` must join the stored nodes; `nodes` sent without `edges` must
    leave the stored edges their ends)."""
    if not body.model_fields_set - {"version"}:
        raise ValidationFailed.field("body", "names no field to change")
    header = expected_version(if_match)
    if header is not None and body.version is not None and header != body.version:
        raise ValidationFailed.field("body.version", "differs from the If-Match header")
    workflow = await commands.update(workflow_id, body, expected_version=header)
    response.headers["ETag"] = etag(workflow.version)
    return workflow


@router.delete(
    "/{workflow_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a workflow definition",
)
async def delete_workflow(
    workflow_id: str, commands: WorkflowCommandsDep, if_match: IfMatchHeader = None
) -> Response:
    """Refused (409 `workflow_in_use`) while it has running executions; finished
    executions are kept."""
    await commands.delete(workflow_id, expected_version=expected_version(if_match))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/{workflow_id}/validate",
    response_model=WorkflowValidation,
    summary="Check a workflow definition against every rule",
)
async def validate_workflow_definition(workflow_id: str, session: SessionDep) -> WorkflowValidation:
    workflow = await _load(session, workflow_id)
    errors = validate_workflow(workflow.nodes, workflow.edges)
    return WorkflowValidation(valid=not errors, errors=errors)


@router.get(
    "/{workflow_id}/export",
    response_class=Response,
    summary="Export a workflow definition as YAML",
    responses={
        200: {
            "content": {"application/yaml": {"schema": {"type": "string"}}},
            "description": "The YAML steps.",
        }
    },
)
async def export_workflow(workflow_id: str, session: SessionDep) -> Response:
    """Steps in topological order with `depends_on`; start and end are left out."""
    workflow = await _load(session, workflow_id)
    document = export_yaml(workflow.name, workflow.description, workflow.nodes, workflow.edges)
    return Response(
        document,
        media_type="application/yaml",
        headers={
            "ETag": etag(workflow.version),
            "Content-Disposition": f'inline; filename="{workflow.id}.yaml"',
        },
    )
