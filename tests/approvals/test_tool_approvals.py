"""Fail-closed tool approvals in the agent loop, on the real database: a side-effecting
call the agent's operator did not allow waits for a person, with a summary to decide
from (the agent, what it said it was about to do, the arguments); approved, it runs once
with the approved arguments; rejected, it never runs and the agent reads why."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.approvals import store as approval_store
from app.approvals.engine.approval_summaries import NO_INTENT
from app.core.errors import Conflict
from app.core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from app.core.model_config import ScriptedTurn
from app.core.states import ApprovalStatus, RunStatus
from app.runs.schemas.runs import RunRead
from tests.support.history import append_messages
from tests.support.runs import Harness, assert_valid_transcript, call, say, tool_results


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    async with Harness.open(clean_db) as harness:
        yield harness


def guarded(**arguments: object) -> ScriptedTurn:
    """`guarded` is a side-effecting test tool (define_tool's defaults)."""
    return call("guarded", **arguments)


async def waiting_approval(h: Harness, run: RunRead) -> str:
    assert run.status is RunStatus.WAITING_ON_HUMAN
    assert run.waiting_for is not None and run.waiting_for.reason == "approval"
    return str(run.waiting_for.approval_id)


async def test_a_side_effecting_call_waits_for_approval_then_runs_once(h: Harness) -> None:
    agent = await h.agent(guarded(to="ops"), say("Sent."), auto_approve=[])
    paused = await h.finish(agent, "Tell ops.")
    approval_id = await waiting_approval(h, paused)
    assert h.tools.calls["guarded"] == 0  # nothing ran before a person said yes
    async with h.sessionmaker() as session:
        approval = await approval_store.get_approval(session, approval_id)
    assert approval is not None
    assert (approval.status, approval.tool, approval.arguments) == (
        ApprovalStatus.PENDING,
        "guarded",
        {"to": "ops"},
    )
    assert approval.run_id == paused.id
    # The scripted model says nothing beside its calls: the summary says so.
    assert approval.summary == (
        f"Agent 'scripted-agent' asks to call 'guarded'.\nIntent: {NO_INTENT}\n"
        'Arguments: {"to": "ops"}'
    )
    assert approval.decision is None

    await h.approvals.approve(approval_id, "alice")
    await h.drain()
    done = await h.run(paused.id)
    assert (done.status, done.result) == (RunStatus.COMPLETED, "Sent.")
    assert h.tools.calls["guarded"] == 1
    messages = await h.messages(done.conversation_id)
    assert [r.content for r in tool_results(messages)] == ["guarded ran"]
    assert_valid_transcript(messages)


async def test_a_rejected_call_never_runs_and_the_agent_reads_the_reason(h: Harness) -> None:
    agent = await h.agent(guarded(to="everyone"), say("Understood."), auto_approve=[])
    paused = await h.finish(agent)
    approval_id = await waiting_approval(h, paused)
    await h.approvals.reject(approval_id, "alice", reason="not to everyone")
    await h.drain()
    done = await h.run(paused.id)
    assert (done.status, done.result) == (RunStatus.COMPLETED, "Understood.")
    assert h.tools.calls["guarded"] == 0
    [result] = tool_results(await h.messages(done.conversation_id))
    assert result.is_error and "not to everyone" in result.content
    # What the model saw next is that refusal.
    last = h.llm_calls[agent.id][-1].request.messages[-1]
    assert any("not to everyone" in getattr(b, "content", "") for b in last.content)


async def test_idempotent_and_operator_allowed_calls_ask_nobody(h: Harness) -> None:
    agent = await h.agent(
        call("echo", x=1), guarded(to="ops"), say("Done."), auto_approve=["guarded"]
    )
    done = await h.finish(agent)
    assert (done.status, h.tools.calls["guarded"]) == (RunStatus.COMPLETED, 1)
    async with h.sessionmaker() as session:
        asked = await approval_store.list_approvals(
            session, after_id=None, limit=10, filters={"run_id": done.id}
        )
    assert asked == []


async def test_a_human_response_cannot_stand_in_for_an_approval(h: Harness) -> None:
    agent = await h.agent(guarded(to="ops"), say("Sent."), auto_approve=[])
    paused = await h.finish(agent)
    await waiting_approval(h, paused)
    with pytest.raises(Conflict, match="approve or reject"):
        await h.runs.respond(paused.id, "sure, go ahead")
    assert h.tools.calls["guarded"] == 0


async def test_two_gated_calls_in_one_batch_are_asked_one_after_the_other(h: Harness) -> None:
    both = ScriptedTurn.model_validate(
        {
            "tool_calls": [
                {"name": "guarded", "input": {"to": "ops"}},
                {"name": "guarded", "input": {"to": "sales"}},
            ]
        }
    )
    agent = await h.agent(both, say("Both sent."), auto_approve=[])
    first = await h.finish(agent)
    first_id = await waiting_approval(h, first)
    await h.approvals.approve(first_id, "alice")
    await h.drain()

    # The second call was held back by its own approval: resuming asks again, not as a
    # call cut short by a crash.
    second = await h.run(first.id)
    second_id = await waiting_approval(h, second)
    assert second_id != first_id
    assert h.tools.calls["guarded"] == 1
    await h.approvals.approve(second_id, "alice")
    await h.drain()
    done = await h.run(first.id)
    assert (done.status, done.result) == (RunStatus.COMPLETED, "Both sent.")
    assert h.tools.calls["guarded"] == 2
    uses = [
        b
        for m in await h.messages(done.conversation_id)
        for b in m.content
        if isinstance(b, ToolUseBlock)
    ]
    assert [u.input for u in uses] == [{"to": "ops"}, {"to": "sales"}]
    assert_valid_transcript(await h.messages(done.conversation_id))


async def test_the_intent_is_the_run_s_latest_text_up_to_the_call(h: Harness) -> None:
    """What the model said beside the call wins; else what it said before, in this run
    (not an earlier run of the conversation, nor anything after the call)."""
    agent = await h.agent(say("unused"))
    earlier = await h.start(agent, "first run")
    run = await h.start(agent, "second run", conversation_id=earlier.conversation_id)
    cid = run.conversation_id

    def use(call_id: str) -> ToolUseBlock:
        return ToolUseBlock(id=call_id, name="guarded", input={})

    def result(call_id: str) -> Message:
        return Message(role="user", content=[ToolResultBlock(tool_use_id=call_id, content="ok")])

    def said(text: str, *blocks: ToolUseBlock) -> Message:
        return Message(role="assistant", content=[TextBlock(text=text), *blocks])

    async with h.sessionmaker() as session, session.begin():
        await append_messages(
            session, cid, [said("Another run's plan.", use("c0")), result("c0")], earlier.id
        )
        await append_messages(
            session,
            cid,
            [
                said("First I check the list, then I write to ops."),
                Message.user_text("go on"),
                Message(role="assistant", content=[use("c1")]),
                result("c1"),
                said("Now I tell ops.", use("c2")),
                result("c2"),
                said("Done, ops know."),
            ],
            run.id,
        )

    async def intent(call_id: str) -> str | None:
        async with h.sessionmaker() as session:
            return await approval_store.stated_intent(session, cid, run.id, call_id)

    assert await intent("c2") == "Now I tell ops."
    assert await intent("c1") == "First I check the list, then I write to ops."
    async with h.sessionmaker() as session:
        assert await approval_store.stated_intent(session, cid, earlier.id, "c0") == (
            "Another run's plan."
        )
    asked = await h.approvals.request_tool_approval(run, "c2", "guarded", {"to": "ops"}, "?")
    assert asked.summary.splitlines()[1] == "Intent: Now I tell ops."
