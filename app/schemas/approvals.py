"""Approval shapes: what a reviewer reads and what they send back."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.approval_states import ApprovalKind, ApprovalStatus
from app.schemas.common import Reason
from app.workflow_states import ReviewTimeoutPolicy

RequiredReason = Annotated[
    str, StringConstraints(min_length=1, max_length=2_000, strip_whitespace=True)
]


class ApprovalRead(BaseModel):
    """A question to a person. `version` doubles as the ETag."""

    model_config = ConfigDict(extra="forbid", from_attributes=True)

    id: str = Field(examples=["apr_01jd2x7k8m9n0p1q2r3s4t5v6w"])
    kind: ApprovalKind
    status: ApprovalStatus
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
    comment: str | None = Field(description="The approver's comment.")
    reason: str | None = Field(description="Why it was rejected; the agent is told.")
    decided_by: str | None = Field(description="Who answered; `system:timeout` at expiry.")
    timeout_s: int = Field(description="How long each wait lasts before the policy applies.")
    timeout_policy: ReviewTimeoutPolicy
    expires_at: datetime
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
