"""A provider that misbehaves, under the agent loop: each LLM call goes through the call
policy, and the scripted model's faults are classed as Anthropic's API would class them.
Rate limits wait what `retry-after` says, overload storms are ridden out in the
foreground and switch to the fallback model after N in a row, a context overflow is
retried with the room left, `x-should-retry: false` is obeyed, a dropped connection is
retried, and an open circuit breaker sends calls straight to the fallback model.

The injected sleep records each wait (`h.sleeps`); nothing waits for real."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.agents.schemas import AgentRead, Limits
from app.core.breakers import CircuitBreakerPolicy
from app.core.model_config import ScriptedFault, ScriptedTurn
from app.core.states import RunStatus
from app.llm.providers.scripted.provider import ScriptedProvider
from tests.support.runs import Harness, assert_valid_transcript, call, say
from tests.support.scenarios import (
    MODEL,
    AttemptLog,
    fields_of,
    of_type,
    scripted_agent,
)

FALLBACK = "scripted-small"
ANSWER = "The invoice is paid."


def faulty(fault: ScriptedFault, text: str = ANSWER) -> ScriptedTurn:
    return ScriptedTurn(text=text, fault=fault)


def attempts_of(h: Harness, agent: AgentRead) -> AttemptLog:
    """Every attempt the agent's model receives, failed ones included."""
    assert agent.model.script is not None
    log = AttemptLog(ScriptedProvider(agent.model.script))
    h.models[agent.id] = log
    return log


async def retries(h: Harness, run_id: str) -> list[dict[str, Any]]:
    return of_type(await h.events(run_id), "agent.llm.retry")


def within_jitter(delay: float, base: float) -> bool:
    """The backoff formula's delay for `base`: up to 25 % jitter on top, never less."""
    return base <= delay <= base * 1.25


async def test_a_429_with_retry_after_waits_what_the_server_asked_then_completes(
    h: Harness,
) -> None:
    limited = ScriptedFault(status=429, message="rate limited", headers={"retry-after": "7"})
    agent = await scripted_agent(h, faulty(limited))
    log = attempts_of(h, agent)
    done = await h.finish(agent, "Is the invoice paid?")

    assert (done.status, done.result) == (RunStatus.COMPLETED, ANSWER)
    assert h.sleeps == [7.0]
    [retry] = await retries(h, done.id)
    assert retry["purpose"] == "main_loop"
    assert (retry["class"], retry["http_status"], retry["attempt"]) == ("rate_limited", 429, 1)
    assert retry["delay_s"] == 7.0
    assert len(log.requests) == 2
    assert done.iteration == 1  # one logical call, however many attempts it took
    assert_valid_transcript(await h.messages(done.conversation_id))


async def test_rate_limits_waited_out_in_persistent_mode_are_not_charged_to_the_time_limit(
    h: Harness,
) -> None:
    async def waits_out(delay_s: float) -> None:  # the wait takes its time on the run's clock
        h.sleeps.append(delay_s)
        h.clock.advance(delay_s)

    h.deps.sleep = waits_out
    limited = ScriptedFault(
        status=429, message="rate limited", headers={"retry-after": "100"}, times=3
    )
    first = ScriptedTurn(tool_calls=call("echo", invoice=7).tool_calls, fault=limited)
    limits = Limits(soft_time_limit_s=60, hard_time_limit_s=120, persistent_retries=True)
    agent = await scripted_agent(h, first, say(ANSWER), limits=limits)
    done = await h.finish(agent)

    # 300 s waiting on the rate limit, more than the hard limit: the run still completes,
    # its next call made after the boundary check that counts the time it worked.
    assert sum(h.sleeps) == 300
    assert (done.status, done.result) == (RunStatus.COMPLETED, ANSWER)
    assert done.iteration == 2


