"""Approvals as data: what a person is asked to sign off, and the machine of its answer.

An approval is asked once and answered once: `pending` is the only state with a way out.
An escalation is not a transition (the approval stays `pending`, with a later expiry).
"""

from __future__ import annotations

from enum import StrEnum

from app.errors import InvalidTransition


class ApprovalKind(StrEnum):
    TASK_REVIEW = "task_review"  # a task reached `in_review` (seed 002 review gate)
    TOOL_CALL = "tool_call"  # a run wants to call a tool that needs a person's consent


class ApprovalStatus(StrEnum):
    PENDING = "pending"  # asked, unanswered. In: a review gate or a gated tool call.
    APPROVED = "approved"  # a person (or `auto_approve` at expiry) said yes; terminal.
    REJECTED = "rejected"  # a person (or `auto_deny` at expiry) said no, with a reason; terminal.
    CANCELLED = "cancelled"  # the task or run it gated moved on without it; terminal.


A = ApprovalStatus

APPROVAL_ALLOWED: dict[ApprovalStatus, frozenset[ApprovalStatus]] = {
    A.PENDING: frozenset({A.APPROVED, A.REJECTED, A.CANCELLED}),
    A.APPROVED: frozenset(),
    A.REJECTED: frozenset(),
    A.CANCELLED: frozenset(),
}

APPROVAL_TERMINAL: frozenset[ApprovalStatus] = frozenset(
    s for s, targets in APPROVAL_ALLOWED.items() if not targets
)


def check_transition(current: ApprovalStatus, target: ApprovalStatus) -> None:
    """Raise `invalid_transition` (409) unless the table allows `current -> target`."""
    allowed = APPROVAL_ALLOWED[current]
    if target not in allowed:
        raise InvalidTransition(current, target, allowed, " (the approval was already decided)")
