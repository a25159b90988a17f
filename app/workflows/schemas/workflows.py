"""Workflow shapes: definitions (a graph of nodes and edges), node configs, executions."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from typing_extensions import TypeAliasType, TypedDict

from app.coordination.schemas import CoordinationRequest
from app.core.bounds import VERSION_MAX
from app.core.fields import Name, Text
from app.core.schema_variants import PublishedAs, published_as
from app.core.shapes import PatchBody
from app.core.states import ExecutionStatus, NodeStatus
from app.core.vocabulary import (
    AssignmentStrategy,
    Complexity,
    CoordinationTopology,
    EdgeType,
    JoinStrategy,
    NodeType,
    Priority,
    ReviewTimeoutPolicy,
    TaskType,
    WorkflowKind,
)
from app.tasks.schemas.board_defaults import BoardDefaults
from app.tasks.schemas.tasks import MAX_RESOURCES, RouteRequest

GraphId = Annotated[
    str, StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:-]+$")
]
DEFAULT_REVIEW_TIMEOUT_S = 24 * 3600
MAX_PARALLEL_TASKS = 10_000
ParallelLimit = Annotated[int, Field(ge=1, le=MAX_PARALLEL_TASKS)]
_PARALLEL_DOC = (
    "At most this many of an execution's task nodes have an agent run working at once "
    "(dispatched and not yet done: the task is `in_progress`); the others wait `assigned` "
    "and start as those finish. Null: no limit."
)
_KIND_DOC = (
    "How its tasks are worked (four types): `kanban` and `agile_kanban` put them "
    "on the project's board under `board`'s WIP limits, `agile_kanban` in sprints too."
)
_BOARD_DOC = "The board and sprint defaults its project starts with (null: none)."
_FAIL_FAST_DOC = (
    "A task node that fails (no retry left) fails the execution at once and cancels its "
    "open tasks. Without it, the other branches go on: the execution fails once nothing "
    "else is running or able to start."
)

# The grammar of a `conditional` node's condition (`app/workflows/engine/conditions.py`) as
# a regular expression: an operand, or two joined by `==` / `!=`; an operand is a string in
# single or double quotes (escapes \\ \' \" \n \t), a JSON number, or a key (`a.b`; `true`,
# `false` and `null` are literals). Spaces are ASCII here; the parser forgives any whitespace.
MAX_CONDITION_CHARS = 1_000
_SPACE = r"[ \t\n\r]*"
_OPERAND = (
    r"""(?:"(?:[^"\\]|\\[\\'"nt])*"|'(?:[^'\\]|\\[\\'"nt])*'"""
    r"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
    r"|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
)
CONDITION_PATTERN = f"^{_SPACE}{_OPERAND}(?:{_SPACE}(?:==|!=){_SPACE}{_OPERAND})?{_SPACE}$"


class Position(BaseModel):
    """Where the visual editor draws the node; the engine ignores it."""

    x: float
    y: float


class TaskStepConfig(BaseModel):
    """`config` of a `task` node: the task made for it at activation. `title` is required
    for the workflow to validate; `assigned_to` overrides a preceding agent assignment."""

    model_config = ConfigDict(extra="forbid")

    title: Annotated[str, StringConstraints(max_length=200, strip_whitespace=True)] | None = Field(
        None, examples=["Write the release notes"]
    )
    description: Text = ""
    type: TaskType = TaskType.DEVELOPMENT
    priority: Priority = Priority.MEDIUM
    estimated_complexity: Complexity = Complexity.MEDIUM
    coordination_topology: CoordinationTopology = CoordinationTopology.AUTO
    assigned_to: Name | None = None
    reviewers: list[Name] = Field(default_factory=list, max_length=100)
    acceptance_criteria: list[Text] = Field(default_factory=list, max_length=100)
    budget_limit: float | None = Field(None, ge=0)
    max_retries: int = Field(1, ge=0, le=100)
    resources: list[Name] = Field(
        default_factory=list,
        max_length=MAX_RESOURCES,
        description="Exclusive resources (the task's `resources`): no two tasks naming one "
        "key, in this execution or any other, have agent runs working at once.",
        examples=[["staging-db"]],
    )
    coordination: CoordinationRequest | None = Field(
        None,
        description="Coordinate the task instead of giving it to one agent: once its "
        "dependencies are completed, a coordination splits it into subtasks (the "
        "task's `coordination`). Not with `assigned_to`; an agent assignment upstream "
        "does not reach it.",
    )

    @model_validator(mode="after")
    def _coordinated_or_assigned(self) -> TaskStepConfig:
        if self.coordination is not None and self.assigned_to is not None:
            raise ValueError("a coordinated task is its coordination's: give no assigned_to")
        return self


class AgentAssignmentConfig(BaseModel):
    """`config` of an `agent_assignment` node: who gets the tasks downstream (until another
    assignment). `manual`: `agent_name`. Any other strategy: each task is created
    unassigned with a `routing` request (`strategy`, `role`, `skills`, and `agent_name` as
    its `agent`), and routed once its dependencies are completed. A task node's own
    `assigned_to` overrides both."""

    model_config = ConfigDict(extra="forbid")

    agent_name: Name | None = Field(None, examples=["sarah_chen"])
    strategy: AssignmentStrategy = AssignmentStrategy.MANUAL
    role: Name | None = None
    skills: list[Name] = Field(default_factory=list, max_length=100)

    def routing(self) -> RouteRequest | None:
        """The routing request of the tasks downstream; None for `manual`."""
        if self.strategy is AssignmentStrategy.MANUAL:
            return None
        return RouteRequest(
            strategy=self.strategy, role=self.role, skills=self.skills, agent=self.agent_name
        )


class ConditionalConfig(BaseModel):
    """`config` of a `conditional` node: `app/workflows/engine/conditions.py` has its language."""

    model_config = ConfigDict(extra="forbid")

    condition_expression: str = Field(
        examples=["env == 'prod'"],
        # The language is regular (conditions.py): the pattern is its grammar, so the
        # schema accepts what parses. Runtime checks go through the parser, whose errors
        # say where the text goes wrong.
        json_schema_extra={"pattern": CONDITION_PATTERN, "maxLength": MAX_CONDITION_CHARS},
    )


class ParallelJoinConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    join_strategy: JoinStrategy = JoinStrategy.ALL


class NoConfig(BaseModel):
    """`start`, `end` and `parallel_split` nodes take no config."""

    model_config = ConfigDict(extra="forbid")


NODE_CONFIGS: dict[NodeType, type[BaseModel]] = {
    NodeType.START: NoConfig,
    NodeType.END: NoConfig,
    NodeType.TASK: TaskStepConfig,
    NodeType.AGENT_ASSIGNMENT: AgentAssignmentConfig,
    NodeType.CONDITIONAL: ConditionalConfig,
    NodeType.PARALLEL_SPLIT: NoConfig,
    NodeType.PARALLEL_JOIN: ParallelJoinConfig,
}


class _NodeFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: GraphId = Field(examples=["review"])
    label: Text = ""
    position: Position | None = None


class StartNode(_NodeFields):
    type: Literal[NodeType.START]
    config: NoConfig = Field(default_factory=NoConfig)


class EndNode(_NodeFields):
    type: Literal[NodeType.END]
    config: NoConfig = Field(default_factory=NoConfig)


class TaskNode(_NodeFields):
    type: Literal[NodeType.TASK]
    config: TaskStepConfig = Field(default_factory=TaskStepConfig)


class AgentAssignmentNode(_NodeFields):
    type: Literal[NodeType.AGENT_ASSIGNMENT]
    config: AgentAssignmentConfig = Field(default_factory=AgentAssignmentConfig)


class ConditionalNode(_NodeFields):
    type: Literal[NodeType.CONDITIONAL]
    config: ConditionalConfig


class ParallelSplitNode(_NodeFields):
    type: Literal[NodeType.PARALLEL_SPLIT]
    config: NoConfig = Field(default_factory=NoConfig)


class ParallelJoinNode(_NodeFields):
    type: Literal[NodeType.PARALLEL_JOIN]
    config: ParallelJoinConfig = Field(default_factory=ParallelJoinConfig)


class WorkflowNode(_NodeFields):
    """A node; `config` depends on `type` (see the `*Config` schemas). The engine reads
    `config` by the node's type; a config that does not fit is refused when the workflow is
    saved, naming the node."""

    type: NodeType
    config: dict[str, Any] = Field(default_factory=dict)

    __get_pydantic_json_schema__ = published_as(
        StartNode,
        EndNode,
        TaskNode,
        AgentAssignmentNode,
        ConditionalNode,
        ParallelSplitNode,
        ParallelJoinNode,
        tag="type",
    )


class WorkflowEdge(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: GraphId = Field(examples=["e1"])
    source: GraphId
    target: GraphId
    type: EdgeType = EdgeType.SEQUENTIAL
    label: Text = ""


class _WorkflowFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name = Field(examples=["Release"])
    description: Text = ""
    nodes: list[WorkflowNode] = Field(default_factory=list, max_length=500)
    edges: list[WorkflowEdge] = Field(default_factory=list, max_length=2_000)
    review_timeout_s: int = Field(
        DEFAULT_REVIEW_TIMEOUT_S,
        ge=60,
        le=30 * 24 * 3600,
        description="How long a task review may wait for a person.",
    )
    review_timeout_policy: ReviewTimeoutPolicy = Field(
        ReviewTimeoutPolicy.ESCALATE, description="What happens to a review nobody answered."
    )
    max_parallel_tasks: ParallelLimit | None = Field(None, description=_PARALLEL_DOC)
    fail_fast: bool = Field(False, description=_FAIL_FAST_DOC)
    kind: WorkflowKind = Field(WorkflowKind.SEQUENTIAL, description=_KIND_DOC)
    board: BoardDefaults | None = Field(None, description=_BOARD_DOC)
    project: Name | None = Field(
        None, description="The project an activation that names none puts its tasks in."
    )


class WorkflowCreate(_WorkflowFields):
    """A new definition. It may be saved unfinished (the editor saves drafts): only its
    structure is checked here; `POST /v1/workflows/{id}/validate` reports the rest, and
    activation requires a valid definition."""


class WorkflowPatch(PatchBody):
    """Fields to replace; `version` (or `If-Match`) guards against overwriting a change.
    No field of a definition may be null but `max_parallel_tasks` (null: no limit),
    `board` and `project` (null: none)."""

    guard_fields: ClassVar[frozenset[str]] = frozenset({"version"})
    nullable_fields: ClassVar[frozenset[str]] = frozenset(
        {"max_parallel_tasks", "board", "project"}
    )

    name: Name | None = None
    description: Text | None = None
    nodes: list[WorkflowNode] | None = Field(None, max_length=500)
    edges: list[WorkflowEdge] | None = Field(None, max_length=2_000)
    review_timeout_s: int | None = Field(None, ge=60, le=30 * 24 * 3600)
    review_timeout_policy: ReviewTimeoutPolicy | None = None
    max_parallel_tasks: ParallelLimit | None = None
    fail_fast: bool | None = None
    kind: WorkflowKind | None = None
    board: BoardDefaults | None = None
    project: Name | None = None
    version: int | None = Field(
        None, ge=1, le=VERSION_MAX, description="The version you last read."
    )


class WorkflowRead(_WorkflowFields):
    model_config = ConfigDict(extra="forbid", from_attributes=True)

    id: str = Field(examples=["wf_01jd2x7k8m9n0p1q2r3s4t5v6w"])
    version: int
    created_at: datetime
    updated_at: datetime


class ValidationIssue(BaseModel):
    """One broken rule, naming the node or edge at fault."""

    rule: str = Field(examples=["conditional_branches"])
    message: str
    node_id: str | None = None
    edge_id: str | None = None


class WorkflowValidation(BaseModel):
    valid: bool
    errors: list[ValidationIssue]


class ActivateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    context: dict[str, Any] = Field(
        default_factory=dict,
        description="Values the conditions read (`key`, `a.b`).",
        examples=[{"env": "prod"}],
    )
    project: Name | None = Field(None, description="Set on every task the execution makes.")
    max_parallel_tasks: ParallelLimit | None = Field(
        None,
        description="This execution's limit instead of the definition's (null: the definition's).",
    )


class ExecutionCancel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: Annotated[str, StringConstraints(max_length=2_000)] | None = None


class RequiresAll(TypedDict):
    """Met when every requirement in `all` is."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    all: list[Requirement]


class RequiresAny(TypedDict):
    """Met when one requirement in `any` is."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    any: list[Requirement]


# What a task node waits on (`app/core/requirements.py`): a task node's id (met when its
# task completed), or all or any of other requirements.
Requirement = TypeAliasType("Requirement", "str | RequiresAll | RequiresAny")


class ExecutionProgress(BaseModel):
    """How far an execution's task nodes are: `done` of `total` completed."""

    done: int = Field(description="Task nodes completed.")
    total: int = Field(description="Task nodes on the path the execution takes.")
    running: int = Field(description="Task nodes whose task is in progress or in review.")
    failed: int = Field(description="Task nodes failed with no retry left.")

    @classmethod
    def of(cls, task_nodes: list[NodeStatus]) -> ExecutionProgress:
        """The progress of these task nodes' statuses."""
        return cls(
            done=task_nodes.count(NodeStatus.COMPLETED),
            total=len(task_nodes),
            running=task_nodes.count(NodeStatus.RUNNING),
            failed=task_nodes.count(NodeStatus.FAILED),
        )


class ExecutionRead(BaseModel):
    """A running or finished activation of a definition. `waits_for` holds, per task node,
    what its task waits on: a node id, or `{"all": [...]}` / `{"any": [...]}` of those."""

    model_config = ConfigDict(from_attributes=True)

    id: str = Field(examples=["wfx_01jd2x7k8m9n0p1q2r3s4t5v6w"])
    workflow_id: str
    workflow_version: int
    status: ExecutionStatus
    context: dict[str, Any]
    node_status: dict[str, NodeStatus]
    node_tasks: dict[str, str] = Field(description="The task made for each task node.")
    waits_for: Annotated[dict[str, Any], PublishedAs(dict[str, Requirement])]
    ready_task_ids: list[str] = Field(
        description="Tasks whose node is pending and whose dependencies are met."
    )
    progress: ExecutionProgress
    max_parallel_tasks: int | None = Field(None, description=_PARALLEL_DOC)
    fail_fast: bool = Field(False, description=_FAIL_FAST_DOC)
    reason: str | None = None
    version: int
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None
