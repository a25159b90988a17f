"""Which model answers an agent: the provider, the model names, where to reach it (a base
URL, the name of the variable holding its key), the fallback model, and the scripted
model's turns. Shared by the agents' API shapes and the providers that read it."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.core.fields import Name, Text, ToolName
from app.core.schema_variants import published_as


# The shipped providers, each with its published shapes below.
class ModelProvider(StrEnum):
    """Who serves an agent's model (`app/llm/providers/registry.py` maps each to its
    provider)."""

    ANTHROPIC = "anthropic"  # Anthropic's Messages API
    # OpenAI's Chat Completions API, or any server that speaks it (vLLM, Ollama, llama.cpp,
    # LM Studio, other vendors) at the model's `base_url`
    OPENAI = "openai"
    SCRIPTED = "scripted"  # plays the agent's `script`: the demo and test double


# The providers registered beyond the shipped ones. The agent shapes check a name here
# because the core may not import the providers' registry, which is this set's one writer
# (`registry.register`). Their agents take the shapes' common fields; the API's document
# publishes the shipped providers' shapes only.
_ADMITTED: set[str] = set()


def admit_provider(name: str) -> None:
    """Lets agents name the provider `name` (called by the providers' registry)."""
    _ADMITTED.add(name)


def withdraw_provider(name: str) -> None:
    _ADMITTED.discard(name)


def _known_provider(name: object) -> object:
    """A shipped name, or another if registered; what is not a name is left to the type.
    An unknown name is refused as the enum of names would refuse it."""
    if not isinstance(name, str) or name in frozenset(ModelProvider) or name in _ADMITTED:
        return name
    *others, last = [repr(str(known)) for known in [*ModelProvider, *sorted(_ADMITTED)]]
    expected = f"{', '.join(others)} or {last}"
    raise PydanticCustomError("enum", "Input should be {expected}", {"expected": expected})


# An agent's model provider: a shipped one (as its member) or one registered since.
ProviderName = Annotated[
    ModelProvider | str, Field(union_mode="left_to_right"), BeforeValidator(_known_provider)
]


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


def _not_our_setting(name: str) -> str:
    if name.startswith("LOOPWRIGHT_"):
        raise ValueError("names one of Loopwright's own settings: name a variable of its own")
    return name


# The name of an environment variable, where the workers run, that holds a model's API key:
# the key itself is never stored nor shown. Only a variable named like an API key, and not
# one of Loopwright's settings: whoever edits an agent also chooses the server the key goes
# to, so the name must not reach, say, the database's URL.
ApiKeyEnv = Annotated[
    str,
    StringConstraints(max_length=200, pattern=r"^[A-Z][A-Z0-9_]*_API_KEY$"),
    AfterValidator(_not_our_setting),
]
BaseUrl = Annotated[str, StringConstraints(max_length=500)]

_API_KEY_ENV_DESCRIPTION = (
    "`openai` only: the environment variable, where the workers run, that holds the key "
    "(e.g. `GROQ_API_KEY`; not a `LOOPWRIGHT_` setting). Unset: the settings' key when the "
    "base URL is the settings' one, else no key (a local server needs none)."
)


class _FallbackFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name = Field(examples=["llama3.1:8b"])
    base_url: BaseUrl | None = Field(
        None,
        description="Unset: the agent's own base URL when on the same provider, else the "
        "provider's settings.",
    )


class AnthropicFallback(_FallbackFields):
    """A fallback model of Anthropic's Messages API."""

    provider: Literal[ModelProvider.ANTHROPIC]
    api_key_env: None = None


class OpenAIFallback(_FallbackFields):
    """A fallback model on an OpenAI-compatible server (Chat Completions)."""

    provider: Literal[ModelProvider.OPENAI]
    api_key_env: ApiKeyEnv | None = Field(None, description=_API_KEY_ENV_DESCRIPTION)


class ScriptedFallback(_FallbackFields):
    """A scripted fallback model: it plays the scripted agent's own script."""

    provider: Literal[ModelProvider.SCRIPTED]
    api_key_env: None = None


class FallbackModel(_FallbackFields):
    """The model tried instead after repeated overloads, or while the primary model's
    circuit breaker is open: of any provider (a scripted one only for a scripted agent).
    What it leaves unset comes from the agent's model when on the same provider."""

    provider: ProviderName
    api_key_env: ApiKeyEnv | None = Field(None, description=_API_KEY_ENV_DESCRIPTION)

    __get_pydantic_json_schema__ = published_as(
        AnthropicFallback, OpenAIFallback, ScriptedFallback, tag="provider"
    )

    @model_validator(mode="after")
    def _key_env_only_for_openai(self) -> FallbackModel:
        _check_key_env(self.provider, self.api_key_env)
        return self


def _check_key_env(provider: str, api_key_env: str | None) -> None:
    if api_key_env is not None and provider != ModelProvider.OPENAI:
        raise ValueError("`api_key_env` is only for the openai provider")


_RealFallback = Annotated[AnthropicFallback | OpenAIFallback, Field(discriminator="provider")]


class _ModelFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name = Field(examples=["claude-sonnet-4-5"])
    fallback_name: Name | None = Field(
        None,
        description="Same provider, another model (the short form of `fallback`, which wins "
        "when both are given).",
    )
    context_window: int = Field(200_000, ge=1_000, le=10_000_000)
    max_output_tokens: int = Field(4_096, ge=1, le=200_000)
    base_url: BaseUrl | None = Field(
        None,
        description="The API's base URL (e.g. `http://localhost:11434/v1` for Ollama); "
        "unset: the provider's settings.",
    )


class AnthropicModelConfig(_ModelFields):
    """A model of Anthropic's Messages API."""

    provider: Literal[ModelProvider.ANTHROPIC]
    fallback: _RealFallback | None = None
    api_key_env: None = None
    script: None = None


class OpenAIModelConfig(_ModelFields):
    """A model on an OpenAI-compatible server: OpenAI's API, or vLLM, Ollama, llama.cpp,
    LM Studio or another vendor at `base_url` (Chat Completions, streamed)."""

    provider: Literal[ModelProvider.OPENAI]
    fallback: _RealFallback | None = None
    api_key_env: ApiKeyEnv | None = Field(None, description=_API_KEY_ENV_DESCRIPTION)
    script: None = None


class ScriptedModelConfig(_ModelFields):
    """The scripted model (the demo and test double): plays `script` turn by turn."""

    provider: Literal[ModelProvider.SCRIPTED]
    fallback: FallbackModel | None = None
    api_key_env: None = None
    script: list[ScriptedTurn] = Field(min_length=1, max_length=1_000)


class ModelConfig(_ModelFields):
    """Which model answers. `anthropic` calls the Messages API; `openai` the Chat
    Completions API of OpenAI or of a compatible server at `base_url`; `scripted` plays
    `script` turn by turn (the demo and test double)."""

    provider: ProviderName
    fallback: FallbackModel | None = None
    api_key_env: ApiKeyEnv | None = Field(None, description=_API_KEY_ENV_DESCRIPTION)
    script: list[ScriptedTurn] | None = Field(None, max_length=1_000)

    __get_pydantic_json_schema__ = published_as(
        AnthropicModelConfig, OpenAIModelConfig, ScriptedModelConfig, tag="provider"
    )

    @model_validator(mode="after")
    def _fields_of_the_provider(self) -> ModelConfig:
        if self.provider == ModelProvider.SCRIPTED and not self.script:
            raise ValueError("a scripted model needs a non-empty `script`")
        if self.provider != ModelProvider.SCRIPTED and self.script is not None:
            raise ValueError("`script` is only for the scripted provider")
        _check_key_env(self.provider, self.api_key_env)
        fallback = self.fallback
        if (
            fallback is not None
            and fallback.provider == ModelProvider.SCRIPTED
            and self.provider != ModelProvider.SCRIPTED
        ):
            raise ValueError(
                "a scripted fallback is only for a scripted model (it plays its script)"
            )
        return self

    def fallback_model(self) -> ModelConfig | None:
        """The fallback as a model of its own: `fallback`, else `fallback_name` (this
        provider). On this model's provider without a base URL of its own, it is reached
        as this model is (its base URL, and its key variable unless it names one); else as
        it says, the provider's settings filling in the rest."""
        fallback = self.fallback
        if fallback is None:
            if self.fallback_name is None:
                return None
            fallback = FallbackModel(provider=self.provider, name=self.fallback_name)
        if fallback.provider == self.provider and fallback.base_url is None:
            base_url, key_env = self.base_url, fallback.api_key_env or self.api_key_env
        else:  # a server of its own: never this model's key
            base_url, key_env = fallback.base_url, fallback.api_key_env
        return self.model_copy(
            update={
                "provider": fallback.provider,
                "name": fallback.name,
                "base_url": base_url,
                "api_key_env": key_env,
                "fallback": None,
                "fallback_name": None,
            }
        )
