"""The review gate on the real database, with a real TaskEngine, TaskRuns and worker pool:
a task whose run completes waits in review on an approval that summarises the task and the
result; approving completes it, rejecting sends it back with the reason for a rework run;
the sweeps finish what a crash left half done; unanswered reviews expire into their
timeout policy on an injected clock, and an answer after the deadline is refused as
`approval_expired` whether or not the sweep came first. Also the tool-call side: asking is
idempotent and a decision (or an expiry) releases the waiting run."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.approvals import store as approval_store
from app.approvals.engine.approval_timeouts import ApprovalTimeoutScheduler
from app.approvals.engine.approvals import TIMEOUT_ACTOR, ApprovalCommands, ExpiryReport
from app.approvals.engine.tool_approvals import rejection_result, waiting_for
from app.approvals.schemas import ApprovalRead
from app.core.config import ApprovalSettings
from app.core.errors import ApprovalExpired
from app.core.states import ApprovalDecision, ApprovalStatus, ExecutionStatus, RunStatus, TaskStatus
from app.core.streams import APPROVALS_STREAM
from app.core.vocabulary import ApprovalKind, ReviewTimeoutPolicy
from app.runs.schemas.runs import RunRead
from app.runs.store import history
from app.runs.store import runs as run_store
from app.tasks.engine.review_gate import ReviewGate
from app.tasks.engine.task_engine import TaskEngine
from app.tasks.engine.task_mutations import TransitionTask
from app.tasks.engine.task_runs import TaskRuns, run_input
from app.workflows import store as workflow_store
from app.workflows.engine.workflows import WorkflowCommands
from app.workflows.schemas.workflows import ActivateRequest, WorkflowCreate
from tests.support.runs import SAFETY_S, Harness, call, say
from tests.support.tasks import TaskWorld

T = TaskStatus
A = ApprovalStatus
D = ApprovalDecision
DAY_S = 86_400


@dataclass
class World(TaskWorld):
    approvals: ApprovalCommands
    gate: ReviewGate
    sweep: ApprovalTimeoutScheduler

    async def reviews(self, task_id: str) -> list[ApprovalRead]:
        async with self.h.sessionmaker() as session:
            return await approval_store.list_approvals(
                session, after_id=None, limit=100, filters={"task_id": task_id}
            )

    async def review(self, task_id: str, review_round: int) -> ApprovalRead:
        """The task's review of this round once it exists (woken by the approvals stream)."""
        with self.h.bus.subscribe(APPROVALS_STREAM) as wake:
            async with asyncio.timeout(SAFETY_S):
                while True:
                    found = [
                        r for r in await self.reviews(task_id) if r.review_round == review_round
                    ]
                    if found:
                        return found[0]
                    await wake.wait(0.05)


OpenWorld = Callable[..., Awaitable[World]]


@pytest.fixture
async def open_world(clean_db: AsyncEngine) -> AsyncIterator[OpenWorld]:
    """Build a world; `live=False` leaves TaskRuns and the pool stopped (as after a crash)
    for tests that drive each step; other keywords are approval settings."""
    async with contextlib.AsyncExitStack() as stack:

        async def build(live: bool = True, **settings: object) -> World:
            h = await stack.enter_async_context(Harness.open(clean_db))
            tasks = TaskEngine(h.sessionmaker, h.bus)
            tasks.start()
            stack.push_async_callback(tasks.stop)
            bridge = TaskRuns(h.sessionmaker, tasks, h.runs, h.bus, poll_interval_s=0.05)
            approvals = ApprovalCommands(
                h.sessionmaker,
                h.bus,
                tasks,
                ApprovalSettings.model_validate(settings),
                clock=h.clock,
            )
            gate = ReviewGate(h.sessionmaker, tasks, approvals)
            gate.start()
            stack.push_async_callback(gate.stop)
            pool = h.new_pool(capacity=2, owner="pool-b")
            if live:
                bridge.start()
                stack.push_async_callback(bridge.stop)
                pool.start()
                stack.push_async_callback(pool.stop, SAFETY_S)
            sweep = ApprovalTimeoutScheduler(h.sessionmaker, approvals, gate)
            return World(h, tasks, bridge, pool, approvals, gate, sweep)

        yield build


@pytest.fixture
async def world(open_world: OpenWorld) -> World:
    return await open_world()


