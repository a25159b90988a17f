"""Auto-compaction and the recovery ladder as pure policy: where the verbatim
tail starts, what is pinned, the truncation fallback, R1 → R2 → R3, the cap on recovery
actions, and the counters' JSON round trip."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from app.core.config import CompactionSettings
from app.core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from app.core.model_config import ModelConfig, ScriptedFault, ScriptedTurn
from app.llm.providers.scripted.provider import ScriptedProvider
from app.runs.loop.compaction import (
    PIN_PREFIX,
    AskHuman,
    Compaction,
    Compactor,
    LadderState,
    Recovery,
    cut_index,
    is_summary,
    pinned_results,
)
from app.runs.loop.summary import llm_summariser, summary_settings

SETTINGS = CompactionSettings()
BIG = "lorem ipsum dolor sit amet " * 60  # about 300 tokens


def user(text: str) -> Message:
    return Message.user_text(text)


def call(call_id: str, name: str = "search", **arguments: Any) -> Message:
    return Message(role="assistant", content=[ToolUseBlock(id=call_id, name=name, input=arguments)])


def result(call_id: str, content: str = "ok", *, error: bool = False) -> Message:
    return Message(
        role="user",
        content=[ToolResultBlock(tool_use_id=call_id, content=content, is_error=error)],
    )


def answer(text: str) -> Message:
    return Message(role="assistant", content=[TextBlock(text=text)])


def shaped(shape: str) -> list[Message]:
    """Messages from letters: u user text, c a call, r its result, a assistant text."""
    messages: list[Message] = []
    for i, letter in enumerate(shape.split()):
        if letter == "u":
            messages.append(user(f"input {i}"))
        elif letter == "c":
            messages.append(call(f"t{i}"))
        elif letter == "r":
            messages.append(result(f"t{i - 1}"))
        else:
            messages.append(answer(f"answer {i}"))
    return messages


def research(calls: int, *, size: str = BIG) -> list[Message]:
    """A run's input followed by `calls` search calls with large results."""
    messages = [user("research the topic")]
    for i in range(calls):
        messages += [call(f"t{i}", query=f"q{i}"), result(f"t{i}", f"result {i}: {size}")]
    return messages


