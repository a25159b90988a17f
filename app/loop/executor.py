"""The agent loop for one claimed run: its turns, boundaries and terminators.

    boundary checks (cancel, time, iterations) → LLM call → llm_response boundary
    → tool batch (ledger start committed first) → tool_result boundary → repeat

Each boundary is one transaction (messages, ledger rows, checkpoint, run row, events),
fenced by the run's lease: a worker that lost its lease writes nothing more. Resuming and
running are the same path: answered tool calls are read back from the ledger, not re-run.

`RunLoop` orchestrates: it owns the loop's state and every commit, the boundary checks
and terminators, the LLM call, context recovery and settling. A tool batch (approval
gate, tool runner, the tool_result boundary and the watchers' verdict) is `ToolBatch`'s
(loop/tool_batch.py), which sees the loop only through `BatchHost`; the pure parts are
in loop/prompt.py, loop/run_boundaries.py, loop/approval_gate.py and loop/guards.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.breakers import Breakers
from app.core.config import CompactionSettings
from app.core.messages import (
    Message,
    TextBlock,
    for_provider,
    last_assistant_text,
    pending_tool_uses,
)
from app.core.states import RunStatus
from app.core.streams import run_stream
from app.engine.approvals import ApprovalCommands
from app.engine.bus import EventBus
from app.engine.group_commit import GroupCommitter
from app.engine.published import published, run_written
from app.engine.retry import RunRetryPolicy
from app.llm.caller import LLMCallFailed, ResilientModel
from app.llm.policy import PERMANENT_FAILURES, LLMRetryPolicy
from app.llm.provider import (
    LLMRequest,
    LLMResponse,
    Provider,
    RefreshesCredentials,
    ToolChoice,
    ToolSpec,
)
from app.llm.providers import ProviderUnavailable
from app.loop import approval_gate
from app.loop.boundary import Boundary, BoundaryWrite, started_events
from app.loop.compaction import Compactor
from app.loop.crashpoints import crash_point
from app.loop.guards import (
    ERROR_LIMIT_EVENT,
    ERROR_STOP_REASON,
    MAX_ERROR_BATCHES,
    ErrorStreak,
    Guards,
)
from app.loop.loop_detection import ASK_HUMAN
from app.loop.prompt import Frame, frame_of, offered_tools, read_frame
from app.loop.run_boundaries import hand_back, human_pause, settled, waiting_on_call
from app.loop.stagnation import STOP_REASON, StagnationPolicy
from app.loop.summary import llm_summariser
from app.loop.tool_batch import BatchEnd, ToolBatch, is_idempotent
from app.loop.tool_runner import ToolRunner
from app.schemas.agents import AgentRead
from app.schemas.runs import RunRead
from app.store import agents as agent_store
from app.store import checkpoints, conversations, tool_calls
from app.store import journal as journal_store
from app.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

SUMMARY_PROMPT = (
    "Your time for this task is up. Without calling tools, summarise what you have done, "
    "what you found, and what remains to be done."
)


# The provider for an agent's model, as one run (or one purpose of it) calls it: a scripted
# model keeps its place in the script per caller.
ProviderFactory = Callable[[AgentRead, str], Provider]  # (agent, run id)


class LeaseLost(Exception):
    """Another worker owns this run now (or it was settled meanwhile): stop writing."""


@dataclass
class LoopDeps:
    sessionmaker: async_sessionmaker[AsyncSession]
    bus: EventBus
    providers: ProviderFactory
    tools: ToolRunner
    clock: Callable[[], datetime]
    committer: GroupCommitter[BoundaryWrite, RunRead | None]
    tool_services: Any = None
    run_retry: RunRetryPolicy = field(default_factory=RunRetryPolicy)
    stagnation: StagnationPolicy = field(default_factory=StagnationPolicy)
    max_error_batches: int = MAX_ERROR_BATCHES  # 0: no "too many errors" terminator
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    metrics: Metrics | None = None
    breakers: Breakers = field(default_factory=Breakers)  # shared with the tool runner
    llm_policy: LLMRetryPolicy = field(default_factory=LLMRetryPolicy)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep  # between LLM attempts
    approvals: ApprovalCommands | None = None  # None: calls that need approval are refused


def prompt_hash(system_prompt: str) -> str:
    return hashlib.sha256(system_prompt.encode()).hexdigest()


class RunLoop:
    """Drives one claimed run until it settles, pauses, or loses its lease."""

    def __init__(self, deps: LoopDeps, run: RunRead, *, owner: str) -> None:
        self.deps = deps
        self.run = run
        self.owner = owner
        self.token = run.lease_token
        self.lease_lost = asyncio.Event()
        self.stop_requested = asyncio.Event()  # shutdown: hand the run back at a boundary
        self.history: list[Message] = []  # the live context: compacted prefix + transcript
        self.through = -1  # position of the last transcript message the history covers
        self.transcript_count = 0  # messages of the conversation's transcript
        self.completed_calls: list[str] = []
        self.guards = Guards()
        self.frame: Frame | None = None  # the journal's part of the prompt, while unchanged

    # -- entry -----------------------------------------------------------------------

    async def execute(self) -> None:
        try:
            await self._execute()
        except LeaseLost:
            log.warning("run %s: lease lost; leaving it to its new owner", self.run.id)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            await self._quietly(self._fail_hard_limit())
        except LLMCallFailed as exc:
            retryable = exc.error_class not in PERMANENT_FAILURES  # a refused request is final
            await self._settle_quietly(
                RunStatus.FAILED, "provider_error", str(exc), retryable=retryable
            )
        except ProviderUnavailable as exc:
            await self._settle_quietly(RunStatus.FAILED, "provider_unavailable", str(exc))
        except Exception as exc:
            log.exception("run %s failed", self.run.id)
            await self._settle_quietly(RunStatus.FAILED, "internal", f"{type(exc).__name__}: {exc}")

    async def _execute(self) -> None:
        deps = self.deps
        crash_point("after_claim")
        self.execution_started = deps.clock()
        conversation_id = self.run.conversation_id
        async with deps.sessionmaker() as session:
            agent = await agent_store.get_agent(session, self.run.agent_id)
            self.history, self.through = await conversations.read_context(session, conversation_id)
            latest = await checkpoints.latest(session, self.run.id)
            journal = await journal_store.read_journal(session, conversation_id)
        if agent is None:
            await self._settle(RunStatus.FAILED, error=("agent_missing", "the agent was deleted"))
            return
        self.agent = agent
        self.system_hash = prompt_hash(agent.system_prompt)
        self.transcript_count = self.through + 1  # the live context reaches the last message
        self.guards = Guards.load(latest.loop_counters if latest else None)
        self.frame = frame_of(agent, journal)
        self.llm = self._model(agent.model.provider, deps.providers(agent, self.run.id))
        self.batch = ToolBatch(
            self,
            agent,
            tools=deps.tools,
            approvals=deps.approvals,
            services=deps.tool_services,
            stagnation=deps.stagnation,
            max_error_batches=deps.max_error_batches,
            owner=self.owner,
            token=self.token,
        )
        self.compactor = self._compactor()
        # Its first boundary (the input) wrote a checkpoint with its first messages.
        started_here = latest is not None
        await self._start(started_here)
        if started_here and self.run.system_prompt_hash != self.system_hash:
            await self._pause_for_prompt_drift()
            return
        if not await self._answer_pending():
            return
        while True:
            if await self._stopped_at_boundary():
                return
            frame = await self._frame()
            await self._recover_context(frame)
            response = await self._call_llm(frame, with_tools=True)
            if await self._record_response(response):
                return
            crash_point("after_llm_response")
            if not await self._went_on(await self.batch.run(response.content)):
                return
            crash_point("after_tool_result")

    # -- boundaries ------------------------------------------------------------------

    async def commit(self, boundary: Boundary, guards: Guards | None = None) -> RunRead:
        """Commit one boundary (through the group committer, alongside other runs'), fenced
        by this worker's lease; then take its messages, results and the watchers' new state
        (`guards`, recorded in its checkpoint) into the loop's state."""
        if self.lease_lost.is_set():  # the heartbeat could not renew: stop here
            raise LeaseLost()
        guards = guards or self.guards
        registry = self.deps.tools.registry
        completed_ids = [*self.completed_calls, *(call_id for call_id, _ in boundary.completed)]
        write = BoundaryWrite(
            run_id=self.run.id,
            owner=self.owner,
            token=self.token,
            boundary=boundary,
            message_count=self.transcript_count + len(boundary.messages),
            completed_tool_call_ids=completed_ids,
            system_prompt_hash=self.system_hash,
            idempotent={c.id: is_idempotent(registry, c) for c in boundary.started},
            now=self.deps.clock(),
            loop_counters=guards.counters,
        )
        run = await self.deps.committer.submit(write)
        if run is None:
            raise LeaseLost()
        events = [*boundary.opening, *boundary.events]
        # Local waiters (pools, wait tools) hear of it now, not at their next poll.
        published(self.deps.bus, [run_written(run, events)], metrics=self.deps.metrics)
        if boundary.context is not None:
            self.history = list(boundary.context[1])
        self.history += boundary.messages
        self.through += len(boundary.messages)
        self.transcript_count += len(boundary.messages)
        self.guards = guards
        self.completed_calls = completed_ids
        self.run = run
        return run

    async def _start(self, started_here: bool) -> None:
        event = (
            "agent_run.started",
            {"attempt": self.run.attempt, "resumed": started_here, "worker": self.owner},
        )
        if started_here:
            # A prompt change a human accepted (the hash was cleared) is adopted here.
            accepted = (
                {} if self.run.system_prompt_hash else {"system_prompt_hash": self.system_hash}
            )
            await self.commit(Boundary(None, run_values=accepted, opening=[event]))
            return
        await self.commit(
            Boundary(
                "input",
                messages=[Message.user_text(self.run.input)],
                run_values={"system_prompt_hash": self.system_hash},
                opening=[event],
            )
        )

    async def _pause_for_prompt_drift(self) -> None:
        """The agent's system prompt changed since this run began: resuming would mix two
        instructions, so a human decides (their answer accepts the new prompt)."""
        question = (
            "The agent's system prompt changed since this run started. Reply to continue "
            "with the new prompt, or cancel the run."
        )
        reason = "system_prompt_changed"
        await self.commit(
            human_pause(
                {"reason": reason, "question": question},
                events=[("agent_run.resume_unsafe", {"reason": reason})],
            )
        )

    async def _answer_pending(self) -> bool:
        """A run that resumes with unanswered tool calls (after a human answered, or after
        a crash) answers them from the ledger. A call that never started, or an idempotent
        one cut short, runs (again); a side-effecting one cut short is never re-run: the run
        halts for a human (`agent_run.resume_unsafe`). False when the run paused."""
        pending = pending_tool_uses(self.history)
        if not pending:
            return True
        async with self.deps.sessionmaker() as session:
            ledger = await tool_calls.for_run(session, self.run.id)
        answered: dict[str, tuple[str, bool]] = {}
        for call in pending:
            record = ledger.get(call.id)
            if record is not None and record.completed_at is not None and record.result is not None:
                answered[call.id] = (record.result, record.is_error)
        cut_short = [
            c.id
            for c in pending
            if c.id not in answered and c.id in ledger and not ledger[c.id].idempotent
        ]
        if cut_short:  # calls an approval held back never ran: they may simply go again
            async with self.deps.sessionmaker() as session:
                never_ran = await approval_gate.held_back(session, self.run.id, cut_short)
            cut_short = [c for c in cut_short if c not in never_ran]
        unsafe = [c for c in pending if c.id in cut_short]
        if unsafe:
            call = unsafe[0]
            question = (
                "A side-effecting tool call was interrupted before it finished; it may or may "
                "not have taken effect. Reply with its result to continue."
            )
            unsafe_event = ("agent_run.resume_unsafe", {"tool_call_id": call.id, "tool": call.name})
            await self.commit(
                human_pause(waiting_on_call(call, question, "resume_unsafe"), events=[unsafe_event])
            )
            return False
        declined = await self._declined(answered)
        missing = [c for c in pending if c.id not in answered]
        if missing:
            return await self._went_on(
                await self.batch.run(
                    self.history[-1].content, only=missing, answered=answered, declined=declined
                )
            )
        return await self._went_on(await self.batch.record(pending, answered, [], [], declined))

    async def _declined(self, answered: dict[str, tuple[str, bool]]) -> set[str]:
        """Of the error results read back from the ledger, the refusals of an approval
        (written there by the decision): a person's word, not the model's error."""
        errors = [call_id for call_id, (_, is_error) in answered.items() if is_error]
        if not errors:
            return set()
        async with self.deps.sessionmaker() as session:
            return await approval_gate.held_back(session, self.run.id, errors)

    async def _stopped_at_boundary(self) -> bool:
        """End the run here if it was cancelled, its tool calls kept failing (too many
        errors), or it ran out of time or iterations; or hand it back to the queue if this
        worker is shutting down."""
        if self.stop_requested.is_set() and not self.run.cancel_requested:
            await self.commit(hand_back(self.owner))
            return True
        if self.run.cancel_requested:
            await self._settle(RunStatus.CANCELLED, stop_reason="cancelled")
            return True
        # Checked here, not only where the batch is recorded: a run resumed after a crash
        # between its last failing batch and its settling stops before another LLM call.
        if self.guards.errors.reached(self.deps.max_error_batches):
            await self._fail_too_many_errors()
            return True
        limits = self.agent.limits
        elapsed = self._elapsed_s()
        if elapsed >= limits.hard_time_limit_s:
            await self._fail_hard_limit()
            return True
        if elapsed >= limits.soft_time_limit_s:
            await self._summarise()
            return True
        if self.run.iteration >= limits.max_iterations:
            log.warning("run %s stopped at max_iterations=%d", self.run.id, limits.max_iterations)
            await self._settle(
                RunStatus.COMPLETED,
                stop_reason="max_iterations",
                result=last_assistant_text(self.history),
                event=("agent_run.iteration_limit", {"max_iterations": limits.max_iterations}),
            )
            return True
        return False

    async def _fail_hard_limit(self) -> None:
        limit = self.agent.limits.hard_time_limit_s
        await self._settle(
            RunStatus.FAILED,
            stop_reason="hard_time_limit",
            error=("hard_time_limit", f"the run exceeded its hard time limit of {limit:g} s"),
        )

    async def _fail_too_many_errors(self) -> None:
        """The too-many-errors terminator: the model's tool calls kept failing. Not retried:
        another attempt resumes the same transcript and model, which fail the same way. The
        final checkpoint starts a new streak, so a person's `retry` gives the model a fresh
        chance (the count at its limit would stop the run again before any call)."""
        streak, limit = self.guards.errors, self.deps.max_error_batches
        log.warning("run %s stopped: %d failing tool batches in a row", self.run.id, streak.batches)
        await self._settle(
            RunStatus.FAILED,
            stop_reason=ERROR_STOP_REASON,
            error=(ERROR_STOP_REASON, streak.message),
            event=(
                ERROR_LIMIT_EVENT,
                {
                    "max_consecutive_error_batches": limit,
                    "batches": streak.batches,
                    "last_errors": list(streak.last_errors),
                },
            ),
            retryable=False,
            guards=replace(self.guards, errors=ErrorStreak()),
        )

    async def _summarise(self) -> None:
        """Soft time limit: one final turn without tools, and its text is the result."""
        await self.commit(
            Boundary(
                "input",
                messages=[Message.user_text(SUMMARY_PROMPT)],
                events=[("agent.exhaustion.soft_time_limit", {})],
            )
        )
        response = await self._call_llm(
            await self._frame(),
            with_tools=False,
        )
        text = "".join(b.text for b in response.content if isinstance(b, TextBlock))
        message = Message(role="assistant", content=[TextBlock(text=text or "(no summary)")])
        await self._settle(
            RunStatus.COMPLETED,
            stop_reason="soft_time_limit",
            result=text,
            messages=[message],
            extra=self._after_call(response),
        )

    async def _call_llm(self, frame: Frame, *, with_tools: bool) -> LLMResponse:
        """One LLM call over the live context, in its frame."""
        model = self.agent.model
        tool_choice = self.guards.tool_choice if with_tools else None
        request = LLMRequest(
            model=model.name,
            system=frame.system,
            messages=[*frame.journal, *for_provider(self.history)],
            max_tokens=model.max_output_tokens,
            tools=self._tool_specs(tool_choice) if with_tools else [],
            tool_choice=tool_choice,
            timeout_s=self.remaining_s(),
            turn=self.run.iteration,
        )
        stream = run_stream(self.run.id)

        async def on_text(delta: str) -> None:
            self.deps.bus.publish_ephemeral(stream, "message.delta", {"text": delta})

        metrics = self.deps.metrics
        try:
            async with asyncio.timeout(self.remaining_s()):
                response = await self.llm.complete(request, on_text, purpose="main_loop")
        except LLMCallFailed as exc:
            if metrics is not None:
                metrics.llm_call(request.model, exc.error_class)
            raise
        if metrics is not None:
            metrics.llm_call(response.model, "ok")
        return response

    async def _frame(self) -> Frame:
        """Read once, and again only after a journal tool wrote (nothing else changes the
        journal while the run holds its lane)."""
        if self.frame is None:
            self.frame = await read_frame(
                self.deps.sessionmaker, self.agent, self.run.conversation_id
            )
        return self.frame

    def _tool_specs(self, forced: ToolChoice | None) -> list[ToolSpec]:
        registry = self.deps.tools.registry
        return offered_tools(registry, self.agent, withdrawn=self.guards.degraded, forced=forced)

    def _model(self, provider_name: str, provider: Provider) -> ResilientModel:
        """The run's model behind the LLM call policy: retries, breakers, fallback."""

        async def heartbeat() -> None:  # between the chunks of a persistent wait
            if self.lease_lost.is_set():
                raise LeaseLost()

        return ResilientModel(
            provider_for=lambda _model: provider,  # one provider serves every model name
            provider_name=provider_name,
            breakers=self.deps.breakers,
            policy=self.deps.llm_policy,
            fallback_model=self.agent.model.fallback_name,
            persistent=self.agent.limits.persistent_retries,
            on_event=self._event_now,
            refresh_credentials=(
                provider.refresh_credentials if isinstance(provider, RefreshesCredentials) else None
            ),
            heartbeat=heartbeat,
            sleep=self.deps.sleep,
            clock=self.deps.clock,
        )

    def _compactor(self) -> Compactor:
        """Compaction for this run: the summary is a background call (it fails fast under
        load) with the cheap model, on a provider of its own (a scripted one keeps its own
        place in the script)."""
        settings = self.deps.compaction
        provider = self.deps.providers(self.agent, f"{self.run.id}:summary")
        summariser = self._model(self.agent.model.provider, provider)
        return Compactor(
            settings,
            llm_summariser(summariser.for_purpose("compaction_summary"), settings),
            self.agent.model.context_window,
            system=self.agent.system_prompt,
            tools=self._tool_specs(None),
        )

    def _compactor_for(self, frame: Frame) -> Compactor:
        """The compactor with the frame's system prompt and journal, made again only when
        the frame changes: what it counts once (prompt, tools, journal) stays counted."""
        if self.compactor.system is not frame.system or self.compactor.prefix is not frame.journal:
            self.compactor = replace(self.compactor, system=frame.system, prefix=frame.journal)
        return self.compactor

    async def _recover_context(self, frame: Frame) -> None:
        """Before an LLM call: when the request (its frame counted too) outgrew its budget,
        climb the recovery ladder (R1 compaction, R2 deep prune, R3 ask the human) and
        commit what it did with a `compaction` checkpoint. R3's forced `ask_human` is kept
        in the guards, so a crash before the call does not lose it."""
        recovery = await self._compactor_for(frame).recover(
            self.history,
            through_position=self.through,
            iteration=self.run.iteration,
            state=self.guards.ladder,
        )
        if recovery is None or not recovery.steps:  # within budget, or no recovery left
            return
        context = None
        if recovery.messages is not None:
            context = (recovery.through_position, recovery.messages)
        ask = recovery.ask_human
        loops = replace(self.guards.loops, force_tool=ASK_HUMAN) if ask else self.guards.loops
        await self.commit(
            Boundary(
                "compaction",
                messages=[Message.user_text(ask.instruction)] if ask else [],
                events=recovery.events,
                context=context,
            ),
            replace(self.guards, ladder=recovery.state, loops=loops),
        )

    def _elapsed_s(self) -> float:
        """Time limits bound one execution (a worker's time), as a task's time limit would:
        a run that waited on a human is not charged for the wait."""
        return (self.deps.clock() - self.execution_started).total_seconds()

    def remaining_s(self) -> float:
        """Seconds left before the hard time limit (bounding an LLM call or a tool)."""
        return max(0.001, self.agent.limits.hard_time_limit_s - self._elapsed_s())

    async def _record_response(self, response: LLMResponse) -> bool:
        """Persist the assistant message before any of its tools run; True when it is the
        final answer (and the run is settled)."""
        message = Message(role="assistant", content=response.content)
        counters = self._after_call(response)
        if message.tool_uses:
            # The response and the start of its tool calls are durable before any tool runs.
            await self.commit(
                Boundary(
                    "llm_response",
                    messages=[message],
                    run_values=counters,
                    started=message.tool_uses,
                    events=started_events(message.tool_uses),
                )
            )
            return False
        await self._settle(
            RunStatus.COMPLETED,
            stop_reason="end_turn",
            result=message.text,
            messages=[message],
            extra=counters,
        )
        return True

    def _after_call(self, response: LLMResponse) -> dict[str, Any]:
        """The run's counters once this LLM call is counted."""
        usage = self.run.usage
        return {
            "iteration": self.run.iteration + 1,
            "usage": {
                "input_tokens": usage.input_tokens + response.usage.input_tokens,
                "output_tokens": usage.output_tokens + response.usage.output_tokens,
            },
        }

    async def _went_on(self, end: BatchEnd) -> bool:
        """After a tool batch: False when the run paused for a human, or (stagnant) is
        settled here."""
        if end is BatchEnd.STAGNANT:
            log.warning("run %s stopped: stagnation", self.run.id)
            await self._settle(
                RunStatus.COMPLETED,
                stop_reason=STOP_REASON,
                result=last_assistant_text(self.history),
            )
        return end is BatchEnd.RECORDED

    def journal_changed(self) -> None:
        self.frame = None  # the next call reads the journal again

    async def _event_now(self, event_type: str, data: dict[str, Any]) -> None:
        """An event outside any boundary (a retry, a fallback), fenced like the rest."""
        await self.commit(Boundary(None, events=[(event_type, data)]))

    # -- settling --------------------------------------------------------------------

    async def _settle(
        self,
        status: RunStatus,
        *,
        stop_reason: str | None = None,
        result: str | None = None,
        error: tuple[str, str] | None = None,
        messages: list[Message] | None = None,
        extra: dict[str, Any] | None = None,
        event: tuple[str, dict[str, Any]] | None = None,
        retryable: bool = True,
        guards: Guards | None = None,
    ) -> None:
        """`guards`: the watchers' state for the final checkpoint, if not the loop's."""
        boundary = settled(
            self.run,
            self.history,
            status,
            self.deps.clock(),
            policy=self.deps.run_retry,
            stop_reason=stop_reason,
            result=result,
            error=error,
            messages=messages,
            extra=extra,
            event=event,
            retryable=retryable,
        )
        crash_point("before_final")
        await self.commit(boundary, guards)

    async def _settle_quietly(
        self, status: RunStatus, code: str, message: str, *, retryable: bool = True
    ) -> None:
        settling = self._settle(
            status, stop_reason=code, error=(code, message), retryable=retryable
        )
        await self._quietly(settling)

    async def _quietly(self, settling: Awaitable[None]) -> None:
        try:
            await settling
        except LeaseLost:
            log.warning("run %s: lease lost before it could be settled", self.run.id)
