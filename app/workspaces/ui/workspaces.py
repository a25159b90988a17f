"""Workspaces in the dashboard: the projects' workspaces (`/ui/workspaces`), their tasks'
worktrees (`/ui/worktrees`, by project and status) and a worktree's page
(`/ui/worktrees/{id}`): its branch and status, its task, its diff (read from the
repository as the API's diff route reads it), its last merge result, its open escalation
with the forms to decide it, and "Merge now" for a queued one (the API's merge route,
called by the page's script). All three follow the worktrees' stream.

Reads go straight to the store, as the API's do; only the diff reaches the repository."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from app.agents.store import agents as agent_store
from app.approvals import store as approval_store
from app.core.streams import WORKTREES_STREAM
from app.core.vocabulary import WorktreeStatus
from app.dashboard.deps import DbDep, ServicesDep, ViewerDep
from app.dashboard.page import NavItem, Page
from app.dashboard.templating import render
from app.events import store as event_store
from app.events import ui as events
from app.tasks.store import tasks as task_store
from app.workspaces import store
from app.workspaces.engine.diffs import DIFF_LIMIT_BYTES, WorktreeDiffUnavailable, worktree_diff
from app.workspaces.repo.errors import WorkspaceError
from app.workspaces.schemas import WorktreeRead
from app.workspaces.ui.diff_lines import conflict_lines, diff_lines

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = Page(router, NavItem("workspaces", "Workspaces", "/ui/workspaces", order=90))

WORKTREES_PAGE = 50

ProjectQuery = Annotated[str | None, Query(max_length=200)]
StatusQuery = Annotated[str | None, Query(max_length=40)]
BeforeQuery = Annotated[str | None, Query(max_length=200)]


def _stream(since: int) -> dict[str, object]:
    return {
        "stream": f"/v1/worktrees/events?last_event_id={since}",
        "events": events.WORKTREES,
    }


# -- workspaces --------------------------------------------------------------------------


@router.get("/workspaces")
async def workspaces_page(request: Request, viewer: ViewerDep, db: DbDep) -> HTMLResponse:
    """Each workspace with its settings and its worktrees in use; live, as worktrees are
    made and settle."""
    since = await event_store.last_seq(db, WORKTREES_STREAM)  # before the rows: see kanban
    context = {"section": "workspaces", **await _workspaces(db), **_stream(since)}
    return render(request, "workspaces.html", viewer, context)


@router.get("/workspaces/table")
async def workspaces_table(request: Request, viewer: ViewerDep, db: DbDep) -> HTMLResponse:
    return render(request, "_workspaces_table.html", viewer, await _workspaces(db))


async def _workspaces(db: DbDep) -> dict[str, object]:
    workspaces = await store.all_workspaces(db)
    agents = [w.review_agent_id for w in workspaces if w.review_agent_id]
    return {"workspaces": workspaces, "names": await agent_store.names(db, agents)}


# -- worktrees ---------------------------------------------------------------------------


def _filters(project: str | None, status: str | None) -> tuple[str | None, WorktreeStatus | None]:
    """An unknown status filters nothing (as the tasks board does)."""
    known = status if status in WorktreeStatus.__members__.values() else None
    return project or None, WorktreeStatus(known) if known else None


@router.get("/worktrees")
async def worktrees_page(
    request: Request,
    viewer: ViewerDep,
    db: DbDep,
    project: ProjectQuery = None,
    status: StatusQuery = None,
    before: BeforeQuery = None,
) -> HTMLResponse:
    """Newest first, a page at a time (`before`: the page after that worktree); the first
    page is live."""
    since = await event_store.last_seq(db, WORKTREES_STREAM)
    chosen_project, chosen_status = _filters(project, status)
    context = {
        "section": "workspaces",
        **await _worktrees(db, chosen_project, chosen_status, before),
        "projects": [w.project for w in await store.all_workspaces(db)],
        "statuses": list(WorktreeStatus),
        "first_page": before is None,
        **_stream(since),
    }
    return render(request, "worktrees.html", viewer, context)


@router.get("/worktrees/rows")
async def worktrees_rows(
    request: Request,
    viewer: ViewerDep,
    db: DbDep,
    project: ProjectQuery = None,
    status: StatusQuery = None,
) -> HTMLResponse:
    """The first page's table as it is now."""
    chosen_project, chosen_status = _filters(project, status)
    context = await _worktrees(db, chosen_project, chosen_status, None)
    return render(request, "_worktrees_table.html", viewer, context)


