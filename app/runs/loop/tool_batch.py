"""One tool batch of a run's loop: the calls of an assistant message, each through the
approval gate and the tool runner, then the batch's `tool_result` boundary with what the
watchers make of it (loop notes, stagnation, the error streak).

    (resuming: ledger start of the calls to run again) → approval gate → tool runner
    → human_pause (a call waits on a person) | tool_result boundary (+ watchers' verdict)

The batch does not settle the run: it says how it ended (`BatchEnd`) and the loop, which
owns the run's ending, settles a stagnant one. What it needs of the loop is `BatchHost`:
the run and the watchers' state as of the last commit, the commit itself, the time left,
and word that the journal changed.
"""

from __future__ import annotations

import asyncio
import enum
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, Protocol

from app.agents.schemas import AgentRead
from app.approvals.engine.approvals import ApprovalCommands
from app.core.crashpoints import crash_point
from app.core.messages import ToolUseBlock, results_message
from app.core.states import WaitReason
from app.core.streams import StreamEvent
from app.core.vocabulary import StepKind
from app.runs.loop import approval_gate
from app.runs.loop.boundary import Boundary, started_events
from app.runs.loop.cancel_watch import CancelFlag
from app.runs.loop.exits import NOT_RUN, completed_events, human_pause, waiting_on_call
from app.runs.loop.loop_detection import with_notes
from app.runs.loop.stagnation import StagnationPolicy
from app.runs.loop.tool_runner import ToolOutcome, ToolRunner
from app.runs.loop.watchers import Watchers
from app.runs.schemas.runs import RunRead
from app.runs.tools.base import ToolContext
from app.runs.tools.journal_tools import JOURNAL_WRITERS
from app.runs.tools.registry import ToolRegistry


class BatchEnd(enum.Enum):
    RECORDED = "recorded"  # the results are committed: the loop goes on
    PAUSED = "paused"  # a call waits on a person; the batch's other results are kept
    STAGNANT = "stagnant"  # recorded, and the stagnation detector stops the run


class BatchHost(Protocol):
    """The part of the loop a batch works with (`RunLoop` provides it)."""

    @property
    def run(self) -> RunRead:
        """The run as the last commit returned it."""
        ...

    # The watchers' state: the batch withdraws a degraded tool here at once, so that the
    # batch's later calls, and whatever commits next (a retry event, the pause, the
    # results), see it.
    watchers: Watchers

    async def commit(self, boundary: Boundary, watchers: Watchers | None = None) -> RunRead:
        """Commit one boundary, fenced by the lease; `watchers`: the state it records."""
        ...

    def remaining_s(self) -> float:
        """Seconds left before the run's hard time limit."""
        ...

    def journal_changed(self) -> None:
        """A journal tool wrote: the next LLM call reads the journal again."""
        ...

    def cancel_flag(self) -> AbstractContextManager[CancelFlag]:
        """Says, between calls, whether a person cancelled the run meanwhile."""
        ...


def may_run_again(registry: ToolRegistry, call: ToolUseBlock) -> bool:
    """Whether `call` may simply run again when a crash cut it short (kept in the ledger,
    as `idempotent`, when it starts): it is idempotent, or its remote deduplicates it."""
    tool = registry.get(call.name)
    return tool is not None and tool.may_send_again(call.input)


