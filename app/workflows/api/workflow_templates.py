"""`/v1/workflow-templates`: the built-in workflow templates, one or more of each kind, and
their instantiation into a definition with its board defaults in effect."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response, status

from app.db.idempotency import request_hash
from app.http.deps import PrincipalDep, ServicesDep, get_principal
from app.http.headers import IdempotencyKeyHeader, etag
from app.workflows.schemas.workflow_templates import (
    TemplateInstantiate,
    WorkflowTemplateRead,
    WorkflowTemplateSummary,
)
from app.workflows.schemas.workflows import WorkflowRead

router = APIRouter(
    prefix="/v1/workflow-templates",
    tags=["workflow templates"],
    dependencies=[Depends(get_principal)],
)


@router.get(
    "",
    response_model=list[WorkflowTemplateSummary],
    summary="List the workflow templates",
)
async def list_workflow_templates(services: ServicesDep) -> list[WorkflowTemplateSummary]:
    """Every built-in template with its variables: at least one of each workflow kind
    (`sequential`, `parallel`, `kanban`, `agile_kanban`)."""
    return [template.summary() for template in services.templates.catalogue().values()]


@router.get(
    "/{name}",
    response_model=WorkflowTemplateRead,
    summary="Get a workflow template",
)
async def get_workflow_template(name: str, services: ServicesDep) -> WorkflowTemplateRead:
    """The template, its variables with their defaults and bounds, and the definition it
    makes with the defaults. An unknown name is a 404 `not_found`."""
    return services.templates.get(name).read()


@router.post(
    "/{name}/instantiate",
    status_code=status.HTTP_201_CREATED,
    response_model=WorkflowRead,
    summary="Make a workflow definition from a template",
)
async def instantiate_workflow_template(
    name: str,
    body: TemplateInstantiate,
    request: Request,
    response: Response,
    services: ServicesDep,
    actor: PrincipalDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> WorkflowRead:
    """Renders the template with `variables` (the others at their defaults) and saves the
    definition, with the template's `kind` and board defaults (`board`) and `project`.
    A variable the template does not have, a value of the wrong type or out of its bounds
    is a 422 `validation_error` naming it (`variables.wip_limit`); an unknown template a
    404 `not_found`.

    With a `project`, in the same transaction: each column in the defaults' `wip_limits`
    that has **no limit yet** gets its limit; a column that has one keeps it (read the
    limits in effect at `GET /v1/projects/{project}/wip-limits`). For `agile_kanban`, when
    the project has no sprint `planning` or `active`, a first sprint is created
    (`planning`, from today, UTC, `length_days` long, with the defaults'
    `auto_transition`; a `sprint.created` event); otherwise none is. Activating the
    definition without a project then uses this one.

    With `Idempotency-Key`, a repeat of the request (same key, template and body) gets
    the first response again (`Idempotent-Replayed: true`) and changes nothing; another
    body is a 409 `idempotency_key_reused`."""
    digest = None
    if idempotency_key:  # a key names one instantiation, of one template
        digest = request_hash([name, body.model_dump(mode="json")])
    workflow, replayed = await services.templates.instantiate(
        name, body, actor, idempotency_key=idempotency_key, request_hash=digest
    )
    response.headers["Location"] = str(request.url_for("get_workflow", workflow_id=workflow.id))
    response.headers["ETag"] = etag(workflow.version)
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return workflow
