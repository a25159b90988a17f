"""Task shapes: what clients send and receive. The TaskEngine works on `TaskRead`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic_core import PydanticCustomError

from app.coordination.schemas import CoordinationRequest
from app.core.bounds import VERSION_MAX, StorableDatetime
from app.core.fields import Name, Reason, Text
from app.core.shapes import PatchBody
from app.core.states import TaskStatus
from app.core.vocabulary import (
    AssignmentStrategy,
    Complexity,
    CoordinationTopology,
    Priority,
    TaskStructure,
    TaskType,
)


class Artifact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Name = Field(examples=["code"])
    path: Annotated[str, StringConstraints(min_length=1, max_length=1_000)] = Field(
        examples=["src/auth/"]
    )


class RouteRequest(BaseModel):
    """How to find a task's agent. `role` and `skills` say who is capable: an agent of the
    role (when one is given) whose skills include every one listed; an agent is a
    candidate only while it holds fewer tasks than its `max_concurrent_tasks`."""

    model_config = ConfigDict(extra="forbid")

    strategy: AssignmentStrategy = Field(examples=["load_balanced"])
    role: Name | None = Field(None, examples=["writer"])
    skills: list[Name] = Field(default_factory=list, max_length=100, examples=[["python"]])
    agent: Name | None = Field(
        None,
        description="`manual`: the agent (id or name) to assign; the task's `assigned_to` "
        "by default. `hierarchical`: the manager it goes to first; by default the head of "
        "`role` (an agent of the role that reports to nobody).",
    )


MAX_RESOURCES = 20


class _TaskFields(BaseModel):
    """Fields a client may set on create and change on update."""

    model_config = ConfigDict(extra="forbid")

    title: Name = Field(examples=["Implement user authentication API"])
    description: Text = ""
    type: TaskType = TaskType.DEVELOPMENT
    priority: Priority = Field(
        Priority.MEDIUM, description="Routing order: critical first, then high, medium, low."
    )
    project: Name | None = Field(None, examples=["proj-456"])
    assigned_to: Name | None = Field(None, examples=["sarah_chen"])
    reviewers: list[Name] = Field(
        default_factory=list,
        max_length=100,
        description="Who may decide the task's review: callers as the API names them "
        "(`key-<n>`, the n-th API key). Empty: anyone; a service without API keys has one "
        "operator, who may always decide.",
        examples=[["key-0"]],
    )
    dependencies: list[Name] = Field(default_factory=list, max_length=1_000)
    artifacts_expected: list[Artifact] = Field(default_factory=list, max_length=100)
    acceptance_criteria: list[Text] = Field(default_factory=list, max_length=100)
    estimated_complexity: Complexity = Field(
        Complexity.MEDIUM,
        description="The auction's bids prefer agents whose `cost_tier` fits it: simple → "
        "low, medium → medium, complex and epic → high.",
    )
    task_structure: TaskStructure = TaskStructure.SEQUENTIAL
    coordination_topology: CoordinationTopology = CoordinationTopology.AUTO
    budget_limit: float | None = Field(None, ge=0, examples=[2.0])
    deadline: StorableDatetime | None = None
    max_retries: int = Field(1, ge=0, le=100)
    parent_task_id: Name | None = None
    delegation_chain: list[Name] = Field(default_factory=list, max_length=100)
    routing: RouteRequest | None = Field(
        None,
        description="Route this task automatically: while it is `created`, it is routed "
        "with this request once its dependencies are completed, and again whenever an "
        "agent's task ends, until an agent takes it.",
    )
    coordination: CoordinationRequest | None = Field(
        None,
        description="Coordinate this task automatically: once it is `created` with its "
        "dependencies completed, a coordination starts with this request (as "
        "`POST /v1/tasks/{id}/coordinate`), once.",
    )
    resources: list[Name] = Field(
        default_factory=list,
        max_length=MAX_RESOURCES,
        description="Exclusive resources the task's work uses (a database, a device): no two "
        "tasks naming one key have an agent run working at once; the later one waits "
        "`assigned` until the other's run is done.",
        examples=[["staging-db"]],
    )


class TaskCreate(_TaskFields):
    """A new task. It starts `assigned` when `assigned_to` is given, else `created`."""

    created_by: Name | None = Field(
        None, description="Defaults to the caller's identity.", examples=["product_manager_1"]
    )

    @model_validator(mode="after")
    def _routing_or_assignee(self) -> TaskCreate:
        if self.routing is not None and self.assigned_to is not None:
            raise PydanticCustomError(
                "routing_and_assignee",
                "give assigned_to or routing, not both: routing finds the assignee",
            )
        if self.coordination is not None and (self.routing or self.assigned_to):
            raise PydanticCustomError(
                "coordination_and_assignee",
                "a coordinated task is its coordination's: give no assigned_to nor routing",
            )
        return self


IMMUTABLE_TASK_FIELDS = frozenset({"id", "status", "created_by"})
READ_ONLY_TASK_FIELDS = frozenset({"version", "retry_count", "created_at", "updated_at"})
NULLABLE_TASK_FIELDS = frozenset(
    {
        "project",
        "assigned_to",
        "budget_limit",
        "deadline",
        "parent_task_id",
        "routing",
        "coordination",
    }
)


class TaskPatch(PatchBody):
    """A partial update (JSON merge semantics: only the fields present change; `null` clears
    `project`, `assigned_to`, `budget_limit`, `deadline`, `parent_task_id`, `routing` and
    `coordination`).
    `id`, `status` and `created_by` cannot be changed; use transitions for `status`."""

    nullable_fields: ClassVar[frozenset[str]] = NULLABLE_TASK_FIELDS

    title: Name | None = None
    description: Text | None = None
    type: TaskType | None = None
    priority: Priority | None = None
    project: Name | None = None
    assigned_to: Name | None = None
    reviewers: list[Name] | None = Field(None, max_length=100)
    dependencies: list[Name] | None = Field(None, max_length=1_000)
    artifacts_expected: list[Artifact] | None = Field(None, max_length=100)
    acceptance_criteria: list[Text] | None = Field(None, max_length=100)
    estimated_complexity: Complexity | None = None
    task_structure: TaskStructure | None = None
    coordination_topology: CoordinationTopology | None = None
    budget_limit: float | None = Field(None, ge=0)
    deadline: StorableDatetime | None = None
    max_retries: int | None = Field(None, ge=0, le=100)
    parent_task_id: Name | None = None
    delegation_chain: list[Name] | None = Field(None, max_length=100)
    routing: RouteRequest | None = None
    coordination: CoordinationRequest | None = None
    resources: list[Name] | None = Field(None, max_length=MAX_RESOURCES)

    @model_validator(mode="before")
    @classmethod
    def _refuse_fixed_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in sorted(data.keys() & (IMMUTABLE_TASK_FIELDS | READ_ONLY_TASK_FIELDS)):
                how = "immutable" if name in IMMUTABLE_TASK_FIELDS else "read-only"
                hint = (
                    "; change it with POST /v1/tasks/{id}/transitions" if name == "status" else ""
                )
                raise PydanticCustomError(
                    "immutable_field", "{field} is " + how + hint, {"field": name}
                )
        return data


class TaskRead(_TaskFields):
    """A task as stored. `version` doubles as the ETag."""

    model_config = ConfigDict(extra="forbid", from_attributes=True)

    id: str = Field(examples=["task_01jd2x7k8m9n0p1q2r3s4t5v6w"])
    created_by: str
    status: TaskStatus
    retry_count: int
    version: int
    created_at: datetime
    updated_at: datetime


class TransitionRequest(BaseModel):
    """Move a task to another status; `assigned_to`, `reviewers`, `priority` and `deadline`
    may be set in the same step."""

    model_config = ConfigDict(extra="forbid")

    to: TaskStatus
    expected_version: int | None = Field(None, ge=1, le=VERSION_MAX)
    reason: Reason | None = None
    assigned_to: Name | None = None
    reviewers: list[Name] | None = Field(None, max_length=100)
    priority: Priority | None = None
    deadline: StorableDatetime | None = None


class CancelRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    expected_version: int | None = Field(None, ge=1, le=VERSION_MAX)
    reason: Reason | None = None


class TransitionRead(BaseModel):
    """One row of a task's audit trail."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    task_id: str
    from_status: TaskStatus | None
    to_status: TaskStatus
    reason: str | None
    actor: str
    task_version: int
    at: datetime
