"""ORM tables, by domain. Closed vocabularies are text columns guarded by CHECK constraints
built from the enums, so that the database refuses what the code would refuse. Each module
also gives typed handles on its tables (`RUNS`, `TASKS`, …) for Core statements."""

from app.models.approvals import APPROVALS, Approval
from app.models.base import Base
from app.models.events import EVENTS, IDEMPOTENCY_KEYS, Event, EventStream, IdempotencyKey
from app.models.runs import (
    AGENTS,
    CHECKPOINTS,
    CONVERSATIONS,
    MESSAGES,
    RUNS,
    TOOL_CALLS,
    Agent,
    Checkpoint,
    Conversation,
    Message,
    Run,
    ToolCall,
)
from app.models.tasks import TASKS, TRANSITIONS, Task, TaskTransition
from app.models.workflows import (
    WORKFLOW_EXECUTION_TASKS,
    WORKFLOW_EXECUTIONS,
    WORKFLOWS,
    Workflow,
    WorkflowExecution,
    WorkflowExecutionTask,
)

__all__ = [
    "AGENTS",
    "APPROVALS",
    "CHECKPOINTS",
    "CONVERSATIONS",
    "EVENTS",
    "IDEMPOTENCY_KEYS",
    "MESSAGES",
    "RUNS",
    "TASKS",
    "TOOL_CALLS",
    "TRANSITIONS",
    "WORKFLOWS",
    "WORKFLOW_EXECUTIONS",
    "WORKFLOW_EXECUTION_TASKS",
    "Agent",
    "Approval",
    "Base",
    "Checkpoint",
    "Conversation",
    "Event",
    "EventStream",
    "IdempotencyKey",
    "Message",
    "Run",
    "Task",
    "TaskTransition",
    "ToolCall",
    "Workflow",
    "WorkflowExecution",
    "WorkflowExecutionTask",
]
