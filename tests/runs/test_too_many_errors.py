"""A model whose tool calls keep failing (the "too many errors" terminator): after
`max_consecutive_error_batches` (3) tool batches in a row in which every call failed,
the run fails as `too_many_errors` once that batch's results are recorded, and the retry
policy leaves it failed. A batch with any success starts the count again; a call a person
refused counts neither way; the count rides in the checkpoints, so a crash keeps it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import TextBlock
from app.core.model_config import ScriptedTurn
from app.core.states import RunStatus
from app.runs.engine.reconciler import Reconciler
from app.runs.loop.deps import LeaseLost
from app.runs.loop.kinds import react
from app.runs.loop.retry import RunRetryPolicy
from app.runs.store import history
from app.runs.tools.base import ToolContext, ToolFailure, define_tool
from app.telemetry.metrics import Metrics
from tests.support.runs import (
    SAFETY_S,
    Harness,
    assert_valid_transcript,
    call,
    say,
    tool_results,
)
from tests.support.scenarios import of_type

OUT_OF_STOCK = "Error: the widget is out of stock"  # what `broken` answers, every time
# Retries configured as in the service: a run that failed for a reason a retry could fix
# would be queued again; this one must not be.
RETRIES = RunRetryPolicy(base_delay_s=15.0, factor=2.0, max_retries=5)


async def error_streak(h: Harness, run_id: str) -> int:
    """The count in the run's latest checkpoint."""
    async with h.sessionmaker() as session:
        latest = await history.checkpoint(session, run_id)
    assert latest.kind is not None
    return int(latest.loop_counters["error_streak"]["batches"])


async def expire_lease(h: Harness, run_id: str) -> None:
    """The worker holding the run is gone: its lease runs out."""
    async with h.sessionmaker() as session, session.begin():
        await session.execute(
            text("UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = :id"),
            {"id": run_id},
        )


async def test_three_failing_batches_in_a_row_fail_the_run_and_it_is_not_retried(
    clean_db: AsyncEngine,
) -> None:
    metrics = Metrics()
    async with Harness.open(clean_db, run_retry=RETRIES, metrics=metrics) as h:
        same = call("broken", sku="W-1")  # the same call each time: the loop ladder and
        # stagnation would both speak up at the third batch; the terminator takes it.
        agent = await h.agent(same, same, same, say("never reached"), tools=["broken"])
        done = await h.finish(agent)

        assert (done.status, done.stop_reason) == (RunStatus.FAILED, "too_many_errors")
        assert done.error is not None and done.error.code == "too_many_errors"
        assert done.error.message == (
            f"3 tool batches in a row failed in every call; the last: {OUT_OF_STOCK}"
        )
        # Not requeued: one attempt, one entry in its error log, no retry scheduled.
        assert (done.attempt, done.not_before) == (1, None)
        assert [e.code for e in done.error_log] == ["too_many_errors"]
        assert len(h.llm_calls[agent.id]) == 3  # it stopped right after the third batch
        assert h.tools.calls["broken"] == 3

        events = await h.events(done.id)
        types = [e.type for e in events]
        assert "agent_run.retry_scheduled" not in types
        assert types[-2:] == ["agent_run.error_limit", "agent_run.failed"]
        [limit] = of_type(events, "agent_run.error_limit")
        assert (limit["max_consecutive_error_batches"], limit["batches"]) == (3, 3)
        assert limit["last_errors"] == [OUT_OF_STOCK]
        [failed] = of_type(events, "agent_run.failed")
        assert failed["stop_reason"] == "too_many_errors"
        # The third batch is the terminator's: no ladder rung, no stagnation verdict.
        assert of_type(events, "agent.loop.detected") == []
        assert of_type(events, "agent.stagnation.detected") == []
        assert len(of_type(events, "tool_call.completed")) == 3

        # Every call kept its result; the last results message carries no notes.
        messages = await h.messages(done.conversation_id)
        assert_valid_transcript(messages)
        results = tool_results(messages)
        assert [(r.content, r.is_error) for r in results] == [(OUT_OF_STOCK, True)] * 3
        assert not [b for b in messages[-1].content if isinstance(b, TextBlock)]

        # The batch's checkpoint holds the count at the limit; the final one starts over,
        # so a person's retry gives the model a fresh chance (the next test but one).
        assert (await h.checkpoint_kinds(done.id))[-2:] == ["tool_result", "final"]
        assert await error_streak(h, done.id) == 0
        assert (
            metrics.registry.get_sample_value("loopwright_run_outcomes_total", {"status": "failed"})
            == 1.0
        )
        assert metrics.registry.get_sample_value("loopwright_run_retries_total") == 0.0


