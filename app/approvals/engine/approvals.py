"""Approval commands: ask (idempotently, with a context summary), approve, reject, cancel,
and the expiry policies.

Each command is one short transaction: lock the approval, check the transition, write it,
append its event to the `approvals` stream, and (for a tool call) send the waiting run back
to its lane in that same transaction, so that a decision and the run's release cannot part.
After the commit a review's decision moves its task through the TaskEngine: approved →
`completed`, rejected → `in_progress` (TaskRuns then dispatches the rework run). A crash
between the two is repaired by `ReviewGate.sync`, which re-applies the decided review.

Expiry: once `expires_at` passes, `auto_approve` and `auto_deny` settle the approval as
`expired` (by `system:timeout`), with the policy's effect as its `decision` (approved /
rejected), which the task or tool call follows exactly as it would a person's answer.
`escalate` is not an expiry: the approval stays `pending` and open to a person, with one
more escalation and a new wait. The sweep applies expiry within its interval; a person who
answers an approval past its deadline before the sweep did finds it expired all the same
(the answer applies the expiry, then gets `approval_expired`), so the outcome does not
depend on when the sweep ran.

A gated tool call's side of this (what the agent loop does) is in `tool_approvals.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.approvals import store
from app.approvals.engine.approval_summaries import review_summary, tool_call_summary
from app.approvals.engine.tool_approvals import release_run
from app.approvals.schemas import ApprovalRead
from app.core.config import ApprovalSettings
from app.core.errors import AppError, ApprovalExpired, NotFound, ProblemCode, VersionConflict
from app.core.ids import new_id
from app.core.states import ApprovalDecision, ApprovalStatus, TaskStatus, check_approval_transition
from app.core.streams import APPROVALS_STREAM
from app.core.vocabulary import SUMMARY_MAX_CHARS, ApprovalKind, ReviewTimeoutPolicy
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.events.engine.published import Written, published, run_written
from app.runs.schemas.runs import RunRead
from app.runs.store import runs as run_store
from app.tasks.engine.task_engine import TaskEngine
from app.tasks.engine.task_mutations import TransitionTask
from app.tasks.store import task_runs as task_run_store
from app.tasks.store import tasks as task_store
from app.workflows import store as workflow_store

log = logging.getLogger(__name__)

TIMEOUT_ACTOR = "system:timeout"
TIMED_OUT = {
    ApprovalKind.TASK_REVIEW: "review timed out",
    ApprovalKind.TOOL_CALL: "approval timed out",
    ApprovalKind.MERGE: "merge decision timed out",
}
AUTO_APPROVED = "approved automatically: nobody answered in time"
SUPERSEDED = "the task entered review again; a new review replaces this one"
LEFT_REVIEW = "the task left review before anyone decided"

S = ApprovalStatus
D = ApprovalDecision
P = ReviewTimeoutPolicy


# The principal of a service without API keys: one operator on loopback, who cannot be
# told apart from anyone else, so no reviewer list can exclude them.
KEYLESS_PRINCIPAL = "local"


class NotAReviewer(AppError):
    """The task lists its reviewers, and only they may decide its review."""

    code = ProblemCode.NOT_A_REVIEWER
    status_code = 403

    def __init__(self, actor: str, reviewers: list[str]) -> None:
        self.actor = actor
        self.reviewers = reviewers
        super().__init__(
            f"{actor!r} is not a reviewer of this task; its reviewers: {', '.join(reviewers)}"
        )

    def extensions(self) -> dict[str, Any]:
        return {"reviewers": self.reviewers}


def review_question(title: str) -> str:
    return f"Review the work on task {title!r}: approve it, or reject it with a reason."


@dataclass(frozen=True)
class ExpiryReport:
    """What one expiry pass did: approvals expired by the effect of their policy
    (`approved`: auto_approve, `rejected`: auto_deny), and approvals escalated."""

    approved: int = 0
    rejected: int = 0
    escalated: int = 0


@dataclass
class _Written:
    """What one transaction did: its events, and the runs it released. Appended to the
    stream inside the transaction, told to the bus and the logs after the commit."""

    events: list[tuple[str, ApprovalRead]]
    runs: list[RunRead]

    def add(self, event_type: str, approval: ApprovalRead) -> None:
        self.events.append((event_type, approval))


class ApprovalCommands:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        tasks: TaskEngine,
        settings: ApprovalSettings,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._sessionmaker = sessionmaker
        self._bus = bus
        self._tasks = tasks
        self._settings = settings
        self._clock = clock

    # -- asking ----------------------------------------------------------------------

    async def request_review(self, task_id: str) -> ApprovalRead | None:
        """The review of the task's current round, asked once per time it enters review;
        None when the task is not in review. It may come back decided (see `ReviewGate`)."""
        now = self._clock()
        written = _Written([], [])
        async with self._sessionmaker() as session, session.begin():
            await store.lock_reviews_of(session, task_id)  # one asker per task at a time
            task = await task_store.get_task(session, task_id)
            if task is None or task.status is not TaskStatus.IN_REVIEW:
                return None
            review_round = await store.review_rounds(session, task_id)
            latest = await store.latest_review(session, task_id)
            if latest is not None and latest.review_round == review_round:
                return latest
            if latest is not None and latest.status is S.PENDING:  # a round nobody answered
                stale = await store.get_approval(session, latest.id, lock=True)
                if stale is not None and stale.status is S.PENDING:
                    reason = {"reason": SUPERSEDED}
                    await self._decide(
                        session, written, stale, S.CANCELLED, None, "system", reason, now
                    )
            workflow = await workflow_store.workflow_of_task(session, task_id)
            executions = await workflow_store.running_executions_of_tasks(session, [task_id])
            run = await task_run_store.latest_run(session, task_id)
            timeout_s = workflow.review_timeout_s if workflow else self._settings.review_timeout_s
            policy = (
                workflow.review_timeout_policy if workflow else self._settings.review_timeout_policy
            )
            values = {
                "kind": ApprovalKind.TASK_REVIEW,
                "task_id": task_id,
                "run_id": run.id if run else None,
                "workflow_execution_id": executions[0] if executions else None,
                "review_round": review_round,
                "question": review_question(task.title),
                "summary": review_summary(
                    task.title,
                    task.acceptance_criteria,
                    run.id if run else None,
                    run.result if run else None,
                ),
            }
            created = await self._insert(session, values, timeout_s, policy, now)
            assert created is not None  # asks are serialised, and this round had none
            written.add("approval.requested", created)
            await self._append(session, written, now)
        self._published(written)
        return created

    async def withdraw_review(self, task_id: str) -> ApprovalRead | None:
        """Cancel the pending review of a task that left review without a decision (moved
        by hand, cancelled, deleted); None when there is nothing to withdraw."""
        async with self._sessionmaker() as session:
            task = await task_store.get_task(session, task_id)
            if task is not None and task.status is TaskStatus.IN_REVIEW:
                return None  # back in review: `request_review` supersedes the old round
            latest = await store.latest_review(session, task_id)
        if latest is None or latest.status is not S.PENDING:
            return None
        return await self.cancel(latest.id, LEFT_REVIEW)

    async def request_tool_approval(
        self,
        run: RunRead,
        tool_call_id: str,
        tool: str,
        arguments: dict[str, Any],
        question: str,
    ) -> ApprovalRead:
        """The approval of one tool call, asked once: a repeat returns the first one, in
        whatever state it is now."""
        now = self._clock()
        written = _Written([], [])
        async with self._sessionmaker() as session, session.begin():
            found = await store.tool_approval(session, run.id, tool_call_id)
            if found is not None:
                return found
            task_id = run.metadata.get("task_id")
            # What the model said before the call: its boundary committed the message
            # before any tool of the batch ran, so the transcript has it by now.
            intent = await store.stated_intent(session, run.conversation_id, run.id, tool_call_id)
            agent = await store.agent_name(session, run.agent_id) or run.agent_id
            values = {
                "kind": ApprovalKind.TOOL_CALL,
                "task_id": task_id if isinstance(task_id, str) else None,
                "run_id": run.id,
                "tool_call_id": tool_call_id,
                "tool": tool,
                "arguments": arguments,
                "question": question,
                "summary": tool_call_summary(agent, tool, arguments, intent),
            }
            settings = self._settings
            created = await self._insert(
                session, values, settings.tool_timeout_s, settings.tool_timeout_policy, now
            )
            if created is None:
                raced = await store.tool_approval(session, run.id, tool_call_id)
                assert raced is not None  # the insert met it
                return raced
            written.add("approval.requested", created)
            await self._append(session, written, now)
        self._published(written)
        return created

    async def request_merge(self, task_id: str, question: str, summary: str) -> ApprovalRead:
        """A person decides a merge the merge queue could not make alone (a conflict, or
        semantic issues): approve to merge (once the branch is fixed), reject to drop it.
        Its wait, however long, only escalates: a merge is never decided by a clock."""
        now = self._clock()
        written = _Written([], [])
        async with self._sessionmaker() as session, session.begin():
            values = {
                "kind": ApprovalKind.MERGE,
                "task_id": task_id,
                "question": question,
                "summary": summary[:SUMMARY_MAX_CHARS],
            }
            timeout_s = self._settings.review_timeout_s
            created = await self._insert(session, values, timeout_s, P.ESCALATE, now)
            assert created is not None  # merges have no uniqueness of their own
            written.add("approval.requested", created)
            await self._append(session, written, now)
        self._published(written)
        return created

    async def _insert(
        self,
        session: AsyncSession,
        values: dict[str, Any],
        timeout_s: int,
        policy: ReviewTimeoutPolicy,
        now: datetime,
    ) -> ApprovalRead | None:
        return await store.insert_approval(
            session,
            {
                **values,
                "id": new_id("apr"),
                "status": S.PENDING,
                "timeout_s": timeout_s,
                "timeout_policy": policy,
                "expires_at": now + timedelta(seconds=timeout_s),
                "escalations": 0,
                "version": 1,
                "created_at": now,
            },
        )

    # -- answering -------------------------------------------------------------------

    async def approve(
        self,
        approval_id: str,
        actor: str,
        *,
        comment: str | None = None,
        expected_version: int | None = None,
    ) -> ApprovalRead:
        return await self._answer(
            approval_id, D.APPROVED, actor, expected_version, {"comment": comment}
        )

    async def reject(
        self, approval_id: str, actor: str, *, reason: str, expected_version: int | None = None
    ) -> ApprovalRead:
        """`reason` is required: the agent reworking the task (or skipping the call) reads it."""
        return await self._answer(
            approval_id, D.REJECTED, actor, expected_version, {"reason": reason}
        )

    async def cancel(self, approval_id: str, why: str) -> ApprovalRead | None:
        """Withdraw a pending approval whose task or run moved on; None when it was not
        pending any more."""
        now = self._clock()
        written = _Written([], [])
        async with self._sessionmaker() as session, session.begin():
            approval = await store.get_approval(session, approval_id, lock=True)
            if approval is None or approval.status is not S.PENDING:
                return None
            cancelled = await self._decide(
                session, written, approval, S.CANCELLED, None, "system", {"reason": why}, now
            )
            await self._append(session, written, now)
        self._published(written)
        return cancelled

    async def _answer(
        self,
        approval_id: str,
        decision: ApprovalDecision,
        actor: str,
        expected_version: int | None,
        values: dict[str, Any],
    ) -> ApprovalRead:
        """A person's answer. One that comes after the deadline of an approval whose
        policy decides (not `escalate`) is too late even if the sweep has not been by:
        the expiry is applied and committed here, then refused as `approval_expired`."""
        now = self._clock()
        written = _Written([], [])
        target = S(decision.value)
        async with self._sessionmaker() as session, session.begin():
            approval = await store.get_approval(session, approval_id, lock=True)
            if approval is None:
                raise NotFound("approval", approval_id)
            await _check_reviewer(session, approval, actor)
            if _overdue(approval, now):
                decided = await self._expire(session, written, approval, now)
            else:
                if approval.status is S.EXPIRED:
                    raise _too_late(approval, target)
                check_approval_transition(approval.status, target)
                if expected_version is not None and expected_version != approval.version:
                    raise VersionConflict(expected=expected_version, current=approval.version)
                decided = await self._decide(
                    session, written, approval, target, decision, actor, values, now
                )
            await self._append(session, written, now)
        self._published(written)
        await self.settle_review(decided)
        if decided.status is S.EXPIRED:
            raise _too_late(decided, target)
        return decided

    async def _decide(
        self,
        session: AsyncSession,
        written: _Written,
        approval: ApprovalRead,
        target: ApprovalStatus,
        decision: ApprovalDecision | None,
        actor: str,
        values: dict[str, Any],
        now: datetime,
    ) -> ApprovalRead:
        """Settle a locked pending approval; a tool call's run is released (unless the
        approval was withdrawn: then the run is gone or moved on). Every change of an
        approval's status is made here, checked against its machine."""
        check_approval_transition(approval.status, target)
        decided = await store.update_approval(
            session,
            approval.id,
            read_version=approval.version,
            values={
                **values,
                "status": target,
                "decision": decision,
                "decided_by": actor,
                "decided_at": now,
            },
        )
        assert decided is not None  # the row is locked
        written.add(f"approval.{target.value}", decided)
        if decided.kind is ApprovalKind.TOOL_CALL and target is not S.CANCELLED:
            released = await release_run(session, decided, now)
            if released is not None:
                written.runs.append(released)
        return decided

    # -- expiry ----------------------------------------------------------------------

    async def expire_due(self, *, limit: int = 200) -> ExpiryReport:
        """Apply the timeout policy of each pending approval whose wait ran out:
        `auto_approve` and `auto_deny` settle it `expired` with their effect as its
        decision; `escalate` keeps it pending with one more escalation and a new wait of
        the same length."""
        now = self._clock()
        written = _Written([], [])
        counts = {D.APPROVED: 0, D.REJECTED: 0}
        escalated = 0
        async with self._sessionmaker() as session, session.begin():
            for approval in await store.due(session, now, limit=limit):
                if approval.timeout_policy is P.ESCALATE:
                    await self._escalate(session, written, approval, now)
                    escalated += 1
                    continue
                expired = await self._expire(session, written, approval, now)
                assert expired.decision is not None  # an expiry always decides
                counts[expired.decision] += 1
            await self._append(session, written, now)
        self._published(written)
        for event_type, approval in written.events:
            if event_type != "approval.escalated":
                await self.settle_review(approval)
        return ExpiryReport(counts[D.APPROVED], counts[D.REJECTED], escalated)

    async def _expire(
        self, session: AsyncSession, written: _Written, approval: ApprovalRead, now: datetime
    ) -> ApprovalRead:
        """Settle a locked, overdue approval `expired` with its policy's decision."""
        if approval.timeout_policy is P.AUTO_APPROVE:
            decision, values = D.APPROVED, {"comment": AUTO_APPROVED}
        else:
            decision, values = D.REJECTED, {"reason": TIMED_OUT[approval.kind]}
        return await self._decide(
            session, written, approval, S.EXPIRED, decision, TIMEOUT_ACTOR, values, now
        )

    async def _escalate(
        self, session: AsyncSession, written: _Written, approval: ApprovalRead, now: datetime
    ) -> None:
        escalated = await store.update_approval(
            session,
            approval.id,
            read_version=approval.version,
            values={
                "escalations": approval.escalations + 1,
                "expires_at": now + timedelta(seconds=approval.timeout_s),
            },
        )
        assert escalated is not None  # locked by the sweep's select
        written.add("approval.escalated", escalated)

    # -- effects of a decision ---------------------------------------------------------

    async def settle_review(self, approval: ApprovalRead) -> None:
        """Move a decided review's task out of review, if it still waits on that round:
        decision approved → completed, rejected → in_progress (a person's answer or an
        expiry's alike). A no-op otherwise, so the sweep may call it again after a crash."""
        if approval.kind is not ApprovalKind.TASK_REVIEW or approval.task_id is None:
            return
        if approval.decision is None:  # pending, or withdrawn
            return
        async with self._sessionmaker() as session:
            task = await task_store.get_task(session, approval.task_id)
            if task is None or task.status is not TaskStatus.IN_REVIEW:
                return
            if await store.review_rounds(session, task.id) != approval.review_round:
                return  # a later round's review decides this one
        approved = approval.decision is D.APPROVED
        mutation = TransitionTask(
            task.id,
            TaskStatus.COMPLETED if approved else TaskStatus.IN_PROGRESS,
            approval.decided_by or "system",
            expected_version=task.version,
            reason=(approval.comment if approved else approval.reason) or f"review {approval.id}",
            enforce_wip=False,  # a person decided: a full column does not undo it
        )
        try:
            await self._tasks.submit(mutation)
        except AppError as exc:  # the task moved meanwhile; the sweep looks again
            log.warning("review %s not applied to task %s: %s", approval.id, task.id, exc)

    async def release_answered(self, run_id: str) -> RunRead | None:
        """Release a run that still waits on an approval already decided (the decision
        landed before the run's pause was written)."""
        now = self._clock()
        written = _Written([], [])
        async with self._sessionmaker() as session, session.begin():
            run = await run_store.get_run(session, run_id, lock=True)
            if run is None or not run.waiting_for:
                return None
            approval = await store.get_approval(session, str(run.waiting_for.approval_id))
            if approval is None or approval.status is S.PENDING:
                return None
            released = await release_run(session, approval, now)
            if released is not None:
                written.runs.append(released)
        self._published(written)
        return released

    # -- events ----------------------------------------------------------------------

    async def _append(self, session: AsyncSession, written: _Written, now: datetime) -> None:
        await event_store.append_events(
            session,
            APPROVALS_STREAM,
            [event_store.NewEvent(kind, _event_data(a)) for kind, a in written.events],
            now,
        )

    def _published(self, written: _Written) -> None:
        """After commit: wake the stream's readers and the released runs' followers (and
        the workers), and log."""
        approvals = [
            Written(
                APPROVALS_STREAM,
                [(event_type, {"kind": approval.kind.value, "status": approval.status.value})],
                {
                    "approval_id": approval.id,
                    "task_id": approval.task_id,
                    "run_id": approval.run_id,
                    "escalations": approval.escalations,
                },
            )
            for event_type, approval in written.events
        ]
        runs = [run_written(run, [("agent_run.approval_decided", {})]) for run in written.runs]
        published(self._bus, [*approvals, *runs])


