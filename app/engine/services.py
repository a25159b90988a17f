"""The services of one process that requests and tools reach, built once by the
composition root (`app/wiring.py`) and handed to the routers through a dependency."""

from __future__ import annotations

from dataclasses import dataclass

import anyio
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.breakers import Breakers
from app.core.config import Settings
from app.core.sessions import Sessions
from app.engine.agents import AgentCommands
from app.engine.approvals import ApprovalCommands
from app.engine.budgets import BudgetCommands
from app.engine.bus import EventBus
from app.engine.coordination.commands import CoordinationCommands
from app.engine.routing.router import TaskRouter
from app.engine.runs import RunCommands
from app.engine.sprints import SprintCommands
from app.engine.stream_slots import StreamSlots
from app.engine.stream_tails import StreamTails
from app.engine.task_engine import TaskEngine
from app.engine.triggers.commands import TriggerCommands
from app.engine.triggers.firing import TriggerFiring
from app.engine.triggers.hooks import TriggerHooks
from app.engine.webhooks.commands import WebhookCommands
from app.engine.workflow_templates.instantiate import TemplateCommands
from app.engine.workflows import WorkflowCommands
from app.engine.workspaces.merge_queue import MergeQueue
from app.engine.workspaces.settings import WorkspaceCommands
from app.engine.workspaces.worktrees import Worktrees
from app.schemas.tools import ToolRead
from app.telemetry.metrics import Metrics


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
