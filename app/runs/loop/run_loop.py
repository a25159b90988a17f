"""The agent loop for one claimed run.

    terminators (cancel, errors, time, iterations) → LLM call → llm_response boundary
    → tool batch (ledger start committed first) → tool_result boundary → repeat

A cancel is seen at each boundary, and also during an LLM call, which it abandons (a
model call has no side effects; see runs/loop/cancel_watch.py). A response that came after
the cancel is kept, but none of its tool calls start.

Each boundary is one transaction (messages, ledger rows, checkpoint, run row, events),
fenced by the run's lease: a worker that lost its lease writes nothing more. Resuming and
running are the same path: answered tool calls are read back from the ledger, not re-run.

`RunLoop` sets a run up (its agent, tools, model, resume point and loop kind) and hands it
to its kind, which drives the turns through `LoopHost`: the turns and the run's endings
are `Turns` (runs/loop/turns.py), which `RunLoop` extends. The rest is in units of their
own: the checks that may end the run at a boundary (runs/loop/terminators.py), the LLM
calls and context recovery (runs/loop/model_calls.py), what a resumed run finds
(runs/loop/resume.py), a tool batch (runs/loop/tool_batch.py, which sees the loop through
`BatchHost`), and the boundaries that take a run out of `running` (runs/loop/exits.py).
"""

from __future__ import annotations

import asyncio
import logging

from app.agents.store import agents as agent_store
from app.core.crashpoints import crash_point
from app.core.messages import Message
from app.core.states import StopReason
from app.core.vocabulary import StepKind
from app.db.outage import connection_lost
from app.llm.policy import PERMANENT_FAILURES
from app.llm.provider import ProviderUnavailable
from app.llm.providers.registry import load_sdks
from app.llm.resilient import LLMCallFailed
from app.runs.loop import resume, terminators
from app.runs.loop.boundary import Boundary
from app.runs.loop.budget_guard import BudgetExhausted, BudgetGuard
from app.runs.loop.cancel_watch import CancelledDuringCall
from app.runs.loop.deps import LeaseLost, prompt_hash
from app.runs.loop.kinds import registry
from app.runs.loop.mcp_servers import run_tools
from app.runs.loop.model_calls import (
    ModelCalls,
)
from app.runs.loop.terminators import AtBoundary, Ending, Stop, failed
from app.runs.loop.tool_batch import ToolBatch
from app.runs.loop.turns import Turns
from app.runs.loop.watchers import Watchers
from app.runs.schemas.runs import LoopSelection, Usage
from app.runs.store import conversations, history
from app.runs.store import journal as journal_store
from app.runs.tools.mcp.errors import McpUnavailable
from app.telemetry import spans

log = logging.getLogger(__name__)


