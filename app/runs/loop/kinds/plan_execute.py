"""plan_execute: a planner model's plan, its steps carried out in order on the executor model.

    plan (`submit_plan`, forced; asked again once when invalid)
    → per step: its input → ReAct turns on the executor until it answers in text (the
      step's result) or calls `step_failed` → a replan (at most `max_replans`) → …
    → the last step's result is the run's

The plan is the run's `plan` column, written in the boundary of the move it describes (with
the messages of that move), so a resumed run goes on in the step it was in: the transcript
holds the step's turns so far. The loop keeps nothing of its own between boundaries.
Terminators, context recovery, approvals, the ledger and cancellation are ReAct's, through
the same host. `Hybrid` (hybrid.py) is this loop with its own rules: the plan's size, a
turn limit per step, a checkpoint after each step, a review on completion.
"""

from __future__ import annotations

from typing import Any

from app.agents.schemas import PlanExecuteSettings
from app.core.crashpoints import crash_point
from app.core.messages import Block, Message, TextBlock, ToolResultBlock, ToolUseBlock
from app.core.states import PlanStepStatus, RunStatus, StopReason
from app.core.streams import StreamEvent
from app.llm.provider import LLMResponse
from app.runs.loop import terminators
from app.runs.loop.kinds import plan as plans
from app.runs.loop.kinds.protocol import LoopHost
from app.runs.loop.model_calls import CallShape
from app.runs.loop.terminators import Ending, Stop, failed
from app.runs.schemas.plans import PlanDraft, RunPlan

NO_PLAN = f"No plan was submitted: call {plans.SUBMIT_PLAN} with the plan."
NOT_RUN = "Not run: only the planning tool is offered now."
REVIEW = (
    "Every step of the plan is done. If the task is complete, answer in text; if it needs "
    f"more, call {plans.SUBMIT_PLAN} with the steps still to do."
)


def _values(plan: RunPlan) -> dict[str, Any]:
    return {"plan": plan.model_dump(mode="json")}


def _step(plan: RunPlan, index: int, **fields: Any) -> dict[str, Any]:
    return {"step": index, "goal": plan.steps[index].goal, **fields}


def _uses(response: LLMResponse) -> list[ToolUseBlock]:
    return [b for b in response.content if isinstance(b, ToolUseBlock)]


async def _stopped(host: LoopHost) -> bool:
    """Whether a terminator ended the run here (and it is stopped)."""
    stop = terminators.first_stop(host.at_boundary())
    if stop is not None:
        await host.stop(stop)
    return stop is not None


