"""Tools that fail under the agent loop, climbing the escalation ladder: a flaky idempotent
tool is retried after 0.5 s, 2 s and 8 s (each plus up to 25 % jitter) until it answers; a
side-effecting tool that fails is never retried, and its error goes to the model, which
carries on; a declared fallback tool answers for a failing one; an optional tool that
fails is withdrawn for the rest of the run."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.states import RunStatus
from app.runs.loop.retry import ToolRetryPolicy
from app.runs.store import history
from app.runs.tools.base import ToolContext, ToolFailure, ToolHandler, define_tool
from tests.support.runs import Harness, assert_valid_transcript, call, say, tool_results
from tests.support.scenarios import of_type

SCHEDULE_S = (0.5, 2.0, 8.0)  # the service's default tool retry delays


async def test_a_flaky_idempotent_tool_is_retried_with_growing_delays_until_it_answers(
    clean_db: AsyncEngine,
) -> None:
    async with Harness.open(clean_db, retry_policy=ToolRetryPolicy(SCHEDULE_S)) as h:
        h.tools.flaky_failures = 3  # the fourth attempt answers
        agent = await h.agent(call("flaky", id="A-1"), say("Got it."), tools=["flaky"])
        done = await h.finish(agent)

        assert (done.status, done.result) == (RunStatus.COMPLETED, "Got it.")
        assert h.tools.calls["flaky"] == 4
        events = await h.events(done.id)
        retried = of_type(events, "agent.tool.retry")
        assert [(r["tool"], r["attempt"]) for r in retried] == [("flaky", n) for n in (1, 2, 3)]
        assert all(r["error"] == "upstream answered 503" for r in retried)
        # Each wait is the schedule's delay plus at most 25 % jitter, slept through the
        # injected sleep, and the event says how long.
        assert len(h.sleeps) == 3
        for slept, base in zip(h.sleeps, SCHEDULE_S, strict=True):
            assert base <= slept <= base * 1.25
        assert [r["delay_s"] for r in retried] == [round(s, 3) for s in h.sleeps]
        [completed] = of_type(events, "tool_call.completed")
        assert (completed["is_error"], completed["attempts"]) == (False, 4)

        transcript = await h.transcript(done.conversation_id)
        [result] = tool_results(transcript)
        assert (result.content, result.is_error) == ("flaky answered", False)
        assert tool_results(h.llm_calls[agent.id][1].request.messages) == [result]
        assert h.breakers.snapshot()["tool:flaky"] == "closed"
        assert_valid_transcript(transcript)


async def test_a_flaky_tool_that_never_recovers_reports_its_error_after_three_retries(
    clean_db: AsyncEngine,
) -> None:
    async with Harness.open(clean_db, retry_policy=ToolRetryPolicy(SCHEDULE_S)) as h:
        h.tools.flaky_failures = 10
        agent = await h.agent(call("flaky"), say("The service is down."), tools=["flaky"])
        done = await h.finish(agent)

        assert (done.status, done.result) == (RunStatus.COMPLETED, "The service is down.")
        assert h.tools.calls["flaky"] == 4  # one attempt and three retries
        assert len(h.sleeps) == 3
        [result] = tool_results(await h.transcript(done.conversation_id))
        assert (result.content, result.is_error) == ("Error: upstream answered 503", True)


async def test_a_failing_side_effecting_tool_is_not_retried_and_the_model_sees_the_error(
    clean_db: AsyncEngine,
) -> None:
    async with Harness.open(clean_db, retry_policy=ToolRetryPolicy(SCHEDULE_S)) as h:
        agent = await h.agent(
            call("send_email", to="ops@example.com"),
            say("The mail could not be sent; please check the mail server."),
            tools=["send_email"],
        )
        done = await h.finish(agent)

        # The failure was transient, but a retry could send the mail twice.
        assert h.tools.calls["send_email"] == 1
        assert h.sleeps == []
        assert (done.status, done.stop_reason) == (RunStatus.COMPLETED, "end_turn")
        events = await h.events(done.id)
        assert of_type(events, "agent.tool.retry") == []
        [completed] = of_type(events, "tool_call.completed")
        assert (completed["is_error"], completed["attempts"]) == (True, 1)
        assert completed["result"] == "Error: mail server timed out"

        transcript = await h.transcript(done.conversation_id)
        [result] = tool_results(transcript)
        assert (result.content, result.is_error) == ("Error: mail server timed out", True)
        assert tool_results(h.llm_calls[agent.id][1].request.messages) == [result]
        assert_valid_transcript(transcript)


def add_forecast_tools(h: Harness) -> None:
    """`forecast` (its service refuses every call) with a declared fallback,
    `forecast_cache`, which answers; and `radar` (optional, refused, no fallback). Calls
    that reach a refused service are counted in `h.tools.calls["refused"]`."""

    async def refused(context: ToolContext, arguments: dict[str, Any]) -> str:
        h.tools.calls["refused"] += 1
        raise ToolFailure("the forecast service refused the request")

    async def cached(context: ToolContext, arguments: dict[str, Any]) -> str:
        return "Cached forecast: rain."

    tools: list[tuple[str, ToolHandler, dict[str, Any]]] = [
        ("forecast", refused, {"fallback": "forecast_cache"}),
        ("forecast_cache", cached, {}),
        ("radar", refused, {"optional": True}),
    ]
    for name, handler, options in tools:
        h.registry.add(
            define_tool(
                name,
                f"Test tool {name}.",
                {"type": "object"},
                handler,
                destructive=False,
                requires_permission=False,
                **options,
            )
        )


async def test_a_failing_tool_with_a_fallback_is_answered_by_the_fallback(h: Harness) -> None:
    add_forecast_tools(h)
    agent = await h.agent(call("forecast", city="Oslo"), say("Rain, says the cache."))
    done = await h.finish(agent)

    assert (done.status, done.result) == (RunStatus.COMPLETED, "Rain, says the cache.")
    [result] = tool_results(await h.transcript(done.conversation_id))
    assert result.is_error is False
    assert result.content == (
        "[forecast failed; this result comes from forecast_cache]\nCached forecast: rain."
    )
    assert h.tools.calls["refused"] == 1  # a permanent failure is not retried
    [fallback] = of_type(await h.events(done.id), "agent.tool.fallback")
    assert (fallback["tool"], fallback["fallback"], fallback["reason"]) == (
        "forecast",
        "forecast_cache",
        "failed",
    )


async def test_an_optional_tool_that_fails_is_withdrawn_for_the_rest_of_the_run(
    h: Harness,
) -> None:
    add_forecast_tools(h)
    agent = await h.agent(
        call("radar", city="Oslo"),
        call("radar", city="Bergen"),  # the model tries again anyway
        say("No radar today."),
    )
    done = await h.finish(agent)

    assert (done.status, done.result) == (RunStatus.COMPLETED, "No radar today.")
    first, second = tool_results(await h.transcript(done.conversation_id))
    assert first.is_error and "unavailable for the rest of this run" in first.content
    assert "the forecast service refused the request" in first.content  # the last error
    assert second.is_error and "unavailable for the rest of this run" in second.content
    assert h.tools.calls["refused"] == 1  # the second call never reached the tool
    [degraded] = of_type(await h.events(done.id), "agent.tool.degraded")
    assert degraded["tool"] == "radar"
    # The model is no longer offered the tool, and the checkpoints remember it.
    offered = [[t.name for t in c.request.tools] for c in h.llm_calls[agent.id]]
    assert "radar" in offered[0]
    assert all("radar" not in names for names in offered[1:])
    async with h.sessionmaker() as session:
        latest = await history.checkpoint(session, done.id)
    assert latest.loop_counters["degraded_tools"] == ["radar"]