async def test_an_overload_storm_in_the_foreground_is_retried_with_backoff(h: Harness) -> None:
    storm = ScriptedFault(status=529, message="Overloaded", times=2)
    agent = await scripted_agent(h, call("echo", invoice=7), faulty(storm))
    log = attempts_of(h, agent)
    done = await h.finish(agent)

    assert (done.status, done.result) == (RunStatus.COMPLETED, ANSWER)
    found = await retries(h, done.id)
    assert [(r["class"], r["http_status"], r["attempt"]) for r in found] == [
        ("overloaded", 529, 1),
        ("overloaded", 529, 2),
    ]
    assert len(h.sleeps) == 2
    assert within_jitter(h.sleeps[0], 0.5) and within_jitter(h.sleeps[1], 1.0)
    assert [r["delay_s"] for r in found] == [round(s, 3) for s in h.sleeps]
    assert [r.model for r in log.requests] == [MODEL] * 4  # no fallback model configured
    assert of_type(await h.events(done.id), "agent.llm.fallback") == []


async def test_after_three_overloads_in_a_row_the_fallback_model_answers(h: Harness) -> None:
    storm = ScriptedFault(status=529, message="Overloaded", times=3)
    agent = await scripted_agent(
        h,
        ScriptedTurn(tool_calls=[{"name": "echo"}], fault=storm),
        say(ANSWER),
        fallback_name=FALLBACK,
    )
    log = attempts_of(h, agent)
    done = await h.finish(agent)

    assert (done.status, done.result) == (RunStatus.COMPLETED, ANSWER)
    events = await h.events(done.id)
    [fallback] = of_type(events, "agent.llm.fallback")
    expected = {"from_model": MODEL, "to_model": FALLBACK, "reason": "overloaded", "overloads": 3}
    assert fields_of(fallback, expected) == expected
    # Two waits, then the switch at once; the next LLM call starts from the primary again.
    assert len(h.sleeps) == 2
    assert [r.model for r in log.requests] == [MODEL, MODEL, MODEL, FALLBACK, MODEL]
    [first, second] = h.llm_calls[agent.id]
    assert (first.request.model, first.response.model) == (FALLBACK, FALLBACK)
    assert second.request.model == MODEL
    assert_valid_transcript(await h.messages(done.conversation_id))


async def test_a_context_overflow_is_retried_at_once_with_the_room_left_for_the_answer(
    h: Harness,
) -> None:
    overflow = ScriptedFault(
        status=400,
        message="input length and `max_tokens` exceed context limit: 188059 + 20000 > 200000",
    )
    agent = await scripted_agent(
        h,
        ScriptedTurn(tool_calls=[{"name": "echo"}], fault=overflow),
        say(ANSWER),
        max_output_tokens=20_000,
    )
    log = attempts_of(h, agent)
    done = await h.finish(agent)

    assert (done.status, done.result) == (RunStatus.COMPLETED, ANSWER)
    assert [r.max_tokens for r in log.requests] == [20_000, 11_941, 20_000]
    assert [c.request.max_tokens for c in h.llm_calls[agent.id]] == [11_941, 20_000]
    [adjusted] = of_type(await h.events(done.id), "agent.llm.max_tokens_adjusted")
    expected = {"model": MODEL, "from": 20_000, "to": 11_941}
    assert fields_of(adjusted, expected) == expected
    assert h.sleeps == []  # a fixed request needs no wait
    assert await retries(h, done.id) == []


async def test_x_should_retry_false_is_obeyed_and_the_run_fails_with_provider_error(
    h: Harness,
) -> None:
    refused = ScriptedFault(
        status=503, message="Service unavailable", headers={"x-should-retry": "false"}
    )
    agent = await scripted_agent(h, faulty(refused))
    log = attempts_of(h, agent)
    done = await h.finish(agent, "Is the invoice paid?")

    assert (done.status, done.stop_reason) == (RunStatus.FAILED, "provider_error")
    assert done.error is not None and done.error.code == "provider_error"
    assert "[server_error]" in done.error.message and "1 attempt" in done.error.message
    assert len(log.requests) == 1
    assert h.sleeps == []
    events = await h.events(done.id)
    assert of_type(events, "agent.llm.retry") == []
    [failed] = of_type(events, "agent_run.failed")
    assert failed["error"]["code"] == "provider_error"
    assert (await h.checkpoint_kinds(done.id))[-1] == "final"
    assert_valid_transcript(await h.messages(done.conversation_id))