class RunLoop(Turns):
    """Drives one claimed run until it settles, pauses, or loses its lease."""

    trace: spans.RunSpan = spans.NO_SPAN  # this execution's span, when tracing

    # -- entry -----------------------------------------------------------------------

    async def execute(self) -> None:
        with spans.run_execution(self.run, self.owner) as self.trace:
            await self._drive()
            self.trace.ended(self.run)

    async def _drive(self) -> None:
        try:
            await self._execute()
        except LeaseLost:
            log.warning("run %s: lease lost; leaving it to its new owner", self.run.id)
        except asyncio.CancelledError:
            raise
        except CancelledDuringCall:
            await self._quietly(self._abandoned_call())
        except TimeoutError:
            await self._quietly(terminators.out_of_time(self.agent.limits))
        except BudgetExhausted as exc:
            await self._quietly(exc.stop())
        except LLMCallFailed as exc:
            retryable = exc.error_class not in PERMANENT_FAILURES  # a refused request is final
            await self._quietly(failed(StopReason.PROVIDER_ERROR, str(exc), retryable=retryable))
        except ProviderUnavailable as exc:
            # A configuration mistake: retrying with backoff would only hide it for minutes.
            message = f"{exc}; fix the configuration, then retry the run"
            unavailable = failed(StopReason.PROVIDER_UNAVAILABLE, message, retryable=False)
            await self._quietly(unavailable)
        except Exception as exc:
            if connection_lost(exc):
                # A read the database could not answer is not the run's failure: it goes
                # back to the head of its lane (the commit waits for the database while
                # the lease lasts) and resumes from its last boundary.
                log.warning(
                    "run %s: database connection lost (%s); handing it back", self.run.id, exc
                )
                await self._quietly(Stop(Ending.HAND_BACK))
                return
            log.exception("run %s failed", self.run.id)
            await self._quietly(failed(StopReason.INTERNAL, f"{type(exc).__name__}: {exc}"))
        finally:
            if self.servers is not None:  # every way out stops the run's MCP servers
                await self.servers.close()

    async def _execute(self) -> None:
        deps = self.deps
        crash_point("after_claim")
        self.execution_started = deps.clock()
        conversation_id = self.run.conversation_id
        async with deps.sessionmaker() as session:
            agent = await agent_store.get_agent(session, self.run.agent_id)
            self.history, self.through = await conversations.read_context(session, conversation_id)
            checkpoint = await history.checkpoint(session, self.run.id)
            journal = await journal_store.read_journal(session, conversation_id)
        self.transcript_count = self.through + 1  # the live context reaches the last message
        if checkpoint.iteration is not None:  # where the history left its counters
            usage = Usage.model_validate(checkpoint.usage or {})
            self.run = self.run.model_copy(
                update={"iteration": checkpoint.iteration, "usage": usage}
            )
        if agent is None:
            missing = failed(StopReason.AGENT_MISSING, "the agent was deleted", retryable=False)
            await self._settle(missing)
            return
        self.system_hash = prompt_hash(agent.system_prompt)
        budgets = BudgetGuard(deps, agent, self.run.lane)
        downgrade = self.run.model_downgrade or await budgets.downgrade(self.run)
        if downgrade is not None:  # the run uses the cheaper model, and its tier's prompt
            model = agent.model.model_copy(update={"name": downgrade.to_model})
            # for every call: plan_execute's planner and executor too
            plain = agent.plan_execute.model_copy(
                update={"planner_model": None, "executor_model": None}
            )
            agent = agent.model_copy(update={"model": model, "plan_execute": plain})
        try:
            tools = await run_tools(deps, self.run.id, agent, self._event_now)
        except McpUnavailable as exc:
            reason, retryable = StopReason.TOOLS_UNAVAILABLE, exc.retryable
            await self._settle(failed(reason, str(exc), retryable=retryable))
            return
        self.agent, self.tools, self.servers = tools.agent, tools.runner, tools.servers
        agent = self.agent
        self.trace.agent(agent.name, agent.model.name)
        self.watchers = Watchers.load(checkpoint.loop_counters or None)
        if checkpoint.loop_counters:
            self.loop_written = self.watchers.counters
        fallback = agent.model.fallback_model()
        await load_sdks(agent.model.provider, *([fallback.provider] if fallback else []))
        self.model = ModelCalls(
            deps,
            agent,
            self.run.id,
            self.run.lane,
            conversation_id,
            journal,
            self.watchers,
            budgets,
            lease_lost=self.lease_lost,
            on_event=self._event_now,
            tools=self.tools.registry,
        )
        self.batch = ToolBatch(
            self,
            agent,
            tools=self.tools,
            approvals=deps.approvals,
            services=deps.tool_services,
            stagnation=deps.stagnation,
            max_error_batches=deps.max_error_batches,
            owner=self.owner,
            token=self.token,
        )
        # Its first boundary (the input) was its first resume point, with its first message.
        started_here = checkpoint.kind is not None
        kind = self.run.execution_loop or await registry.selection(
            deps, agent, self.run.lane, budgets
        )
        await self._start(started_here, kind)
        if tools.listing is not None:
            await self.commit(tools.listing)
        if downgrade is not None and self.run.model_downgrade is None:
            record = downgrade.model_dump(mode="json")
            await self.commit(
                Boundary(
                    StepKind.NOTE,
                    run_values={"model_downgrade": record},
                    events=[("agent.budget.downgraded", record)],
                )
            )
        if started_here and self.run.system_prompt_hash != self.system_hash:
            await self.commit(resume.prompt_drift_pause())
            return
        if not await self._answer_pending_calls():
            return
        kinds = deps.loop_kinds or registry.LOOP_KINDS
        await kinds.loop_of(kind.kind).drive(self)

    # -- boundaries ------------------------------------------------------------------

    async def _start(self, started_here: bool, kind: LoopSelection) -> None:
        """The run's start (or its resumption), fixing its loop kind the first time."""
        event = (
            "agent_run.started",
            {"attempt": self.run.attempt, "resumed": started_here},
        )
        fixed = {} if self.run.execution_loop else {"execution_loop": kind.model_dump(mode="json")}
        if started_here:
            # A prompt change a human accepted (the hash was cleared) is adopted here.
            accepted = (
                {} if self.run.system_prompt_hash else {"system_prompt_hash": self.system_hash}
            )
            await self.commit(Boundary(StepKind.NOTE, run_values=accepted | fixed, opening=[event]))
            return
        await self.commit(
            Boundary(
                StepKind.INPUT,
                messages=[Message.user_text(self.run.input)],
                run_values={"system_prompt_hash": self.system_hash} | fixed,
                opening=[event],
            )
        )

    async def _answer_pending_calls(self) -> bool:
        """A resumed run answers the calls its transcript left open (see runs/loop/resume.py).
        False when the run paused."""
        pending = await resume.pending_calls(self.deps.sessionmaker, self.run.id, self.history)
        if pending is None:
            return True
        if pending.unsafe is not None:
            await self.commit(resume.unsafe_pause(pending.unsafe))
            return False
        if pending.missing:
            end = await self.batch.run(
                self.history[-1].content,
                only=pending.missing,
                answered=pending.answered,
                declined=pending.declined,
            )
        else:
            end = await self.batch.record(pending.calls, pending.answered, [], [], pending.declined)
        return await self.went_on(end)

    def at_boundary(self) -> AtBoundary:
        return AtBoundary(
            run=self.run,
            limits=self.agent.limits,
            watchers=self.watchers,
            history=self.history,
            elapsed_s=self._elapsed_s(),
            shutting_down=self.stop_requested.is_set(),
            max_error_batches=self.deps.max_error_batches,
        )