async def test_a_completed_run_waits_in_review_and_approval_completes_the_task(
    world: World,
) -> None:
    await world.h.agent(say("The report is written."), name="writer")
    task = await world.create(
        "Write the report", "writer", acceptance_criteria=["Covers Q3", "Under two pages"]
    )
    await world.reach(task.id, T.IN_REVIEW)
    review = await world.review(task.id, 1)
    [run] = await world.runs(task.id)
    assert (review.kind, review.status, review.run_id, review.task_id) == (
        ApprovalKind.TASK_REVIEW,
        A.PENDING,
        run.id,
        task.id,
    )
    # No workflow: the configured defaults, 24 hours then escalate.
    assert (review.timeout_s, review.timeout_policy) == (DAY_S, ReviewTimeoutPolicy.ESCALATE)
    assert review.expires_at - review.created_at == timedelta(days=1)
    assert "Write the report" in review.question
    # What the reviewer decides from: the task, what "done" means, what the run handed in.
    assert review.summary == (
        "Task: Write the report\n"
        "Acceptance criteria:\n- Covers Q3\n- Under two pages\n"
        f"Result of run {run.id}: The report is written."
    )
    assert review.decision is None

    approved = await world.approvals.approve(review.id, "ann", comment="Looks good.")
    assert (approved.status, approved.decision, approved.decided_by, approved.comment) == (
        A.APPROVED,
        D.APPROVED,
        "ann",
        "Looks good.",
    )
    done = await world.task(task.id)
    assert done.status is T.COMPLETED
    assert await world.trail(task.id) == [
        (T.ASSIGNED, T.IN_PROGRESS),
        (T.IN_PROGRESS, T.IN_REVIEW),
        (T.IN_REVIEW, T.COMPLETED),
    ]
    assert len(await world.runs(task.id)) == 1  # approval dispatches nothing
    types = [e.type for e in await world.h.stream(APPROVALS_STREAM)]
    assert types == ["approval.requested", "approval.approved"]


async def test_a_rejection_sends_the_reason_to_a_rework_run_then_asks_again(
    world: World,
) -> None:
    agent = await world.h.agent(say("Here is the summary."), name="summariser")
    task = await world.create("Summarise Q3", "summariser")
    first = await world.review(task.id, 1)
    rejected = await world.approvals.reject(first.id, "ann", reason="The Q3 numbers are missing.")
    assert (rejected.status, rejected.decision, rejected.reason) == (
        A.REJECTED,
        D.REJECTED,
        "The Q3 numbers are missing.",
    )

    second = await world.review(task.id, 2)  # the rework run completed: review again
    assert second.status is A.PENDING
    original, rework = await world.runs(task.id)
    assert second.run_id == rework.id and first.run_id == original.id
    assert rework.input == run_input(task, "The Q3 numbers are missing.")
    assert rework.conversation_id == original.conversation_id  # rework continues the work
    seen = world.h.llm_calls[agent.id][-1].request.messages
    assert any("The Q3 numbers are missing." in str(m.content) for m in seen)
    assert await world.trail(task.id) == [
        (T.ASSIGNED, T.IN_PROGRESS),
        (T.IN_PROGRESS, T.IN_REVIEW),
        (T.IN_REVIEW, T.IN_PROGRESS),
        (T.IN_PROGRESS, T.IN_REVIEW),
    ]


async def test_the_sweeps_finish_a_rejection_whose_effects_a_crash_lost(
    open_world: OpenWorld,
) -> None:
    world = await open_world(live=False)
    await world.h.agent(say("Draft one."), name="drafter")
    task = await world.create("Draft the letter", "drafter")
    await world.bridge.sync(task.id)  # TaskRuns, driven by hand: dispatch, run, review
    await world.h.drain()
    await world.bridge.sync(task.id)
    review = await world.review(task.id, 1)

    # The decision committed, then the process died: the task never left review.
    async with world.h.sessionmaker() as session, session.begin():
        await approval_store.update_approval(
            session,
            review.id,
            read_version=review.version,
            values={
                "status": A.REJECTED,
                "decision": D.REJECTED,
                "reason": "Too formal.",
                "decided_by": "ann",
            },
        )
    assert await world.sweep.run_once() == ExpiryReport()
    assert (await world.task(task.id)).status is T.IN_PROGRESS
    assert len(await world.runs(task.id)) == 1  # TaskRuns is down: no rework yet

    await world.bridge.sweep()  # after the restart
    original, rework = await world.runs(task.id)
    assert (original.status, rework.status) == (RunStatus.COMPLETED, RunStatus.QUEUED)
    assert rework.input == run_input(task, "Too formal.")
    await world.bridge.sweep()  # convergent: nothing more to do
    assert len(await world.runs(task.id)) == 2
    assert (await world.task(task.id)).status is T.IN_PROGRESS


