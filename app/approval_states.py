"""Approvals as data: what a person is asked to sign off, and the machine of its answer.

An approval is asked once and settled once: `pending` is the only state with a way out.

    pending ──a person──▶ approved | rejected
            ──its wait ran out (auto_approve / auto_deny)──▶ expired
            ──the task or run it gated moved on──▶ cancelled

`status` says how an approval was settled; `decision` says what it decided, which is what
the gated task or tool call follows: `approved` / `rejected` for a person's answer (the
same as the status), the timeout policy's effect for `expired` (`auto_approve` → approved,
`auto_deny` → rejected), none while pending or when cancelled. An escalation is not a
transition: the approval stays `pending`, open to a person, with a later expiry.
"""

from __future__ import annotations

from enum import StrEnum

from app.errors import ApprovalExpired, InvalidTransition


class ApprovalKind(StrEnum):
    TASK_REVIEW = "task_review"  # a task reached `in_review` (seed 002 review gate)
    TOOL_CALL = "tool_call"  # a run wants to call a tool that needs a person's consent


class ApprovalStatus(StrEnum):
    PENDING = "pending"  # asked, unanswered. In: a review gate or a gated tool call.
    APPROVED = "approved"  # a person said yes; terminal.
    REJECTED = "rejected"  # a person said no, with a reason; terminal.
    # Nobody answered before `expires_at` and the policy decided (see `decision`); terminal.
    EXPIRED = "expired"
    # The task or run it gated moved on without it (left review by hand, superseded by a
    # new review round, the run ended or was cancelled while waiting); terminal, no decision.
    CANCELLED = "cancelled"


class ApprovalDecision(StrEnum):
    """What a settled approval decided: the gated work goes ahead, or it does not."""

    APPROVED = "approved"
    REJECTED = "rejected"


# A context summary (what a person decides from) is at most this long.
SUMMARY_MAX_CHARS = 1_000

A = ApprovalStatus

APPROVAL_ALLOWED: dict[ApprovalStatus, frozenset[ApprovalStatus]] = {
    A.PENDING: frozenset({A.APPROVED, A.REJECTED, A.EXPIRED, A.CANCELLED}),
    A.APPROVED: frozenset(),
    A.REJECTED: frozenset(),
    A.EXPIRED: frozenset(),
    A.CANCELLED: frozenset(),
}

APPROVAL_TERMINAL: frozenset[ApprovalStatus] = frozenset(
    s for s, targets in APPROVAL_ALLOWED.items() if not targets
)


def check_transition(current: ApprovalStatus, target: ApprovalStatus) -> None:
    """Raise unless the table allows `current -> target`: `approval_expired` (409) when
    the approval expired (its policy decided; nobody may answer it any more), otherwise
    `invalid_transition` (409)."""
    allowed = APPROVAL_ALLOWED[current]
    if target in allowed:
        return
    if current is A.EXPIRED:
        raise ApprovalExpired(target)
    raise InvalidTransition(current, target, allowed, " (the approval was already decided)")
