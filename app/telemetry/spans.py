"""The spans of runs, turns, LLM calls, tool calls and group commits (API requests get
theirs from the FastAPI instrumentation, which `app/main.py` installs when tracing is on).

    POST /v1/runs                        (a server span; the caller's `traceparent` its parent)
      └ invoke_agent <agent>             one per execution of the run (each claim, each resume)
          ├ turn                         an LLM call and the tool batch that follows it
          │   ├ chat <model>             GenAI attributes; retries and fallbacks as events
          │   └ execute_tool <tool>      http_request sends this span's `traceparent` on
          └ turn …
    group_commit <committer>             a root of its own, linked to the spans of its writes

No cost when tracing is off: each helper first reads one attribute of the tracing state
and then returns at once a shared no-op (or the callable it was given, or None), building
no attributes and reading no context.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self

from app.core.states import RunStatus
from app.telemetry import tracing

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanContext

    from app.runs.schemas.runs import RunRead

EventSink = Callable[[str, dict[str, Any]], Awaitable[None]]
DataSink = Callable[[dict[str, Any]], Awaitable[None]]

_state = tracing.state
_ERROR_TEXT = 300  # characters of an error kept as its span's status description
_FAILED = frozenset({RunStatus.FAILED, RunStatus.DEAD_LETTER, RunStatus.TIMED_OUT})


class Answer(Protocol):
    """What a chat span reads of an LLM response (`app.llm.provider.LLMResponse`)."""

    @property
    def model(self) -> str: ...

    @property
    def stop_reason(self) -> str: ...

    @property
    def usage(self) -> Any: ...


class _NoSpan:
    """What every helper gives when tracing is off: one shared context manager whose
    methods do nothing."""

    recording = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def agent(self, name: str, model: str) -> None:
        return None

    def turn(self, iteration: int) -> None:
        return None

    def ended(self, run: RunRead) -> None:
        return None

    def answered(self, response: Answer, provider: str, cost: object = None) -> None:
        return None

    def result(self, is_error: bool, content: str, attempts: int) -> None:
        return None


NO_SPAN = _NoSpan()


class _Scope:
    """A span, current for the life of a `with` block. An exception ends it with an error
    status and `error.type` (an LLM call's error class, when it has one); a cancellation (a
    call abandoned, a worker stopping) is an event, not an error."""

    def __init__(self, span: Span) -> None:
        self.span = span
        self.recording = span.is_recording()  # False when the sampler left it out
        self._token: Any = None

    def __enter__(self) -> Self:
        from opentelemetry import context, trace

        self._token = context.attach(trace.set_span_in_context(self.span))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        from opentelemetry import context

        self.close()
        if isinstance(exc, Exception):
            error_type = getattr(exc, "error_class", None) or type(exc).__qualname__
            self.span.set_attribute("error.type", str(error_type))
            _failed(self.span, exc)
        elif exc is not None:
            self.span.add_event("cancelled", {"exception.type": type(exc).__qualname__})
        context.detach(self._token)
        self.span.end()

    def close(self) -> None:
        """Ends what the scope opened inside it (a run's last turn)."""


def _failed(span: Span, exc: Exception) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:_ERROR_TEXT]))


# -- runs and turns ------------------------------------------------------------------


class _Run(_Scope):
    """One execution of a run: its `invoke_agent` span, and the `turn` span current from
    one `turn()` to the next (or to the execution's end)."""

    def __init__(self, span: Span) -> None:
        super().__init__(span)
        self._turn: Span | None = None
        self._turn_token: Any = None

    def agent(self, name: str, model: str) -> None:
        self.span.update_name(f"invoke_agent {name}")
        self.span.set_attributes({"gen_ai.agent.name": name, "gen_ai.request.model": model})

    def turn(self, iteration: int) -> None:
        """A new turn begins (the previous one ends): `iteration`, the run's LLM calls before
        it (the turn's number is one more)."""
        from opentelemetry import context, trace

        self.close()
        assert _state.tracer is not None
        self._turn = _state.tracer.start_span("turn", attributes={"loopwright.turn": iteration + 1})
        self._turn_token = context.attach(trace.set_span_in_context(self._turn))

    def close(self) -> None:
        from opentelemetry import context

        if self._turn is not None:
            context.detach(self._turn_token)
            self._turn.end()
            self._turn = None

    def ended(self, run: RunRead) -> None:
        """The run as this execution left it: its status and what it has used so far."""
        from opentelemetry.trace import Status, StatusCode

        usage = run.usage
        attributes: dict[str, Any] = {
            "loopwright.run.status": run.status.value,
            "loopwright.run.iterations": run.iteration,
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
        }
        if run.stop_reason is not None:
            attributes["loopwright.run.stop_reason"] = run.stop_reason.value
        if usage.cost_usd is not None:
            attributes["loopwright.run.cost_usd"] = usage.cost_usd
        self.span.set_attributes(attributes)
        if run.error is not None and run.status in _FAILED:
            self.span.set_status(Status(StatusCode.ERROR, run.error.message[:_ERROR_TEXT]))


RunSpan = _Run | _NoSpan