async def _check_reviewer(session: AsyncSession, approval: ApprovalRead, actor: str) -> None:
    """A task that lists reviewers (principals: `key-<n>`, as the API names its callers)
    has its review decided by one of them only; without API keys (`local`) anyone."""
    if approval.kind is not ApprovalKind.TASK_REVIEW or approval.task_id is None:
        return
    if actor == KEYLESS_PRINCIPAL:
        return
    task = await task_store.get_task(session, approval.task_id)
    if task is not None and task.reviewers and actor not in task.reviewers:
        raise NotAReviewer(actor, task.reviewers)


def _overdue(approval: ApprovalRead, now: datetime) -> bool:
    """Past its deadline, and its policy (not `escalate`) decides rather than a person."""
    return (
        approval.status is S.PENDING
        and approval.expires_at <= now
        and approval.timeout_policy is not P.ESCALATE
    )


def _too_late(approval: ApprovalRead, target: ApprovalStatus) -> ApprovalExpired:
    return ApprovalExpired(
        target.value,
        expires_at=approval.expires_at.isoformat(),
        decision=approval.decision.value if approval.decision else None,
    )


def _event_data(approval: ApprovalRead) -> dict[str, Any]:
    return {
        "approval_id": approval.id,
        "kind": approval.kind.value,
        "status": approval.status.value,
        "decision": approval.decision.value if approval.decision else None,
        "approval": approval.model_dump(mode="json"),
    }
