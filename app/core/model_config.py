"""Which model answers an agent: the provider, the model names, and the scripted model's
turns. Shared by the agents' API shapes and the providers that read it."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from app.core.fields import Name, Text, ToolName
from app.core.schema_variants import published_as


class ModelProvider(StrEnum):
    """Who serves an agent's model (`app/llm/providers/registry.py` maps each to its
    provider)."""

    ANTHROPIC = "anthropic"  # Anthropic's Messages API
    SCRIPTED = "scripted"  # plays the agent's `script`: the demo and test double


class FaultKind(StrEnum):
    """How a scripted model's call fails."""

    HTTP = "http"  # an HTTP error answer with a status
    TIMEOUT = "timeout"  # no answer in time
    CONNECTION = "connection"  # the connection failed


class TransportFaultKind(StrEnum):
    """The faults where no answer arrives (`FaultKind` less `http`)."""

    TIMEOUT = FaultKind.TIMEOUT.value
    CONNECTION = FaultKind.CONNECTION.value


class ScriptedToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: ToolName
    input: dict[str, Any] = Field(default_factory=dict)


class _FaultFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    headers: dict[str, str] = Field(default_factory=dict)
    message: Text = "injected fault"
    times: int = Field(1, ge=1, le=100)


class HttpFault(_FaultFields):
    """An HTTP error answer with `status` (the default kind)."""

    kind: Literal[FaultKind.HTTP] = FaultKind.HTTP
    status: int = Field(ge=400, le=599)


class TransportFault(_FaultFields):
    """A timeout or a failed connection; no answer arrives."""

    kind: TransportFaultKind
    status: int | None = Field(None, ge=400, le=599)


class ScriptedFault(_FaultFields):
    """A failure the scripted model raises on the first `times` attempts of its turn: an
    HTTP error (`kind: http`, the default, needs `status`), a timeout or a failed
    connection."""

    kind: FaultKind = FaultKind.HTTP
    status: int | None = Field(None, ge=400, le=599)

    __get_pydantic_json_schema__ = published_as(HttpFault, TransportFault)

    @model_validator(mode="after")
    def _http_needs_status(self) -> ScriptedFault:
        if self.kind is FaultKind.HTTP and self.status is None:
            raise ValueError("an http fault needs a status")
        return self


class ScriptedUsage(BaseModel):
    """The tokens a scripted call reports (and is priced by), instead of its estimate
    from the prompt's and the answer's length."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = Field(0, ge=0, le=10_000_000)
    output_tokens: int = Field(0, ge=0, le=10_000_000)
    cache_write_tokens: int = Field(0, ge=0, le=10_000_000)
    cache_read_tokens: int = Field(0, ge=0, le=10_000_000)


class _TurnFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    latency_ms: int = Field(0, ge=0, le=600_000)
    stream_interval_ms: int = Field(
        0,
        ge=0,
        le=10_000,
        description="A text turn's pause between the chunks of its text (16 characters "
        "each) as they stream, to watch the text arrive.",
    )
    fault: ScriptedFault | None = None
    usage: ScriptedUsage | None = None


class TextTurn(_TurnFields):
    """A turn that answers with text."""

    text: Text
    tool_calls: None = None


class ToolCallsTurn(_TurnFields):
    """A turn that calls tools."""

    tool_calls: list[ScriptedToolCall] = Field(min_length=1, max_length=32)
    text: None = None


class ScriptedTurn(_TurnFields):
    """One answer of the scripted model: text, or one or more tool calls."""

    text: Text | None = None
    tool_calls: list[ScriptedToolCall] | None = Field(None, min_length=1, max_length=32)

    __get_pydantic_json_schema__ = published_as(TextTurn, ToolCallsTurn)

    @model_validator(mode="after")
    def _one_kind_of_answer(self) -> ScriptedTurn:
        if (self.text is None) == (self.tool_calls is None):
            raise ValueError("a turn has either `text` or `tool_calls`")
        return self


class _ModelFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name = Field(examples=["claude-sonnet-4-5"])
    fallback_name: Name | None = Field(
        None,
        description="Same provider, another model: used after repeated overloads, or while "
        "the primary model's circuit breaker is open.",
    )
    context_window: int = Field(200_000, ge=1_000, le=10_000_000)
    max_output_tokens: int = Field(4_096, ge=1, le=200_000)
    base_url: Annotated[str, StringConstraints(max_length=500)] | None = None


class AnthropicModelConfig(_ModelFields):
    """A model of Anthropic's Messages API."""

    provider: Literal[ModelProvider.ANTHROPIC]
    script: None = None


class ScriptedModelConfig(_ModelFields):
    """The scripted model (the demo and test double): plays `script` turn by turn."""

    provider: Literal[ModelProvider.SCRIPTED]
    script: list[ScriptedTurn] = Field(min_length=1, max_length=1_000)


class ModelConfig(_ModelFields):
    """Which model answers. `scripted` plays `script` turn by turn (the demo and test
    double); `anthropic` calls the Messages API."""

    provider: ModelProvider
    script: list[ScriptedTurn] | None = Field(None, max_length=1_000)

    __get_pydantic_json_schema__ = published_as(
        AnthropicModelConfig, ScriptedModelConfig, tag="provider"
    )

    @model_validator(mode="after")
    def _script_only_for_scripted(self) -> ModelConfig:
        if self.provider is ModelProvider.SCRIPTED and not self.script:
            raise ValueError("a scripted model needs a non-empty `script`")
        if self.provider is not ModelProvider.SCRIPTED and self.script is not None:
            raise ValueError("`script` is only for the scripted provider")
        return self
