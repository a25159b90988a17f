"""Agent shapes: identity, prompt, tools, model (with the scripted model's turns), limits."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.core.fields import Name, Text, ToolName
from app.core.model_config import ModelConfig
from app.core.shapes import PatchBody
from app.core.vocabulary import CostTier, ExecutionLoopKind
from app.runs.schemas.mcp import McpServers


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_iterations: int = Field(25, ge=1, le=1_000)
    soft_time_limit_s: float = Field(900.0, gt=0, le=86_400)
    hard_time_limit_s: float = Field(1_200.0, gt=0, le=86_400)
    max_cost_usd: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description="What one run may spend on LLM calls (priced models only): a call whose "
        "worst case would pass it ends the run `budget_exhausted`.",
    )
    persistent_retries: bool = Field(
        False,
        description="Unattended runs: retry LLM calls without an attempt limit, for up to the "
        "persistent cap (6 h by default), heartbeating through long waits.",
    )

    @model_validator(mode="after")
    def _soft_before_hard(self) -> Limits:
        if self.soft_time_limit_s >= self.hard_time_limit_s:
            raise ValueError("soft_time_limit_s must be below hard_time_limit_s")
        return self


class Level(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Personality(BaseModel):
    """How the agent comes across, rendered into its system prompt after the prompt itself,
    as much of it as its model tier's profile allows: all of it for a large model (up to
    500 tokens), description, style and traits for a medium one (200), the communication
    style alone for a small one (80); trimmed further when it does not fit."""

    model_config = ConfigDict(extra="forbid")

    description: Text = Field("", examples=["A careful analyst who checks every figure twice."])
    communication_style: Name | None = Field(None, examples=["concise"])
    traits: list[Name] = Field(default_factory=list, max_length=20, examples=[["thorough"]])
    risk_tolerance: Level | None = None
    creativity: Level | None = None
    verbosity: Level | None = None


EXECUTION_LOOP_DESCRIPTION = (
    "How its runs work: `react` (the model calls tools until it answers in text); "
    "`plan_execute` (a planner model writes a plan of steps, each run in order on the "
    "executor model, replanned when a step fails); `hybrid` (plan_execute with a plan of "
    "3 to 7 steps, each at most `plan_execute.max_turns_per_step` turns, a checkpoint "
    "after each, and optionally a review of the plan on completion); `auto` (chosen per "
    "run by its task's `estimated_complexity`: simple → react, medium → plan_execute, "
    "complex and epic → hybrid, or plan_execute while a monthly budget is nearly spent). "
    "A scripted model scripts the planner and executor in one script, played by LLM "
    "call: the planner's `submit_plan` call first, then the executor's turns."
)


class PlanExecuteSettings(BaseModel):
    """The `plan_execute` and `hybrid` loops' models and replanning (unused by `react`)."""

    model_config = ConfigDict(extra="forbid")

    planner_model: Name | None = Field(
        None,
        description="The model that writes and revises the plan (its provider as the "
        "agent's `model`); null: the agent's model.",
        examples=["claude-opus-4-1"],
    )
    executor_model: Name | None = Field(
        None,
        description="The model that carries out the steps; null: the agent's model.",
        examples=["claude-sonnet-4-5"],
    )
    max_replans: int = Field(
        3,
        ge=0,
        le=20,
        description="How many times a failed step (or hybrid's review on completion) may "
        "lead to a new plan.",
    )
    max_turns_per_step: int = Field(
        5,
        ge=1,
        le=50,
        description="`hybrid` only: the executor turns a step may take; a step that uses "
        "them without answering has failed, and is replanned.",
    )
    allow_replan_on_completion: bool = Field(
        False,
        description="`hybrid` only: once every step is done, ask the planner (once) whether "
        "the task needs more steps; it may add some (a replan, counted in `max_replans`).",
    )


class _AgentFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name = Field(examples=["researcher"])
    role: Name = Field(
        "assistant",
        examples=["research analyst"],
        description="What routing's `role` matches (exactly).",
    )
    skills: list[Name] = Field(
        default_factory=list,
        max_length=100,
        description="What routing's `skills` must find here (each, exactly).",
    )
    system_prompt: Text = Field("You are a helpful assistant.")
    tools: list[ToolName] = Field(
        default_factory=list,
        max_length=100,
        description="The tools this agent may call: each a name that `GET /v1/tools` lists.",
    )
    auto_approve: list[ToolName] = Field(
        default_factory=list,
        max_length=100,
        description="Side-effecting tools this agent may run without a person's approval, "
        "each a name that `GET /v1/tools` lists or a tool of its MCP servers "
        "(`<server>__<tool>`). Any other call that can change the world waits for an "
        "approval first.",
    )
    mcp_servers: McpServers = Field(default_factory=list)
    model: ModelConfig
    limits: Limits = Field(default_factory=Limits)
    max_concurrent_tasks: int = Field(
        1,
        ge=1,
        le=1_000,
        description="How many tasks routing gives this agent at once: tasks assigned to it "
        "that are `assigned`, `in_progress`, `in_review`, `blocked` or `interrupted`.",
    )
    cost_tier: CostTier = Field(
        CostTier.MEDIUM,
        description="`cost_optimised` routing prefers lower tiers at the same model price; "
        "the auction matches it to a task's `estimated_complexity`.",
    )
    reports_to: Name | None = Field(
        None,
        description="The id of this agent's manager (hierarchical routing delegates a "
        "manager's task down to its reports); no chain may loop.",
        examples=["agent_01jd2x7k8m9n0p1q2r3s4t5v6w"],
    )
    personality: Personality | None = None
    execution_loop: ExecutionLoopKind = Field(
        ExecutionLoopKind.REACT, description=EXECUTION_LOOP_DESCRIPTION
    )
    plan_execute: PlanExecuteSettings = Field(default_factory=PlanExecuteSettings)


class AgentCreate(_AgentFields):
    """A new agent."""


class AgentPatch(PatchBody):
    """Fields to change; the ones absent stay as they are. Only `reports_to` (the agent
    then reports to nobody) and `personality` may be null."""

    name: Name | None = None
    role: Name | None = None
    skills: list[Name] | None = Field(None, max_length=100)
    system_prompt: Text | None = None
    tools: list[ToolName] | None = Field(
        None, max_length=100, description="Each a name that `GET /v1/tools` lists."
    )
    auto_approve: list[ToolName] | None = Field(
        None,
        max_length=100,
        description="Each a name that `GET /v1/tools` lists, or `<server>__<tool>` of one of "
        "its MCP servers (as patched).",
    )
    mcp_servers: McpServers | None = None
    model: ModelConfig | None = None
    limits: Limits | None = None
    max_concurrent_tasks: int | None = Field(None, ge=1, le=1_000)
    cost_tier: CostTier | None = None
    reports_to: Name | None = None
    personality: Personality | None = Field(None, description="null removes it.")
    execution_loop: ExecutionLoopKind | None = Field(None, description=EXECUTION_LOOP_DESCRIPTION)
    plan_execute: PlanExecuteSettings | None = None

    nullable_fields: ClassVar[frozenset[str]] = frozenset({"personality", "reports_to"})


class AgentRead(_AgentFields):
    model_config = ConfigDict(extra="forbid", from_attributes=True)

    id: str
    version: int
    created_at: datetime
    updated_at: datetime
    warnings: list[str] = Field(
        default_factory=list,
        description="Why this agent's runs would fail as the service is configured now "
        "(e.g. its model provider has no credentials), each with the fix.",
    )
