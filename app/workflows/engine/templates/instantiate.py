"""Instantiating a workflow template: the rendered definition saved, and its board
defaults put into effect on the project named, in one transaction.

With a project, the same transaction sets the template's WIP limits on the project's
columns that have none (a limit already set is kept) and, for `agile_kanban`, opens the
first sprint when the project has none planning or active (`app/tasks/engine/board_defaults.py`).
Either all of it commits or none of it. Under an `Idempotency-Key` a repeat gets the first
response (the definition as it was made) and changes nothing on the board.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db import idempotency
from app.db.idempotent_create import CreateKey, keyed_create
from app.sprints.engine.sprints import SprintCommands
from app.tasks.engine.board_defaults import apply_wip_limits, open_first_sprint
from app.workflows.engine.templates.catalogue import (
    WorkflowTemplate,
    builtin_templates,
    get_template,
)
from app.workflows.engine.workflows import WorkflowCommands
from app.workflows.schemas.workflow_templates import TemplateInstantiate
from app.workflows.schemas.workflows import WorkflowRead

INSTANTIATE_SCOPE = "workflow-templates.instantiate"


class TemplateCommands:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        workflows: WorkflowCommands,
        sprints: SprintCommands,
        *,
        catalogue: Mapping[str, WorkflowTemplate] | None = None,  # None: the built-ins
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        idempotency_retention: timedelta = idempotency.DEFAULT_RETENTION,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._workflows = workflows
        self._sprints = sprints
        self._catalogue = catalogue
        self._clock = clock
        self._idempotency_retention = idempotency_retention

    def catalogue(self) -> Mapping[str, WorkflowTemplate]:
        """The templates by name, in the order they are listed (the built-ins are read
        on first use)."""
        return builtin_templates() if self._catalogue is None else self._catalogue

    def get(self, name: str) -> WorkflowTemplate:
        """The template (404 `not_found` for none)."""
        return get_template(name, self.catalogue())

    async def instantiate(
        self,
        name: str,
        body: TemplateInstantiate,
        actor: str,
        *,
        idempotency_key: str | None = None,
        request_hash: str | None = None,
    ) -> tuple[WorkflowRead, bool]:
        """The definition made, and whether this is a replay of the key's first response."""
        definition = self.get(name).instantiate(body)
        key = CreateKey.of(INSTANTIATE_SCOPE, idempotency_key, request_hash)
        now = self._clock()
        sprint = None
        async with self._sessionmaker() as session, session.begin():
            create = await keyed_create(
                session, key, now=now, retention=self._idempotency_retention
            )
            if create.replay is not None:
                return WorkflowRead.model_validate(create.replay.response), True
            workflow = await self._workflows.create_in(session, definition)
            if workflow.project is not None:
                await apply_wip_limits(session, workflow.project, workflow, now=now)
                sprint = await open_first_sprint(
                    session,
                    self._sprints,
                    workflow.project,
                    workflow,
                    today=now.date(),
                    actor=actor,
                )
            await create.remember(workflow.id, workflow.model_dump(mode="json"))
        if sprint is not None:
            self._sprints.announce()
        return workflow, False
