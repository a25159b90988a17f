"""The approvals inbox (`/ui/approvals`): what waits on a person, oldest first, each with
its summary and the forms to approve (with a comment) or reject (with a reason), a merge's
worktree linked; live, as approvals are asked for and settled. The forms post to the
API's own routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from app.approvals import store as approval_store
from app.approvals.schemas import ApprovalRead
from app.core.states import ApprovalStatus
from app.core.streams import APPROVALS_STREAM
from app.core.vocabulary import ApprovalKind
from app.dashboard.deps import DbDep, ViewerDep
from app.dashboard.page import NavItem, Page
from app.dashboard.templating import render
from app.events import store as event_store
from app.events import ui as events
from app.workspaces import store as workspace_store
from app.workspaces.schemas import WorktreeRead

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = Page(router, NavItem("approvals", "Approvals", "/ui/approvals", order=40))

INBOX_PAGE = 50
_PENDING = {"status": ApprovalStatus.PENDING.value}


@router.get("/approvals")
async def inbox(
    request: Request,
    viewer: ViewerDep,
    db: DbDep,
    after: Annotated[str | None, Query(max_length=200)] = None,
) -> HTMLResponse:
    """Pending approvals, oldest first; `after`: the page after that approval."""
    since = await event_store.last_seq(db, APPROVALS_STREAM)  # before the list, as the board
    rows = await approval_store.list_approvals(
        db, after_id=after, limit=INBOX_PAGE + 1, filters=_PENDING
    )
    approvals = rows[:INBOX_PAGE]
    context = {
        "section": "approvals",
        "approvals": approvals,
        "worktrees": await _worktrees(db, approvals),
        "more": approvals[-1].id if len(rows) > INBOX_PAGE else None,
        "first_page": after is None,
        "stream": f"/v1/approvals/events?last_event_id={since}",
        "events": events.APPROVALS,
    }
    return render(request, "approvals.html", viewer, context)


@router.get("/approvals/{approval_id}/item")
async def approval_item(
    approval_id: str, request: Request, viewer: ViewerDep, db: DbDep
) -> Response:
    """One inbox item as it is now; 204 once it is no longer pending."""
    approval = await approval_store.get_approval(db, approval_id)
    if approval is None or approval.status is not ApprovalStatus.PENDING:
        return Response(status_code=204)
    context = {"approval": approval, "worktrees": await _worktrees(db, [approval])}
    return render(request, "_approval.html", viewer, context)


async def _worktrees(db: DbDep, approvals: list[ApprovalRead]) -> dict[str, WorktreeRead]:
    """The worktrees merge approvals decide, by task (a merge approval names its task)."""
    tasks = [a.task_id for a in approvals if a.kind is ApprovalKind.MERGE and a.task_id]
    return await workspace_store.worktrees_of_tasks(db, tasks)
