"""hybrid: plan_execute with a short plan and short steps, checked after each one.

    plan of 3 to 7 steps (`submit_plan`, forced; asked again once when invalid)
    → per step: ReAct turns on the executor, at most `max_turns_per_step`; a step that
      uses them without answering has failed, as one whose executor calls `step_failed`
    → a checkpoint after each completed step (the progress so far on the plan, and the
      event `plan.checkpoint`); a failed step is replanned there (at most `max_replans`)
    → with `allow_replan_on_completion`, the planner is asked once, when every step is
      done, whether the task needs more: it answers in text, or submits the steps still
      to do (a replan)
    → the last step's result is the run's

A step's end is a boundary that holds the plan and its checkpoint, so it is where a run
may be inspected (`GET /v1/runs/{id}`), paused or resumed.
"""

from __future__ import annotations

from app.agents.schemas import PlanExecuteSettings
from app.runs.loop.kinds import plan as plans
from app.runs.loop.kinds.plan_execute import PlanExecute

PLAN_SIZE = plans.PlanSize(fewest=3, most=7)


class Hybrid(PlanExecute):
    size = PLAN_SIZE
    checkpoints = True

    def turn_limit(self, settings: PlanExecuteSettings) -> int | None:
        return settings.max_turns_per_step

    def reviews(self, settings: PlanExecuteSettings) -> bool:
        return settings.allow_replan_on_completion
