"""The agent loop on the real database, driven by scripted models: what a finished run
leaves behind (transcript, events, checkpoints), the tool error pipeline, cooperative
cancellation, pausing for a human, time and iteration limits, and provider faults."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.agents.schemas import Limits
from app.core.errors import InvalidTransition
from app.core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from app.core.model_config import ScriptedFault, ScriptedToolCall, ScriptedTurn
from app.core.states import RunStatus
from app.llm.provider import LLMRequest, LLMResponse, TextSink, Usage, UsageSink
from app.llm.providers.scripted.provider import ScriptedProvider
from app.runs.engine.runs import CANCELLED_WHILE_WAITING
from app.runs.loop.exits import CANCELLED_BEFORE_IT_RAN
from app.runs.loop.retry import ToolRetryPolicy
from app.runs.loop.turns import SUMMARY_PROMPT
from app.runs.schemas.runs import RunRead
from app.runs.store import history
from tests.support.runs import (
    SAFETY_S,
    SECRET_PATH,
    Harness,
    assert_valid_transcript,
    call,
    say,
    tool_results,
)

LIMITS = Limits(soft_time_limit_s=60, hard_time_limit_s=120)
RECOVERED = "I will try another way."


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    async with Harness.open(clean_db) as harness:
        yield harness


async def test_a_tool_call_then_an_answer_completes_with_transcript_events_and_checkpoints(h):
    agent = await h.agent(call("echo", city="Oslo"), say("It is sunny in Oslo."))
    done = await h.finish(agent, "Weather in Oslo?")
    assert (done.status, done.stop_reason, done.iteration) == (RunStatus.COMPLETED, "end_turn", 2)
    assert done.result == "It is sunny in Oslo."
    calls = h.llm_calls[agent.id]
    assert len(calls) == 2
    assert done.usage.input_tokens == sum(c.response.usage.input_tokens for c in calls) > 0
    assert done.usage.output_tokens == sum(c.response.usage.output_tokens for c in calls) > 0

    messages = await h.messages(done.conversation_id)
    assert [(m.role, [b.type for b in m.content]) for m in messages] == [
        ("user", ["text"]),
        ("assistant", ["tool_use"]),
        ("user", ["tool_result"]),
        ("assistant", ["text"]),
    ]
    assert messages[0].content == [TextBlock(text="Weather in Oslo?")]
    use = messages[1].content[0]
    assert isinstance(use, ToolUseBlock)
    assert (use.name, use.input) == ("echo", {"city": "Oslo"})
    assert messages[2].content == [ToolResultBlock(tool_use_id=use.id, content='{"city": "Oslo"}')]
    assert {m.run_id for m in messages} == {done.id}
    assert tool_results(calls[1].request.messages) == messages[2].content  # the model saw it

    assert await h.event_types(done.id) == [
        "agent_run.queued",
        "agent_run.started",
        "message.created",
        "message.created",
        "tool_call.started",
        "message.created",
        "tool_call.completed",
        "message.created",
        "agent_run.completed",
    ]
    assert await h.checkpoint_kinds(done.id) == ["input", "llm_response", "tool_result", "final"]


# -- the tool error pipeline -----------------------------------------------------------


async def one_failing_call(
    h: Harness, tool: str, *, tools: list[str] | None = None
) -> tuple[RunRead, ToolResultBlock]:
    """Run an agent that calls `tool` once; check the run went on to its next turn."""
    agent = await h.agent(call(tool), say(RECOVERED), tools=tools)
    done = await h.finish(agent)
    transcript = await h.transcript(done.conversation_id)
    [result] = tool_results(transcript)
    assert (done.status, done.result) == (RunStatus.COMPLETED, RECOVERED)
    assert tool_results(h.llm_calls[agent.id][1].request.messages) == [result]
    assert_valid_transcript(transcript)
    return done, result


async def retry_events(h: Harness, run_id: str) -> list[dict[str, object]]:
    return [e.data for e in await h.events(run_id) if e.type == "agent.tool.retry"]


async def test_an_unknown_tool_becomes_an_error_result_and_the_run_goes_on(h):
    _, result = await one_failing_call(h, "no_such_tool")
    assert result.is_error
    assert result.content == "Error: unknown tool 'no_such_tool'"


async def test_a_tool_the_agent_does_not_list_is_denied_without_running(h):
    _, result = await one_failing_call(h, "guarded", tools=["echo"])
    assert result.is_error
    assert "permission denied" in result.content
    assert h.tools.calls["guarded"] == 0


async def test_a_tool_failure_reaches_the_model_as_an_error_result(h):
    run, result = await one_failing_call(h, "broken")
    assert (result.content, result.is_error) == ("Error: the widget is out of stock", True)
    assert h.tools.calls["broken"] == 1
    assert await retry_events(h, run.id) == []


async def test_an_unexpected_tool_exception_reaches_the_model_sanitised(h):
    run, result = await one_failing_call(h, "crash")
    assert result.is_error
    assert result.content == "Error executing crash: RuntimeError: cannot read [path]"
    stored = json.dumps([m.model_dump(mode="json") for m in await h.messages(run.conversation_id)])
    events = json.dumps([e.data for e in await h.events(run.id)])
    assert SECRET_PATH not in stored + events


async def test_an_idempotent_tool_failing_transiently_is_retried_three_times_then_reported(
    clean_db: AsyncEngine,
):
    backoff = ToolRetryPolicy((0.5, 2.0, 8.0), jitter_ratio=0)
    async with Harness.open(clean_db, retry_policy=backoff) as h:
        h.tools.flaky_failures = 100
        run, result = await one_failing_call(h, "flaky")
        assert (result.content, result.is_error) == ("Error: upstream answered 503", True)
        assert h.tools.calls["flaky"] == 4
        assert h.sleeps == [0.5, 2.0, 8.0]
        retries = await retry_events(h, run.id)
        assert [(r["attempt"], r["delay_s"]) for r in retries] == [(1, 0.5), (2, 2.0), (3, 8.0)]
        [completed] = [e.data for e in await h.events(run.id) if e.type == "tool_call.completed"]
        assert completed["attempts"] == 4


async def test_an_idempotent_tool_that_recovers_on_its_second_attempt_succeeds(h):
    h.tools.flaky_failures = 1
    agent = await h.agent(call("flaky"), say("Got it."))
    run = await h.start(agent)
    await h.drain()
    [result] = tool_results(await h.transcript(run.conversation_id))
    assert (result.content, result.is_error) == ("flaky answered", False)
    assert h.tools.calls["flaky"] == 2
    assert len(await retry_events(h, run.id)) == 1
    assert (await h.run(run.id)).status is RunStatus.COMPLETED


async def test_a_side_effecting_tool_is_not_retried_after_a_transient_failure(h):
    run, result = await one_failing_call(h, "send_email")
    assert (result.content, result.is_error) == ("Error: mail server timed out", True)
    assert h.tools.calls["send_email"] == 1
    assert h.sleeps == []
    assert await retry_events(h, run.id) == []


# -- cooperative cancellation ----------------------------------------------------------


async def cancel_inside_the_gate(h: Harness) -> RunRead:
    """A run cancelled while its `gate` tool runs, after the tool was let finish."""
    agent = await h.agent(call("gate"), say("This must never be said."))
    run = await h.start(agent)
    drain = h.drain_in_background()
    async with asyncio.timeout(SAFETY_S):
        await h.tools.gate_entered.wait()
    requested = await h.runs.cancel(run.id)
    assert (requested.status, requested.cancel_requested) == (RunStatus.RUNNING, True)
    h.tools.gate_release.set()
    await drain
    return await h.run(run.id)


async def test_a_cancel_stops_the_run_after_its_tool_keeping_the_result_and_no_apology(h):
    done = await cancel_inside_the_gate(h)
    assert (done.status, done.stop_reason) == (RunStatus.CANCELLED, "cancelled")
    transcript = await h.transcript(done.conversation_id)
    assert [m.role for m in transcript] == ["user", "assistant", "user"]
    [use] = transcript[1].tool_uses
    assert tool_results(transcript) == [
        ToolResultBlock(tool_use_id=use.id, content="the gate opened")
    ]
    assert_valid_transcript(transcript)
    assert len(h.llm_calls[done.agent_id]) == 1
    types = await h.event_types(done.id)
    # The loop records the request in the run's history as it settles the run.
    assert types[-3:] == [
        "tool_call.completed",
        "agent_run.cancel_requested",
        "agent_run.cancelled",
    ]


async def test_a_cancel_during_a_batch_lets_the_running_tool_finish_and_starts_no_other(h):
    both = ScriptedTurn(
        tool_calls=[ScriptedToolCall(name="gate"), ScriptedToolCall(name="guarded")]
    )
    run = await h.start(await h.agent(both, say("This must never be said.")))
    drain = h.drain_in_background()
    async with asyncio.timeout(SAFETY_S):
        await h.tools.gate_entered.wait()
    await h.runs.cancel(run.id)
    h.tools.gate_release.set()
    await drain

    done = await h.run(run.id)
    assert (done.status, done.stop_reason) == (RunStatus.CANCELLED, "cancelled")
    assert (h.tools.calls["gate"], h.tools.calls["guarded"]) == (1, 0)
    transcript = await h.transcript(done.conversation_id)
    assert [r.content for r in tool_results(transcript)] == [
        "the gate opened",
        CANCELLED_BEFORE_IT_RAN,
    ]
    assert_valid_transcript(transcript)


async def test_after_a_cancelled_run_the_next_run_of_the_conversation_completes(h):
    first = await cancel_inside_the_gate(h)
    again = await h.agent(say("Starting over."))
    done = await h.finish(again, "Start over, please.", conversation_id=first.conversation_id)
    assert (done.status, done.result) == (RunStatus.COMPLETED, "Starting over.")
    [seen] = h.llm_calls[again.id]
    assert_valid_transcript(seen.request.messages)
    assert seen.request.messages[-1].content[-1] == TextBlock(text="Start over, please.")


class CancelledMidCall:
    """A model whose call is under way until the test says otherwise; `after_cancel`
    instead asks for the cancel itself, then answers at once (as a response that was
    already on its way when the person pressed cancel)."""

    def __init__(self, h: Harness, answer: ScriptedTurn, *, after_cancel: bool = False) -> None:
        self.h = h
        self.inner = ScriptedProvider([answer])
        self.after_cancel = after_cancel
        self.entered = asyncio.Event()
        self.abandoned = asyncio.Event()
        self.run_id = ""  # of the run to cancel (`after_cancel`)

    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
    ) -> LLMResponse:
        if on_usage is not None:
            on_usage(Usage(input_tokens=1234))  # known as the answer begins
        self.entered.set()
        if self.after_cancel:
            await self.h.runs.cancel(self.run_id)
            return await self.inner.complete(request, on_text, on_usage)
        try:
            await asyncio.sleep(20)  # a long turn: the cancel must not wait for it
        except asyncio.CancelledError:
            self.abandoned.set()
            raise
        raise AssertionError("the call was not abandoned")


async def test_a_cancel_during_a_model_call_abandons_the_call_and_settles_at_once(h):
    agent = await h.agent(say("never said"))
    model = h.models[agent.id] = CancelledMidCall(h, say("never said"))
    run = await h.start(agent)
    drain = h.drain_in_background()
    async with asyncio.timeout(SAFETY_S):
        await model.entered.wait()
    await h.runs.cancel(run.id)
    async with asyncio.timeout(5):  # well before the 20 s turn would have ended
        await drain
    assert model.abandoned.is_set()

    done = await h.run(run.id)
    assert (done.status, done.stop_reason) == (RunStatus.CANCELLED, "cancelled")
    assert done.usage.input_tokens == 1234  # what was known of the abandoned call counts
    assert done.iteration == 0  # it gave no answer
    transcript = await h.transcript(done.conversation_id)
    assert [m.role for m in transcript] == ["user"]
    events = await h.events(run.id)
    [abandoned] = [e.data for e in events if e.type == "agent.llm.abandoned"]
    assert abandoned["reason"] == "cancelled"
    assert abandoned["usage"] == {"input_tokens": 1234, "output_tokens": 0}
    assert [e.type for e in events][-2:] == ["agent.llm.abandoned", "agent_run.cancelled"]


async def test_a_response_that_arrives_after_the_cancel_is_kept_but_none_of_its_calls_run(h):
    agent = await h.agent(say("never said"))
    two_calls = ScriptedTurn(
        tool_calls=[
            ScriptedToolCall(name="guarded", input={}),
            ScriptedToolCall(name="create_task", input={"title": "made after cancel"}),
        ]
    )
    model = h.models[agent.id] = CancelledMidCall(h, two_calls, after_cancel=True)
    model.run_id = (await h.start(agent)).id
    await h.drain()
    done = await h.run(model.run_id)

    assert (done.status, done.stop_reason) == (RunStatus.CANCELLED, "cancelled")
    assert h.tools.calls["guarded"] == 0
    async with h.sessionmaker() as session:
        made = await session.execute(text("SELECT count(*) FROM tasks"))
        assert made.scalar_one() == 0
    transcript = await h.transcript(done.conversation_id)
    assert [m.role for m in transcript] == ["user", "assistant", "user"]
    assert [b.name for b in transcript[1].tool_uses] == ["guarded", "create_task"]
    results = tool_results(transcript)
    assert [r.content for r in results] == [CANCELLED_BEFORE_IT_RAN] * 2
    assert all(r.is_error for r in results)
    assert_valid_transcript(transcript)
    # The ledger agrees: both calls answered, neither attempted.
    async with h.sessionmaker() as session:
        ledger = await history.ledger(session, done.id)
    assert (
        sorted((e.result, e.attempts) for e in ledger.values())
        == [(CANCELLED_BEFORE_IT_RAN, 0)] * 2
    )
    types = await h.event_types(done.id)
    assert types[-3:] == ["tool_call.completed", "tool_call.completed", "agent_run.cancelled"]


async def test_cancelling_a_queued_run_cancels_it_at_once_and_it_never_starts(h):
    run = await h.start(await h.agent(say("never")))
    cancelled = await h.runs.cancel(run.id)
    assert cancelled.status is RunStatus.CANCELLED
    assert cancelled.started_at is None and cancelled.finished_at is not None
    await h.drain()
    assert h.claims == []
    assert await h.messages(run.conversation_id) == []
    assert await h.event_types(run.id) == ["agent_run.queued", "agent_run.cancelled"]


async def test_a_completed_run_cannot_be_cancelled(h):
    run = await h.start(await h.agent(say("done")))
    await h.drain()
    with pytest.raises(InvalidTransition):
        await h.runs.cancel(run.id)
    assert (await h.run(run.id)).status is RunStatus.COMPLETED


# -- waiting on a human ----------------------------------------------------------------


async def test_ask_human_pauses_the_run_holding_its_lane_until_the_answer_comes(h):
    agent = await h.agent(call("ask_human", question="Which colour?"), say("Blue it is."))
    run = await h.start(agent)
    later = await h.start(await h.agent(say("Next.")), conversation_id=run.conversation_id)
    await h.drain()

    paused = await h.run(run.id)
    assert paused.status is RunStatus.WAITING_ON_HUMAN
    assert paused.waiting_for is not None
    assert paused.waiting_for.tool == "ask_human"
    assert paused.waiting_for.question == "Which colour?"
    assert (await h.run(later.id)).status is RunStatus.QUEUED
    assert (await h.checkpoint_kinds(run.id))[-1] == "human_pause"

    assert (await h.runs.respond(run.id, "blue")).status is RunStatus.QUEUED
    await h.drain()
    done = await h.run(run.id)
    assert (done.status, done.result) == (RunStatus.COMPLETED, "Blue it is.")
    messages = await h.messages(run.conversation_id)
    assert tool_results(messages)[0] == ToolResultBlock(
        tool_use_id=str(paused.waiting_for.tool_call_id), content="blue"
    )
    assert (await h.run(later.id)).status is RunStatus.COMPLETED
    assert [m.run_id for m in messages] == [run.id] * 4 + [later.id] * 2
    assert_valid_transcript(messages)


async def test_cancelling_a_run_waiting_on_a_human_closes_its_transcript(h):
    agent = await h.agent(call("ask_human", question="Which colour?"), say("never"))
    run = await h.start(agent)
    await h.drain()
    cancelled = await h.runs.cancel(run.id)
    assert (cancelled.status, cancelled.waiting_for) == (RunStatus.CANCELLED, None)
    transcript = await h.transcript(run.conversation_id)
    [result] = tool_results(transcript)
    assert (result.content, result.is_error) == (CANCELLED_WHILE_WAITING, True)
    assert_valid_transcript(transcript)


# -- limits ----------------------------------------------------------------------------


async def test_past_the_soft_time_limit_the_run_ends_with_one_summary_turn_without_tools(h):
    agent = await h.agent(call("advance_clock", seconds=90), call("echo"), limits=LIMITS)
    done = await h.finish(agent)
    assert (done.status, done.stop_reason) == (RunStatus.COMPLETED, "soft_time_limit")
    calls = h.llm_calls[agent.id]
    assert len(calls) == 2
    summary = calls[-1].request
    assert summary.tools == []
    assert summary.messages[-1].content[-1] == TextBlock(text=SUMMARY_PROMPT)
    transcript = await h.transcript(done.conversation_id)
    assert transcript[-1].role == "assistant"
    assert transcript[-1].text == done.result
    assert done.result
    assert sum(len(m.tool_uses) for m in transcript) == 1  # echo never ran
    assert_valid_transcript(transcript)
    types = await h.event_types(done.id)
    assert "agent.exhaustion.soft_time_limit" in types
    assert types[-1] == "agent_run.completed"


async def test_the_summary_turn_at_the_soft_time_limit_counts_in_the_usage(h):
    agent = await h.agent(call("advance_clock", seconds=90), call("echo"), limits=LIMITS)
    done = await h.finish(agent)
    calls = h.llm_calls[agent.id]
    assert done.usage.input_tokens == sum(c.response.usage.input_tokens for c in calls)
    assert done.usage.output_tokens == sum(c.response.usage.output_tokens for c in calls)


async def test_past_the_hard_time_limit_the_run_fails_with_a_valid_transcript(h):
    agent = await h.agent(call("advance_clock", seconds=150), say("too late"), limits=LIMITS)
    done = await h.finish(agent)
    assert done.status is RunStatus.FAILED
    assert done.error is not None
    assert (done.error.code, done.stop_reason) == ("hard_time_limit", "hard_time_limit")
    assert len(h.llm_calls[agent.id]) == 1
    assert_valid_transcript(await h.transcript(done.conversation_id))
    assert (await h.event_types(done.id))[-1] == "agent_run.failed"


async def test_time_spent_waiting_on_a_human_does_not_count_against_the_time_limits(h):
    agent = await h.agent(call("ask_human", question="Go on?"), say("Done."), limits=LIMITS)
    run = await h.start(agent)
    await h.drain()
    assert (await h.run(run.id)).status is RunStatus.WAITING_ON_HUMAN
    h.clock.advance(3_600)  # the person answers an hour later
    await h.runs.respond(run.id, "yes")
    await h.drain()
    done = await h.run(run.id)
    assert (done.status, done.result, done.error) == (RunStatus.COMPLETED, "Done.", None)


async def test_at_max_iterations_the_run_completes_with_an_iteration_limit_event(h):
    turns = [call("echo", n=1), call("echo", n=2), call("echo", n=3), say("done")]
    agent = await h.agent(*turns, limits=Limits(max_iterations=2))
    done = await h.finish(agent)
    assert (done.status, done.stop_reason) == (RunStatus.COMPLETED, "max_iterations")
    assert done.iteration == 2
    assert len(h.llm_calls[agent.id]) == 2
    events = await h.events(done.id)
    assert [e.type for e in events[-2:]] == ["agent_run.iteration_limit", "agent_run.completed"]
    assert events[-2].data["max_iterations"] == 2
    assert_valid_transcript(await h.transcript(done.conversation_id))


async def test_a_provider_fault_that_is_not_retryable_fails_the_run_with_provider_error(h):
    refused = ScriptedFault(status=400, message="invalid request: bad schema")
    agent = await h.agent(ScriptedTurn(text="never", fault=refused))
    done = await h.finish(agent, "Hello?")
    assert done.status is RunStatus.FAILED
    assert done.error is not None
    assert done.error.code == "provider_error"
    assert "bad schema" in done.error.message and "1 attempt" in done.error.message
    assert await h.transcript(done.conversation_id) == [Message.user_text("Hello?")]
    assert (await h.event_types(done.id))[-1] == "agent_run.failed"
