"""Gated tool calls: the agent loop's side of an approval, and the release of a waiting
run once its approval is decided.

How the loop uses a tool approval:

1. Before running a call that needs consent, the loop calls
   `ApprovalCommands.request_tool_approval(run, call_id, tool, arguments, question)`. It is
   idempotent by (run, call): the same approval comes back however often it is asked,
   decided or not.
2. `pending` → the loop pauses the run with `waiting_for=waiting_for(approval)`
   (`reason == "approval"`, `approval_id`, `tool_call_id`, `tool`, `question`).
3. A decision (a person's, or the expiry policy's: `expired` with its `decision`) releases
   the run in the decision's own transaction: the run goes back to the head of its lane's
   queue. Decision approved: the call's
   ledger row is dropped, so on resume the call counts as never started, the loop asks
   again (step 1) and gets the `approved` approval: it runs the tool with
   `approval.arguments` (exactly what the person saw).
   Rejected: the call is completed in the ledger with `rejection_result(approval)` as an
   error, which the loop replays like any recorded result; a loop that finds the call
   unrecorded and the approval `rejected` uses that same text.
4. A decision that lands between step 1 and the pause being written finds no run to
   release; the approval sweep releases it on its next tick (`release_answered`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.approvals.schemas import ApprovalRead
from app.core.states import ApprovalDecision, ApprovalStatus, RunStatus, WaitReason
from app.runs.engine import run_transitions
from app.runs.schemas.runs import RunRead, WaitingFor
from app.runs.store import history
from app.runs.store import runs as run_store


def waiting_for(approval: ApprovalRead) -> WaitingFor:
    """A run's `waiting_for` while it waits on this tool approval."""
    return WaitingFor(
        reason=WaitReason.APPROVAL,
        question=approval.question,
        tool_call_id=approval.tool_call_id,
        tool=approval.tool,
        approval_id=approval.id,
    )


def rejection_result(approval: ApprovalRead) -> str:
    """What the agent reads as the result of a call a person (or the policy) refused."""
    if approval.status is ApprovalStatus.EXPIRED:
        return f"Nobody approved this call in time, so it did not run. Reason: {approval.reason}"
    return f"A reviewer rejected this call, so it did not run. Reason: {approval.reason}"


async def release_run(
    session: AsyncSession, approval: ApprovalRead, now: datetime
) -> RunRead | None:
    """Send the run waiting on this decided tool approval back to the head of its lane:
    approved, its call runs as never started; rejected, the call's result is the refusal.
    None when the run is not (or no longer) waiting on this approval."""
    assert approval.run_id is not None and approval.tool_call_id is not None
    run = await run_store.get_run(session, approval.run_id, lock=True)
    if (
        run is None
        or run.status is not RunStatus.WAITING_ON_HUMAN
        or not run.waiting_for
        or run.waiting_for.approval_id != approval.id
    ):
        return None
    call_id = approval.tool_call_id
    if approval.decision is ApprovalDecision.APPROVED:
        ledger: dict[str, Any] = {"forgotten": [call_id]}
    else:
        refusal = rejection_result(approval)
        ledger = {"completed": [history.completed_entry(call_id, refusal, True, 1, False)]}
    decided = {
        "approval_id": approval.id,
        "tool_call_id": approval.tool_call_id,
        "decision": approval.decision.value if approval.decision else approval.status.value,
    }
    return await run_transitions.move(
        session,
        run,
        RunStatus.QUEUED,
        now,
        events=[("agent_run.approval_decided", decided)],
        values={"waiting_for": None},
        data=ledger,
    )