class Summariser:
    """Counts its calls; fails while `failures` remain."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.calls: list[int] = []

    async def __call__(self, messages: Sequence[Message]) -> str:
        self.calls.append(len(messages))
        if self.failures:
            self.failures -= 1
            raise RuntimeError("the summary model is down")
        return f"summary of {len(messages)} messages"


def compactor(summarise: Any = None, *, window: int = 10_000, **settings: Any) -> Compactor:
    return Compactor(
        CompactionSettings(**settings),
        summarise or Summariser(),
        context_window=window,
        system="You research things.",
    )


async def recover(
    engine: Compactor, messages: list[Message], *, iteration: int, state: LadderState
) -> Recovery | None:
    """A check of a live context that covers the transcript up to its last message."""
    return await engine.recover(
        messages, through_position=len(messages) - 1, iteration=iteration, state=state
    )


def orphaned(kept: Sequence[Message], head: Sequence[Message]) -> set[str]:
    """Results in `kept` whose call is in `head`."""
    calls = {b.id for m in head for b in m.tool_uses}
    return {
        b.tool_use_id
        for m in kept
        for b in m.content
        if isinstance(b, ToolResultBlock) and b.tool_use_id in calls
    }


# -- where the verbatim tail starts ------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "keep", "cut"),
    [
        ("u c r c r c r a", 3, 5),  # the tail opens on a call: cut where asked
        ("u c r c r c r a", 2, 5),  # it would open on a result: take its call along
        ("u c r c r c r a", 8, 0),  # keep everything
        ("u c r c r c r a", 20, 0),
        ("u c r u c r", 1, 4),  # a pending-free tail of one result takes its call
        ("u c r u c r", 3, 3),  # a new input opens the tail
        ("u a u a", 1, 3),
    ],
)
def test_the_tail_never_starts_with_a_result_parted_from_its_call(
    shape: str, keep: int, cut: int
) -> None:
    assert cut_index(shaped(shape), keep) == cut


@pytest.mark.parametrize("keep", range(1, 25))
def test_no_cut_of_a_long_run_orphans_a_result(keep: int) -> None:
    messages = [*research(10), user("now compare"), call("x1"), result("x1"), answer("done")]
    cut = cut_index(messages, keep)
    assert len(messages) - cut >= min(keep, len(messages))
    assert not orphaned(messages[cut:], messages[:cut])


# -- pins ----------------------------------------------------------------------------------


def pins_of(head: list[Message], max_chars: int = 2_000) -> dict[str, str]:
    pinned = {}
    for block in pinned_results(head, max_chars):
        header, _, body = block.text.partition("\n")
        assert header.startswith(PIN_PREFIX)
        pinned[header[len(PIN_PREFIX) : -1]] = body
    return pinned


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ([call("1"), result("1", "old"), call("2"), result("2", "new")], {"search": "new"}),
        (
            [call("1"), result("1", "good"), call("2"), result("2", "boom", error=True)],
            {"search": "good"},
        ),
        ([call("1", "fetch"), result("1", "Error: 404", error=True)], {}),
        (
            [call("1", "fetch"), result("1", "page"), call("2"), result("2", "hits")],
            {"fetch": "page", "search": "hits"},
        ),
        ([user("no tools here"), answer("fine")], {}),
    ],
)
def test_the_latest_successful_result_of_each_tool_is_pinned(
    head: list[Message], expected: dict[str, str]
) -> None:
    assert pins_of(head) == expected


def test_a_pin_is_capped() -> None:
    (pin,) = pinned_results([call("1"), result("1", "x" * 5_000)], 100)
    assert pin.text.count("x") == 100
    assert pin.text.endswith("[... 4900 more characters cut]")


def test_pins_of_an_earlier_compaction_carry_over_until_a_newer_result_replaces_them() -> None:
    earlier = pinned_results([call("1", "fetch"), result("1", "old page")], 2_000)
    summary = Message(role="user", content=[TextBlock(text="[Compacted: 9 ...]"), *earlier])

    assert pins_of([summary, call("2"), result("2", "hits")]) == {
        "fetch": "old page",
        "search": "hits",
    }
    assert pins_of([summary, call("3", "fetch"), result("3", "new page")]) == {"fetch": "new page"}


# -- R1 ------------------------------------------------------------------------------------


async def test_within_budget_nothing_happens() -> None:
    summarise = Summariser()
    assert (
        await recover(compactor(summarise), research(3), iteration=4, state=LadderState()) is None
    )
    assert summarise.calls == []


async def test_r1_keeps_the_last_ten_messages_and_summarises_the_rest() -> None:
    messages = research(30)  # 61 messages, about 10,000 tokens
    summarise = Summariser()
    recovery = await recover(
        compactor(summarise, window=12_000), messages, iteration=30, state=LadderState()
    )

    assert recovery is not None
    (step,) = recovery.steps
    assert isinstance(step, Compaction)
    assert step.stage == "R1" and step.method == "summary"
    opening, *kept = step.messages
    assert kept == messages[-10:]  # verbatim
    assert step.folded == 51 and summarise.calls == [51]
    assert is_summary(opening)
    assert opening.content[0] == TextBlock(
        text="[Compacted: 51 earlier messages summarised]\n\nsummary of 51 messages"
    )
    latest = messages[50].content[0]  # the newest result among the folded messages
    assert isinstance(latest, ToolResultBlock)
    assert pins_of([opening]) == {"search": latest.content}
    assert recovery.messages == step.messages and recovery.ask_human is None
    assert recovery.through_position == 60
    assert step.tokens_after < 12_000 * 0.7 < step.tokens_before
    assert recovery.state == LadderState(
        compactions_used=1, last_stage="R1", last_stage_iteration=30
    )
    kind, data = recovery.events[0]
    assert kind == "agent.compaction.run"
    assert data == {
        "stage": "R1",
        "method": "summary",
        "folded": 51,
        "tokens_before": step.tokens_before,
        "tokens_after": step.tokens_after,
        "messages_before": 61,
        "messages_after": 11,
        "iteration": 30,
    }


async def test_a_second_compaction_folds_the_first_summary_in() -> None:
    engine = compactor(window=12_000)
    first = await recover(engine, research(30), iteration=30, state=LadderState())
    assert first is not None and first.messages is not None
    grown = first.messages + research(30)[1:]

    second = await recover(engine, grown, iteration=60, state=first.state)

    assert second is not None and [s.stage for s in second.steps] == ["R1"]  # a fresh R1
    assert second.messages is not None and len(second.messages) == 11
    assert second.state.compactions_used == 2


# -- the truncation fallback -----------------------------------------------------------


async def test_a_failed_summary_truncates_and_keeps_the_pins() -> None:
    messages = research(30)
    recovery = await recover(
        compactor(Summariser(failures=1), window=12_000), messages, iteration=3, state=LadderState()
    )

    assert recovery is not None and recovery.messages is not None
    (step,) = recovery.steps
    assert isinstance(step, Compaction) and step.method == "truncation"
    opening = recovery.messages[0]
    assert opening.content[0] == TextBlock(
        text="[Compacted: earlier history was truncated; 51 messages dropped]"
    )
    assert set(pins_of([opening])) == {"search"}
    assert recovery.messages[1:] == messages[-10:]
    assert recovery.state.summary_failures == 1


@pytest.mark.parametrize(
    ("failures_so_far", "summary_fails", "method", "called", "failures_after"),
    [
        (0, False, "summary", True, 0),
        (2, False, "summary", True, 0),  # a success resets the count
        (0, True, "truncation", True, 1),
        (2, True, "truncation", True, 3),
        (3, False, "truncation", False, 3),  # three in a row: truncation only from now on
        (5, False, "truncation", False, 5),
    ],
)
async def test_three_failed_summaries_in_a_row_leave_only_truncation(
    failures_so_far: int, summary_fails: bool, method: str, called: bool, failures_after: int
) -> None:
    summarise = Summariser(failures=1 if summary_fails else 0)
    recovery = await recover(
        compactor(summarise, window=12_000),
        research(30),
        iteration=3,
        state=LadderState(summary_failures=failures_so_far),
    )

    assert recovery is not None
    assert [s.method for s in recovery.steps if isinstance(s, Compaction)] == [method]
    assert bool(summarise.calls) is called
    assert recovery.state.summary_failures == failures_after


async def test_the_llm_summariser_asks_the_summary_model_and_its_failure_truncates() -> None:
    good = ScriptedProvider([ScriptedTurn(text="They searched thirty times.")])
    broken = ScriptedProvider(
        [ScriptedTurn(text="never", fault=ScriptedFault(status=529, times=5))]
    )

    summarised = await recover(
        compactor(llm_summariser(good, SETTINGS), window=12_000),
        research(30),
        iteration=3,
        state=LadderState(),
    )
    truncated = await recover(
        compactor(llm_summariser(broken, SETTINGS), window=12_000),
        research(30),
        iteration=3,
        state=LadderState(),
    )

    assert summarised is not None and summarised.messages is not None
    assert summarised.messages[0].content[0] == TextBlock(
        text="[Compacted: 51 earlier messages summarised]\n\nThey searched thirty times."
    )
    assert truncated is not None and truncated.state.summary_failures == 1


# -- the ladder ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("last_stage", "last_iteration", "iteration", "stage"),
    [
        (None, None, 5, "R1"),
        ("R1", 10, 30, "R2"),  # still over within 20 iterations of R1
        ("R1", 10, 31, "R1"),  # later than that: a fresh compaction
        ("R2", 10, 12, "R3"),
        ("R2", 10, 31, "R1"),
        ("R3", 10, 11, "R1"),  # the human has spoken: start over
    ],
)
def test_the_next_stage_escalates_within_twenty_iterations(
    last_stage: Any, last_iteration: int | None, iteration: int, stage: str
) -> None:
    state = LadderState(last_stage=last_stage, last_stage_iteration=last_iteration)
    assert state.next_stage(iteration, SETTINGS.escalation_window_iterations) == stage


async def test_r2_keeps_four_messages_under_a_deep_pruned_marker() -> None:
    messages = research(30)
    state = LadderState(compactions_used=1, last_stage="R1", last_stage_iteration=10)
    recovery = await recover(compactor(window=12_000), messages, iteration=15, state=state)

    assert recovery is not None and recovery.messages is not None
    (step,) = recovery.steps
    assert step.stage == "R2"
    assert recovery.messages[1:] == messages[-4:]
    assert recovery.messages[0].text.startswith("[Deep pruned: 57 earlier messages summarised]")
    kind, data = recovery.events[0]
    assert (kind, data["stage"], data["messages_after"]) == ("agent.recovery.fired", "R2", 5)
    assert recovery.state.prunes_used == 1 and recovery.state.last_stage == "R2"


async def test_r3_asks_the_human_and_leaves_the_context_alone() -> None:
    state = LadderState(1, 1, 0, last_stage="R2", last_stage_iteration=10)
    recovery = await recover(compactor(window=12_000), research(30), iteration=12, state=state)

    assert recovery is not None and recovery.messages is None
    ask = recovery.ask_human
    assert isinstance(ask, AskHuman) and ask.messages == 61
    assert ask.tool_choice.type == "tool" and ask.tool_choice.name == "ask_human"
    assert "losing context" in ask.question
    kind, data = recovery.events[0]
    assert (kind, data["stage"], data["question"]) == ("agent.recovery.fired", "R3", ask.question)
    assert recovery.state.asks_used == 1 and recovery.state.recoveries_used == 3


async def test_a_compaction_that_does_not_suffice_escalates_at_once() -> None:
    """Each result alone is over budget: R1, then R2, then R3 in the same check."""
    messages = research(8, size=BIG * 10)
    recovery = await recover(compactor(window=4_000), messages, iteration=9, state=LadderState())

    assert recovery is not None
    assert [s.stage for s in recovery.steps] == ["R1", "R2", "R3"]
    assert recovery.messages is not None and recovery.messages[1:] == messages[-4:]
    assert recovery.ask_human is not None
    assert recovery.state == LadderState(1, 1, 1, last_stage="R3", last_stage_iteration=9)
    assert not recovery.capped


async def test_too_few_messages_to_fold_goes_straight_to_the_deep_prune() -> None:
    messages = research(3, size=BIG * 4)  # 7 messages, fewer than R1 keeps
    recovery = await recover(compactor(window=4_000), messages, iteration=4, state=LadderState())

    assert recovery is not None
    assert [s.stage for s in recovery.steps][:1] == ["R2"]
    assert recovery.state.compactions_used == 0 and recovery.state.prunes_used == 1


@pytest.mark.parametrize(
    ("state", "stages", "capped"),
    [
        (LadderState(2, 1, 1), [], True),  # four used: the run goes on as it is
        (LadderState(3, 0, 0), ["R1"], True),  # room for one: R1, then nothing more
        (LadderState(2, 0, 0), ["R1", "R2"], True),
        (LadderState(1, 0, 0), ["R1", "R2", "R3"], False),
    ],
)
async def test_at_most_four_recovery_actions_per_run(
    state: LadderState, stages: list[str], capped: bool
) -> None:
    recovery = await recover(
        compactor(window=4_000), research(8, size=BIG * 10), iteration=50, state=state
    )

    assert recovery is not None
    assert [s.stage for s in recovery.steps] == stages
    assert recovery.capped is capped
    assert recovery.state.recoveries_used == min(4, state.recoveries_used + len(stages))


# -- the counters survive a resume ---------------------------------------------------------


def test_the_ladder_state_round_trips_through_json() -> None:
    state = LadderState(2, 1, 0, last_stage="R2", last_stage_iteration=17, summary_failures=2)
    assert LadderState.from_json(json.loads(json.dumps(state.to_json()))) == state
    assert LadderState.from_json(None) == LadderState()
    assert LadderState.from_json({"compactions_used": 1, "thrash_level": 2}) == LadderState(1)


def test_the_settings_default_to_the_seed_and_refuse_a_prune_that_keeps_more() -> None:
    assert (
        SETTINGS.threshold_ratio,
        SETTINGS.keep_last_messages,
        SETTINGS.deep_prune_keep_messages,
        SETTINGS.summary_failures_before_truncation_only,
        SETTINGS.max_recovery_actions,
        SETTINGS.escalation_window_iterations,
    ) == (0.7, 10, 4, 3, 4, 20)
    with pytest.raises(ValidationError, match="deep_prune_keep_messages"):
        CompactionSettings(keep_last_messages=4, deep_prune_keep_messages=4)


def test_an_openai_compatible_agent_summarises_with_its_own_model() -> None:
    """A local server knows only the models it loaded: the summary model setting (a Claude
    model) is for the providers that serve any model of theirs."""
    local = ModelConfig(provider="openai", name="llama3.1:8b", base_url="http://h:11434/v1")
    claude = ModelConfig(provider="anthropic", name="claude-sonnet-4-5")
    assert summary_settings(SETTINGS, local).summary_model == "llama3.1:8b"
    assert summary_settings(SETTINGS, claude) is SETTINGS
