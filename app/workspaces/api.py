"""Workspaces: a project's repository that its tasks' runs change in worktrees of their
own (`PUT/GET/DELETE /v1/projects/{project}/workspace`, `GET /v1/workspaces`), and those
worktrees with their diffs and merge results (`/v1/worktrees`, `/v1/worktrees/{id}/diff`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response, status
from sse_starlette import EventSourceResponse

from app.core.errors import Conflict, NotFound, ProblemCode, Unavailable
from app.core.fields import Name
from app.core.shapes import Page
from app.core.streams import WORKTREES_STREAM
from app.core.vocabulary import WorktreeStatus
from app.events.api.stream_docs import WORKTREES
from app.events.api.streams import LastEventIdHeader, LastEventIdQuery, open_stream, resume_point
from app.http.deps import ServicesDep, SessionDep, get_principal
from app.http.headers import IfMatchHeader, etag, expected_version
from app.http.pagination import CursorQuery, decode_cursor, page
from app.workspaces import store
from app.workspaces.engine.diffs import DIFF_LIMIT_BYTES, MAX_DIFF_LIMIT_BYTES, worktree_diff
from app.workspaces.engine.worktrees import Opened
from app.workspaces.repo.errors import NotARepository
from app.workspaces.schemas import WorkspaceRead, WorkspaceSet, WorktreeDiff, WorktreeRead

projects = APIRouter(
    prefix="/v1/projects/{project:path}",
    tags=["workspaces"],
    dependencies=[Depends(get_principal)],
)
router = APIRouter(tags=["workspaces"], dependencies=[Depends(get_principal)])


class WorktreeNotMergeable(Conflict):
    """Only a queued worktree (its task approved, its turn not come) is merged on request."""

    code = ProblemCode.WORKTREE_NOT_MERGEABLE

    def __init__(self, worktree: WorktreeRead) -> None:
        super().__init__(f"worktree {worktree.id} is {worktree.status.value}, not queued")
        self.status = worktree.status

    def extensions(self) -> dict[str, Any]:
        return {"worktree_status": self.status.value}


def _sent(response: Response, workspace: WorkspaceRead) -> WorkspaceRead:
    response.headers["ETag"] = etag(workspace.version)
    return workspace


@projects.put(
    "/workspace",
    response_model=WorkspaceRead,
    summary="Set a project's workspace",
    responses={201: {"description": "Created.", "model": WorkspaceRead}},
)
async def put_workspace(
    project: Name,
    body: WorkspaceSet,
    response: Response,
    services: ServicesDep,
    if_match: IfMatchHeader = None,
) -> WorkspaceRead:
    """The project's tasks' runs then work in worktrees of `repository` (the file tools:
    `read_file`, `list_files`, `search`, `write_file`, `apply_patch`, `run_command`), and
    their approved work is merged into `base_branch` in `merge_order`. The repository must
    be a git repository this server reaches, with that branch (422 naming the field).
    Replacing the settings is refused while worktrees are in use if the repository
    changes (409 `workspace_in_use`)."""
    workspace, created = await services.workspaces.put(
        project, body, expected_version=expected_version(if_match)
    )
    if created:
        response.status_code = status.HTTP_201_CREATED
    return _sent(response, workspace)


@projects.get("/workspace", response_model=WorkspaceRead, summary="A project's workspace")
async def get_workspace(project: Name, response: Response, session: SessionDep) -> WorkspaceRead:
    found = await store.get_workspace(session, project)
    if found is None:
        raise NotFound("workspace", project)
    return _sent(response, found)


@projects.delete(
    "/workspace", status_code=status.HTTP_204_NO_CONTENT, summary="Remove a project's workspace"
)
async def delete_workspace(project: Name, services: ServicesDep) -> Response:
    """Refused while its worktrees are in use (409 `workspace_in_use`); the repository and
    its branches are left as they are."""
    await services.workspaces.delete(project)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/v1/workspaces", response_model=list[WorkspaceRead], summary="List workspaces")
async def list_workspaces(session: SessionDep) -> list[WorkspaceRead]:
    """Every workspace, by project name (a deployment has a workspace a repository: few,
    so not paged)."""
    return await store.all_workspaces(session)


@router.get("/v1/worktrees", response_model=Page[WorktreeRead], summary="List worktrees")
async def list_worktrees(
    session: SessionDep,
    project: Annotated[str | None, Query(max_length=200)] = None,
    task_id: Annotated[str | None, Query(max_length=200)] = None,
    status: WorktreeStatus | None = None,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Page[WorktreeRead]:
    """Newest first, each with its branch, status, diff stat and last merge result."""
    rows = await store.list_worktrees(
        session,
        project=project,
        task_id=task_id,
        status=status,
        after=decode_cursor(cursor),
        limit=limit + 1,
    )
    return page(rows, limit)


@router.get(
    "/v1/worktrees/events",
    response_class=EventSourceResponse,
    summary="Stream worktree changes (SSE)",
    responses={200: WORKTREES.response()},
)
async def stream_worktree_events(
    services: ServicesDep,
    last_event_id: LastEventIdHeader = None,
    last_event_id_query: LastEventIdQuery = None,
) -> EventSourceResponse:
    """Every worktree's changes: made, committed (a new diff), moved (queued, merging,
    merged, conflict, held, ...), its directory removed. Without a resume point only new
    events are sent."""
    after = resume_point(last_event_id, last_event_id_query)
    return await open_stream(services, WORKTREES_STREAM, after)


@router.get("/v1/worktrees/{worktree_id}", response_model=WorktreeRead, summary="A worktree")
async def get_worktree(worktree_id: Name, session: SessionDep) -> WorktreeRead:
    found = await store.get_worktree(session, worktree_id)
    if found is None:
        raise NotFound("worktree", worktree_id)
    return found


@router.get(
    "/v1/worktrees/{worktree_id}/diff",
    response_model=WorktreeDiff,
    summary="A worktree's diff",
)
async def get_worktree_diff(
    worktree_id: Name,
    services: ServicesDep,
    limit_bytes: Annotated[
        int, Query(ge=1_024, le=MAX_DIFF_LIMIT_BYTES, description="Cut the text here.")
    ] = DIFF_LIMIT_BYTES,
) -> WorktreeDiff:
    """The unified diff of its committed work (`git diff base...branch`) with each file's
    stat, read from the repository now; the text is cut on a line at `limit_bytes`
    (`truncated`). A merged worktree shows what its merge brought to the base branch.
    409 `worktree_diff_unavailable` when there is nothing to read it from: its branch was
    deleted, or its workspace or repository is gone (`reason`)."""
    async with services.sessionmaker() as session:
        worktree = await store.get_worktree(session, worktree_id)
        if worktree is None:
            raise NotFound("worktree", worktree_id)
        workspace = await store.get_workspace(session, worktree.project)
    return await worktree_diff(services.worktrees.repos, worktree, workspace, limit_bytes)


@router.post(
    "/v1/worktrees/{worktree_id}/merge",
    response_model=WorktreeRead,
    summary="Merge a queued worktree now",
)
async def merge_worktree(worktree_id: Name, services: ServicesDep) -> WorktreeRead:
    """For the `manual` merge order (or to go before the queue's order): the worktree's
    branch is rebased on the base branch, checked, and merged, as the queue would. The
    answer is the worktree after it: `merged`, or `conflict`/`held` with an escalation.
    Only a `queued` worktree is merged (409 `worktree_not_mergeable`)."""
    async with services.sessionmaker() as session:
        worktree = await store.get_worktree(session, worktree_id)
        if worktree is None:
            raise NotFound("worktree", worktree_id)
        workspace = await store.get_workspace(session, worktree.project)
    if worktree.status is not WorktreeStatus.QUEUED or workspace is None:
        raise WorktreeNotMergeable(worktree)
    try:
        repo = await services.worktrees.repos.open(workspace.repository)
    except NotARepository as exc:
        raise Unavailable(f"the workspace's repository is not reachable: {exc}") from None
    merged = await services.merge_queue.merge(Opened(worktree, workspace, repo))
    if merged is None:  # another process took it first
        async with services.sessionmaker() as session:
            merged = await store.get_worktree(session, worktree_id)
        assert merged is not None  # worktrees are never deleted
    return merged