async def _worktrees(
    db: DbDep, project: str | None, status: WorktreeStatus | None, before: str | None
) -> dict[str, object]:
    rows = await store.list_worktrees(
        db, project=project, status=status, after=before, limit=WORKTREES_PAGE + 1
    )
    shown = rows[:WORKTREES_PAGE]
    query = {"project": project or "", "status": status.value if status else ""}
    filters = urlencode({k: v for k, v in query.items() if v})
    older = None
    if len(rows) > WORKTREES_PAGE:
        older = urlencode({k: v for k, v in {**query, "before": shown[-1].id}.items() if v})
    tasks = await task_store.get_tasks(db, [w.task_id for w in shown])
    return {
        "worktrees": shown,
        "titles": {t.id: t.title for t in tasks},
        "project": project,
        "status": status,
        "filters": filters,
        "older": older,
    }


# -- a worktree --------------------------------------------------------------------------


@router.get("/worktrees/{worktree_id}")
async def worktree_page(
    worktree_id: str, request: Request, viewer: ViewerDep, db: DbDep, services: ServicesDep
) -> HTMLResponse:
    since = await event_store.last_seq(db, WORKTREES_STREAM)
    worktree = await store.get_worktree(db, worktree_id)
    if worktree is None:
        missing = {"section": "workspaces", "what": f"worktree {worktree_id}"}
        return render(request, "not_found.html", viewer, missing, status_code=404)
    context = {
        "section": "workspaces",
        **await _worktree(db, services, worktree),
        **_stream(since),
    }
    return render(request, "worktree.html", viewer, context)


@router.get("/worktrees/{worktree_id}/live")
async def worktree_live(
    worktree_id: str, request: Request, viewer: ViewerDep, db: DbDep, services: ServicesDep
) -> Response:
    """The part of the page its events change: all of it but the crumbs."""
    worktree = await store.get_worktree(db, worktree_id)
    if worktree is None:
        return Response(status_code=404)
    return render(request, "_worktree_live.html", viewer, await _worktree(db, services, worktree))


async def _worktree(db: DbDep, services: ServicesDep, worktree: WorktreeRead) -> dict[str, object]:
    """The worktree, its workspace and task, its diff (or why there is none), and its open
    escalation (the approval, or the review agent's run)."""
    workspace = await store.get_workspace(db, worktree.project)
    diff, diff_problem = None, None
    try:
        diff = await worktree_diff(services.worktrees.repos, worktree, workspace, DIFF_LIMIT_BYTES)
    except WorktreeDiffUnavailable as exc:
        diff_problem = exc.detail
    except WorkspaceError as exc:  # git refused or timed out: the rest of the page stands
        diff_problem = f"the repository could not be read: {exc}"
    approval = (
        await approval_store.get_approval(db, worktree.approval_id)
        if worktree.approval_id
        else None
    )
    merge = worktree.merge
    return {
        "worktree": worktree,
        "workspace": workspace,
        "task": await task_store.get_task(db, worktree.task_id),
        "diff": diff,
        "diff_lines": diff_lines(diff.text) if diff is not None else [],
        "diff_problem": diff_problem,
        "conflicts": [
            (conflict.path, [conflict_lines(hunk) for hunk in conflict.hunks])
            for conflict in (merge.conflicts if merge is not None else [])
        ],
        "approval": approval,
    }