class PlanExecute:
    """The loop; its rules are what `Hybrid` changes."""

    size = plans.PlanSize()
    checkpoints = False  # a progress summary after each completed step

    def turn_limit(self, settings: PlanExecuteSettings) -> int | None:
        """How many executor turns a step may take (None: only the run's limits count)."""
        return None

    def reviews(self, settings: PlanExecuteSettings) -> bool:
        """Whether the planner is asked, once every step is done, if the task needs more."""
        return False

    async def drive(self, host: LoopHost) -> None:
        plan = host.run.plan
        if plan is None:
            plan = await self._plan(host, None)
        while plan is not None:
            index = plan.current_step
            if index is None:
                if any(s.status is PlanStepStatus.FAILED for s in plan.steps):
                    plan = await self._replan(host, plan)  # a step failed
                    continue
                if self._may_review(host.agent.plan_execute, plan):
                    plan = await self._review(host, plan)
                    continue
                done = Stop(
                    Ending.SETTLE,
                    RunStatus.COMPLETED,
                    StopReason.END_TURN,
                    plans.final_result(plan),
                )
                await host.stop(done)
                return
            if plan.steps[index].status is PlanStepStatus.PENDING:
                if await _stopped(host):  # a step starts only if it may run
                    return
                plan = plans.start(plan, index, host.run.iteration)
                turns = self.turn_limit(host.agent.plan_execute)
                await host.note(
                    messages=[Message.user_text(plans.step_prompt(plan, index, turns))],
                    run_values=_values(plan),
                    events=[("plan.step.started", _step(plan, index))],
                )
            plan = await self._execute(host, plan, index)

    async def _execute(self, host: LoopHost, plan: RunPlan, index: int) -> RunPlan | None:
        """ReAct turns on the executor until the step is completed or failed (the plan
        after it), or the run stopped or paused (None)."""
        settings = host.agent.plan_execute
        shape = CallShape(model=settings.executor_model, tools=(plans.STEP_FAILED_TOOL,))
        limit = self.turn_limit(settings)
        while True:
            host.trace.turn(host.run.iteration)
            if await _stopped(host):
                return None
            started = plan.steps[index].started_at_iteration
            if limit is not None and started is not None and host.run.iteration - started >= limit:
                return await self._out_of_turns(host, plan, index, limit)
            await host.recover_context()
            response = await host.call_llm(with_tools=True, shape=shape)
            uses = _uses(response)
            failing = next((u for u in uses if u.name == plans.STEP_FAILED), None)
            if failing is not None:
                reason = str(failing.input.get("reason") or "no reason given")
                plan = plans.fail(plan, index, reason)
                answers: list[Block] = [
                    ToolResultBlock(
                        tool_use_id=u.id,
                        content=f"Recorded: step {index + 1} failed; the plan will be revised."
                        if u is failing
                        else "Not run: the step failed.",
                        is_error=u is not failing,
                    )
                    for u in uses
                ]
                await host.record_turn(
                    response,
                    after=[Message(role="user", content=answers)],
                    run_values=_values(plan),
                    events=[("plan.step.failed", _step(plan, index, reason=reason))],
                )
                return plan
            if not uses:
                text = "".join(b.text for b in response.content if isinstance(b, TextBlock))
                plan = plans.complete(plan, index, text)
                events: list[StreamEvent] = [
                    ("plan.step.completed", _step(plan, index, result=text))
                ]
                if self.checkpoints:
                    plan = plans.checkpoint(plan, index)
                    summary = plan.checkpoints[-1].summary
                    events.append(("plan.checkpoint", {"step": index, "summary": summary}))
                await host.record_turn(response, after=[], run_values=_values(plan), events=events)
                return plan
            await host.record_response(response)  # tool calls: never the final answer
            crash_point("after_llm_response")
            cancel = terminators.cancelled(host.at_boundary())
            if cancel is not None:
                await host.stop(cancel)
                return None
            if not await host.went_on(await host.run_batch(response.content)):
                return None
            crash_point("after_tool_result")

    async def _out_of_turns(self, host: LoopHost, plan: RunPlan, index: int, limit: int) -> RunPlan:
        """The step took its turns without an answer: it failed (the planner, asked next,
        reads why in the transcript)."""
        reason = f"the step used its {limit} turns (max_turns_per_step) without an answer"
        plan = plans.fail(plan, index, reason)
        await host.note(
            messages=[Message.user_text(f"Step {index + 1} stopped: {reason}.")],
            run_values=_values(plan),
            events=[("plan.step.failed", _step(plan, index, reason=reason))],
        )
        return plan

    def _may_review(self, settings: PlanExecuteSettings, plan: RunPlan) -> bool:
        """Once per run, while a replan is left and the plan may grow."""
        return (
            self.reviews(settings)
            and plan.review != "answered"
            and plan.replans < settings.max_replans
            and len(self.size.drafts(plan)) > 0
        )

    async def _review(self, host: LoopHost, plan: RunPlan) -> RunPlan | None:
        """The planner's answer to `REVIEW`: the plan as it is (a text answer), or more
        steps (a replan). A run resumed while asked asks no second time."""
        if plan.review is None:
            plan = plan.model_copy(update={"review": "asked"})
            await host.note(
                messages=[Message.user_text(REVIEW)], run_values=_values(plan), events=[]
            )
        answered = plan.model_copy(update={"review": "answered"})
        return await self._plan(host, answered, review=True)

    async def _replan(self, host: LoopHost, plan: RunPlan) -> RunPlan | None:
        limit = host.agent.plan_execute.max_replans
        if plan.replans >= limit:
            step = next(s for s in plan.steps if s.status is PlanStepStatus.FAILED)
            message = (
                f"the step {step.goal!r} failed ({step.result}) and no replan is left "
                f"(max_replans {limit})"
            )
            await host.stop(failed(StopReason.PLAN_FAILED, message, retryable=False))
            return None
        return await self._plan(host, plan)

    async def _plan(
        self, host: LoopHost, plan: RunPlan | None, *, review: bool = False
    ) -> RunPlan | None:
        """A plan from the planner (the first, or `plan` revised): asked again once when
        what it submitted is invalid, then the run fails. In a `review` it need not submit
        one: its text answer leaves `plan` as it is."""
        steps = self.size.drafts(plan)
        shape = CallShape(
            model=host.agent.plan_execute.planner_model,
            tools=(plans.submit_plan_tool(steps),),
            only=True,
            tool_choice=None if review else plans.FORCE_PLAN,
        )
        problem = NO_PLAN
        for _attempt in range(2):
            if await _stopped(host):
                return None
            await host.recover_context()
            response = await host.call_llm(with_tools=True, shape=shape)
            uses = _uses(response)
            submitted = next((u for u in uses if u.name == plans.SUBMIT_PLAN), None)
            draft = NO_PLAN if submitted is None else plans.read_draft(submitted.input, steps)
            others: list[Block] = [
                ToolResultBlock(tool_use_id=u.id, content=NOT_RUN, is_error=True)
                for u in uses
                if u is not submitted
            ]
            if review and submitted is None:  # the plan is complete as it stands
                assert plan is not None
                after = [Message(role="user", content=others)] if others else []
                await host.record_turn(response, after=after, run_values=_values(plan), events=[])
                return plan
            if isinstance(draft, PlanDraft):
                assert submitted is not None
                new = plans.from_draft(draft) if plan is None else plans.replan(plan, draft)
                event = (
                    ("plan.created", {"steps": len(new.steps)})
                    if plan is None
                    else ("plan.replanned", {"steps": len(new.steps), "replans": new.replans})
                )
                accepted = ToolResultBlock(tool_use_id=submitted.id, content="Plan accepted.")
                await host.record_turn(
                    response,
                    after=[Message(role="user", content=[accepted, *others])],
                    run_values=_values(new),
                    events=[event],
                )
                return new
            problem = draft
            answers: list[Block] = (
                [TextBlock(text=draft)]
                if submitted is None
                else [ToolResultBlock(tool_use_id=submitted.id, content=draft, is_error=True)]
            )
            await host.record_turn(
                response,
                after=[Message(role="user", content=[*answers, *others])],
                run_values={},
                events=[],
            )
        message = f"the planner gave no valid plan in two tries; the last: {problem}"
        await host.stop(failed(StopReason.PLAN_INVALID, message, retryable=False))
        return None
