"""Failed runs are retried with backoff, keep an error log, go to dead_letter when their
retries are used up, and a person can send a dead-lettered run back."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.agents.schemas import Limits
from app.core.errors import InvalidTransition
from app.core.model_config import ScriptedFault, ScriptedTurn
from app.core.states import RunStatus
from app.runs.loop.retry import RunRetryPolicy, run_retry_delay
from tests.support.runs import Harness, assert_valid_transcript, call, say

# No waiting in tests: a zero base makes every retry due at once.
POLICY = RunRetryPolicy(base_delay_s=0.0, max_retries=2)


def overloaded(times: int) -> ScriptedTurn:
    """A turn whose first `times` calls fail in a way the LLM call policy does not retry
    (the server says so), so each failure fails the run's attempt."""
    no_retry = {"x-should-retry": "false"}
    fault = ScriptedFault(status=503, headers=no_retry, message="overloaded", times=times)
    return ScriptedTurn(text="recovered", fault=fault)


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    async with Harness.open(clean_db, run_retry=POLICY) as harness:
        yield harness


@pytest.mark.parametrize(("retry", "delay_s"), [(1, 30.0), (2, 60.0), (3, 120.0), (5, 480.0)])
def test_the_backoff_doubles_from_thirty_seconds(retry: int, delay_s: float) -> None:
    assert run_retry_delay(RunRetryPolicy(), retry) == delay_s


async def test_a_failed_run_is_retried_and_keeps_its_error_log(h: Harness) -> None:
    agent = await h.agent(overloaded(times=2))
    run = await h.finish(agent)
    assert run.status is RunStatus.COMPLETED and run.result == "recovered"
    assert run.attempt == 3
    assert [e.attempt for e in run.error_log] == [1, 2]
    assert all(e.code == "provider_error" for e in run.error_log)
    kinds = await h.event_types(run.id)
    assert kinds.count("agent_run.failed") == 2
    assert kinds.count("agent_run.retry_scheduled") == 2
    assert_valid_transcript(await h.messages(run.conversation_id))


async def test_a_run_out_of_retries_is_dead_lettered_and_can_be_sent_back(h: Harness) -> None:
    agent = await h.agent(overloaded(times=3))
    run = await h.finish(agent)
    assert run.status is RunStatus.DEAD_LETTER
    assert len(run.error_log) == 3  # the first try and both retries
    assert "agent_run.dead_letter" in await h.event_types(run.id)

    revived = await h.runs.retry(run.id)
    assert revived.status is RunStatus.QUEUED and revived.attempt == 1
    await h.drain()
    done = await h.run(run.id)
    assert done.status is RunStatus.COMPLETED and done.result == "recovered"
    assert len(done.error_log) == 3  # kept


async def test_only_settled_failures_can_be_retried(h: Harness) -> None:
    agent = await h.agent(say("fine"))
    run = await h.finish(agent)
    with pytest.raises(InvalidTransition):
        await h.runs.retry(run.id)


async def test_a_backing_off_run_holds_its_place_in_the_lane(clean_db: AsyncEngine) -> None:
    slow = RunRetryPolicy(base_delay_s=3600.0, max_retries=1)
    async with Harness.open(clean_db, run_retry=slow) as h:
        agent = await h.agent(overloaded(times=1))
        first = await h.start(agent)
        later = await h.start(agent, conversation_id=first.conversation_id)
        await h.drain()
        waiting = await h.run(first.id)
        assert waiting.status is RunStatus.QUEUED and waiting.not_before is not None
        assert (await h.run(later.id)).status is RunStatus.QUEUED  # not run ahead of it


async def test_a_refused_request_fails_the_run_at_once_without_retries(h: Harness) -> None:
    """A 400 says the request itself is wrong: no later attempt can fix it."""
    refused = ScriptedFault(status=400, message="invalid request: bad schema", times=1)
    agent = await h.agent(ScriptedTurn(text="never", fault=refused))
    done = await h.finish(agent)
    assert (done.status, done.attempt) == (RunStatus.FAILED, 1)
    assert [e.code for e in done.error_log] == ["provider_error"]
    assert "agent_run.retry_scheduled" not in await h.event_types(done.id)


async def test_a_run_past_its_hard_time_limit_fails_without_retries(h: Harness) -> None:
    """Another attempt would start a fresh time limit: a person decides instead."""
    limits = Limits(soft_time_limit_s=60, hard_time_limit_s=120)
    agent = await h.agent(call("advance_clock", seconds=150), say("too late"), limits=limits)
    done = await h.finish(agent)
    assert (done.status, done.attempt, done.stop_reason) == (
        RunStatus.FAILED,
        1,
        "hard_time_limit",
    )
    assert "agent_run.retry_scheduled" not in await h.event_types(done.id)
    retried = await h.runs.retry(done.id)  # a person may still send it back
    assert retried.status is RunStatus.QUEUED
