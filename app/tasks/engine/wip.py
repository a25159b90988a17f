"""WIP limits in the TaskEngine's writer: a change that brings a task into a board column
(a status of `COLUMN_STATUS`) of a project with a limit is counted against it, however it
was made (the API, a board move, an agent's tool, a run's progress, a workflow).

The writer locks the limits of every project its batch touches (after the task and agent
rows), then counts each column in the database, leaving out the batch's own tasks, which
it counts in its working copy as it applies them. Writers in other processes wait on the
same locks, so fifty moves racing into a column with a strict limit of three leave three.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import STATUS_COLUMN
from app.core.vocabulary import WipMode
from app.tasks.engine.task_mutations import (
    Change,
    CreateTask,
    TaskMutation,
    UpdateTask,
    WipLimitReached,
    wip_exceeded,
)
from app.tasks.schemas.tasks import TaskRead
from app.tasks.store import boards
from app.tasks.store.boards import Cell, Limit


class WipCounter:
    def __init__(self, limits: Mapping[Cell, Limit], counts: Counter[Cell]) -> None:
        self._limits = limits
        self._counts = counts  # in the database, the batch's tasks left out

    @classmethod
    async def locked(
        cls,
        session: AsyncSession,
        read: Mapping[str, TaskRead],
        mutations: Sequence[TaskMutation],
    ) -> WipCounter:
        projects = {task.project for task in read.values() if task.project}
        for mutation in mutations:
            if isinstance(mutation, CreateTask) and mutation.fields.project:
                projects.add(mutation.fields.project)
            elif isinstance(mutation, UpdateTask) and mutation.changes.get("project"):
                projects.add(str(mutation.changes["project"]))
        limits = await boards.lock_limits(session, projects)
        if not limits:
            return cls({}, Counter())
        counts = await boards.column_counts(session, list(limits), leaving_out=list(read))
        return cls(limits, counts)

    def check(
        self, change: Change, working: Mapping[str, TaskRead | None], *, enforce: bool
    ) -> list[Change]:
        """Nothing when the change brings no task into a limited column, or stays within
        the limit; past it, `wip_limit_reached` (strict, and `enforce`), else the note of
        a limit exceeded."""
        after, before = change.after, change.before
        if not self._limits or after is None or after.project is None:
            return []
        column = STATUS_COLUMN.get(after.status)
        limit = self._limits.get((after.project, column)) if column is not None else None
        if column is None or limit is None:
            return []
        if before is not None and (before.project, before.status) == (after.project, after.status):
            return []  # it was in that column already
        others = sum(
            1
            for task_id, task in working.items()
            if task is not None
            and task_id != after.id
            and (task.project, task.status) == (after.project, after.status)
        )
        held = self._counts[after.project, column] + others
        if held < limit.limit:
            return []
        if enforce and limit.mode is WipMode.STRICT:
            raise WipLimitReached(after.project, column, limit.limit, held)
        return [wip_exceeded(after, column, limit.limit, held + 1)]