async def test_a_task_that_leaves_review_by_hand_withdraws_its_review(world: World) -> None:
    await world.h.agent(say("Done."), name="hand")
    task = await world.create("Tidy up", "hand")
    review = await world.review(task.id, 1)
    await world.tasks.submit(TransitionTask(task.id, T.IN_PROGRESS, "ann", reason="more to do"))
    with world.h.bus.subscribe(APPROVALS_STREAM) as wake:
        async with asyncio.timeout(SAFETY_S):
            while (await world.reviews(task.id))[0].status is A.PENDING:
                await wake.wait(0.05)
    [withdrawn] = await world.reviews(task.id)
    assert (withdrawn.id, withdrawn.status) == (review.id, A.CANCELLED)


@pytest.mark.parametrize(
    ("policy", "decision", "task_status"),
    [
        (ReviewTimeoutPolicy.AUTO_APPROVE, D.APPROVED, T.COMPLETED),
        (ReviewTimeoutPolicy.AUTO_DENY, D.REJECTED, T.IN_PROGRESS),
    ],
)
async def test_an_unanswered_review_expires_into_its_policy(
    open_world: OpenWorld,
    policy: ReviewTimeoutPolicy,
    decision: ApprovalDecision,
    task_status: TaskStatus,
) -> None:
    world = await open_world(live=False, review_timeout_s=3600, review_timeout_policy=policy)
    await world.h.agent(say("Done."), name="timely")
    task = await world.create("Answer the ticket", "timely")
    await world.bridge.sync(task.id)
    await world.h.drain()
    await world.bridge.sync(task.id)
    review = await world.review(task.id, 1)
    assert (review.timeout_s, review.timeout_policy) == (3600, policy)

    world.h.clock.advance(3599)
    assert await world.sweep.run_once() == ExpiryReport()
    world.h.clock.advance(1)
    report = await world.sweep.run_once()
    assert report == ExpiryReport(
        approved=int(decision is D.APPROVED), rejected=int(decision is D.REJECTED)
    )
    [expired] = await world.reviews(task.id)
    assert (expired.status, expired.decision, expired.decided_by) == (
        A.EXPIRED,
        decision,
        TIMEOUT_ACTOR,
    )
    assert expired.decided_at == world.h.clock.now
    assert (await world.task(task.id)).status is task_status
    events = [
        e for e in await world.h.stream(APPROVALS_STREAM) if e.data["approval_id"] == review.id
    ]
    assert [(e.type, e.data["decision"]) for e in events] == [
        ("approval.requested", None),
        ("approval.expired", decision.value),
    ]
    with pytest.raises(ApprovalExpired) as late:
        await world.approvals.approve(review.id, "ann")
    assert late.value.extensions()["decision"] == decision.value
    if decision is D.REJECTED:  # denied by the timer: the agent reworks it, told why
        assert expired.reason == "review timed out"
        await world.bridge.sweep()
        _, rework = await world.runs(task.id)
        assert rework.input == run_input(task, "review timed out")


@pytest.mark.parametrize("answer", ["approve", "reject"])
async def test_an_answer_after_the_deadline_finds_the_review_expired_before_the_sweep(
    open_world: OpenWorld, answer: str
) -> None:
    """Expiry is a fact of the clock, not of the sweep's timing: the late answer applies
    it (the policy decides, the task follows) and is refused."""
    world = await open_world(
        live=False, review_timeout_s=3600, review_timeout_policy=ReviewTimeoutPolicy.AUTO_DENY
    )
    await world.h.agent(say("Done."), name="late")
    task = await world.create("File the taxes", "late")
    await world.bridge.sync(task.id)
    await world.h.drain()
    await world.bridge.sync(task.id)
    review = await world.review(task.id, 1)

    world.h.clock.advance(3600)
    late = (
        world.approvals.approve(review.id, "ann", expected_version=review.version)
        if answer == "approve"
        else world.approvals.reject(review.id, "ann", reason="Wrong year.")
    )
    with pytest.raises(ApprovalExpired) as refused:
        await late
    assert refused.value.code == "approval_expired"
    assert refused.value.extensions() == {
        "current": "expired",
        "target": "approved" if answer == "approve" else "rejected",
        "allowed": [],
        "expires_at": review.expires_at.isoformat(),
        "decision": "rejected",
    }
    [expired] = await world.reviews(task.id)
    assert (expired.status, expired.decision, expired.reason, expired.decided_by) == (
        A.EXPIRED,
        D.REJECTED,
        "review timed out",
        TIMEOUT_ACTOR,
    )
    assert (await world.task(task.id)).status is T.IN_PROGRESS
    assert await world.sweep.run_once() == ExpiryReport()  # nothing left for the sweep


