"""Leases: a run whose worker stops renewing is timed out by the reconciler and, being
resumable, requeued; the worker that claims it next gets a new token that fences the old
worker's writes; a side-effecting call cut short is never run twice; a pool that stops
gives its unfinished runs back to the queue; a time-out the run stays in is counted as its
outcome; a run that keeps losing its worker is resumed automatically at most
`max_resume_attempts` times, then left for a person."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import Conflict
from app.core.states import RUN_SETTLED, RunStatus
from app.core.streams import RUNS_STREAM, run_stream
from app.runs.engine.reconciler import Reconciler
from app.runs.engine.runs import ResumeUnavailable
from app.runs.store import runs as run_store
from app.telemetry.metrics import Metrics
from tests.support.runs import (
    SAFETY_S,
    FakeClock,
    Harness,
    assert_valid_transcript,
    call,
    say,
)


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    async with Harness.open(clean_db) as harness:
        yield harness


async def _expire_lease(h: Harness, run_id: str) -> None:
    async with h.sessionmaker() as session, session.begin():
        await session.execute(
            text("UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = :id"),
            {"id": run_id},
        )


async def test_an_expired_lease_is_timed_out_resumed_and_the_old_worker_fenced_off(
    h: Harness,
) -> None:
    agent = await h.agent(call("gate"), say("finished"))
    run = await h.start(agent)
    old = h.new_pool(capacity=1, owner="old-worker")
    new = h.new_pool(capacity=1, owner="new-worker")
    await old.claim()
    async with asyncio.timeout(SAFETY_S):
        await h.tools.gate_entered.wait()  # the side effect is under way
    await _expire_lease(h, run.id)
    report = await Reconciler(h.sessionmaker, h.bus, h.runs).run_once()
    assert (report.timed_out, report.resumed) == (1, 1)
    requeued = await h.run(run.id)
    assert requeued.status is RunStatus.QUEUED and requeued.resume_available
    assert ["agent_run.timed_out", "agent_run.resume"] == (await h.event_types(run.id))[-2:]

    async with asyncio.timeout(SAFETY_S):
        await new.run_until_idle()
    reclaimed = await h.run(run.id)
    assert reclaimed.lease_token == run.lease_token + 2  # claimed twice
    # The new owner cannot know whether the side effect happened: it asks a human.
    assert reclaimed.status is RunStatus.WAITING_ON_HUMAN
    assert reclaimed.waiting_for is not None
    assert reclaimed.waiting_for.reason == "resume_unsafe"
    assert "agent_run.resume_unsafe" in await h.event_types(run.id)

    h.tools.gate_release.set()  # the old worker's tool finishes late
    async with asyncio.timeout(SAFETY_S):
        await old.run_until_idle()
    after = await h.run(run.id)
    assert after.status is RunStatus.WAITING_ON_HUMAN and after.version == reclaimed.version
    assert h.tools.calls["gate"] == 1  # never run a second time

    await h.runs.respond(run.id, "it went through")
    await h.drain()
    done = await h.run(run.id)
    assert done.status is RunStatus.COMPLETED and done.result == "finished"
    assert_valid_transcript(await h.messages(run.conversation_id))


async def test_a_stopping_pool_gives_unfinished_runs_back_to_the_queue(h: Harness) -> None:
    agent = await h.agent(call("gate"), say("finished"))
    first = await h.start(agent)
    behind = await h.start(agent, conversation_id=first.conversation_id)
    pool = h.new_pool(capacity=1, owner="leaving")
    await pool.claim()
    async with asyncio.timeout(SAFETY_S):
        await h.tools.gate_entered.wait()
    await pool.stop(grace_s=0)

    released = await h.run(first.id)
    assert released.status is RunStatus.QUEUED and released.lease_owner is None
    assert "agent_run.interrupted" in await h.event_types(first.id)
    assert (await h.run(behind.id)).status is RunStatus.QUEUED

    await h.drain()  # the next worker resumes it first: it keeps its place in the lane
    resumed = await h.run(first.id)
    assert resumed.status is RunStatus.WAITING_ON_HUMAN  # the gate call was cut short
    assert (await h.run(behind.id)).status is RunStatus.QUEUED  # the lane is still held


async def test_the_reconciler_leaves_unresumable_runs_timed_out(h: Harness) -> None:
    agent = await h.agent(call("ask_human", question="ok?"), say("done"))
    run = await h.finish(agent)  # paused: its last checkpoint is human_pause
    async with h.sessionmaker() as session, session.begin():  # as if it had died running
        await session.execute(
            text(
                "UPDATE runs SET status = 'running', lease_owner = 'gone', "
                "lease_expires_at = now() - interval '1 second' WHERE id = :id"
            ),
            {"id": run.id},
        )
    with h.bus.subscribe(run_stream(run.id)) as follower:
        report = await Reconciler(h.sessionmaker, h.bus, h.runs).run_once()
        assert await follower.wait(SAFETY_S)  # woken now, not at its next poll
    assert (report.timed_out, report.resumed) == (1, 0)
    stuck = await h.run(run.id)
    assert stuck.status is RunStatus.TIMED_OUT and not stuck.resume_available
    with pytest.raises(ResumeUnavailable):
        await h.runs.resume(run.id)


async def test_a_time_out_counts_as_a_run_outcome_unless_the_run_is_requeued(
    h: Harness,
) -> None:
    agent = await h.agent(say("done"))
    stays, requeued = await h.start(agent), await h.start(agent)  # lanes of their own
    metrics = Metrics()

    def outcomes() -> dict[str, float | None]:
        name = "loopwright_run_outcomes_total"
        return {
            s.value: metrics.registry.get_sample_value(name, {"status": s.value})
            for s in RUN_SETTLED
        }

    async def dies_running(run_id: str) -> None:  # claimed, then its worker died
        async with h.sessionmaker() as session, session.begin():
            await session.execute(
                text(
                    "UPDATE runs SET status = 'running', lease_owner = 'gone', lease_token = 1, "
                    "lease_expires_at = now() - interval '1 second' WHERE id = :id"
                ),
                {"id": run_id},
            )

    await dies_running(stays.id)
    manual = Reconciler(h.sessionmaker, h.bus, h.runs, auto_resume=False, metrics=metrics)
    assert (await manual.run_once()).timed_out == 1
    assert (await h.run(stays.id)).status is RunStatus.TIMED_OUT
    counted = {s.value: 0.0 for s in RUN_SETTLED} | {"timed_out": 1.0}
    assert outcomes() == counted

    await dies_running(requeued.id)  # no checkpoint yet: resumable, so back to its queue
    automatic = Reconciler(h.sessionmaker, h.bus, h.runs, metrics=metrics)
    assert (await automatic.run_once()).resumed == 1
    assert (await h.run(requeued.id)).status is RunStatus.QUEUED
    assert outcomes() == counted  # not an outcome yet: it settles when it runs again


async def test_a_timed_out_run_resumes_on_request(h: Harness) -> None:
    agent = await h.agent(call("echo", text="x"), say("done"))
    run = await h.start(agent)
    pool = h.new_pool(capacity=1, owner="dies")
    async with h.sessionmaker() as session, session.begin():  # claimed, then its worker died
        await session.execute(
            text(
                "UPDATE runs SET status = 'running', lease_owner = 'dies', lease_token = 1, "
                "lease_expires_at = now() - interval '1 second' WHERE id = :id"
            ),
            {"id": run.id},
        )
        await session.execute(
            text(INPUT_STEP),
            {"id": run.id},
        )
    manual = Reconciler(h.sessionmaker, h.bus, h.runs, auto_resume=False)
    assert (await manual.run_once()).resumed == 0
    assert (await h.run(run.id)).status is RunStatus.TIMED_OUT
    assert (await h.runs.resume(run.id)).status is RunStatus.QUEUED
    async with asyncio.timeout(SAFETY_S):
        await pool.run_until_idle()
    assert (await h.run(run.id)).status is RunStatus.COMPLETED


async def test_a_stopping_pool_lets_a_run_reach_its_boundary_then_hands_it_back(
    h: Harness,
) -> None:
    agent = await h.agent(call("gate"), say("finished"))
    run = await h.start(agent)
    pool = h.new_pool(capacity=1, owner="leaving")
    await pool.claim()
    async with asyncio.timeout(SAFETY_S):
        await h.tools.gate_entered.wait()
    stopping = asyncio.create_task(pool.stop(grace_s=SAFETY_S))
    h.tools.gate_release.set()  # the tool finishes within the grace period
    async with asyncio.timeout(SAFETY_S):
        await stopping

    handed_back = await h.run(run.id)
    assert handed_back.status is RunStatus.QUEUED and handed_back.lease_owner is None
    events = await h.event_types(run.id)
    assert events[-1] == "agent_run.interrupted"
    assert "tool_call.completed" in events  # the finished tool's result was kept

    await h.drain()
    done = await h.run(run.id)
    assert done.status is RunStatus.COMPLETED and done.result == "finished"
    assert h.tools.calls["gate"] == 1
    assert_valid_transcript(await h.messages(run.conversation_id))


async def test_a_person_may_have_a_cut_short_call_run_again(h: Harness) -> None:
    agent = await h.agent(call("gate"), say("finished"))
    run = await h.start(agent)
    old = h.new_pool(capacity=1, owner="old-worker")
    await old.claim()
    async with asyncio.timeout(SAFETY_S):
        await h.tools.gate_entered.wait()
    await _expire_lease(h, run.id)
    await Reconciler(h.sessionmaker, h.bus, h.runs).run_once()
    await h.drain()
    halted = await h.run(run.id)
    assert halted.waiting_for is not None and halted.waiting_for.reason == "resume_unsafe"
    h.tools.gate_release.set()
    async with asyncio.timeout(SAFETY_S):
        await old.run_until_idle()  # fenced off: its late result is not recorded

    await h.runs.respond(run.id, None, retry_call=True)
    await h.drain()
    done = await h.run(run.id)
    assert done.status is RunStatus.COMPLETED and done.result == "finished"
    assert h.tools.calls["gate"] == 2  # the person asked for the second execution
    assert_valid_transcript(await h.messages(run.conversation_id))


async def test_only_a_cut_short_call_can_be_retried_by_a_person(h: Harness) -> None:
    agent = await h.agent(call("ask_human", question="ok?"), say("done"))
    run = await h.finish(agent)
    with pytest.raises(Conflict):
        await h.runs.respond(run.id, None, retry_call=True)


async def _claimed_then_died(h: Harness, run_id: str, owner: str) -> None:
    """A worker claims the run as any worker does, then dies before it renews the lease
    (the lease runs on the database's clock, so it is moved into the past here)."""
    async with h.sessionmaker() as session, session.begin():
        claimed = await run_store.claim_runs(session, owner=owner, limit=10, ttl_s=30.0)
    assert [r.id for r in claimed] == [run_id]
    await _expire_lease(h, run_id)


# The run's input boundary as its worker would have written it (its messages aside).
INPUT_STEP = (
    "INSERT INTO run_history (run_id, seq, kind, status, at, conversation_id, data) "
    "SELECT id, (SELECT coalesce(max(seq), 0) + 1 FROM run_history WHERE run_id = :id), "
    "'input', 'running', now(), conversation_id, '{}' FROM runs WHERE id = :id"
)


async def _input_checkpoint(h: Harness, run_id: str) -> None:
    """The run's input boundary, as its first worker committed it before dying."""
    async with h.sessionmaker() as session, session.begin():
        await session.execute(
            text(INPUT_STEP),
            {"id": run_id},
        )


async def test_a_run_that_keeps_losing_its_worker_is_resumed_twice_then_left_to_a_person(
    h: Harness,
) -> None:
    agent = await h.agent(say("done"))
    run = await h.start(agent)
    clock = FakeClock()
    metrics = Metrics()
    reconciler = Reconciler(
        h.sessionmaker, h.bus, h.runs, max_resume_attempts=2, clock=clock, metrics=metrics
    )
    stamps = []
    for death in range(1, 4):
        await _claimed_then_died(h, run.id, owner=f"worker-{death}")
        if death == 1:
            await _input_checkpoint(h, run.id)  # a resumable boundary
        clock.advance(300)
        stamps.append(clock.now)
        report = await reconciler.run_once()
        if death < 3:
            assert (report.timed_out, report.resumed, report.resume_exhausted) == (1, 1, 0)
            assert (await h.run(run.id)).status is RunStatus.QUEUED
    assert (report.timed_out, report.resumed, report.resume_exhausted) == (1, 0, 1)

    stuck = await h.run(run.id)
    assert stuck.status is RunStatus.TIMED_OUT and stuck.resume_available
    assert stuck.stop_reason == "heartbeat_lost"
    # The error log tells a person what happened each time, on the reconciler's clock.
    assert [(e.code, e.resume, e.at) for e in stuck.error_log] == [
        ("heartbeat_lost", "automatic", stamps[0]),
        ("heartbeat_lost", "automatic", stamps[1]),
        ("heartbeat_lost", "exhausted", stamps[2]),
    ]
    events = await h.events(run.id)
    kinds = [e.type for e in events]
    assert kinds.count("agent_run.resume") == 2
    assert kinds[-2:] == ["agent_run.timed_out", "agent_run.resume_exhausted"]
    assert events[-1].data["automatic_resumes"] == 2
    assert events[-1].data["max_resume_attempts"] == 2
    assert "agent_run.resume_exhausted" in [e.type for e in await h.stream(RUNS_STREAM)]
    # Only the time-out the run stayed in is an outcome; the requeued ones settle later.
    name = "loopwright_run_outcomes_total"
    assert metrics.registry.get_sample_value(name, {"status": "timed_out"}) == 1.0

    # A person may still resume it, and it runs to the end.
    resumed = await h.runs.resume(run.id)
    assert resumed.status is RunStatus.QUEUED
    assert (await h.events(run.id))[-1].data["automatic"] is False
    await h.drain()
    done = await h.run(run.id)
    assert done.status is RunStatus.COMPLETED and done.result == "done"


async def test_only_the_runs_own_automatic_resumes_use_up_its_budget(h: Harness) -> None:
    agent = await h.agent(say("done"))
    other = await h.start(agent)
    automatic = Reconciler(h.sessionmaker, h.bus, h.runs, max_resume_attempts=2)
    manual = Reconciler(h.sessionmaker, h.bus, h.runs, auto_resume=False)

    # Another run uses up its own budget: that takes nothing from this run's.
    for death in range(3):
        await _claimed_then_died(h, other.id, owner=f"other-{death}")
        await automatic.run_once()
    assert (await h.run(other.id)).status is RunStatus.TIMED_OUT
    run = await h.start(agent)  # a lane of its own; claimed alone (the other is settled)

    # With automatic resume off, a time-out and the resume a person asks for are not
    # automatic resumes, however often they happen.
    for death in range(3):
        await _claimed_then_died(h, run.id, owner=f"manual-{death}")
        assert (await manual.run_once()).resumed == 0
        await h.runs.resume(run.id)

    # So the automatic budget is whole: two requeues, then it gives up.
    outcomes = []
    for death in range(3):
        await _claimed_then_died(h, run.id, owner=f"auto-{death}")
        report = await automatic.run_once()
        outcomes.append((report.resumed, report.resume_exhausted))
    assert outcomes == [(1, 0), (1, 0), (0, 1)]
    log = (await h.run(run.id)).error_log
    assert [e.resume for e in log] == ["disabled"] * 3 + ["automatic"] * 2 + ["exhausted"]
