"""`/v1/approvals`: what waits on a person, and their answers. Answers go to the
ApprovalCommands; lists and reads go straight to the store."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query, Response
from sse_starlette import EventSourceResponse

from app.approvals import store
from app.approvals.schemas import ApprovalRead, ApproveRequest, RejectRequest
from app.core.errors import NotFound
from app.core.shapes import Page
from app.core.states import ApprovalDecision, ApprovalStatus
from app.core.streams import APPROVALS_STREAM
from app.core.vocabulary import ApprovalKind
from app.events.api.stream_docs import APPROVALS
from app.events.api.streams import LastEventIdHeader, LastEventIdQuery, open_stream, resume_point
from app.http.deps import ApprovalCommandsDep, PrincipalDep, ServicesDep, SessionDep, get_principal
from app.http.headers import IfMatchHeader, etag, expected_version
from app.http.pagination import CursorQuery, decode_cursor, page, present

router = APIRouter(
    prefix="/v1/approvals", tags=["approvals"], dependencies=[Depends(get_principal)]
)


def _respond(response: Response, approval: ApprovalRead) -> ApprovalRead:
    response.headers["ETag"] = etag(approval.version)
    return approval


@router.get("", response_model=Page[ApprovalRead], summary="List approvals")
async def list_approvals(
    session: SessionDep,
    status: ApprovalStatus | None = None,
    decision: ApprovalDecision | None = None,
    kind: ApprovalKind | None = None,
    task_id: Annotated[str | None, Query(max_length=200)] = None,
    run_id: Annotated[str | None, Query(max_length=200)] = None,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Page[ApprovalRead]:
    """Oldest first; `status=pending` is the reviewer's inbox, `status=expired` what
    nobody answered in time, `decision=rejected` what did not go ahead (by a person or
    by expiry)."""
    filters = present(status=status, decision=decision, kind=kind, task_id=task_id, run_id=run_id)
    rows = await store.list_approvals(
        session, after_id=decode_cursor(cursor), limit=limit + 1, filters=filters
    )
    return page(rows, limit)


@router.get(
    "/events",
    response_class=EventSourceResponse,
    summary="Stream approval changes (SSE)",
    responses={200: APPROVALS.response()},
)
async def stream_approval_events(
    services: ServicesDep,
    last_event_id: LastEventIdHeader = None,
    last_event_id_query: LastEventIdQuery = None,
) -> EventSourceResponse:
    """Events `approval.requested`, `approval.approved`, `approval.rejected`,
    `approval.expired` (its `decision` is the timeout policy's), `approval.escalated`,
    `approval.cancelled`, each with the approval; the `id` is the event's sequence number.
    Without a resume point only new events are sent."""
    after = resume_point(last_event_id, last_event_id_query)
    return await open_stream(services, APPROVALS_STREAM, after)


@router.get("/{approval_id}", response_model=ApprovalRead, summary="Get an approval")
async def get_approval(approval_id: str, session: SessionDep, response: Response) -> ApprovalRead:
    approval = await store.get_approval(session, approval_id)
    if approval is None:
        raise NotFound("approval", approval_id)
    return _respond(response, approval)


@router.post("/{approval_id}/approve", response_model=ApprovalRead, summary="Approve")
async def approve(
    approval_id: str,
    response: Response,
    commands: ApprovalCommandsDep,
    actor: PrincipalDep,
    body: Annotated[ApproveRequest | None, Body()] = None,
    if_match: IfMatchHeader = None,
) -> ApprovalRead:
    """A task review completes its task; a tool call runs with exactly the arguments
    shown. 409 `approval_expired` when its deadline passed and its timeout policy decided
    (even if the sweep had not been by yet); 409 `invalid_transition` when it was already
    decided or withdrawn."""
    body = body or ApproveRequest()
    approval = await commands.approve(
        approval_id, actor, comment=body.comment, expected_version=expected_version(if_match)
    )
    return _respond(response, approval)


@router.post("/{approval_id}/reject", response_model=ApprovalRead, summary="Reject")
async def reject(
    approval_id: str,
    body: RejectRequest,
    response: Response,
    commands: ApprovalCommandsDep,
    actor: PrincipalDep,
    if_match: IfMatchHeader = None,
) -> ApprovalRead:
    """A task review sends its task back to `in_progress` and its agent reworks it with
    `reason`; a tool call does not run and the agent is told `reason`. 409 as approve."""
    approval = await commands.reject(
        approval_id, actor, reason=body.reason, expected_version=expected_version(if_match)
    )
    return _respond(response, approval)
