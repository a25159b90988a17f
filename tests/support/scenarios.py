"""What the scenarios share beyond `tests.support.runs`: agents with a model configuration
of their own, tools that return large results, and two model doubles (one that answers the
compaction summariser as well as the script, one that logs every attempt)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.agents.schemas import AgentCreate, AgentRead, Limits
from app.core.messages import TextBlock, ToolUseBlock
from app.core.model_config import ModelConfig, ScriptedTurn
from app.events.store import StoredEvent
from app.llm.provider import LLMRequest, LLMResponse, Provider, TextSink, Usage, UsageSink
from app.llm.providers.scripted.provider import ScriptedProvider
from app.runs.loop.summary import SUMMARY_SYSTEM_PROMPT
from app.runs.tools.base import ToolContext, define_tool
from tests.support.runs import Harness

MODEL = "scripted"  # the model name every scenario agent starts with
FORCED_QUESTION = "I am stuck. How should I go on?"


async def scripted_agent(
    h: Harness,
    *script: ScriptedTurn,
    tools: Sequence[str] | None = None,
    limits: Limits | None = None,
    **model: Any,
) -> AgentRead:
    """Like `h.agent`, with model settings of its own (`context_window`, `fallback_name`,
    `max_output_tokens`, ...)."""
    return await h.agents.create(
        AgentCreate(
            name="scenario-agent",
            tools=list(h.registry.names() if tools is None else tools),
            model=ModelConfig(provider="scripted", name=MODEL, script=list(script), **model),
            limits=limits or Limits(),
        )
    )


def add_page_tools(h: Harness, names: Sequence[str], size_chars: int) -> None:
    """Read-only tools whose every answer is a page of about `size_chars` characters,
    different for each call (so a summary or a pin can be told apart from the original)."""
    for name in names:

        async def read(context: ToolContext, arguments: dict[str, Any], name: str = name) -> str:
            line = f"{name} {arguments.get('page', 0)}: the widget inventory lists item "
            lines = [f"{line}{i}." for i in range(size_chars // (len(line) + 4) + 1)]
            return "\n".join(lines)[:size_chars]

        h.registry.add(
            define_tool(
                name,
                f"Read a page of {name.removeprefix('read_')}.",
                {"type": "object", "properties": {"page": {"type": "integer"}}},
                read,
                idempotent=True,
                destructive=False,
                requires_permission=False,
            )
        )


Summarise = Callable[[LLMRequest], str]  # returns the summary, or raises ProviderError


@dataclass
class ScriptAndSummaries:
    """The agent's model, as a real one behaves: it plays the agent's script; it calls the
    tool a request's `tool_choice` forces (as the API guarantees) when the script's turn
    does not; and it answers the compaction summariser's requests (recognised by their
    system prompt) with `summarise`, which may raise to play a failing summary model."""

    agent: AgentRead
    summarise: Summarise
    summary_requests: list[LLMRequest] = field(default_factory=list)
    script: ScriptedProvider = field(init=False)

    def __post_init__(self) -> None:
        assert self.agent.model.script is not None
        self.script = ScriptedProvider(self.agent.model.script)

    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
    ) -> LLMResponse:
        if request.system == SUMMARY_SYSTEM_PROMPT:
            self.summary_requests.append(request)
            text = self.summarise(request)
            return LLMResponse([TextBlock(text=text)], "end_turn", Usage(), request.model)
        response = await self.script.complete(request, on_text)
        forced = request.tool_choice.name if request.tool_choice else None
        if forced and not any(
            isinstance(b, ToolUseBlock) and b.name == forced for b in response.content
        ):
            call = ToolUseBlock(id=f"toolu_forced_{request.turn}", name=forced, input={})
            if forced == "ask_human":
                call = call.model_copy(update={"input": {"question": FORCED_QUESTION}})
            return LLMResponse([call], "tool_use", Usage(), request.model)
        return response


@dataclass
class AttemptLog:
    """Passes requests to `inner`, keeping every attempt, also those that fail (the
    harness's recording keeps only answered ones)."""

    inner: Provider
    requests: list[LLMRequest] = field(default_factory=list)

    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
    ) -> LLMResponse:
        self.requests.append(request)
        return await self.inner.complete(request, on_text, on_usage)


def of_type(events: Sequence[StoredEvent], event_type: str) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type == event_type]


def fields_of(data: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    """The keys of `expected` in an event's data, which also carries the run's id and status."""
    return {key: data.get(key, "<missing>") for key in expected}
