"""Plans of the `plan_execute` and `hybrid` loops: what the planner submits (`PlanDraft`,
the input of its `submit_plan` tool), and the plan as a run keeps it (`RunPlan`): each
step's status and result, the current step, how many times it was replanned, and (hybrid)
its checkpoints and whether the planner reviewed it on completion."""

from __future__ import annotations

from typing import Annotated, Literal

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
    started_at_iteration: int | None = Field(
        None,
        description="The run's `iteration` when the step started (hybrid counts its turn "
        "limit from it); null until then.",
    )


class Checkpoint(BaseModel):
    """The progress of a `hybrid` run after one of its steps completed."""

    step: int = Field(description="The index of the step that completed.")
    summary: str = Field(description="The steps done so far, each with its result.")


class RunPlan(BaseModel):
    """A `plan_execute` or `hybrid` run's plan as it stands."""

    steps: list[PlanStep]
    current_step: int | None = Field(
        description="The index of the step that runs now or runs next; null when every "
        "step is done or one failed."
    )
    replans: int = Field(
        0, description="How many times a failed step (or hybrid's review) led to a new plan."
    )
    checkpoints: list[Checkpoint] = Field(
        default_factory=list, description="`hybrid`: one after each completed step."
    )
    review: Literal["asked", "answered"] | None = Field(
        None,
        description="`hybrid` with `allow_replan_on_completion`: the planner was asked, once "
        "every step was done, whether the task needs more steps (`asked`), and answered.",
    )
