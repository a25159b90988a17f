"""Plans of the `plan_execute` loop: what the planner submits (`PlanDraft`, the input of
its `submit_plan` tool), and the plan as a run keeps it (`RunPlan`): each step's status
and result, the current step, and how many times it was replanned."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.core.states import PlanStepStatus

Goal = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2_000)]
Criterion = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=1_000)]
MAX_PLAN_STEPS = 20


class StepDraft(BaseModel):
    model_config = ConfigDict(extra="forbid")

    goal: Goal = Field(description="What this step achieves, in one or two sentences.")
    acceptance_criteria: list[Criterion] = Field(
        min_length=1,
        max_length=10,
        description="How to tell the step is done: each a check its result must pass.",
    )


class PlanDraft(BaseModel):
    """The planner's plan: the steps, in the order they run."""

    model_config = ConfigDict(extra="forbid")

    steps: list[StepDraft] = Field(min_length=1, max_length=MAX_PLAN_STEPS)


class PlanStep(StepDraft):
    status: PlanStepStatus = PlanStepStatus.PENDING
    result: str | None = Field(
        None, description="The executor's result (completed), or why it failed (failed)."
    )


class RunPlan(BaseModel):
    """A `plan_execute` run's plan as it stands."""

    steps: list[PlanStep]
    current_step: int | None = Field(
        description="The index of the step that runs now or runs next; null when every "
        "step is done or one failed."
    )
    replans: int = Field(0, description="How many times a failed step led to a new plan.")
