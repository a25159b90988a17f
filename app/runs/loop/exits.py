"""The boundaries that take a run out of `running`: a pause for a person, a hand-back to
the queue at shutdown, and settling (a failure is retried with backoff, then dead-lettered).
Pure: they build what `RunLoop.commit` writes, from what the loop knows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.core.messages import Message, ToolUseBlock, pending_tool_uses, results_message
from app.core.sanitize import sanitize
from app.core.states import RunStatus, StopReason, WaitReason
from app.core.streams import StreamEvent
from app.core.vocabulary import StepKind
from app.runs.loop.boundary import Boundary
from app.runs.loop.retry import RunRetryPolicy, after_failure
from app.runs.loop.tool_runner import ToolOutcome
from app.runs.schemas.runs import RunRead, WaitingFor
from app.runs.store import runs as run_store

RESULT_PREVIEW_CHARS = 2_000
CANCELLED_BEFORE_IT_RAN = "Error: the run was cancelled before this call ran"
# The result of a call a cancel kept from starting (a person's word: not the model's error).
NOT_RUN = ToolOutcome(CANCELLED_BEFORE_IT_RAN, is_error=True, attempts=0, declined=True)
_LEASE_GIVEN_UP = {"lease_owner": None, "lease_expires_at": None}


def completed_events(outcomes: dict[str, ToolOutcome]) -> list[StreamEvent]:
    return [
        (
            "tool_call.completed",
            {
                "tool_call_id": call_id,
                "is_error": o.is_error,
                "attempts": o.attempts,
                "result": o.content[:RESULT_PREVIEW_CHARS],
            },
        )
        for call_id, o in outcomes.items()
    ]


def waiting_on_call(call: ToolUseBlock, question: str, reason: WaitReason) -> WaitingFor:
    """A run's `waiting_for` when a person's answer becomes the result of `call`."""
    return WaitingFor(reason=reason, question=question, tool_call_id=call.id, tool=call.name)


def human_pause(
    waiting_for: WaitingFor,
    *,
    completed: dict[str, ToolOutcome] | None = None,
    events: list[StreamEvent] | None = None,
) -> Boundary:
    """Wait on a person: the lane stays held, the lease is given up. `completed`: the
    batch's other results, kept."""
    completed = completed or {}
    asked = {"question": waiting_for.question, "reason": waiting_for.reason.value}
    waiting = ("agent_run.waiting_on_human", asked)
    stored = waiting_for.model_dump(mode="json", exclude_none=True)
    return Boundary(
        StepKind.HUMAN_PAUSE,
        completed=list(completed.items()),
        run_values={"status": RunStatus.WAITING_ON_HUMAN, "waiting_for": stored} | _LEASE_GIVEN_UP,
        events=[*completed_events(completed), *(events or []), waiting],
    )


def hand_back() -> Boundary:
    """Shutdown: the run goes back to the head of its lane's queue, for any worker."""
    return Boundary(
        StepKind.NOTE,
        run_values={"status": RunStatus.QUEUED} | _LEASE_GIVEN_UP,
        events=[("agent_run.interrupted", {"at_boundary": True})],
    )


def settled(
    run: RunRead,
    history: list[Message],
    status: RunStatus,
    now: datetime,
    *,
    policy: RunRetryPolicy,
    stop_reason: StopReason | None = None,
    result: str | None = None,
    error: tuple[str, str] | None = None,
    messages: list[Message] | None = None,
    extra: dict[str, Any] | None = None,
    event: StreamEvent | None = None,
    retryable: bool = True,
) -> Boundary:
    """The run's last boundary (or, for a failure with retries left, its return to the
    queue). Calls left unanswered are closed, so the conversation's transcript stays valid
    for its next run."""
    values: dict[str, Any] = {
        "status": status,
        "stop_reason": stop_reason,
        "result": result,
        **run_store.finished(now),
        **(extra or {}),
    }
    data: dict[str, Any] = {"stop_reason": stop_reason}
    if error is not None:
        values["error"] = data["error"] = {"code": error[0], "message": sanitize(error[1])}
    events = [*([event] if event else []), (f"agent_run.{status.value}", data)]
    kind = StepKind.FINAL
    if status is RunStatus.FAILED:
        failed = after_failure(policy, run, values["error"], data, now, retryable=retryable)
        values.update(failed.values)
        events, kind = events[:-1] + failed.events, failed.checkpoint
    closing = []
    skipped: list[tuple[str, ToolOutcome]] = []
    pending = pending_tool_uses(history)
    if pending and status is RunStatus.CANCELLED:
        # A response that came after the cancel: none of its calls ran, and each says so.
        skipped = [(call.id, NOT_RUN) for call in pending]
        closing = [results_message(pending, {}, CANCELLED_BEFORE_IT_RAN)]
        events = [*completed_events(dict(skipped)), *events]
    elif pending:
        closing = [results_message(pending, {}, "Error: the run ended before this call finished")]
    if status is RunStatus.CANCELLED:
        # The request went to the board and the lane when it was made; the run's own
        # history is its worker's, which records it here.
        events = [("agent_run.cancel_requested", {}), *events]
    return Boundary(
        kind,
        messages=[*closing, *(messages or [])],
        run_values=values,
        events=events,
        completed=skipped,
    )
