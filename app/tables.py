"""Every table of the service, gathered from each domain's `models`, so that `Base.metadata`
holds them all: what Alembic compares the migrations with, and what the tests empty.
Closed vocabularies are text columns guarded by CHECK constraints built from the enums, so
that the database refuses what the code would refuse. Each domain's `models` also gives
typed handles on its tables (`RUNS`, `TASKS`, …) for Core statements."""

from app.approvals.models import APPROVALS, Approval
from app.coordination.models import COORDINATIONS, Coordination
from app.costs.models.budgets import (
    BUDGET_ALERTS,
    BUDGET_RESERVATIONS,
    BUDGETS,
    Budget,
    BudgetAlert,
    BudgetReservation,
)
from app.costs.models.costs import LLM_COST_DAYS, LLMCostDay
from app.db.base import Base
from app.events.models import EVENTS, IDEMPOTENCY_KEYS, Event, EventStream, IdempotencyKey
from app.runs.models import (
    AGENTS,
    CONVERSATIONS,
    RUN_HISTORY,
    RUNS,
    Agent,
    Conversation,
    Run,
    RunStep,
)
from app.sprints.models import SPRINT_TASKS, SPRINTS, Sprint, SprintTask
from app.tasks.models.boards import WIP_LIMITS, WipLimit
from app.tasks.models.tasks import TASKS, TRANSITIONS, Task, TaskTransition
from app.triggers.models import (
    CHAIN_EVENTS,
    HOOK_SIGNATURES,
    TRIGGER_FIRES,
    TRIGGERS,
    ChainEvent,
    HookSignature,
    Trigger,
    TriggerFire,
)
from app.webhooks.models import (
    WEBHOOK_DELIVERIES,
    WEBHOOK_DELIVERY_ATTEMPTS,
    WEBHOOKS,
    Webhook,
    WebhookDelivery,
    WebhookDeliveryAttempt,
)
from app.workflows.models import (
    WORKFLOW_EXECUTION_TASKS,
    WORKFLOW_EXECUTIONS,
    WORKFLOWS,
    Workflow,
    WorkflowExecution,
    WorkflowExecutionTask,
)
from app.workspaces.models import WORKSPACES, WORKTREES, Workspace, Worktree

__all__ = [
    "AGENTS",
    "APPROVALS",
    "BUDGETS",
    "BUDGET_ALERTS",
    "BUDGET_RESERVATIONS",
    "CHAIN_EVENTS",
    "CONVERSATIONS",
    "COORDINATIONS",
    "EVENTS",
    "HOOK_SIGNATURES",
    "IDEMPOTENCY_KEYS",
    "LLM_COST_DAYS",
    "RUNS",
    "RUN_HISTORY",
    "SPRINTS",
    "SPRINT_TASKS",
    "TASKS",
    "TRANSITIONS",
    "TRIGGERS",
    "TRIGGER_FIRES",
    "WEBHOOKS",
    "WEBHOOK_DELIVERIES",
    "WEBHOOK_DELIVERY_ATTEMPTS",
    "WIP_LIMITS",
    "WORKFLOWS",
    "WORKFLOW_EXECUTIONS",
    "WORKFLOW_EXECUTION_TASKS",
    "WORKSPACES",
    "WORKTREES",
    "Agent",
    "Approval",
    "Base",
    "Budget",
    "BudgetAlert",
    "BudgetReservation",
    "ChainEvent",
    "Conversation",
    "Coordination",
    "Event",
    "EventStream",
    "HookSignature",
    "IdempotencyKey",
    "LLMCostDay",
    "Run",
    "RunStep",
    "Sprint",
    "SprintTask",
    "Task",
    "TaskTransition",
    "Trigger",
    "TriggerFire",
    "Webhook",
    "WebhookDelivery",
    "WebhookDeliveryAttempt",
    "WipLimit",
    "Workflow",
    "WorkflowExecution",
    "WorkflowExecutionTask",
    "Workspace",
    "Worktree",
]