async def test_an_answer_a_second_before_the_deadline_is_taken(open_world: OpenWorld) -> None:
    world = await open_world(
        live=False, review_timeout_s=3600, review_timeout_policy=ReviewTimeoutPolicy.AUTO_DENY
    )
    await world.h.agent(say("Done."), name="timely")
    task = await world.create("Book the venue", "timely")
    await world.bridge.sync(task.id)
    await world.h.drain()
    await world.bridge.sync(task.id)
    review = await world.review(task.id, 1)
    world.h.clock.advance(3599)
    approved = await world.approvals.approve(review.id, "ann")
    assert (approved.status, approved.decision) == (A.APPROVED, D.APPROVED)
    assert (await world.task(task.id)).status is T.COMPLETED


async def test_an_unanswered_review_escalates_and_waits_again(
    open_world: OpenWorld,
) -> None:
    world = await open_world(live=False, review_timeout_s=600)
    await world.h.agent(say("Done."), name="escalated")
    task = await world.create("Sign the release", "escalated")
    await world.bridge.sync(task.id)
    await world.h.drain()
    await world.bridge.sync(task.id)
    review = await world.review(task.id, 1)

    world.h.clock.advance(600)
    assert await world.sweep.run_once() == ExpiryReport(escalated=1)
    [escalated] = await world.reviews(task.id)
    # Escalation is not expiry: still open to a person, with a new wait.
    assert (escalated.status, escalated.decision, escalated.escalations) == (A.PENDING, None, 1)
    assert escalated.expires_at == world.h.clock.now + timedelta(seconds=600)
    assert (await world.task(task.id)).status is T.IN_REVIEW

    world.h.clock.advance(599)
    assert await world.sweep.run_once() == ExpiryReport()
    world.h.clock.advance(1)
    assert await world.sweep.run_once() == ExpiryReport(escalated=1)
    events = [
        e for e in await world.h.stream(APPROVALS_STREAM) if e.data["approval_id"] == review.id
    ]
    assert [e.type for e in events] == [
        "approval.requested",
        "approval.escalated",
        "approval.escalated",
    ]
    assert events[-1].data["approval"]["escalations"] == 2

    # A person who answers an escalated review late is welcome: that is what it asks for.
    world.h.clock.advance(3 * 600)
    approved = await world.approvals.approve(review.id, "ann")
    assert (approved.status, approved.decision) == (A.APPROVED, D.APPROVED)
    assert (await world.task(task.id)).status is T.COMPLETED


async def ask_for_tool(world: World, question: str) -> tuple[RunRead, ApprovalRead]:
    """A run paused on a tool call, and that call's approval (not yet pointed at)."""
    agent = await world.h.agent(call("ask_human", question=question), say("Noted."))
    run = await world.h.start(agent)
    [paused] = await world.h.wait_until_settled([run.id])
    call_id = str(paused.waiting_for.tool_call_id if paused.waiting_for else None)
    asked = await world.approvals.request_tool_approval(
        paused, call_id, "wire_money", {"amount": 100}, question
    )
    return paused, asked


async def point_at(world: World, run: RunRead, approval: ApprovalRead) -> None:
    """The loop's pause on the approval, as it will write it."""
    async with world.h.sessionmaker() as session, session.begin():
        assert await run_store.update_run(
            session,
            run.id,
            read_version=run.version,
            values={"waiting_for": waiting_for(approval).model_dump(mode="json")},
        )


async def test_a_tool_approval_is_asked_once_and_its_rejection_reaches_the_agent(
    world: World,
) -> None:
    # The loop's pause on an approval is the lead's to build: a run paused by `ask_human`
    # stands in, pointed at the approval the way the loop will point it.
    paused, asked = await ask_for_tool(world, "Wire the money?")
    again = await world.approvals.request_tool_approval(
        paused, str(asked.tool_call_id), "wire_money", {"amount": 1_000_000}, "Wire it?"
    )
    assert again == asked and asked.arguments == {"amount": 100}  # the first ask stands
    await point_at(world, paused, asked)

    rejected = await world.approvals.reject(asked.id, "ann", reason="Not before the board meets.")
    [finished] = await world.h.wait_until_settled([paused.id])
    assert finished.status is RunStatus.COMPLETED
    async with world.h.sessionmaker() as session:
        record = (await history.ledger(session, paused.id))[str(asked.tool_call_id)]
    assert (record.result, record.is_error) == (rejection_result(rejected), True)
    seen = world.h.llm_calls[paused.agent_id][-1].request.messages
    assert any("Not before the board meets." in str(m.content) for m in seen)
    assert "agent_run.approval_decided" in await world.h.event_types(paused.id)