async def test_a_batch_with_a_success_starts_the_count_again(h: Harness) -> None:
    # The tool error paths, each a different tool (so no loop or stagnation verdict
    # stands in the way): a tool's own failure, an exception, an unknown tool.
    mixed = ScriptedTurn.model_validate(
        {
            "tool_calls": [
                {"name": "crash", "input": {"sku": "W-5"}},
                {"name": "guarded", "input": {"sku": "W-5"}},
            ]
        }
    )
    agent = await h.agent(
        call("broken", sku="W-1"),
        call("crash", sku="W-2"),
        call("guarded", sku="W-2"),  # succeeds: the count starts again
        call("send_email", to="ops"),
        call("broken", sku="W-4"),
        mixed,  # one of its two calls fails: not an error batch
        call("no_such_tool", sku="W-6"),
        call("send_email", to="sales"),
        say("Out of stock everywhere."),
    )
    done = await h.finish(agent)

    assert (done.status, done.stop_reason) == (RunStatus.COMPLETED, "end_turn")
    assert done.result == "Out of stock everywhere."
    messages = await h.messages(done.conversation_id)
    assert [r.is_error for r in tool_results(messages)] == [
        *(True, True, False),
        *(True, True, True, False),
        *(True, True),
    ]
    assert await error_streak(h, done.id) == 2  # the last two batches
    assert of_type(await h.events(done.id), "agent.loop.detected") == []
    assert_valid_transcript(messages)


async def test_a_person_may_retry_the_failed_run_and_the_model_gets_a_fresh_count(
    h: Harness,
) -> None:
    agent = await h.agent(
        call("broken", sku="W-1"),
        call("broken", sku="W-2"),
        call("broken", sku="W-3"),
        call("broken", sku="W-4"),  # after the retry: one failure, not the fourth
        say("Back in stock, done."),
    )
    failed = await h.finish(agent)
    assert failed.stop_reason == "too_many_errors"

    await h.runs.retry(failed.id)
    await h.drain()
    done = await h.run(failed.id)
    assert (done.status, done.result) == (RunStatus.COMPLETED, "Back in stock, done.")
    assert len(h.llm_calls[agent.id]) == 5
    assert_valid_transcript(await h.messages(done.conversation_id))


