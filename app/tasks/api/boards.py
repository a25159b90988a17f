"""Kanban boards: `GET /v1/projects/{project}/board` and the columns' WIP limits. Moves are
`POST /v1/tasks/{id}/move`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import NotFound
from app.core.fields import Name
from app.core.vocabulary import BoardColumn
from app.db.connection import one_snapshot
from app.http.deps import PrincipalDep, SessionDep, get_principal
from app.sprints.schemas.sprints import SprintRead
from app.sprints.store import sprints as sprint_store
from app.tasks.engine import wip_limits
from app.tasks.schemas.boards import BoardRead, WipLimitRead, WipLimitSet
from app.tasks.store import boards as store

router = APIRouter(
    prefix="/v1/projects/{project:path}", tags=["boards"], dependencies=[Depends(get_principal)]
)


@router.get("/board", response_model=BoardRead, summary="A project's Kanban board")
async def get_board(
    project: Name,
    session: SessionDep,
    sprint: Annotated[
        Name | None,
        Query(
            description="Agile Kanban: only the tasks of this sprint (its id, or `active` "
            "for the project's active sprint)."
        ),
    ] = None,
) -> BoardRead:
    """The project's tasks column by column (backlog = created, ready = assigned,
    in_progress, review = in_review, done = completed), each column with its count and
    WIP limit (counted over the whole project), and the tasks in no column apart. The
    tasks stream (`GET /v1/tasks/events`) tells what moved."""
    await one_snapshot(session)  # each task in one column, counts that match
    shown_sprint = await _sprint(session, project, sprint) if sprint is not None else None
    return await store.board(session, project, sprint=shown_sprint)


async def _sprint(session: AsyncSession, project: str, sprint: str) -> SprintRead:
    sprint_id = await sprint_store.active_sprint(session, project) if sprint == "active" else sprint
    found = await sprint_store.get_sprint(session, sprint_id) if sprint_id else None
    if found is None or found.project != project:
        if sprint == "active":
            raise NotFound("active sprint of project", project)
        raise NotFound(f"sprint of project {project!r}", sprint)
    return found


@router.get("/wip-limits", response_model=list[WipLimitRead], summary="A board's WIP limits")
async def list_wip_limits(project: Name, session: SessionDep) -> list[WipLimitRead]:
    limits = await store.limits_of(session, project)
    return [
        WipLimitRead(project=project, column=column, limit=limit.limit, mode=limit.mode)
        for column, limit in sorted(
            limits.items(), key=lambda item: list(BoardColumn).index(item[0])
        )
    ]


@router.put("/wip-limits/{column}", response_model=WipLimitRead, summary="Set a column's WIP limit")
async def set_wip_limit(
    project: Name,
    column: BoardColumn,
    body: WipLimitSet,
    session: SessionDep,
    actor: PrincipalDep,
) -> WipLimitRead:
    """From now on, a move that would bring the project's tasks in the column past
    `limit` is refused (`strict`) or noted (`advisory`). Tasks already past a lowered
    limit stay; only moves in are counted. The tasks stream tells of the change
    (`board.wip_limit_changed`)."""
    limit = store.Limit(body.limit, body.mode)
    async with session.begin():
        await wip_limits.set_wip_limit(
            session, project, column, limit, actor=actor, now=datetime.now(UTC)
        )
    return WipLimitRead(project=project, column=column, limit=body.limit, mode=body.mode)


@router.delete(
    "/wip-limits/{column}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Remove a column's WIP limit",
)
async def delete_wip_limit(
    project: Name, column: BoardColumn, session: SessionDep, actor: PrincipalDep
) -> Response:
    async with session.begin():
        if not await wip_limits.remove_wip_limit(
            session, project, column, actor=actor, now=datetime.now(UTC)
        ):
            raise NotFound("WIP limit", f"{project}/{column.value}")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
