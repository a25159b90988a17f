"""Tool-loop detection: call sequences in, detections and the escalation ladder out."""

from __future__ import annotations

import json
from itertools import count
from typing import Any

import pytest

from app.core.messages import (
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    for_provider,
    results_message,
)
from app.llm.provider import ToolChoice
from app.runs.loop.loop_detection import (
    LADDER,
    LoopDetection,
    LoopPolicy,
    LoopState,
    observe_batch,
    with_notes,
)

_ids = count()


def call(name: str, **arguments: Any) -> ToolUseBlock:
    return ToolUseBlock(id=f"toolu_{next(_ids)}", name=name, input=arguments)


def s(query: str) -> list[ToolUseBlock]:
    """A batch of one search."""
    return [call("search", query=query)]


def r(path: str) -> list[ToolUseBlock]:
    """A batch of one read."""
    return [call("read_file", path=path)]


def other(tool: str) -> list[ToolUseBlock]:
    """A batch of one call of yet another tool."""
    return [call(tool)]


Seen = tuple[str, str, str] | None  # (tier, tool, level) of a batch's detection, if any


def observe_all(
    batches: list[list[ToolUseBlock]], state: LoopState | None = None
) -> tuple[LoopState, list[Seen]]:
    state = state or LoopState()
    seen: list[Seen] = []
    for batch in batches:
        state, detection = observe_batch(state, batch)
        seen.append(None if detection is None else _short(detection))
    return state, seen


def _short(detection: LoopDetection) -> tuple[str, str, str]:
    return (detection.tier, detection.tool, detection.level)


IDENTICAL = ("identical", "search")
PATTERN = ("pattern", "search")


@pytest.mark.parametrize(
    ("batches", "expected"),
    [
        pytest.param(
            [s("q"), s("q"), s("q")],
            [None, None, (*IDENTICAL, "nudge")],
            id="same query three times is identical thrash",
        ),
        pytest.param(
            [s("q"), r("a"), s("q"), r("b"), s("q")],
            [None, None, None, None, (*IDENTICAL, "nudge")],
            id="interleaved with other calls it still counts within six calls",
        ),
        pytest.param(
            [s("q"), other("a"), other("b"), other("c"), other("d"), s("q"), s("q")],
            [None] * 7,
            id="three identical calls spread over more than six do not count",
        ),
        pytest.param(
            [s("a"), s("b"), s("c"), s("d")],
            [None, None, None, (*PATTERN, "nudge")],
            id="one tool four times with varying arguments is pattern thrash",
        ),
        pytest.param(
            [[call("search", query="q")] * 3],
            [(*IDENTICAL, "nudge")],
            id="a single batch can thrash on its own",
        ),
        pytest.param(
            [[call("search", q="x", n=1)], [call("search", n=1, q="x")]] * 2,
            [None, None, (*IDENTICAL, "nudge"), (*IDENTICAL, "directive")],
            id="argument key order does not make calls different",
        ),
        pytest.param(
            [s("q"), s("q"), s("q"), s("q"), s("q"), s("q")],
            [None, None, (*IDENTICAL, "nudge"), (*IDENTICAL, "directive")]
            + [(*IDENTICAL, "force_ask_human")] * 2,
            id="the ladder climbs while the thrash goes on and stays on its top rung",
        ),
        pytest.param(
            [s("q"), s("q"), s("q"), s("other")],
            [None, None, (*IDENTICAL, "nudge"), (*PATTERN, "directive")],
            id="varying the arguments of the same tool still climbs the ladder",
        ),
    ],
)
def test_call_sequences_give_these_detections(
    batches: list[list[ToolUseBlock]], expected: list[Seen]
) -> None:
    assert observe_all(batches)[1] == expected


def test_healthy_varied_work_never_triggers() -> None:
    batches = [
        r("README.md"),
        s("retry policy"),
        [
            call("read_file", path="app/retry.py"),
            call("read_file", path="app/runs/loop/__init__.py"),
        ],
        [call("edit_file", path="app/retry.py", patch="1")],
        [call("run_tests", path="tests/unit")],
        [call("edit_file", path="app/retry.py", patch="2")],
        [call("run_tests", path="tests/unit")],
        s("jitter"),
        r("docs/retry.md"),
    ]
    state, seen = observe_all(batches)
    assert seen == [None] * len(batches)
    assert state.detections == 0 and state.tool_choice is None


