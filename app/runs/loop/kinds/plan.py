"""The plan of a `plan_execute` or `hybrid` run as data: the planner's `submit_plan` tool,
reading what it submitted (the error text to ask again with), and the moves of a plan, each
a pure function returning the new plan (its steps follow `PLAN_STEP_ALLOWED`):

    from_draft → start(i) → complete(i, result) [→ checkpoint(i)] | fail(i, reason)
    → replan(draft) → …

A replan keeps the completed steps and replaces the rest with the new plan's steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from app.core.states import PLAN_STEP_ALLOWED, PlanStepStatus
from app.llm.provider import ToolChoice, ToolSpec
from app.runs.schemas.plans import MAX_PLAN_STEPS, Checkpoint, PlanDraft, PlanStep, RunPlan

SUBMIT_PLAN = "submit_plan"
FORCE_PLAN = ToolChoice(type="tool", name=SUBMIT_PLAN)

STEP_FAILED = "step_failed"
STEP_FAILED_TOOL = ToolSpec(
    name=STEP_FAILED,
    description="Say that the current step of the plan cannot be done, and why: the plan "
    "is then revised. Call it only when the step's acceptance criteria cannot be met.",
    input_schema={
        "type": "object",
        "properties": {"reason": {"type": "string", "description": "Why it cannot be done."}},
        "required": ["reason"],
    },
)

Status = PlanStepStatus


@dataclass(frozen=True)
class PlanSize:
    """How many steps a plan may have in all: a replan's steps join the completed ones it
    keeps, so what it may submit depends on them (`drafts`)."""

    fewest: int = 1
    most: int = MAX_PLAN_STEPS

    def drafts(self, plan: RunPlan | None) -> range:
        """How many steps the planner may submit now (empty: none)."""
        kept = 0 if plan is None else sum(s.status is Status.COMPLETED for s in plan.steps)
        return range(max(1, self.fewest - kept), self.most - kept + 1)


def submit_plan_tool(steps: range) -> ToolSpec:
    """The planner's tool, its schema saying how many steps it may submit now."""
    schema = PlanDraft.model_json_schema()
    schema["properties"]["steps"] |= {"minItems": steps.start, "maxItems": steps.stop - 1}
    return ToolSpec(
        name=SUBMIT_PLAN,
        description=f"Submit the plan: {steps.start} to {steps.stop - 1} steps that carry out "
        "the task, in order, each with its goal and the acceptance criteria its result must "
        "meet.",
        input_schema=schema,
    )


def read_draft(arguments: dict[str, Any], steps: range) -> PlanDraft | str:
    """The submitted plan, or what is wrong with it (told to the planner when it is asked
    again), one line per problem. `steps`: how many it may have."""
    try:
        draft = PlanDraft.model_validate(arguments)
    except ValidationError as exc:
        problems = [f"{'.'.join(map(str, e['loc'])) or 'plan'}: {e['msg']}" for e in exc.errors()]
        return "The plan is invalid:\n" + "\n".join(problems)
    if len(draft.steps) not in steps:
        return (
            f"The plan is invalid:\nsteps: {len(draft.steps)} were submitted; submit "
            f"{steps.start} to {steps.stop - 1}"
        )
    return draft


def from_draft(draft: PlanDraft) -> RunPlan:
    steps = [PlanStep(**s.model_dump()) for s in draft.steps]
    return RunPlan(steps=steps, current_step=0)


def _moved(plan: RunPlan, index: int, target: Status, **fields: Any) -> RunPlan:
    step = plan.steps[index]
    if target not in PLAN_STEP_ALLOWED[step.status]:
        raise ValueError(f"step {index} cannot go from {step.status.value} to {target.value}")
    steps = list(plan.steps)
    steps[index] = step.model_copy(update={"status": target, **fields})
    return plan.model_copy(update={"steps": steps})


def start(plan: RunPlan, index: int, iteration: int) -> RunPlan:
    """The step runs from the run's `iteration` on (what its turn limit counts from)."""
    return _moved(plan, index, Status.RUNNING, started_at_iteration=iteration)


def complete(plan: RunPlan, index: int, result: str) -> RunPlan:
    """The step is done; the next one (if any) is current."""
    done = _moved(plan, index, Status.COMPLETED, result=result)
    following = index + 1 if index + 1 < len(plan.steps) else None
    return done.model_copy(update={"current_step": following})


def fail(plan: RunPlan, index: int, reason: str) -> RunPlan:
    """The step cannot be done: no step is current until a replan."""
    failed = _moved(plan, index, Status.FAILED, result=reason)
    return failed.model_copy(update={"current_step": None})


def replan(plan: RunPlan, draft: PlanDraft) -> RunPlan:
    """The completed steps, then the new plan's; the first new step is current."""
    kept = [s for s in plan.steps if s.status is Status.COMPLETED]
    fresh = [PlanStep(**s.model_dump()) for s in draft.steps]
    update = {"steps": kept + fresh, "current_step": len(kept), "replans": plan.replans + 1}
    return plan.model_copy(update=update)


def checkpoint(plan: RunPlan, index: int) -> RunPlan:
    """After step `index` completed: the progress so far, recorded on the plan."""
    done = [(i, s) for i, s in enumerate(plan.steps) if s.status is Status.COMPLETED]
    lines = [f"{len(done)} of {len(plan.steps)} steps done."]
    lines += [f"Step {i + 1} ({s.goal}): {_clipped(s.result or '')}" for i, s in done]
    mark = Checkpoint(step=index, summary="\n".join(lines))
    return plan.model_copy(update={"checkpoints": [*plan.checkpoints, mark]})


def _clipped(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def step_prompt(plan: RunPlan, index: int, turns: int | None) -> str:
    """The executor's input for a step: its goal and acceptance criteria, how to end it,
    and how many turns it may take (None: no limit of its own)."""
    step = plan.steps[index]
    criteria = "\n".join(f"- {c}" for c in step.acceptance_criteria)
    limit = "" if turns is None else f" You have {turns} turns for it."
    return (
        f"Step {index + 1} of {len(plan.steps)} of the plan: {step.goal}\n"
        f"Acceptance criteria:\n{criteria}\n"
        "Work on this step only. When it is done, answer in text with its result, meeting "
        f"every criterion. If it cannot be done, call {STEP_FAILED} with the reason.{limit}"
    )


def final_result(plan: RunPlan) -> str | None:
    """The last step's result, once every step is completed."""
    if not plan.steps or any(s.status is not Status.COMPLETED for s in plan.steps):
        return None
    return plan.steps[-1].result
