"""A task's coordination: the subtask DAG a client (or a decomposing LLM) supplies, the
options of its dispatch, and what each phase reports. Rules beyond a single field (known
dependencies, no cycle, unique keys) are `app.coordination.engine.dag`'s."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from app.core.fields import Name, Reason, Statement, Text
from app.core.states import ExecutionStatus, TaskStatus
from app.core.vocabulary import (
    AssignmentStrategy,
    Complexity,
    CoordinationPhase,
    CoordinationRunPurpose,
    CoordinationTopology,
    PhaseOutcome,
)

# Bounds a decomposition: each subtask becomes a child task and a run, and a wide DAG is
# better split by a second coordination of one of its subtasks.
MAX_SUBTASKS = 20
MAX_ACCEPTANCE_CRITERIA = 10
MAX_DEBATE_ROUNDS = 3

SubtaskIndex = Annotated[int, Field(ge=0, lt=MAX_SUBTASKS)]


class SubtaskDraft(BaseModel):
    """One subtask of a decomposition, before it is a child task of the parent."""

    model_config = ConfigDict(extra="forbid")

    key: Name | None = Field(
        None,
        description="A name other subtasks' `depends_on` may use instead of this one's "
        "index; unique within the decomposition.",
        examples=["schema"],
    )
    title: Name = Field(examples=["Design the accounts table"])
    description: Text = ""
    acceptance_criteria: list[Statement] = Field(
        min_length=1,
        max_length=MAX_ACCEPTANCE_CRITERIA,
        description="How the subtask's reviewer knows it is done: 1 to "
        f"{MAX_ACCEPTANCE_CRITERIA} statements, none blank.",
        examples=[["The migration creates and drops the table"]],
    )
    depends_on: list[SubtaskIndex | Name] = Field(
        default_factory=list,
        max_length=MAX_SUBTASKS,
        description="The subtasks that must complete before this one starts, each by its "
        "index in `subtasks` (from 0) or by its `key`. The dependencies must not form a "
        "cycle.",
        examples=[[0, "schema"]],
    )
    role: Name | None = Field(
        None, description="Route the subtask to an agent of this role.", examples=["backend"]
    )
    required_skills: list[Name] = Field(
        default_factory=list,
        max_length=100,
        description="Route the subtask to an agent whose skills include all of these.",
        examples=[["postgres"]],
    )
    estimated_complexity: Complexity | None = Field(
        None, description="The child task's complexity; by default the parent's."
    )


class Decomposition(BaseModel):
    """A parent task split into subtasks whose dependencies form a DAG."""

    model_config = ConfigDict(extra="forbid")

    subtasks: list[SubtaskDraft] = Field(
        min_length=1,
        max_length=MAX_SUBTASKS,
        description=f"1 to {MAX_SUBTASKS} subtasks; their positions are their indices.",
    )


class AgentDispatchOptions(BaseModel):
    """How a coordination runs its subtasks, as an agent may ask (`coordinate_task`)."""

    model_config = ConfigDict(extra="forbid")

    topology: CoordinationTopology | None = Field(
        None, description="By default the parent task's `coordination_topology`."
    )
    routing_strategy: AssignmentStrategy = Field(
        AssignmentStrategy.LOAD_BALANCED,
        description="How each subtask finds its agent, by the subtask's `role` and "
        "`required_skills` (`manual` gives each to `orchestrator`; `hierarchical` starts "
        "from it).",
    )
    max_concurrency_per_wave: int | None = Field(
        None,
        ge=1,
        le=MAX_SUBTASKS,
        description="At most this many subtasks of a wave run at once (the next starts "
        "when one settles); none: a whole wave at once.",
    )
    fail_fast: bool = Field(
        False,
        description="A subtask that fails cancels the subtasks not yet finished, and the "
        "parent fails; otherwise the others run on and the parent fails at the end.",
    )
    decomposer: Name | None = Field(
        None,
        description="The agent (id or name) whose model decomposes the parent when no "
        "`decomposition` is given; by default the parent's assignee.",
        examples=["planner"],
    )
    orchestrator: Name | None = Field(
        None,
        description="The agent (id or name) that synthesises the subtasks' results "
        "(centralized and decentralized topologies) and works the sequential backbone "
        "(sas); by default the parent's assignee, else the agent routed for the first "
        "subtask.",
        examples=["lead"],
    )
    debate_rounds: int = Field(
        1,
        ge=1,
        le=MAX_DEBATE_ROUNDS,
        description="Decentralized: how many rounds the peers revise their results, each "
        "seeing the others' on the shared thread, before the synthesis.",
    )


class DispatchOptions(AgentDispatchOptions):
    """How a coordination runs its subtasks."""

    auto_accept: bool = Field(
        False,
        description="The coordinator accepts each subtask's result (and the parent's) "
        "itself instead of waiting for a person's review; the task's audit trail names it.",
    )


class PhaseResult(BaseModel):
    """What one phase of a coordination did."""

    model_config = ConfigDict(extra="forbid")

    phase: CoordinationPhase
    outcome: PhaseOutcome
    duration_ms: int = Field(
        ge=0, description="From the end of the phase before (or the start) to its own end."
    )
    detail: Reason = Field("", examples=["3 waves: [0], [1, 2], [3]"])
    finished_at: datetime


class CoordinationRequest(BaseModel):
    """What a coordination runs: the decomposition, when the client gives one (else an LLM
    decomposes the parent), and how to dispatch it."""

    model_config = ConfigDict(extra="forbid")

    decomposition: Decomposition | None = Field(
        None, description="The subtasks; by default the parent is decomposed by an LLM."
    )
    options: DispatchOptions = Field(default_factory=DispatchOptions)


class SubtaskState(BaseModel):
    """A subtask as the coordination runs it: its child task, the agent routing chose
    (none: unroutable, and why), and the wave it runs in."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(ge=0)
    task_id: str
    agent_id: str | None = None
    route_reason: Reason = ""
    wave: int = Field(ge=0)


class CoordinationRun(BaseModel):
    """A run the coordinator made beside the subtasks' own: a peer's round or the
    synthesis. `text`: its answer once it completed."""

    model_config = ConfigDict(extra="forbid")

    purpose: CoordinationRunPurpose
    run_id: str
    round: int | None = None
    index: int | None = Field(None, description="The subtask of a peer's run.")
    text: Reason | None = None


class CoordinationRead(BaseModel):
    """A coordination: the phase it is in and what each phase so far did."""

    model_config = ConfigDict(from_attributes=True)

    id: str = Field(examples=["coord_01JD5Z8Q2W3E4R5T6Y7U8I9O0P"])
    parent_task_id: str
    status: ExecutionStatus
    phase: CoordinationPhase
    topology: CoordinationTopology | None = Field(
        description="Resolved by the topology phase; none before it."
    )
    wave_topologies: list[CoordinationTopology] = Field(
        description="The topology each wave runs in (sas or centralized for a "
        "context_dependent coordination; else the topology, repeated)."
    )
    request: CoordinationRequest
    decomposition: Decomposition | None = Field(
        description="The subtasks being run: the request's, or the decomposer's answer."
    )
    subtasks: list[SubtaskState]
    orchestrator_agent_id: str | None
    runs: list[CoordinationRun]
    phase_results: list[PhaseResult]
    outcome: TaskStatus | None = Field(
        description="What the roll-up made of the subtasks: the parent's target status."
    )
    reason: Reason | None = Field(description="Why it settled as it did.")
    created_at: datetime
    updated_at: datetime
