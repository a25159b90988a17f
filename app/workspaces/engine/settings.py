"""A project's workspace settings (`PUT/GET/DELETE /v1/projects/{project}/workspace`):
checked against the repository itself (it must be a git repository this process reaches,
with the base branch) before they are stored."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.errors import (
    Conflict,
    FieldError,
    NotFound,
    ProblemCode,
    ValidationFailed,
    VersionConflict,
)
from app.core.streams import WORKSPACES_CHANGED
from app.core.vocabulary import ConflictEscalation
from app.events.engine.bus import EventBus
from app.tasks.store import task_runs as task_run_store
from app.workspaces import store
from app.workspaces.engine.repos import Repos
from app.workspaces.repo.errors import NotARepository
from app.workspaces.schemas import WorkspaceRead, WorkspaceSet


class WorkspaceInUse(Conflict):
    """Its worktrees are not all merged or ended: their repository cannot change under
    them, nor the workspace go."""

    code = ProblemCode.WORKSPACE_IN_USE

    def __init__(self, project: str, in_use: int, what: str) -> None:
        super().__init__(f"workspace {project!r} has {in_use} worktrees in use: {what}")
        self.in_use = in_use

    def extensions(self) -> dict[str, Any]:
        return {"worktrees_in_use": self.in_use}


class WorkspaceCommands:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        repos: Repos,
        bus: EventBus,
        *,
        on_changed: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        """`on_changed(project)` after a change: tasks that waited for a worktree may start
        (a larger `max_worktrees`)."""
        self._sessionmaker = sessionmaker
        self._repos = repos
        self._bus = bus
        self._on_changed = on_changed

    async def put(
        self, project: str, body: WorkspaceSet, *, expected_version: int | None
    ) -> tuple[WorkspaceRead, bool]:
        """The workspace after the change, and whether it was created."""
        await self._check_repository(body)
        async with self._sessionmaker() as session, session.begin():
            await self._check_agent(session, body)
            current = await store.get_workspace(session, project)
            if current is not None and expected_version not in (None, current.version):
                raise VersionConflict(expected=expected_version, current=current.version)
            moved = current is not None and current.repository != body.repository
            if moved and current is not None and current.worktrees_in_use:
                raise WorkspaceInUse(
                    project, current.worktrees_in_use, "its repository cannot change"
                )
            read_version = current.version if current is not None else None
            if not await store.put_workspace(session, project, body, read_version=read_version):
                latest = await store.get_workspace(session, project)
                raise VersionConflict(
                    expected=read_version or 0, current=latest.version if latest else 0
                )
            written = await store.get_workspace(session, project)
        assert written is not None  # written in this transaction
        # The merge queue takes a new order (or capacity) at once, not at its next poll.
        self._bus.publish(WORKSPACES_CHANGED)
        if self._on_changed is not None:
            await self._on_changed(project)
        return written, current is None

    async def delete(self, project: str) -> None:
        async with self._sessionmaker() as session, session.begin():
            current = await store.get_workspace(session, project)
            if current is None:
                raise NotFound("workspace", project)
            if current.worktrees_in_use:
                raise WorkspaceInUse(project, current.worktrees_in_use, "merge or end them first")
            await store.delete_workspace(session, project)

    async def _check_repository(self, body: WorkspaceSet) -> None:
        try:
            repo = await self._repos.open(body.repository)
        except NotARepository as exc:
            raise ValidationFailed.field("repository", f"is not a git repository: {exc}") from None
        try:
            await repo.check_branch_name(body.base_branch)
        except ValueError as exc:
            raise ValidationFailed.field("base_branch", str(exc)) from None
        if await repo.branch_head(body.base_branch) is None:
            raise ValidationFailed.field("base_branch", "is not a branch of the repository")

    @staticmethod
    async def _check_agent(session: AsyncSession, body: WorkspaceSet) -> None:
        errors = []
        if body.escalation is ConflictEscalation.AGENT and body.review_agent_id is None:
            errors.append(FieldError("review_agent_id", "is required when escalation is agent"))
        elif body.review_agent_id is not None and (
            await task_run_store.resolve_agent(session, body.review_agent_id) is None
        ):
            errors.append(FieldError("review_agent_id", "names no agent"))
        if errors:
            raise ValidationFailed(errors)
