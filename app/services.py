"""The services of one process that requests and tools reach, built once by the
composition root (`app/wiring.py`) and handed to the routers through a dependency."""

from __future__ import annotations

from dataclasses import dataclass

import anyio
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.engine import AgentCommands
from app.approvals.engine.approvals import ApprovalCommands
from app.coordination.engine.commands import CoordinationCommands
from app.core.breakers import Breakers
from app.core.config import Settings
from app.core.sessions import Sessions
from app.costs.engine.budgets import BudgetCommands
from app.events.engine.bus import EventBus
from app.events.engine.stream_slots import StreamSlots
from app.events.engine.stream_tails import StreamTails
from app.routing.engine.router import TaskRouter
from app.runs.engine.runs import RunCommands
from app.runs.schemas.tools import ToolRead
from app.runtime.lifecycle import Components
from app.sprints.engine.sprints import SprintCommands
from app.tasks.engine.task_engine import TaskEngine
from app.telemetry.metrics import Metrics
from app.triggers.engine.commands import TriggerCommands
from app.triggers.engine.firing import TriggerFiring
from app.triggers.engine.hooks import TriggerHooks
from app.webhooks.engine.commands import WebhookCommands
from app.workflows.engine.templates.instantiate import TemplateCommands
from app.workflows.engine.workflows import WorkflowCommands
from app.workspaces.engine.merge_queue import MergeQueue
from app.workspaces.engine.settings import WorkspaceCommands
from app.workspaces.engine.worktrees import Worktrees


@dataclass(frozen=True)
class Services:
    settings: Settings
    sessionmaker: async_sessionmaker[AsyncSession]
    bus: EventBus
    tasks: TaskEngine
    router: TaskRouter  # routes created tasks to agents
    agents: AgentCommands
    runs: RunCommands
    approvals: ApprovalCommands
    workflows: WorkflowCommands
    coordinations: CoordinationCommands
    triggers: TriggerCommands
    firing: TriggerFiring  # the one fire path (webhooks, schedules, chains)
    hooks: TriggerHooks
    webhooks: WebhookCommands
    budgets: BudgetCommands
    sprints: SprintCommands
    templates: TemplateCommands  # workflow templates and their instantiation
    workspaces: WorkspaceCommands  # projects' workspace settings
    worktrees: Worktrees  # tasks' worktrees (made on first use)
    merge_queue: MergeQueue  # approved worktrees merged in order; a person's merge
    metrics: Metrics
    breakers: Breakers  # this process's circuit breakers, which `metrics` reports
    shutting_down: anyio.Event  # set first at shutdown: open streams end
    stream_slots: StreamSlots
    stream_tails: StreamTails
    tools: list[ToolRead]  # the tools agents may name
    sessions: Sessions  # the dashboard's login cookies (with API keys configured)
    components: Components  # the background components, as `/readyz` reads them
