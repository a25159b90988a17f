"""`/v1/budgets`: limits on what an agent or a project may spend on LLM calls a day or a
month, each with where it stands in its current period; and their alerts' stream."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from sse_starlette import EventSourceResponse

from app.core.errors import NotFound
from app.core.shapes import Page
from app.core.streams import BUDGETS_STREAM
from app.core.vocabulary import BudgetScope
from app.costs.schemas.budgets import BudgetCreate, BudgetPatch, BudgetRead
from app.costs.store import budgets as store
from app.db.idempotency import request_hash
from app.events.api.stream_docs import BUDGETS
from app.events.api.streams import LastEventIdHeader, LastEventIdQuery, open_stream, resume_point
from app.http.deps import ServicesDep, SessionDep, get_principal
from app.http.headers import IdempotencyKeyHeader, IfMatchHeader, etag, expected_version
from app.http.pagination import CursorQuery, decode_cursor, page

router = APIRouter(prefix="/v1/budgets", tags=["budgets"], dependencies=[Depends(get_principal)])


@router.post(
    "", status_code=status.HTTP_201_CREATED, response_model=BudgetRead, summary="Create a budget"
)
async def create_budget(
    body: BudgetCreate,
    request: Request,
    response: Response,
    services: ServicesDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> BudgetRead:
    """From now on, an LLM call of the agent (or of a run of one of the project's tasks)
    starts only if its worst case fits under the limit with what the period spent and the
    calls in flight reserved; a run whose call does not fit ends `budget_exhausted`, and its
    task stays where it is. `budget.alert` events mark 50, 80 and 100 % spent, once each a
    period. A second budget of the same scope, subject and period is a 409.

    With `Idempotency-Key`, a repeat of the request gets the first response again."""
    digest = request_hash(body.model_dump(mode="json")) if idempotency_key else None
    budget, replayed = await services.budgets.create_keyed(
        body, idempotency_key=idempotency_key, request_hash=digest
    )
    response.headers["Location"] = str(request.url_for("get_budget", budget_id=budget.id))
    response.headers["ETag"] = etag(budget.version)
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return budget


@router.get("", response_model=Page[BudgetRead], summary="List budgets")
async def list_budgets(
    session: SessionDep,
    services: ServicesDep,
    scope: BudgetScope | None = None,
    subject: Annotated[str | None, Query(max_length=200)] = None,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Page[BudgetRead]:
    """Oldest first, each with its current period's standing."""
    rows = await store.list_budgets(
        session,
        today=services.budgets.today(),
        after_id=decode_cursor(cursor),
        limit=limit + 1,
        scope=scope,
        subject=subject,
    )
    return page(rows, limit)


@router.get(
    "/events",
    response_class=EventSourceResponse,
    summary="Stream budget alerts (SSE)",
    responses={200: BUDGETS.response()},
)
async def stream_budget_events(
    services: ServicesDep,
    last_event_id: LastEventIdHeader = None,
    last_event_id_query: LastEventIdQuery = None,
) -> EventSourceResponse:
    """`budget.alert` when a budget's spending crosses 50, 80 or 100 % of its limit (once
    each a period). Without a resume point only new events are sent."""
    after = resume_point(last_event_id, last_event_id_query)
    return await open_stream(services, BUDGETS_STREAM, after)


@router.get("/{budget_id}", response_model=BudgetRead, summary="Get a budget")
async def get_budget(
    budget_id: str, session: SessionDep, services: ServicesDep, response: Response
) -> BudgetRead:
    budget = await store.get_budget(session, budget_id, today=services.budgets.today())
    if budget is None:
        raise NotFound("budget", budget_id)
    response.headers["ETag"] = etag(budget.version)
    return budget


@router.patch("/{budget_id}", response_model=BudgetRead, summary="Change a budget's limit")
async def update_budget(
    budget_id: str,
    body: BudgetPatch,
    response: Response,
    services: ServicesDep,
    if_match: IfMatchHeader = None,
) -> BudgetRead:
    """A stale `If-Match` is a 409 `version_conflict`."""
    budget = await services.budgets.update(
        budget_id, body, expected_version=expected_version(if_match)
    )
    response.headers["ETag"] = etag(budget.version)
    return budget


@router.delete("/{budget_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a budget")
async def delete_budget(
    budget_id: str, services: ServicesDep, if_match: IfMatchHeader = None
) -> Response:
    await services.budgets.delete(budget_id, expected_version=expected_version(if_match))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