async def test_a_dropped_connection_is_retried_and_the_run_completes(h: Harness) -> None:
    dropped = ScriptedFault(kind="connection", message="connection reset by peer")
    agent = await scripted_agent(h, faulty(dropped))
    log = attempts_of(h, agent)
    done = await h.finish(agent)

    assert (done.status, done.result) == (RunStatus.COMPLETED, ANSWER)
    [retry] = await retries(h, done.id)
    assert (retry["class"], retry["http_status"], retry["attempt"]) == ("connection", None, 1)
    assert "connection reset" in retry["error"]
    [delay] = h.sleeps
    assert within_jitter(delay, 0.5)
    assert len(log.requests) == 2


async def open_breaker(h: Harness, model: str) -> None:
    """Trip the breaker of the agent's primary model, as an outage another run of this
    process ran into would have."""
    breaker = h.breakers.get(f"provider:scripted:{model}")
    assert breaker.allow()
    breaker.record(failed=True)


async def test_an_open_breaker_sends_every_call_straight_to_the_fallback_model(
    clean_db: AsyncEngine,
) -> None:
    policy = CircuitBreakerPolicy(window_calls=1, min_calls=1, cooldown_s=60)
    async with Harness.open(clean_db, breaker_policy=policy) as h:
        await open_breaker(h, MODEL)
        agent = await scripted_agent(h, call("echo"), say(ANSWER), fallback_name=FALLBACK)
        log = attempts_of(h, agent)
        done = await h.finish(agent)

        assert (done.status, done.result) == (RunStatus.COMPLETED, ANSWER)
        assert [r.model for r in log.requests] == [FALLBACK, FALLBACK]  # none hit the primary
        events = await h.events(done.id)
        expected = {"from_model": MODEL, "to_model": FALLBACK, "reason": "breaker_open"}
        fallbacks = of_type(events, "agent.llm.fallback")
        assert [fields_of(f, expected) for f in fallbacks] == [expected, expected]
        assert h.sleeps == []
        breakers = h.breakers.snapshot()
        assert breakers[f"provider:scripted:{MODEL}"] == "open"
        assert breakers[f"provider:scripted:{FALLBACK}"] == "closed"


async def test_a_breaker_opened_by_failures_sends_the_rest_of_the_run_to_the_fallback(
    clean_db: AsyncEngine,
) -> None:
    policy = CircuitBreakerPolicy(window_calls=2, min_calls=2, cooldown_s=60)
    async with Harness.open(clean_db, breaker_policy=policy) as h:
        down = ScriptedFault(status=500, message="Internal server error", times=2)
        agent = await scripted_agent(
            h,
            ScriptedTurn(tool_calls=[{"name": "echo"}], fault=down),
            say(ANSWER),
            fallback_name=FALLBACK,
        )
        log = attempts_of(h, agent)
        done = await h.finish(agent)

        assert (done.status, done.result) == (RunStatus.COMPLETED, ANSWER)
        # The second failure opened the breaker: no wait, and no attempt at the primary
        # model from then on, in this call or the next.
        assert [r.model for r in log.requests] == [MODEL, MODEL, FALLBACK, FALLBACK]
        assert len(h.sleeps) == 1
        events = await h.events(done.id)
        opened = {"breaker": f"provider:scripted:{MODEL}", "cooldown_s": 60}
        assert [fields_of(e, opened) for e in of_type(events, "agent.breaker.opened")] == [opened]
        assert [f["reason"] for f in of_type(events, "agent.llm.fallback")] == ["breaker_open"] * 2
        assert_valid_transcript(await h.messages(done.conversation_id))


async def test_an_open_breaker_without_a_fallback_fails_the_run_without_any_attempt(
    clean_db: AsyncEngine,
) -> None:
    policy = CircuitBreakerPolicy(window_calls=1, min_calls=1, cooldown_s=60)
    async with Harness.open(clean_db, breaker_policy=policy) as h:
        await open_breaker(h, MODEL)
        agent = await scripted_agent(h, say(ANSWER))
        log = attempts_of(h, agent)
        done = await h.finish(agent)

        assert (done.status, done.stop_reason) == (RunStatus.FAILED, "provider_error")
        assert done.error is not None
        assert "[circuit_open]" in done.error.message
        assert "no attempt was made" in done.error.message
        assert log.requests == []
        assert h.sleeps == []