async def test_an_approved_tool_call_runs_as_never_started(world: World) -> None:
    paused, asked = await ask_for_tool(world, "Wire the money today?")
    await point_at(world, paused, asked)
    await world.pool.stop(grace_s=SAFETY_S)  # hold the run where the decision leaves it
    approved = await world.approvals.approve(asked.id, "ann", expected_version=asked.version)
    released = await world.h.run(paused.id)
    assert (released.status, released.waiting_for) == (RunStatus.QUEUED, None)
    call_id = str(asked.tool_call_id)
    async with world.h.sessionmaker() as session:
        assert call_id not in await history.ledger(session, paused.id)
    # On resume the loop asks again and gets the decision, with the arguments to run.
    answer = await world.approvals.request_tool_approval(released, call_id, "wire_money", {}, "")
    assert (answer.id, answer.status, answer.arguments) == (
        approved.id,
        A.APPROVED,
        {"amount": 100},
    )


async def test_no_run_is_dispatched_for_a_task_of_a_stopped_execution(
    open_world: OpenWorld,
) -> None:
    world = await open_world(live=False)
    await world.h.agent(say("Done."), name="worker")
    commands = WorkflowCommands(world.h.sessionmaker, world.h.bus, world.tasks)
    workflow = await commands.create(
        WorkflowCreate.model_validate(
            {
                "name": "one step",
                "nodes": [
                    {"id": "s", "type": "start"},
                    {"id": "t", "type": "task", "config": {"title": "Go", "assigned_to": "worker"}},
                    {"id": "e", "type": "end"},
                ],
                "edges": [
                    {"id": "e1", "source": "s", "target": "t"},
                    {"id": "e2", "source": "t", "target": "e"},
                ],
            }
        )
    )
    stopped, running = [
        (await commands.activate(workflow.id, ActivateRequest(), "tester")).execution
        for _ in range(2)
    ]
    async with world.h.sessionmaker() as session, session.begin():
        assert await workflow_store.update_execution(
            session,
            stopped.id,
            read_version=stopped.version,
            values={"status": ExecutionStatus.FAILED, "reason": "another branch failed"},
        )
    await world.bridge.sweep()
    assert await world.runs(stopped.node_tasks["t"]) == []
    assert len(await world.runs(running.node_tasks["t"])) == 1


async def test_an_unanswered_tool_approval_is_denied_at_expiry_and_the_run_goes_on(
    open_world: OpenWorld,
) -> None:
    world = await open_world(tool_timeout_s=60, tool_timeout_policy="auto_deny")
    paused, asked = await ask_for_tool(world, "Wire the money?")
    await point_at(world, paused, asked)
    world.h.clock.advance(60)
    assert await world.sweep.run_once() == ExpiryReport(rejected=1)
    [finished] = await world.h.wait_until_settled([paused.id])
    assert finished.status is RunStatus.COMPLETED
    async with world.h.sessionmaker() as session:
        denied = await approval_store.get_approval(session, asked.id)
    assert denied is not None
    assert (denied.status, denied.decision, denied.reason, denied.decided_by) == (
        A.EXPIRED,
        D.REJECTED,
        "approval timed out",
        TIMEOUT_ACTOR,
    )
    async with world.h.sessionmaker() as session:
        record = (await history.ledger(session, paused.id))[str(asked.tool_call_id)]
    assert (record.result, record.is_error) == (rejection_result(denied), True)
    assert record.result is not None and record.result.startswith("Nobody approved this call")
    seen = world.h.llm_calls[paused.agent_id][-1].request.messages
    assert any("Nobody approved this call in time" in str(m.content) for m in seen)


async def test_a_decision_made_before_the_run_paused_still_releases_it(world: World) -> None:
    paused, asked = await ask_for_tool(world, "Wire the money now?")
    await world.approvals.reject(asked.id, "ann", reason="Wrong account.")
    await point_at(world, paused, asked)  # the pause lands after the decision
    assert (await world.h.run(paused.id)).status is RunStatus.WAITING_ON_HUMAN
    await world.sweep.run_once()
    [finished] = await world.h.wait_until_settled([paused.id])
    assert finished.status is RunStatus.COMPLETED
    seen = world.h.llm_calls[finished.agent_id][-1].request.messages
    assert any("Wrong account." in str(m.content) for m in seen)


def test_a_timer_never_consents_to_a_tool_call() -> None:
    with pytest.raises(ValueError, match="auto_approve"):
        ApprovalSettings(tool_timeout_policy=ReviewTimeoutPolicy.AUTO_APPROVE)
