"""What a run finds when it resumes, and what may safely happen next.

A run resumes after a person answered, after a crash, or after a hand-back; its transcript
may end with tool calls that have no results yet. Their results are read back from the
tool-call ledger, never re-run. A call that never started, or one cut short that may run
again (idempotent, or deduplicated by its remote through the call's idempotency key, which
is the same on every attempt), runs (again); another side-effecting call cut short might
have taken effect, so it is never re-run: the run halts for a person
(`agent_run.resume_unsafe`). So does a run whose agent's
system prompt changed since it began (resuming would mix two instructions).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.messages import Message, ToolUseBlock, pending_tool_uses
from app.core.states import WaitReason
from app.runs.loop import approval_gate
from app.runs.loop.boundary import Boundary
from app.runs.loop.exits import human_pause, waiting_on_call
from app.runs.schemas.runs import WaitingFor
from app.runs.store import history

UNSAFE_QUESTION = (
    "A side-effecting tool call was interrupted before it finished; it may or may not have "
    "taken effect. Reply with its result to continue."
)
DRIFT_QUESTION = (
    "The agent's system prompt changed since this run started. Reply to continue with the "
    "new prompt, or cancel the run."
)


@dataclass(frozen=True)
class PendingCalls:
    """The unanswered calls of the transcript's last assistant message, as the ledger
    knows them."""

    calls: list[ToolUseBlock]
    answered: dict[str, tuple[str, bool]]  # call id -> (result, is_error), recorded
    declined: set[str] = field(default_factory=set)  # refused by an approval, not failed
    unsafe: ToolUseBlock | None = None  # a side-effecting call cut short

    @property
    def missing(self) -> list[ToolUseBlock]:
        """Calls to run now: they never started, or may safely run again."""
        return [c for c in self.calls if c.id not in self.answered]


async def pending_calls(
    sessionmaker: async_sessionmaker[AsyncSession], run_id: str, context: list[Message]
) -> PendingCalls | None:
    """None when the transcript (the live context `context`) has no unanswered calls."""
    pending = pending_tool_uses(context)
    if not pending:
        return None
    async with sessionmaker() as session:
        ledger = await history.ledger(session, run_id)
    answered: dict[str, tuple[str, bool]] = {}
    for call in pending:
        record = ledger.get(call.id)
        if record is not None and record.completed_at is not None and record.result is not None:
            answered[call.id] = (record.result, record.is_error)
    cut_short = [
        c.id
        for c in pending
        if c.id not in answered and c.id in ledger and not ledger[c.id].idempotent
    ]
    errors = [call_id for call_id, (_, is_error) in answered.items() if is_error]
    async with sessionmaker() as session:
        # Calls an approval held back never ran: they may simply go again. Of the error
        # results, the refusals of an approval are a person's word, not the model's error.
        never_ran = (
            await approval_gate.held_back(session, run_id, cut_short) if cut_short else set()
        )
        declined = await approval_gate.held_back(session, run_id, errors) if errors else set()
    unsafe = next((c for c in pending if c.id in cut_short and c.id not in never_ran), None)
    return PendingCalls(pending, answered, declined, unsafe)


def unsafe_pause(call: ToolUseBlock) -> Boundary:
    """Halt for a person: their answer becomes the result of the call cut short."""
    event = ("agent_run.resume_unsafe", {"tool_call_id": call.id, "tool": call.name})
    unsafe = waiting_on_call(call, UNSAFE_QUESTION, WaitReason.RESUME_UNSAFE)
    return human_pause(unsafe, events=[event])


def prompt_drift_pause() -> Boundary:
    """Halt for a person: their answer accepts the agent's new system prompt."""
    reason = WaitReason.SYSTEM_PROMPT_CHANGED
    return human_pause(
        WaitingFor(reason=reason, question=DRIFT_QUESTION),
        events=[("agent_run.resume_unsafe", {"reason": reason})],
    )
