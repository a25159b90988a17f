"""Approval shapes: what a reviewer reads and what they send back."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.core.fields import Reason
from app.core.states import ApprovalDecision, ApprovalStatus
from app.core.vocabulary import SUMMARY_MAX_CHARS, ApprovalKind, ReviewTimeoutPolicy

RequiredReason = Annotated[
    str, StringConstraints(min_length=1, max_length=2_000, strip_whitespace=True)
]


class ApprovalRead(BaseModel):
    """A question to a person. `version` doubles as the ETag.

    `status` says how it was settled (`expired`: nobody answered before `expires_at`, and
    its `timeout_policy` decided); `decision` says what was decided, which is what the
    task or tool call follows."""

    model_config = ConfigDict(extra="forbid", from_attributes=True)

    id: str = Field(examples=["apr_01jd2x7k8m9n0p1q2r3s4t5v6w"])
    kind: ApprovalKind
    status: ApprovalStatus
    decision: ApprovalDecision | None = Field(
        description="`approved` or `rejected`: a person's answer, or for `expired` the timeout "
        "policy's effect (`auto_approve` → approved, `auto_deny` → rejected); null while "
        "pending or when cancelled."
    )
    task_id: str | None = Field(description="The task under review, or the run's task.")
    run_id: str | None = Field(description="The run that asks (tool calls) or was reviewed.")
    workflow_execution_id: str | None
    review_round: int | None = Field(
        description="Task reviews: the how-many-th time the task entered review."
    )
    tool_call_id: str | None
    tool: str | None
    arguments: dict[str, Any] | None = Field(
        description="Tool calls: exactly the arguments that run once approved."
    )
    question: str
    summary: str = Field(
        max_length=SUMMARY_MAX_CHARS,
        description="What to decide from. A tool call: the agent, what it said it was about "
        "to do, and the arguments abbreviated (`arguments` has them in full). A task review: "
        "the task's title and acceptance criteria, and the result its run handed in.",
    )
    comment: str | None = Field(description="The approver's comment.")
    reason: str | None = Field(description="Why it was rejected; the agent is told.")
    decided_by: str | None = Field(description="Who answered; `system:timeout` at expiry.")
    timeout_s: int = Field(description="How long each wait lasts before the policy applies.")
    timeout_policy: ReviewTimeoutPolicy
    expires_at: datetime = Field(
        description="When the wait runs out and `timeout_policy` applies (escalate: a new wait)."
    )
    escalations: int = Field(description="How often the wait ran out and was escalated.")
    version: int
    created_at: datetime
    decided_at: datetime | None


class ApproveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    comment: Reason | None = None


class RejectRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: RequiredReason = Field(examples=["The summary misses the Q3 numbers."])
