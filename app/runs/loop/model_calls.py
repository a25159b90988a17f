"""The model side of one execution of a run: its LLM calls over the live context, in the
prompt's frame, behind the resilient call policy (retries, breakers, fallback), and the
context recovery ladder that runs before a call whose request outgrew its budget.

It holds no transcript and commits nothing: the loop passes in what a call needs and
commits what comes back (a response, a recovery).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC
from decimal import Decimal
from typing import Any

from app.agents.schemas import AgentRead
from app.core.messages import Message, for_provider
from app.core.streams import run_stream
from app.core.vocabulary import StepKind
from app.costs.store.costs import CallCost
from app.llm.provider import (
    LLMRequest,
    LLMResponse,
    Provider,
    RefreshesCredentials,
    ToolChoice,
    ToolSpec,
    Usage,
)
from app.llm.resilient import LLMCallFailed, ResilientModel, Route
from app.runs.loop.boundary import Boundary
from app.runs.loop.budget_guard import BudgetGuard
from app.runs.loop.compaction import Compactor, Recovery
from app.runs.loop.deps import LeaseLost, LoopDeps
from app.runs.loop.loop_detection import ASK_HUMAN
from app.runs.loop.prompt import Frame, frame_of, offered_tools, read_frame
from app.runs.loop.prompt_profiles import profile_for
from app.runs.loop.summary import llm_summariser, summary_settings
from app.runs.loop.watchers import Watchers
from app.runs.schemas.runs import RunRead
from app.runs.tools.registry import ToolRegistry
from app.telemetry import spans

EventSink = Callable[[str, dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class CallShape:
    """What a loop kind changes about one call (runs/loop/kinds/): the model (a name of the
    agent's provider), tools offered besides the agent's (or, `only`, instead of them), and
    a tool the model must call (over the watchers' choice)."""

    model: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    only: bool = False
    tool_choice: ToolChoice | None = None


PLAIN = CallShape()


class ModelCalls:
    """The LLM calls of one run's execution (one agent, one lease)."""

    def __init__(
        self,
        deps: LoopDeps,
        agent: AgentRead,
        run_id: str,
        lane: str,
        conversation_id: str,
        journal: dict[str, Any] | None,
        watchers: Watchers,
        budgets: BudgetGuard,
        *,
        lease_lost: asyncio.Event,
        on_event: EventSink,
        tools: ToolRegistry | None = None,
    ) -> None:
        """`tools`: the run's (its agent's MCP tools too); by default the process's."""
        self.deps = deps
        self.tools = tools or deps.tools.registry
        self.agent = agent
        self.run_id = run_id
        self.lane = lane
        self.conversation_id = conversation_id
        self._lease_lost = lease_lost
        self._on_event = on_event
        # The system prompt's profile follows the tier of the model the run uses.
        self.profile = profile_for(deps.prices.tier(agent.model.provider, agent.model.name))
        self._frame: Frame | None = frame_of(agent, journal, self.profile)  # the journal as stored
        self.usage_in_flight = Usage()  # of the call under way, as far as it is known
        self._requested = agent.model.name  # the model the last call asked for
        # Seconds this execution waited out rate limits and outages in persistent mode:
        # not charged to the run's time limits (and the call's deadline moves with them).
        self.waited_s = 0.0
        self._deadline: asyncio.Timeout | None = None
        self.llm = self._model(deps.providers(agent, run_id), run_id)
        self.compactor = self._compactor(watchers)
        self.budgets = budgets  # the run's, which knows its task's project once read

    async def frame(self) -> Frame:
        """Read once, and again only after a journal tool wrote (nothing else changes the
        journal while the run holds its lane)."""
        if self._frame is None:
            self._frame = await read_frame(
                self.deps.sessionmaker, self.agent, self.conversation_id, self.profile
            )
        return self._frame

    @property
    def model_in_flight(self) -> str:
        """The model of the call under way (or the last one): the fallback once it took over."""
        route = self.llm.attempting
        return self._requested if route is None else route.model

    def _answering_provider(self) -> str:
        """The provider of the last attempt (a fallback's, after one)."""
        route = self.llm.attempting
        return self.agent.model.provider if route is None else route.provider

    def account(self, model: str, usage: Usage) -> CallCost:
        """A call of this run's, priced and counted in the metrics: `model` is the one that
        answered (a fallback model is priced as itself, of its own provider)."""
        provider = self._answering_provider()
        cost = self.deps.prices.cost(provider, model, usage)
        if self.deps.metrics is not None:
            tokens = {
                "input": usage.input_tokens,
                "output": usage.output_tokens,
                "cache_write": usage.cache_write_tokens,
                "cache_read": usage.cache_read_tokens,
            }
            self.deps.metrics.llm_spend(
                provider, model, tokens, None if cost is None else float(cost)
            )
        return CallCost(
            day=self.deps.clock().astimezone(UTC).date(),
            agent_id=self.agent.id,
            lane=self.lane,
            provider=provider,
            model=model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cost_usd=cost,
        )

    def journal_changed(self) -> None:
        self._frame = None  # the next call reads the journal again

    def tool_specs(self, watchers: Watchers, forced: ToolChoice | None) -> list[ToolSpec]:
        return offered_tools(self.tools, self.agent, withdrawn=watchers.degraded, forced=forced)

    async def complete(
        self,
        frame: Frame,
        history: Sequence[Message],
        watchers: Watchers,
        *,
        run: RunRead,
        remaining_s: float,
        with_tools: bool,
        shape: CallShape = PLAIN,
    ) -> LLMResponse:
        """One LLM call over the live context, in its frame, bounded by the time left, if
        the run's budgets have room for it (else `BudgetExhausted`); `shape` as its loop
        kind asks."""
        model = self.agent.model
        tool_choice = shape.tool_choice or (watchers.tool_choice if with_tools else None)
        tools: list[ToolSpec] = []
        if with_tools:
            own = [] if shape.only else self.tool_specs(watchers, tool_choice)
            tools = [*own, *shape.tools]
        request = LLMRequest(
            model=shape.model or model.name,
            system=frame.system,
            messages=[*frame.journal, *for_provider(history)],
            max_tokens=model.max_output_tokens,
            tools=tools,
            tool_choice=tool_choice,
            timeout_s=remaining_s,
            turn=run.iteration,
        )
        await self.budgets.admit(run, request)
        self._requested = request.model
        stream = run_stream(self.run_id)

        async def on_text(delta: str) -> None:
            self.deps.bus.publish_ephemeral(stream, "message.delta", {"text": delta})

        def on_usage(usage: Usage) -> None:
            self.usage_in_flight = usage

        self.usage_in_flight = Usage()
        metrics = self.deps.metrics
        try:
            with spans.chat(model.provider, request.model, request.max_tokens) as span:
                async with asyncio.timeout(remaining_s) as self._deadline:
                    response = await self.llm.complete(
                        request, on_text, on_usage, purpose="main_loop"
                    )
                if span.recording:
                    provider = self._answering_provider()
                    cost = self.deps.prices.cost(provider, response.model, response.usage)
                    span.answered(response, provider, cost)
        except LLMCallFailed as exc:
            if metrics is not None:
                metrics.llm_call(request.model, exc.error_class)
            raise
        finally:
            self._deadline = None
        if metrics is not None:
            metrics.llm_call(response.model, "ok")
        return response

    async def recover(
        self,
        frame: Frame,
        history: list[Message],
        watchers: Watchers,
        *,
        through: int,
        iteration: int,
    ) -> Recovery | None:
        """When the request (its frame counted too) outgrew its budget: the recovery
        ladder's step (R1 compaction, R2 deep prune, R3 ask the human); None within budget."""
        recovery = await self._compactor_for(frame).recover(
            history, through_position=through, iteration=iteration, state=watchers.ladder
        )
        return recovery if recovery is not None and recovery.steps else None

    def _model(self, provider: Provider, run_key: str) -> ResilientModel:
        """The run's model behind the call policy: retries, breakers, fallback. The
        fallback model's provider (the same one, or another) is asked for when first used."""
        fallback = self.agent.model.fallback_model()
        route = (
            None if fallback is None else Route(fallback.provider, fallback.name, fallback.base_url)
        )
        fallback_provider: Provider | None = None

        def provider_for(to: Route) -> Provider:
            nonlocal fallback_provider
            if fallback is None or to != route:
                return provider
            if fallback_provider is None:
                owner = self.agent.model_copy(update={"model": fallback})
                fallback_provider = self.deps.providers(owner, run_key)
            return fallback_provider

        async def refresh(to: Route) -> bool:
            chosen = provider_for(to)
            if not isinstance(chosen, RefreshesCredentials):
                return False
            await chosen.refresh_credentials()
            return True

        async def heartbeat() -> None:  # between the chunks of a persistent wait
            if self._lease_lost.is_set():
                raise LeaseLost()

        return ResilientModel(
            provider_for=provider_for,
            provider_name=self.agent.model.provider,
            server=self.agent.model.base_url,
            breakers=self.deps.breakers,
            policy=self.deps.llm_policy,
            fallback=route,
            persistent=self.agent.limits.persistent_retries,
            on_event=spans.with_events(self._on_event),  # a retry, a fallback: the call's events
            refresh_credentials=refresh,
            heartbeat=heartbeat,
            waited=self._waited,
            sleep=self.deps.sleep,
            clock=self.deps.clock,
        )

    def _waited(self, seconds: float) -> None:
        self.waited_s += seconds
        deadline = self._deadline
        if deadline is not None and (when := deadline.when()) is not None:
            deadline.reschedule(when + seconds)

    def _compactor(self, watchers: Watchers) -> Compactor:
        """Compaction for this run: the summary is a background call (it fails fast under
        load) with the cheap model, on a provider of its own (a scripted one keeps its own
        place in the script)."""
        settings = summary_settings(self.deps.compaction, self.agent.model)
        run_key = f"{self.run_id}:summary"
        summariser = self._model(self.deps.providers(self.agent, run_key), run_key)
        return Compactor(
            settings,
            llm_summariser(
                summariser.for_purpose("compaction_summary"),
                settings,
                provider_name=self.agent.model.provider,
            ),
            self.agent.model.context_window,
            system=self.agent.system_prompt,
            tools=self.tool_specs(watchers, None),
        )

    def _compactor_for(self, frame: Frame) -> Compactor:
        """The compactor with the frame's system prompt and journal, made again only when
        the frame changes: what it counts once (prompt, tools, journal) stays counted."""
        if self.compactor.system is not frame.system or self.compactor.prefix is not frame.journal:
            self.compactor = replace(self.compactor, system=frame.system, prefix=frame.journal)
        return self.compactor


def counted(run: RunRead, call: CallCost) -> dict[str, Any]:
    """The run's counters once this answered LLM call is counted."""
    return {"iteration": run.iteration + 1, **with_usage(run, call)}


def with_usage(run: RunRead, call: CallCost) -> dict[str, Any]:
    """The run's usage with `call` added (answered, or abandoned halfway). Its cost is
    unknown from the first call without a price on."""
    usage = run.usage
    cost = None
    if usage.cost_usd is not None and call.cost_usd is not None:
        cost = float(round(Decimal(str(usage.cost_usd)) + call.cost_usd, 9))
    return {
        "usage": {
            "input_tokens": usage.input_tokens + call.input_tokens,
            "output_tokens": usage.output_tokens + call.output_tokens,
            "cache_write_tokens": usage.cache_write_tokens + call.cache_write_tokens,
            "cache_read_tokens": usage.cache_read_tokens + call.cache_read_tokens,
            "cost_usd": cost,
            "unpriced_calls": usage.unpriced_calls + (call.cost_usd is None),
        }
    }


def recovery_boundary(recovery: Recovery, watchers: Watchers) -> tuple[Boundary, Watchers]:
    """What the recovery ladder did, as a `compaction` boundary, and the watchers' state it
    records. R3's forced `ask_human` is kept in that state, so that a crash before the call
    does not lose it."""
    context = None
    if recovery.messages is not None:
        context = (recovery.through_position, recovery.messages)
    ask = recovery.ask_human
    loops = replace(watchers.loops, force_tool=ASK_HUMAN) if ask else watchers.loops
    boundary = Boundary(
        StepKind.COMPACTION,
        messages=[Message.user_text(ask.instruction)] if ask else [],
        events=recovery.events,
        context=context,
    )
    return boundary, replace(watchers, ladder=recovery.state, loops=loops)
