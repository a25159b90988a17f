"""A run's turns as its loop kind sees them (`LoopHost`): the LLM call (abandoned when a
person cancels), recovering the context before it, recording a response or a turn, the
kind's own notes, tool batches, and every way the run ends (settled, summarised, handed
back). `RunLoop` (runs/loop/run_loop.py) sets the run up and hands it to its kind.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime
from typing import Any

from app.agents.schemas import AgentRead
from app.core.crashpoints import crash_point
from app.core.messages import Block, Message, TextBlock, last_assistant_text
from app.core.states import RunStatus, StopReason
from app.core.streams import StreamEvent
from app.core.vocabulary import StepKind
from app.llm.provider import LLMResponse
from app.runs.loop.boundary import Boundary, started_events
from app.runs.loop.cancel_watch import unless_cancelled
from app.runs.loop.deps import LeaseLost
from app.runs.loop.exits import hand_back, settled
from app.runs.loop.leased_run import LeasedRun
from app.runs.loop.model_calls import (
    PLAIN,
    CallShape,
    ModelCalls,
    counted,
    recovery_boundary,
    with_usage,
)
from app.runs.loop.terminators import Ending, Stop
from app.runs.loop.tool_batch import BatchEnd, ToolBatch

log = logging.getLogger(__name__)

SUMMARY_PROMPT = (
    "Your time for this task is up. Without calling tools, summarise what you have done, "
    "what you found, and what remains to be done."
)


class Turns(LeasedRun):
    """The turns and endings of a run whose loop `RunLoop` set up."""

    agent: AgentRead  # as the run uses it: its model maybe downgraded, its MCP tools added
    model: ModelCalls
    batch: ToolBatch
    execution_started: datetime

    async def stop(self, stop: Stop) -> None:
        """End the run as a terminator decided (or hand it back to the queue)."""
        if stop.ending is Ending.HAND_BACK:
            await self.commit(hand_back())
            return
        if stop.reason not in (StopReason.CANCELLED, StopReason.END_TURN):
            log.warning("run %s stopped: %s", self.run.id, stop.reason)
        if stop.ending is Ending.SUMMARISE:
            await self._summarise(stop)
            return
        await self._settle(stop)

    async def _summarise(self, stop: Stop) -> None:
        """One final turn without tools, and its text is the result."""
        await self.commit(
            Boundary(
                StepKind.INPUT,
                messages=[Message.user_text(SUMMARY_PROMPT)],
                events=[("agent.exhaustion.soft_time_limit", {})],
            )
        )
        response = await self.call_llm(with_tools=False)
        call = self.model.account(response.model, response.usage)
        text = "".join(b.text for b in response.content if isinstance(b, TextBlock))
        message = Message(role="assistant", content=[TextBlock(text=text or "(no summary)")])
        await self._settle(
            replace(
                stop,
                result=text,
                messages=(message,),
                counters=counted(self.run, call),
                call=call,
            )
        )

    async def call_llm(self, *, with_tools: bool, shape: CallShape = PLAIN) -> LLMResponse:
        """The model's response; `CancelledDuringCall` when a person cancels first."""
        call = self.model.complete(
            await self.model.frame(),
            self.history,
            self.watchers,
            run=self.run,
            remaining_s=self.remaining_s(),
            with_tools=with_tools,
            shape=shape,
        )
        deps = self.deps
        return await unless_cancelled(
            call,
            run_id=self.run.id,
            bus=deps.bus,
            sessionmaker=deps.sessionmaker,
            poll_s=deps.cancel_poll_s,
        )

    def _abandoned_call(self) -> Stop:
        """The run was cancelled during an LLM call: it settles at once, and what is known
        of the abandoned call's usage (its input, at least) is counted."""
        usage = self.model.usage_in_flight
        call = self.model.account(self.model.model_in_flight, usage)
        abandoned = {
            "reason": "cancelled",
            "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
        }
        return Stop(
            Ending.SETTLE,
            RunStatus.CANCELLED,
            StopReason.CANCELLED,
            event=("agent.llm.abandoned", abandoned),
            counters=with_usage(self.run, call),
            call=call,
        )

    async def recover_context(self) -> None:
        """Before an LLM call: commit what the recovery ladder did with a `compaction`
        checkpoint. R3's forced `ask_human` is kept in the watchers, so a crash before the
        call does not lose it."""
        recovery = await self.model.recover(
            await self.model.frame(),
            self.history,
            self.watchers,
            through=self.through,
            iteration=self.run.iteration,
        )
        if recovery is not None:
            await self.commit(*recovery_boundary(recovery, self.watchers))

    def _elapsed_s(self) -> float:
        """Time limits bound one execution (a worker's time), as a task's time limit would:
        a run that waited on a human is not charged for the wait, nor for rate limits and
        outages waited out in persistent mode."""
        elapsed = (self.deps.clock() - self.execution_started).total_seconds()
        return elapsed - self.model.waited_s

    def remaining_s(self) -> float:
        """Seconds left before the hard time limit (bounding an LLM call or a tool)."""
        return max(0.001, self.agent.limits.hard_time_limit_s - self._elapsed_s())

    async def record_response(self, response: LLMResponse) -> bool:
        """Persist the assistant message before any of its tools run; True when it is the
        final answer (and the run is settled)."""
        message = Message(role="assistant", content=response.content)
        call = self.model.account(response.model, response.usage)
        counters = counted(self.run, call)
        if message.tool_uses:
            # The response and the start of its tool calls are durable before any tool runs.
            await self.commit(
                Boundary(
                    StepKind.LLM_RESPONSE,
                    messages=[message],
                    run_values=counters,
                    started=message.tool_uses,
                    events=started_events(message.tool_uses),
                    call=call,
                )
            )
            return False
        answer = Stop(Ending.SETTLE, RunStatus.COMPLETED, StopReason.END_TURN, message.text)
        await self._settle(replace(answer, messages=(message,), counters=counters, call=call))
        return True

    async def record_turn(
        self,
        response: LLMResponse,
        *,
        after: list[Message],
        run_values: dict[str, Any],
        events: list[StreamEvent],
    ) -> None:
        """Persist the assistant message, and what the loop kind answers it with (`after`),
        with its state (`run_values`), without settling the run: its tool calls, if any,
        are answered in `after` (none runs)."""
        message = Message(role="assistant", content=response.content)
        call = self.model.account(response.model, response.usage)
        await self.commit(
            Boundary(
                StepKind.LLM_RESPONSE,
                messages=[message, *after],
                run_values=counted(self.run, call) | run_values,
                events=events,
                call=call,
            )
        )

    async def note(
        self, *, messages: list[Message], run_values: dict[str, Any], events: list[StreamEvent]
    ) -> None:
        """Commit the loop kind's own messages (an input the model answers next) and state."""
        kind = StepKind.INPUT if messages else StepKind.NOTE
        await self.commit(Boundary(kind, messages=messages, run_values=run_values, events=events))

    async def run_batch(self, content: list[Block]) -> BatchEnd:
        return await self.batch.run(content)

    async def went_on(self, end: BatchEnd) -> bool:
        """After a tool batch: False when the run paused for a human, or (stagnant) is
        settled here."""
        if end is BatchEnd.STAGNANT:
            log.warning("run %s stopped: stagnation", self.run.id)
            result = last_assistant_text(self.history)
            await self._settle(
                Stop(Ending.SETTLE, RunStatus.COMPLETED, StopReason.STAGNATION, result)
            )
        return end is BatchEnd.RECORDED

    def journal_changed(self) -> None:
        self.model.journal_changed()

    async def _event_now(self, event_type: str, data: dict[str, Any]) -> None:
        """An event outside any boundary (a retry, a fallback), fenced like the rest."""
        await self.commit(Boundary(StepKind.NOTE, events=[(event_type, data)]))

    # -- settling --------------------------------------------------------------------

    async def _settle(self, stop: Stop) -> None:
        """The run's last boundary (or, for a failure with retries left, its return to the
        queue)."""
        assert stop.status is not None
        error = (stop.reason or StopReason.INTERNAL, stop.error) if stop.error else None
        boundary = settled(
            self.run,
            self.history,
            stop.status,
            self.deps.clock(),
            policy=self.deps.run_retry,
            stop_reason=stop.reason,
            result=stop.result,
            error=error,
            messages=list(stop.messages),
            extra=stop.counters,
            event=stop.event,
            retryable=stop.retryable,
        )
        crash_point("before_final")
        await self.commit(replace(boundary, call=stop.call), stop.watchers)

    async def _quietly(self, stop: Stop) -> None:
        """Settle after a failure, unless the lease is already gone."""
        try:
            await self.stop(stop)
        except LeaseLost:
            log.warning("run %s: lease lost before it could be settled", self.run.id)