def test_a_batch_that_does_something_else_does_not_escalate_but_the_ladder_holds() -> None:
    state, seen = observe_all([s("q"), s("q"), s("q"), r("a")])
    assert seen[-1] is None
    assert state.detections == 1  # three searches are still among the last six calls
    state, seen = observe_all([s("q")], state)
    assert seen == [(*IDENTICAL, "directive")]


def test_the_ladder_resets_once_the_thrash_leaves_the_window() -> None:
    state, _ = observe_all([s("q"), s("q"), s("q"), other("a"), other("b"), other("c")])
    assert state.detections == 1  # the last six calls still hold the three searches
    state, _ = observe_all([other("d")], state)
    assert state.detections == 0
    state, seen = observe_all([s("q"), s("q"), s("q")], state)
    assert seen == [None, None, (*IDENTICAL, "nudge")]  # a new thrash starts at the bottom


def test_forcing_ask_human_constrains_the_next_call_only() -> None:
    state, seen = observe_all([s("q")] * 5)
    assert seen[-1] == (*IDENTICAL, "force_ask_human")
    assert state.tool_choice == ToolChoice(type="tool", name="ask_human")
    _, detection = observe_batch(LoopState(), [call("search", query="q")] * 5)
    assert detection is not None and detection.tool_choice is None  # a first nudge forces nothing
    state, _ = observe_all([r("a")], state)
    assert state.tool_choice is None


def test_the_human_answer_resets_everything() -> None:
    state, _ = observe_all([s("q")] * 5)
    state, seen = observe_all([[call("ask_human", question="which query?")]], state)
    assert seen == [None] and state == LoopState()
    _, seen = observe_all([s("q"), s("q"), s("q")], state)
    assert seen == [None, None, (*IDENTICAL, "nudge")]


def test_the_detection_carries_its_event_and_notes() -> None:
    state, _ = observe_all([s("a"), s("b"), s("c")])
    _, detection = observe_batch(state, s("d"))
    assert detection is not None
    assert detection.event == (
        "agent.loop.detected",
        {
            "tier": "pattern",
            "tool": "search",
            "level": "nudge",
            "count": 4,
            "window_calls": 4,
            "detections": 1,
        },
    )
    assert "4 times with varying arguments" in detection.note
    notes = [
        LoopDetection("identical", "search", level, count=3, window_calls=6, detections=1).note
        for level in LADDER
    ]
    assert "different approach" in notes[0]
    assert "stop calling `search`" in notes[1]
    assert "Call `ask_human` now" in notes[2]


def test_notes_follow_the_tool_results_so_the_transcript_stays_valid() -> None:
    batch = s("q")
    results = results_message(batch, {batch[0].id: ("nothing found", False)}, "missing")
    noted = with_notes(results, ["Loop check: try something else."])
    assert [b.type for b in noted.content] == ["tool_result", "text"]
    assert noted.content[0] == ToolResultBlock(tool_use_id=batch[0].id, content="nothing found")
    assert noted.content[1] == TextBlock(text="Loop check: try something else.")
    assert with_notes(results, []) is results
    history = [Message.user_text("go"), Message(role="assistant", content=batch), noted]
    assert [m.role for m in for_provider(history)] == ["user", "assistant", "user"]


def test_state_round_trips_through_json() -> None:
    state, _ = observe_all([s("q")] * 5)
    stored = json.loads(json.dumps(state.to_json()))
    assert LoopState.from_json(stored) == state
    assert LoopState.from_json(None) == LoopState() == LoopState.from_json({})


def test_a_resumed_run_climbs_the_same_ladder() -> None:
    """Reloading the state from its JSON after every batch (a crash and resume each time)
    gives the same detections as one uninterrupted run."""
    batches = [s("q"), r("a"), s("q"), s("q"), s("x"), [call("ask_human", question="?")], s("q")]
    _, uninterrupted = observe_all(batches)
    state, resumed = LoopState(), []
    for batch in batches:
        state, detection = observe_batch(state, batch)
        state = LoopState.from_json(json.loads(json.dumps(state.to_json())))
        resumed.append(None if detection is None else _short(detection))
    assert resumed == uninterrupted
    assert any(uninterrupted)


@pytest.mark.parametrize(
    "kwargs",
    [{"identical_min": 1}, {"identical_min": 7}, {"pattern_min": 2}, {"pattern_min": 7}],
)
def test_a_loop_policy_refuses_nonsense(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="_min"):
        LoopPolicy(**kwargs)


def test_a_stricter_policy_fires_sooner() -> None:
    _, detection = observe_batch(
        LoopState(), [call("search", query="q")] * 2, LoopPolicy(identical_min=2, pattern_min=3)
    )
    assert detection is not None and detection.count == 2
