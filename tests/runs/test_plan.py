"""A plan_execute run's plan as data: the submitted plan is validated (with an error text
the planner can act on), its steps move only as `PLAN_STEP_ALLOWED` says, and a replan
keeps the completed steps."""

from __future__ import annotations

import pytest

from app.core.states import PLAN_STEP_ALLOWED, PlanStepStatus
from app.runs.loop.kinds import plan
from app.runs.schemas.plans import MAX_PLAN_STEPS, PlanDraft

S = PlanStepStatus
ANY = plan.PlanSize().drafts(None)  # plan_execute's first plan: 1 to MAX_PLAN_STEPS steps
TWO = {
    "steps": [
        {"goal": "Find the figures", "acceptance_criteria": ["each quarter has a figure"]},
        {"goal": "Write the summary", "acceptance_criteria": ["under 200 words"]},
    ]
}


def _draft(*goals: str) -> PlanDraft:
    steps = [{"goal": g, "acceptance_criteria": ["done"]} for g in goals]
    return PlanDraft.model_validate({"steps": steps})


def test_a_valid_plan_is_read_and_starts_at_its_first_step() -> None:
    draft = plan.read_draft(TWO, ANY)
    assert isinstance(draft, PlanDraft)
    started = plan.from_draft(draft)
    assert started.current_step == 0 and started.replans == 0
    assert [s.status for s in started.steps] == [S.PENDING, S.PENDING]


@pytest.mark.parametrize(
    ("submitted", "problem"),
    [
        ({}, "steps: Field required"),
        ({"steps": []}, "steps: List should have at least 1 item"),
        ({"steps": [{"goal": "x"}]}, "steps.0.acceptance_criteria: Field required"),
        ({"steps": [{"goal": " ", "acceptance_criteria": ["y"]}]}, "steps.0.goal"),
        ({"steps": [{"goal": "x", "acceptance_criteria": []}]}, "acceptance_criteria"),
        ({"steps": [{"goal": "x", "acceptance_criteria": ["y"], "why": 1}]}, "steps.0.why"),
        (
            {"steps": [{"goal": "x", "acceptance_criteria": ["y"]}] * (MAX_PLAN_STEPS + 1)},
            f"at most {MAX_PLAN_STEPS} items",
        ),
    ],
)
def test_an_invalid_plan_says_what_is_wrong(submitted: dict[str, object], problem: str) -> None:
    read = plan.read_draft(submitted, ANY)
    assert isinstance(read, str) and read.startswith("The plan is invalid:")
    assert problem in read


def test_the_submit_plan_tool_takes_the_plan_schema() -> None:
    schema = plan.submit_plan_tool(range(3, 8)).input_schema
    assert schema["required"] == ["steps"]
    assert (
        schema["properties"]["steps"]["minItems"],
        schema["properties"]["steps"]["maxItems"],
    ) == (3, 7)
    assert plan.FORCE_PLAN.type == "tool" and plan.FORCE_PLAN.name == plan.SUBMIT_PLAN


def test_steps_run_in_order_and_the_last_result_is_the_run_s() -> None:
    p = plan.from_draft(_draft("a", "b"))
    p = plan.complete(plan.start(p, 0, 0), 0, "found")
    assert p.current_step == 1 and plan.final_result(p) is None
    p = plan.complete(plan.start(p, 1, 0), 1, "written")
    assert p.current_step is None
    assert [(s.status, s.result) for s in p.steps] == [
        (S.COMPLETED, "found"),
        (S.COMPLETED, "written"),
    ]
    assert plan.final_result(p) == "written"


def test_a_replan_keeps_the_completed_steps_and_replaces_the_rest() -> None:
    p = plan.complete(plan.start(plan.from_draft(_draft("a", "b", "c")), 0, 0), 0, "A")
    p = plan.fail(plan.start(p, 1, 0), 1, "no access")
    assert p.current_step is None and p.steps[1].result == "no access"
    p = plan.replan(p, _draft("b2", "c2"))
    assert [(s.goal, s.status) for s in p.steps] == [
        ("a", S.COMPLETED),
        ("b2", S.PENDING),
        ("c2", S.PENDING),
    ]
    assert p.current_step == 1 and p.replans == 1


@pytest.mark.parametrize(
    ("current", "target"),
    # Nothing moves a step back to pending: a replan makes new steps.
    [(c, t) for c in S for t in S if t not in PLAN_STEP_ALLOWED[c] and t is not S.PENDING],
)
def test_a_step_moves_only_as_the_table_allows(current: S, target: S) -> None:
    p = plan.from_draft(_draft("a"))
    step = p.steps[0].model_copy(update={"status": current})
    p = p.model_copy(update={"steps": [step]})
    move = {
        S.RUNNING: lambda: plan.start(p, 0, 0),
        S.COMPLETED: lambda: plan.complete(p, 0, "r"),
        S.FAILED: lambda: plan.fail(p, 0, "r"),
    }
    with pytest.raises(ValueError, match=f"from {current.value} to {target.value}"):
        move[target]()


def test_a_plan_s_size_counts_the_steps_a_replan_keeps() -> None:
    hybrid = plan.PlanSize(fewest=3, most=7)
    assert hybrid.drafts(None) == range(3, 8)
    p = plan.from_draft(_draft("a", "b", "c"))
    p = plan.fail(plan.start(plan.complete(plan.start(p, 0, 0), 0, "A"), 1, 1), 1, "no")
    assert hybrid.drafts(p) == range(2, 7)  # one completed step is kept
    done = plan.complete(plan.start(plan.from_draft(_draft(*"abcdefg")), 0, 0), 0, "A")
    done = done.model_copy(
        update={"steps": [s.model_copy(update={"status": S.COMPLETED}) for s in done.steps]}
    )
    assert len(hybrid.drafts(done)) == 0  # full: no step may be added


@pytest.mark.parametrize("goals", ["ab", "abcdefgh"])
def test_a_plan_of_the_wrong_size_is_invalid(goals: str) -> None:
    submitted = {"steps": [{"goal": g, "acceptance_criteria": ["done"]} for g in goals]}
    read = plan.read_draft(submitted, range(3, 8))
    assert read == f"The plan is invalid:\nsteps: {len(goals)} were submitted; submit 3 to 7"


def test_a_checkpoint_sums_up_the_steps_done() -> None:
    p = plan.complete(
        plan.start(plan.from_draft(_draft("find", "write", "send")), 0, 0), 0, "x" * 400
    )
    p = plan.checkpoint(plan.complete(plan.start(p, 1, 2), 1, "written"), 1)
    [mark] = p.checkpoints
    assert mark.step == 1
    assert mark.summary.splitlines() == [
        "2 of 3 steps done.",
        f"Step 1 (find): {'x' * 299}…",
        "Step 2 (write): written",
    ]
    assert p.steps[1].started_at_iteration == 2