async def test_a_crash_in_the_middle_of_a_run_keeps_the_count(h: Harness) -> None:
    """Two failing batches, then the worker dies while the third one's call runs; the
    worker that resumes the run re-runs the call (it is idempotent), it fails too, and
    that is the third failing batch in a row, not the first."""
    stalled = asyncio.Event()
    release = asyncio.Event()

    async def stall(context: ToolContext, arguments: dict[str, Any]) -> str:
        h.tools.calls["stall"] += 1
        if h.tools.calls["stall"] == 1:  # the first worker's call hangs until it is gone
            stalled.set()
            await release.wait()
        raise ToolFailure("the warehouse API is down")

    h.registry.add(
        define_tool(
            "stall",
            "Ask the warehouse.",
            {"type": "object"},
            stall,
            idempotent=True,
            destructive=False,
            requires_permission=False,
        )
    )
    agent = await h.agent(
        call("broken", sku="W-1"),
        call("broken", sku="W-2"),
        call("stall", sku="W-3"),
        say("done"),  # what a run that forgot its count would go on to
    )
    run = await h.start(agent)
    old = h.new_pool(capacity=1, owner="dies")
    new = h.new_pool(capacity=1, owner="resumes")
    await old.claim()
    async with asyncio.timeout(SAFETY_S):
        await stalled.wait()
    assert await error_streak(h, run.id) == 2  # in the third batch's llm_response checkpoint

    await expire_lease(h, run.id)
    report = await Reconciler(h.sessionmaker, h.bus, h.runs).run_once()
    assert (report.timed_out, report.resumed) == (1, 1)
    async with asyncio.timeout(SAFETY_S):
        await new.run_until_idle()

    done = await h.run(run.id)
    assert (done.status, done.stop_reason) == (RunStatus.FAILED, "too_many_errors")
    assert done.error is not None
    assert done.error.message.endswith("the last: Error: the warehouse API is down")
    assert h.tools.calls["stall"] == 2
    assert len(h.llm_calls[agent.id]) == 3

    release.set()  # the dead worker's call returns late: its writes are fenced off
    async with asyncio.timeout(SAFETY_S):
        await old.run_until_idle()
    after = await h.run(run.id)
    assert (after.status, after.version) == (RunStatus.FAILED, done.version)
    messages = await h.messages(run.conversation_id)
    assert_valid_transcript(messages)
    assert len(tool_results(messages)) == 3


async def test_a_crash_after_the_last_failing_batch_stops_the_resumed_run_at_once(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker dies once the third failing batch is recorded, before the run is
    settled: the next worker finds the count at the limit in that batch's checkpoint and
    fails the run before it calls the model again."""
    batches = 0

    def dies_after_the_third_batch(name: str) -> None:
        nonlocal batches
        if name == "after_tool_result":
            batches += 1
            if batches == 3:
                raise LeaseLost()  # the loop ends without writing anything more

    monkeypatch.setattr(react, "crash_point", dies_after_the_third_batch)
    agent = await h.agent(
        call("broken", sku="W-1"),
        call("broken", sku="W-2"),
        call("broken", sku="W-3"),
        say("done"),
    )
    run = await h.finish(agent)
    assert run.status is RunStatus.RUNNING  # its worker is gone
    assert (await h.checkpoint_kinds(run.id))[-1] == "tool_result"
    assert await error_streak(h, run.id) == 3

    await expire_lease(h, run.id)
    report = await Reconciler(h.sessionmaker, h.bus, h.runs).run_once()
    assert (report.timed_out, report.resumed) == (1, 1)
    await h.drain()

    done = await h.run(run.id)
    assert (done.status, done.stop_reason) == (RunStatus.FAILED, "too_many_errors")
    assert len(h.llm_calls[agent.id]) == 3  # no fourth call
    assert_valid_transcript(await h.messages(run.conversation_id))


async def test_a_call_a_person_rejected_is_not_the_models_error(h: Harness) -> None:
    """The rejection neither counts nor starts the count again: the batch after it is
    the third failing one."""
    agent = await h.agent(
        call("broken", sku="W-1"),
        call("broken", sku="W-2"),
        call("guarded", sku="W-2"),  # needs approval; a person rejects it
        call("broken", sku="W-3"),
        say("done"),
        auto_approve=["broken"],
    )
    paused = await h.finish(agent)
    assert paused.status is RunStatus.WAITING_ON_HUMAN
    assert paused.waiting_for is not None
    await h.approvals.reject(str(paused.waiting_for.approval_id), "alice", reason="no")
    await h.drain()

    done = await h.run(paused.id)
    assert (done.status, done.stop_reason) == (RunStatus.FAILED, "too_many_errors")
    assert len(h.llm_calls[agent.id]) == 4
    assert h.tools.calls["guarded"] == 0
    messages = await h.messages(done.conversation_id)
    assert_valid_transcript(messages)
    assert [r.is_error for r in tool_results(messages)] == [True] * 4
