"""Which model answers an agent: the provider, the model names, and the scripted model's
turns. Shared by the agents' API shapes and the providers that read it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from app.core.fields import Name, Text, ToolName


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
