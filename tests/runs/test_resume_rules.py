"""Resume rules: a changed system prompt halts a resuming run for a human; a waiting run
whose cancel request outlived the cancel timeout is cancelled by the reconciler."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.agents.schemas import AgentPatch
from app.core.states import RunStatus
from app.runs.engine.reconciler import Reconciler
from tests.support.runs import Harness, assert_valid_transcript, call, say


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    async with Harness.open(clean_db) as harness:
        yield harness


async def test_a_changed_system_prompt_halts_the_resume_until_a_human_accepts_it(
    h: Harness,
) -> None:
    agent = await h.agent(call("ask_human", question="go on?"), say("done"))
    run = await h.finish(agent)
    assert run.status is RunStatus.WAITING_ON_HUMAN
    await h.agents.update(agent.id, AgentPatch(system_prompt="Be terse."), expected_version=None)

    await h.runs.respond(run.id, "yes")
    await h.drain()
    halted = await h.run(run.id)
    assert halted.status is RunStatus.WAITING_ON_HUMAN
    assert halted.waiting_for is not None
    assert halted.waiting_for.reason == "system_prompt_changed"
    assert "agent_run.resume_unsafe" in await h.event_types(run.id)

    await h.runs.respond(run.id, "continue with the new prompt")
    await h.drain()
    done = await h.run(run.id)
    assert done.status is RunStatus.COMPLETED and done.result == "done"
    assert_valid_transcript(await h.messages(run.conversation_id))


async def test_an_overdue_cancel_of_a_waiting_run_is_carried_out(h: Harness) -> None:
    agent = await h.agent(call("ask_human", question="go on?"), say("done"))
    run = await h.finish(agent)
    async with h.sessionmaker() as session, session.begin():
        await session.execute(
            text(
                "UPDATE runs SET cancel_requested = true, "
                "cancel_requested_at = now() - interval '4 minutes' WHERE id = :id"
            ),
            {"id": run.id},
        )
    report = await Reconciler(h.sessionmaker, h.bus, h.runs).run_once()
    assert report.cancelled == 1
    cancelled = await h.run(run.id)
    assert cancelled.status is RunStatus.CANCELLED
    assert_valid_transcript(await h.messages(run.conversation_id))
