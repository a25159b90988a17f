"""A workflow definition's board defaults put into effect on a project, in the caller's
transaction: the WIP limits of its columns that have none (a limit already set, by a
person or an earlier definition, is kept), and for `agile_kanban` a first sprint when the
project has none planning or active.

Only the board kinds (`kanban`, `agile_kanban`) act on their `board`; a `sequential` or
`parallel` definition that carries one leaves the project's board as it is. Each limit set
records its `board.wip_limit_changed` (actor `workflow:<id>`) on the tasks stream; the
first sprint's `sprint.created` is recorded in the same transaction, and its stream
woken once the caller has committed (`SprintCommands.announce`).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import SprintStatus
from app.core.vocabulary import BoardColumn, WorkflowKind
from app.sprints.engine.sprints import SprintCommands
from app.sprints.schemas.sprints import SprintCreate, SprintRead
from app.sprints.store import sprints as sprint_store
from app.tasks.engine.wip_limits import add_default_limits
from app.tasks.schemas.board_defaults import SprintDefaults
from app.tasks.store import boards as board_store
from app.workflows.schemas.workflows import WorkflowRead

BOARD_KINDS = frozenset({WorkflowKind.KANBAN, WorkflowKind.AGILE_KANBAN})
FIRST_SPRINT_NAME = "Sprint 1"


async def apply_wip_limits(
    session: AsyncSession, project: str, workflow: WorkflowRead, *, now: datetime
) -> list[BoardColumn]:
    """Set the defaults' WIP limits on the project's columns that have none; the columns
    set (those left out already had a limit, which stays)."""
    board = workflow.board
    if workflow.kind not in BOARD_KINDS or board is None or not board.wip_limits:
        return []
    wanted = {d.column: board_store.Limit(d.limit, d.mode) for d in board.wip_limits}
    return await add_default_limits(
        session, project, wanted, actor=f"workflow:{workflow.id}", now=now
    )


async def open_first_sprint(
    session: AsyncSession,
    sprints: SprintCommands,
    project: str,
    workflow: WorkflowRead,
    *,
    today: date,
    actor: str,
) -> SprintRead | None:
    """For an `agile_kanban` definition: a sprint `planning` from `today`, as long as its
    sprint defaults say, when the project has no sprint planning or active; else None."""
    if workflow.kind is not WorkflowKind.AGILE_KANBAN:
        return None
    board = workflow.board
    defaults = board.sprint if board is not None and board.sprint is not None else SprintDefaults()
    # Two instantiations into one project at once: the second waits, then finds the first's.
    await sprint_store.lock_project(session, project)
    if await sprint_store.active_sprint(session, project) is not None:
        return None
    if await sprint_store.newest_in(session, project, SprintStatus.PLANNING) is not None:
        return None
    body = SprintCreate(
        project=project,
        name=FIRST_SPRINT_NAME,
        goal=f"The first sprint of workflow {workflow.name}",
        start_date=today,
        end_date=today + timedelta(days=defaults.length_days - 1),
    )
    return await sprints.create_in(session, body, actor, auto_transition=defaults.auto_transition)
