"""Agents that go round in circles: the same call again and again (identical thrash), the
same tool with ever different arguments (pattern thrash), and two calls taking turns
(an A→B→A→B cycle). The loop notices after each tool batch, tells the model in the
results message, escalates, and at last hands over to a human or stops the run."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import Message, TextBlock
from app.core.states import RunStatus
from app.llm.provider import ToolChoice
from app.runs.schemas.runs import MessageRead
from tests.support.runs import Harness, assert_valid_transcript, call, say, tool_results
from tests.support.scenarios import of_type


def notes(message: Message | MessageRead) -> list[str]:
    """The loop's notes: text blocks that follow the tool results of a results message."""
    return [b.text for b in message.content if isinstance(b, TextBlock)]


def results_notes(messages: list[MessageRead]) -> list[list[str]]:
    """The notes of each results message, in order."""
    return [notes(m) for m in messages if tool_results([m])]


async def test_identical_thrash_climbs_nudge_directive_then_forces_ask_human(
    clean_db: AsyncEngine,
) -> None:
    # Default settings: the stagnation detector sees this thrash too, but stands back
    # while the loop ladder corrects it (see the next test).
    async with Harness.open(clean_db) as h:
        same = call("echo", query="status of order 42")
        agent = await h.agent(
            same,
            same,
            same,
            same,
            same,
            call("ask_human", question="Is order 42 lost?"),
            say("I will tell the customer."),
            tools=["echo"],
        )
        paused = await h.finish(agent, "Where is order 42?")

        assert paused.status is RunStatus.WAITING_ON_HUMAN
        assert paused.waiting_for is not None
        assert (paused.waiting_for.tool, paused.waiting_for.reason) == (
            "ask_human",
            "ask_human",
        )
        detected = of_type(await h.events(paused.id), "agent.loop.detected")
        assert [(d["tier"], d["tool"], d["level"], d["count"]) for d in detected] == [
            ("identical", "echo", "nudge", 3),
            ("identical", "echo", "directive", 4),
            ("identical", "echo", "force_ask_human", 5),
        ]

        messages = await h.messages(paused.conversation_id)
        batches = results_notes(messages)
        assert [len(n) for n in batches] == [0, 0, 1, 1, 1]
        assert "same arguments 3 times" in batches[2][0]
        assert "stop calling `echo`" in batches[3][0]
        assert "Call `ask_human` now" in batches[4][0]

        requests = [c.request for c in h.llm_calls[agent.id]]
        assert [r.tool_choice for r in requests] == [None] * 5 + [
            ToolChoice(type="tool", name="ask_human")
        ]
        # ask_human is not among the agent's tools: the loop offers it for the forced call.
        assert [t.name for t in requests[0].tools if t.name == "ask_human"] == []
        assert "ask_human" in [t.name for t in requests[5].tools]
        assert (await h.checkpoint_kinds(paused.id))[-1] == "human_pause"

        # The person's answer is new direction: the ladder starts over, nothing is forced.
        await h.runs.respond(paused.id, "It was delivered to the neighbour.")
        await h.drain()
        done = await h.run(paused.id)
        assert (done.status, done.stop_reason) == (RunStatus.COMPLETED, "end_turn")
        assert done.result == "I will tell the customer."
        assert h.llm_calls[agent.id][-1].request.tool_choice is None
        assert_valid_transcript(await h.messages(done.conversation_id))


async def test_stagnation_adds_no_second_correction_while_the_loop_ladder_escalates(
    h: Harness,
) -> None:
    """Both watchers see identical thrash; the loop ladder's notes correct it, so the
    stagnation detector neither adds its own note nor spends its correction."""
    same = call("echo", query="status of order 42")
    ask = call("ask_human", question="Is order 42 lost?")
    agent = await h.agent(same, same, same, same, same, ask, tools=["echo"])
    paused = await h.finish(agent)

    assert paused.status is RunStatus.WAITING_ON_HUMAN
    events = await h.events(paused.id)
    assert of_type(events, "agent.stagnation.detected") == []
    assert [d["level"] for d in of_type(events, "agent.loop.detected")] == [
        "nudge",
        "directive",
        "force_ask_human",
    ]
    assert [len(notes) for notes in results_notes(await h.messages(paused.conversation_id))] == [
        0,
        0,
        1,
        1,
        1,
    ]


async def test_pattern_thrash_same_tool_with_new_arguments_is_nudged_then_directed(
    h: Harness,
) -> None:
    agent = await h.agent(
        *[call("echo", query=f"order {n}") for n in range(5)],
        say("None of the orders is late."),
        tools=["echo"],
    )
    done = await h.finish(agent, "Is any order late?")

    # Every call is new, so the stagnation detector sees progress and lets the run finish.
    assert (done.status, done.stop_reason) == (RunStatus.COMPLETED, "end_turn")
    assert done.result == "None of the orders is late."
    events = await h.events(done.id)
    detected = of_type(events, "agent.loop.detected")
    assert [(d["tier"], d["tool"], d["level"], d["count"]) for d in detected] == [
        ("pattern", "echo", "nudge", 4),
        ("pattern", "echo", "directive", 5),
    ]
    assert of_type(events, "agent.stagnation.detected") == []

    messages = await h.messages(done.conversation_id)
    batches = results_notes(messages)
    assert [len(n) for n in batches] == [0, 0, 0, 1, 1]
    assert "called `echo` 4 times with varying arguments" in batches[3][0]
    assert "stop calling `echo`" in batches[4][0]
    # The model read each note in the request right after it.
    requests = [c.request for c in h.llm_calls[agent.id]]
    assert notes(requests[4].messages[-1]) == batches[3]
    assert all(r.tool_choice is None for r in requests)
    assert_valid_transcript(messages)


async def test_an_a_b_a_b_cycle_is_corrected_once_then_the_run_stops_as_stagnant(
    h: Harness,
) -> None:
    look, check = call("echo", look="shelf"), call("guarded")
    agent = await h.agent(look, check, look, check, look, check, say("unreached"))
    done = await h.finish(agent, "Find the missing widget.")

    assert (done.status, done.stop_reason) == (RunStatus.COMPLETED, "stagnation")
    assert done.finished_at is not None
    events = await h.events(done.id)
    verdicts = of_type(events, "agent.stagnation.detected")
    assert [(v["action"], v["cycle_length"], v["corrections"]) for v in verdicts] == [
        ("correct", 2, 0),
        ("terminate", 2, 1),
    ]
    assert [e.type for e in events][-1] == "agent_run.completed"
    assert [d["stop_reason"] for d in of_type(events, "agent_run.completed")] == ["stagnation"]

    messages = await h.messages(done.conversation_id)
    batches = results_notes(messages)
    assert len(batches) == 5  # the fifth call was the last: no sixth LLM call
    assert len(h.llm_calls[agent.id]) == 5
    assert "go round in a cycle of 2 turns" in batches[3][-1]
    assert (await h.checkpoint_kinds(done.id))[-1] == "final"
    assert_valid_transcript(messages)
