"""Gated tool calls, the loop's side: approvals fail closed.

A call that may change the world runs only once a person approved it, unless its tool
never needs approval or the agent's operator allowed it (`Tool.needs_approval`). The
gate asks for the approval (idempotent per run and call), and:

    pending    the run waits on the human (`waiting_for.reason == "approval"`)
    approved   the call runs with the approval's arguments: exactly what the person saw
    rejected   the call does not run; the refusal is its error result
    expired    as its `decision` says (tool calls: always rejected, a timer never
               consents: `ApprovalSettings`), the refusal saying nobody answered in time
    cancelled  the call does not run (the run or task moved on without a decision)

A decision sends the waiting run back to its lane (`approvals/engine/tool_approvals.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from sqlalchemy.ext.asyncio import AsyncSession

from app.approvals import store as approval_store
from app.approvals.engine.approvals import ApprovalCommands
from app.approvals.engine.tool_approvals import rejection_result, waiting_for
from app.core.messages import ToolUseBlock, unparsed_arguments
from app.core.states import ApprovalDecision, ApprovalStatus
from app.runs.loop.tool_runner import ToolOutcome
from app.runs.schemas.runs import RunRead
from app.runs.tools.base import Tool


def question(call: ToolUseBlock) -> str:
    return f"May the agent call {call.name!r} with these arguments?"


async def gate(
    call: ToolUseBlock,
    tool: Tool | None,
    *,
    run: RunRead,
    allowed: Collection[str],
    auto_approved: Collection[str],
    approvals: ApprovalCommands | None,
) -> ToolUseBlock | ToolOutcome:
    """The call to run (its arguments as approved), or the outcome that replaces it: a
    pause for the approval, or the refusal. Calls the runner refuses anyway (unknown tool,
    no permission, arguments that are not JSON) pass through: they never reach a person."""
    if tool is None or (tool.requires_permission and call.name not in allowed):
        return call
    if unparsed_arguments(call) is not None:
        return call
    if not tool.needs_approval(call.input, auto_approved):
        return call
    if approvals is None:  # fail closed
        refusal = f"Error: {call.name!r} needs a person's approval, and none can be asked here"
        return ToolOutcome(refusal, True, 0)
    approval = await approvals.request_tool_approval(
        run, call.id, call.name, call.input, question(call)
    )
    if approval.status is ApprovalStatus.PENDING:
        return ToolOutcome(
            question(call), False, 0, pauses_run=True, waiting_for=waiting_for(approval)
        )
    if approval.decision is ApprovalDecision.APPROVED:
        return call.model_copy(update={"input": approval.arguments or {}})
    return ToolOutcome(rejection_result(approval), True, 0, declined=True)


async def held_back(session: AsyncSession, run_id: str, call_ids: Iterable[str]) -> set[str]:
    """Of these started calls, the ones an approval kept from running (pending, refused):
    resuming may ask again instead of treating them as cut short."""
    held = set()
    for call_id in call_ids:
        approval = await approval_store.tool_approval(session, run_id, call_id)
        if approval is not None and approval.decision is not ApprovalDecision.APPROVED:
            held.add(call_id)
    return held