class ToolBatch:
    """Runs the tool batches of one execution of a run (one agent, one lease)."""

    def __init__(
        self,
        host: BatchHost,
        agent: AgentRead,
        *,
        tools: ToolRunner,
        approvals: ApprovalCommands | None,
        services: Any,
        stagnation: StagnationPolicy,
        max_error_batches: int,
        owner: str,
        token: int,
    ) -> None:
        self.host = host
        self.agent = agent
        self.tools = tools
        self.approvals = approvals
        self.services = services
        self.stagnation = stagnation
        self.max_error_batches = max_error_batches
        self.owner = owner
        self.token = token

    async def run(
        self,
        content: list[Any],
        *,
        only: list[ToolUseBlock] | None = None,
        answered: dict[str, tuple[str, bool]] | None = None,
        declined: set[str] | None = None,
    ) -> BatchEnd:
        """Run the batch of `content` (an assistant message's blocks). Resuming: `only`
        the calls to run again, `answered` from the ledger, of which `declined` were
        refused by a person."""
        calls = [b for b in content if isinstance(b, ToolUseBlock)]
        to_run = calls
        if only is not None:  # resuming: (re)start these in the ledger before they run
            to_run = only
            await self.host.commit(
                Boundary(StepKind.NOTE, started=only, events=started_events(only))
            )
        outcomes: dict[str, ToolOutcome] = {}
        pause: tuple[ToolUseBlock, ToolOutcome] | None = None
        with self.host.cancel_flag() as cancel:
            for call in to_run:
                # A call under way finishes; once a person cancelled, no other one starts.
                outcome = NOT_RUN if await cancel.raised() else await self._run_one(call)
                if outcome.pauses_run:  # the first pause wins; later ones ask again on resume
                    pause = pause or (call, outcome)
                    continue
                outcomes[call.id] = outcome
        if pause is not None:
            call, question = pause
            waiting = question.waiting_for or waiting_on_call(
                call, question.content, WaitReason.ASK_HUMAN
            )
            await self.host.commit(human_pause(waiting, completed=outcomes))
            return BatchEnd.PAUSED
        crash_point("during_tool")  # the tools ran; their completion is not recorded yet
        results = {**(answered or {}), **{i: (o.content, o.is_error) for i, o in outcomes.items()}}
        declined = (declined or set()) | {i for i, o in outcomes.items() if o.declined}
        return await self.record(
            calls, results, list(outcomes.items()), completed_events(outcomes), declined
        )

    async def record(
        self,
        calls: list[ToolUseBlock],
        results: dict[str, tuple[str, bool]],
        completed: list[tuple[str, ToolOutcome]],
        events: list[StreamEvent],
        declined: set[str],
    ) -> BatchEnd:
        """The tool_result boundary of a batch, with what the watchers make of it: their
        notes ride in the results message; a stagnant run is to end here. A batch that
        brings the error streak to its limit is recorded whole (every call keeps its
        result), and the loop's boundary check that follows fails the run."""
        host = self.host
        verdict = host.watchers.after_batch(
            calls,
            results,
            self.stagnation,
            declined=declined,
            max_error_batches=self.max_error_batches,
        )
        message = results_message(calls, results, "Error: no result was recorded")
        await host.commit(
            Boundary(
                StepKind.TOOL_RESULT,
                messages=[with_notes(message, verdict.notes)],
                completed=completed,
                events=[*events, *verdict.events],
            ),
            verdict.watchers,
        )
        return BatchEnd.RECORDED if verdict.stop is None else BatchEnd.STAGNANT

    async def _run_one(self, call: ToolUseBlock) -> ToolOutcome:
        host = self.host
        gated = await approval_gate.gate(
            call,
            self.tools.registry.get(call.name),
            run=host.run,
            allowed=self.agent.tools,
            auto_approved=self.agent.auto_approve,
            approvals=self.approvals,
        )
        if isinstance(gated, ToolOutcome):
            return gated
        call = gated  # with the arguments a person approved, if one was asked
        run = host.run
        context = ToolContext(
            run_id=run.id,
            tool_call_id=call.id,
            agent_id=self.agent.id,
            conversation_id=run.conversation_id,
            services=self.services,
            lease_owner=self.owner,
            lease_token=self.token,
        )

        async def on_retry(data: dict[str, Any]) -> None:
            await self._event_now("agent.tool.retry", data)

        async with asyncio.timeout(host.remaining_s()):
            outcome = await self.tools.run(
                call,
                context,
                allowed=set(self.agent.tools),
                on_retry=on_retry,
                on_event=self._event_now,
                unavailable=host.watchers.degraded,
            )
        if call.name in JOURNAL_WRITERS and not outcome.is_error:
            host.journal_changed()
        if outcome.degraded:  # withdrawn from now on; the next checkpoint records it
            host.watchers = replace(host.watchers, degraded=host.watchers.degraded | {call.name})
        return outcome

    async def _event_now(self, event_type: str, data: dict[str, Any]) -> None:
        """An event outside any boundary (a tool's retry, fallback, breaker), fenced like
        the rest."""
        await self.host.commit(Boundary(StepKind.NOTE, events=[(event_type, data)]))
