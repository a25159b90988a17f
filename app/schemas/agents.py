"""Agent shapes: identity, prompt, tools, model (with the scripted model's turns), limits."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from app.schemas.common import Name, Text

ToolName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_]{1,64}$")]


class ScriptedToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: ToolName
    input: dict[str, Any] = Field(default_factory=dict)


class ScriptedFault(BaseModel):
    """A failure the scripted model raises on the first `times` attempts of its turn."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["http", "timeout", "connection"] = "http"
    status: int | None = Field(None, ge=400, le=599)
    headers: dict[str, str] = Field(default_factory=dict)
    message: Text = "injected fault"
    times: int = Field(1, ge=1, le=100)

    @model_validator(mode="after")
    def _http_needs_status(self) -> ScriptedFault:
        if self.kind == "http" and self.status is None:
            raise ValueError("an http fault needs a status")
        return self


class ScriptedTurn(BaseModel):
    """One answer of the scripted model: text, or one or more tool calls."""

    model_config = ConfigDict(extra="forbid")

    text: Text | None = None
    tool_calls: list[ScriptedToolCall] | None = Field(None, min_length=1, max_length=32)
    latency_ms: int = Field(0, ge=0, le=600_000)
    fault: ScriptedFault | None = None

    @model_validator(mode="after")
    def _one_kind_of_answer(self) -> ScriptedTurn:
        if (self.text is None) == (self.tool_calls is None):
            raise ValueError("a turn has either `text` or `tool_calls`")
        return self


class ModelConfig(BaseModel):
    """Which model answers. `scripted` plays `script` turn by turn (the demo and test
    double); `anthropic` calls the Messages API."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["anthropic", "scripted"]
    name: Name = Field(examples=["claude-sonnet-4-5"])
    fallback_name: Name | None = Field(
        None,
        description="Same provider, another model: used after repeated overloads, or while "
        "the primary model's circuit breaker is open.",
    )
    context_window: int = Field(200_000, ge=1_000, le=10_000_000)
    max_output_tokens: int = Field(4_096, ge=1, le=200_000)
    base_url: Annotated[str, StringConstraints(max_length=500)] | None = None
    script: list[ScriptedTurn] | None = Field(None, max_length=1_000)

    @model_validator(mode="after")
    def _script_only_for_scripted(self) -> ModelConfig:
        if self.provider == "scripted" and not self.script:
            raise ValueError("a scripted model needs a non-empty `script`")
        if self.provider != "scripted" and self.script is not None:
            raise ValueError("`script` is only for the scripted provider")
        return self


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_iterations: int = Field(25, ge=1, le=1_000)
    soft_time_limit_s: float = Field(900.0, gt=0, le=86_400)
    hard_time_limit_s: float = Field(1_200.0, gt=0, le=86_400)
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


class _AgentFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name = Field(examples=["researcher"])
    role: Name = Field("assistant", examples=["research analyst"])
    skills: list[Name] = Field(default_factory=list, max_length=100)
    system_prompt: Text = Field("You are a helpful assistant.")
    tools: list[ToolName] = Field(default_factory=list, max_length=100)
    auto_approve: list[ToolName] = Field(
        default_factory=list,
        max_length=100,
        description="Side-effecting tools this agent may run without a person's approval. "
        "Any other call that can change the world waits for an approval first.",
    )
    model: ModelConfig
    limits: Limits = Field(default_factory=Limits)
    max_concurrent_tasks: int = Field(1, ge=1, le=1_000)
    cost_tier: Literal["low", "medium", "high"] = "medium"


class AgentCreate(_AgentFields):
    """A new agent."""


class AgentPatch(BaseModel):
    """Fields to change; the ones absent stay as they are."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    role: Name | None = None
    skills: list[Name] | None = Field(None, max_length=100)
    system_prompt: Text | None = None
    tools: list[ToolName] | None = Field(None, max_length=100)
    auto_approve: list[ToolName] | None = Field(None, max_length=100)
    model: ModelConfig | None = None
    limits: Limits | None = None
    max_concurrent_tasks: int | None = Field(None, ge=1, le=1_000)
    cost_tier: Literal["low", "medium", "high"] | None = None


class AgentRead(_AgentFields):
    model_config = ConfigDict(extra="forbid", from_attributes=True)

    id: str
    version: int
    created_at: datetime
    updated_at: datetime