def run_execution(run: RunRead, worker: str) -> RunSpan:
    """The span of one execution of `run` by `worker`: a child of the context stored with
    the run (a root when none was), current inside the `with` block."""
    tracer = _state.tracer
    if tracer is None:
        return NO_SPAN
    span = tracer.start_span(
        "invoke_agent",
        context=tracing.parent(run.trace_context),
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": run.agent_id,
            "gen_ai.conversation.id": run.conversation_id,
            "loopwright.run.id": run.id,
            "loopwright.run.lane": run.lane,
            "loopwright.run.attempt": run.attempt,
            "loopwright.worker": worker,
        },
    )
    return _Run(span)


# -- LLM calls and tool calls --------------------------------------------------------


class _Chat(_Scope):
    def answered(self, response: Answer, provider: str, cost: object = None) -> None:
        """The response's provider (another one's after a fallback), model, finish reason
        and tokens, and its cost in USD when it is known (None: the model has no price)."""
        usage = response.usage
        provider = str(provider)
        attributes: dict[str, Any] = {
            "gen_ai.provider.name": provider,
            "gen_ai.system": provider,
            "gen_ai.response.model": response.model,
            "gen_ai.response.finish_reasons": [response.stop_reason],
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
        }
        if usage.cache_read_tokens:
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
        if usage.cache_write_tokens:
            attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
        if cost is not None:
            attributes["loopwright.llm.cost_usd"] = float(cost)  # type: ignore[arg-type]
        self.span.set_attributes(attributes)


def chat(
    provider: str, model: str, max_tokens: int, *, purpose: str = "main_loop"
) -> _Chat | _NoSpan:
    """The span of one logical LLM call (its retries and fallbacks are its events), with the
    GenAI semantic conventions' attributes; `purpose`: the loop's turn, or a background call
    (`compaction_summary`)."""
    tracer = _state.tracer
    if tracer is None:
        return NO_SPAN
    from opentelemetry.trace import SpanKind

    provider = str(provider)  # a plain string (the agent's is an enum member)
    span = tracer.start_span(
        f"chat {model}",
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.system": provider,  # the attribute's name before gen_ai.provider.name
            "gen_ai.request.model": model,
            "gen_ai.request.max_tokens": max_tokens,
            "loopwright.llm.purpose": purpose,
        },
    )
    return _Chat(span)


class _Tool(_Scope):
    def result(self, is_error: bool, content: str, attempts: int) -> None:
        """A tool's error is a result for the model, not an exception: the span records it
        as an error all the same."""
        from opentelemetry.trace import Status, StatusCode

        self.span.set_attribute("loopwright.tool.attempts", attempts)
        if is_error:
            self.span.set_attribute("error.type", "tool_error")
            self.span.set_status(Status(StatusCode.ERROR, content[:_ERROR_TEXT]))


def execute_tool(name: str, call_id: str) -> _Tool | _NoSpan:
    """The span of one tool call (its retries and fallback are its events)."""
    tracer = _state.tracer
    if tracer is None:
        return NO_SPAN
    span = tracer.start_span(
        f"execute_tool {name}",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        },
    )
    return _Tool(span)


def with_events(sink: EventSink) -> EventSink:
    """`sink`, also adding each event to the span current when it is sent (an LLM call's or
    a tool call's retries, fallbacks, breakers); `sink` itself when tracing is off."""
    if _state.tracer is None:
        return sink

    async def forward(event_type: str, data: dict[str, Any]) -> None:
        _add_event(event_type, data)
        await sink(event_type, data)

    return forward


def with_event(event_type: str, sink: DataSink) -> DataSink:
    """`with_events` for a sink of one kind of event (a tool's retries)."""
    if _state.tracer is None:
        return sink

    async def forward(data: dict[str, Any]) -> None:
        _add_event(event_type, data)
        await sink(data)

    return forward


def _add_event(event_type: str, data: Mapping[str, Any]) -> None:
    from opentelemetry import trace

    attributes = {
        k: v if isinstance(v, str | bool | int | float) else str(v)
        for k, v in data.items()
        if v is not None
    }
    trace.get_current_span().add_event(event_type, attributes)


# -- group commits -------------------------------------------------------------------


def link_here() -> SpanContext | None:
    """The current span's context, for the group commit of a write to link to; None when
    tracing is off."""
    if _state.tracer is None:
        return None
    from opentelemetry import trace

    found = trace.get_current_span().get_span_context()
    return found if found.is_valid else None


class Linked(Protocol):
    @property
    def link(self) -> SpanContext | None: ...


class _GroupCommit:
    """A group commit's span: a root, never current. Its one transaction serves the writes
    of many runs and requests: parented under one of them it would put the others' work
    into that trace, so it links to each write's span instead."""

    def __init__(self, span: Span) -> None:
        self.span = span
        self.recording = span.is_recording()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        if isinstance(exc, Exception):
            _failed(self.span, exc)
        self.span.end()


def group_commit(name: str, batch: Sequence[Linked]) -> _GroupCommit | _NoSpan:
    """The span of one group commit of `batch` by the committer `name`."""
    tracer = _state.tracer
    if tracer is None:
        return NO_SPAN
    from opentelemetry.context import Context
    from opentelemetry.trace import Link

    links = [Link(p.link) for p in batch if p.link is not None]
    span = tracer.start_span(
        f"group_commit {name}",
        context=Context(),
        links=links,
        attributes={"loopwright.group_commit.size": len(batch)},
    )
    return _GroupCommit(span)
