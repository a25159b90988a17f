"""The stagnation detector: tool-bearing turns in, corrections and the stop verdict out."""

from __future__ import annotations

import json
from itertools import count
from typing import Any

import pytest

from app.core.config import LoopGuardSettings, load_settings
from app.core.messages import ToolUseBlock
from app.runs.loop.stagnation import (
    Stagnation,
    StagnationPolicy,
    StagnationState,
    Turn,
    cycle_length,
    observe_turn,
    repetition_ratio,
)

_ids = count()


def call(name: str, **arguments: Any) -> ToolUseBlock:
    return ToolUseBlock(id=f"toolu_{next(_ids)}", name=name, input=arguments)


def turn(*names: str) -> list[ToolUseBlock]:
    """One turn calling each named tool (same name, same arguments)."""
    return [call(name) for name in names]


A, B, C, D = turn("a"), turn("b"), turn("c"), turn("d")


def verdicts(
    turns: list[list[ToolUseBlock]],
    policy: StagnationPolicy | None = None,
    state: StagnationState | None = None,
) -> tuple[StagnationState, list[str | None]]:
    state = state or StagnationState()
    seen: list[str | None] = []
    for calls in turns:
        state, verdict = observe_turn(state, calls, policy)
        seen.append(None if verdict is None else verdict.action)
    return state, seen


@pytest.mark.parametrize(
    ("window", "ratio"),
    [
        ([], 0.0),
        ([("a",), ("b",)], 0.0),
        ([("a",), ("a",)], 0.5),
        ([("a",), ("a",), ("a",)], 2 / 3),  # a call seen 3 times adds 2 duplicates
        ([("a", "b"), ("a", "b")], 0.5),
        ([("a", "b", "c")] * 3 + [("d",)], 0.6),
        ([("a",), ("b",), ("a",), ("b",)], 0.5),
    ],
)
def test_repetition_ratio(window: list[Turn], ratio: float) -> None:
    assert repetition_ratio(window) == pytest.approx(ratio)


@pytest.mark.parametrize(
    ("window", "length"),
    [
        ("ABAB", 2),
        ("CABAB", 2),
        ("ABCABC", 3),
        ("AAAA", 2),
        ("ABA", None),
        ("ABCD", None),
        ("ABBA", None),
        ("AB", None),
    ],
)
def test_cycle_length(window: str, length: int | None) -> None:
    assert cycle_length([(t,) for t in window]) == length


@pytest.mark.parametrize(
    ("turns", "policy", "expected"),
    [
        pytest.param(
            [A, A], StagnationPolicy(), [None, None], id="two repeats are not yet stagnation"
        ),
        pytest.param(
            [A, A, A, A],
            StagnationPolicy(),
            [None, None, "correct", "terminate"],
            id="repeating on after the correction stops the run",
        ),
        pytest.param(
            [A, B, A, B, A],
            StagnationPolicy(),
            [None, None, None, "correct", "terminate"],
            id="an A-B-A-B cycle is caught although its ratio is only 0.5",
        ),
        pytest.param(
            [A, B, A, B, A],
            StagnationPolicy(cycle_detection=False),
            [None, None, None, None, "correct"],
            id="without cycle detection only the ratio (0.6 at the fifth turn) counts",
        ),
        pytest.param(
            [A, A, A, A],
            StagnationPolicy(max_corrections=0),
            [None, None, "terminate", "terminate"],
            id="no corrections: stop at once",
        ),
        pytest.param(
            [A, A, A, A, A],
            StagnationPolicy(max_corrections=2),
            [None, None, "correct", "correct", "terminate"],
            id="two corrections before the stop",
        ),
        pytest.param(
            [A, A, A, A], StagnationPolicy(enabled=False), [None] * 4, id="disabled: never"
        ),
        pytest.param(
            [A, A, A],
            StagnationPolicy(min_tool_turns=4),
            [None] * 3,
            id="fewer tool turns than min_tool_turns: no verdict",
        ),
        pytest.param(
            [turn("a", "b"), turn("b", "a"), turn("a", "b")],
            StagnationPolicy(),
            [None, None, "correct"],
            id="the order of calls within a turn does not matter",
        ),
        pytest.param(
            [A, A, A, B, C, D, A],
            StagnationPolicy(),
            [None, None, "correct", None, None, None, None],
            id="the window slides: old repeats age out",
        ),
    ],
)
def test_turn_sequences_give_these_verdicts(
    turns: list[list[ToolUseBlock]], policy: StagnationPolicy, expected: list[str | None]
) -> None:
    assert verdicts(turns, policy)[1] == expected


def test_healthy_varied_work_never_triggers() -> None:
    work = [
        [
            call("read_file", path="app/retry.py"),
            call("read_file", path="app/loop/__init__.py"),
        ],
        [call("edit_file", path="app/retry.py", patch="1")],
        [call("run_tests", path="tests/unit")],
        [call("edit_file", path="app/retry.py", patch="2")],
        [call("run_tests", path="tests/unit")],
        [call("search", query="jitter")],
        [call("edit_file", path="app/retry.py", patch="3")],
        [call("run_tests", path="tests/unit")],
    ]
    state, seen = verdicts(work)
    assert seen == [None] * len(work)
    assert state.corrections == 0


def test_a_compliant_turn_after_a_correction_does_not_stop_the_run() -> None:
    """After three identical three-call turns the window's ratio stays at 0.6 even when the
    next turn is new; that new turn is progress, not a failed correction."""
    abc = turn("a", "b", "c")
    state, seen = verdicts([abc, abc, abc, D])
    assert seen == [None, None, "correct", None]
    assert repetition_ratio(state.turns) == pytest.approx(0.6)
    _, seen = verdicts([abc], state=state)
    assert seen == ["terminate"]  # going back to the old turn is a failed correction


def test_the_human_answer_clears_the_window_and_the_corrections() -> None:
    state, seen = verdicts([A, A, A])
    assert seen[-1] == "correct"
    state, seen = verdicts([[call("ask_human", question="what now?")]], state=state)
    assert seen == [None] and state == StagnationState()
    _, seen = verdicts([A, A, A], state=state)
    assert seen == [None, None, "correct"]  # a fresh correction, not a stop


def test_the_verdict_carries_its_note_and_event() -> None:
    state, _ = verdicts([A, B, A])
    _, verdict = observe_turn(state, B)
    assert verdict == Stagnation(
        "correct", repetition_ratio=0.5, cycle_length=2, window_turns=4, corrections=0
    )
    assert "cycle of 2 turns" in verdict.note
    assert verdict.event == (
        "agent.stagnation.detected",
        {
            "action": "correct",
            "repetition_ratio": 0.5,
            "cycle_length": 2,
            "window_turns": 4,
            "corrections": 0,
        },
    )
    ratio_only = Stagnation("terminate", 2 / 3, None, 3, 1)
    assert "repeat the same tool calls" in ratio_only.note
    assert ratio_only.details["repetition_ratio"] == 0.667


def test_state_round_trips_through_json() -> None:
    state, _ = verdicts([turn("a", "b"), A, A, A])
    assert state.corrections == 1
    stored = json.loads(json.dumps(state.to_json()))
    assert StagnationState.from_json(stored) == state
    assert StagnationState.from_json(None) == StagnationState() == StagnationState.from_json({})


def test_a_resumed_run_spends_no_correction_twice() -> None:
    """Reloading the state from its JSON after every turn gives the verdicts of one
    uninterrupted run: a correction given before a crash is not given again."""
    turns = [A, B, A, B, C, A, A, A, A]
    _, uninterrupted = verdicts(turns)
    state, resumed = StagnationState(), []
    for calls in turns:
        state, verdict = observe_turn(state, calls)
        state = StagnationState.from_json(json.loads(json.dumps(state.to_json())))
        resumed.append(None if verdict is None else verdict.action)
    assert resumed == uninterrupted == [None, None, None, "correct", *[None] * 4, "terminate"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_tool_turns": 0},
        {"min_tool_turns": 6},
        {"repetition_threshold": 0.0},
        {"repetition_threshold": 1.5},
        {"max_corrections": -1},
    ],
)
def test_a_stagnation_policy_refuses_nonsense(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must"):
        StagnationPolicy(**kwargs)


def test_the_settings_group_mirrors_the_policy_and_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def policy(group: LoopGuardSettings) -> StagnationPolicy:
        fields = group.model_dump()  # the group also holds other guards' fields
        return StagnationPolicy(
            **{k.removeprefix("stagnation_"): v for k, v in fields.items() if "stagnation_" in k}
        )

    assert policy(LoopGuardSettings()) == StagnationPolicy()  # the documented defaults, both sides
    monkeypatch.setenv("LOOPWRIGHT_LOOP_GUARDS__STAGNATION_MAX_CORRECTIONS", "0")
    assert policy(load_settings().loop_guards).max_corrections == 0
    with pytest.raises(ValueError, match="min_tool_turns"):
        LoopGuardSettings(stagnation_window_size=2, stagnation_min_tool_turns=3)
