"""The approval state machine over every (from, to) pair: asked once, settled once; an
expired approval refuses an answer with its own code."""

from __future__ import annotations

import itertools

import pytest

from app.core.errors import ApprovalExpired, InvalidTransition
from app.core.states import (
    APPROVAL_ALLOWED,
    APPROVAL_TERMINAL,
    ApprovalDecision,
    ApprovalStatus,
    check_approval_transition,
)
from app.core.vocabulary import ApprovalKind

A = ApprovalStatus

# Written out independently of the module: only a pending approval can be settled.
EDGES = {
    (A.PENDING, A.APPROVED),
    (A.PENDING, A.REJECTED),
    (A.PENDING, A.EXPIRED),
    (A.PENDING, A.CANCELLED),
}


def test_values_are_the_database_text() -> None:
    assert [s.value for s in A] == ["pending", "approved", "rejected", "expired", "cancelled"]
    assert [d.value for d in ApprovalDecision] == ["approved", "rejected"]
    assert [k.value for k in ApprovalKind] == ["task_review", "tool_call", "merge"]


@pytest.mark.parametrize(("current", "target"), list(itertools.product(A, A)))
def test_every_pair_follows_the_table(current: ApprovalStatus, target: ApprovalStatus) -> None:
    allowed = (current, target) in EDGES
    assert (target in APPROVAL_ALLOWED[current]) == allowed
    if allowed:
        check_approval_transition(current, target)
        return
    with pytest.raises(InvalidTransition) as refused:
        check_approval_transition(current, target)
    # An expired approval has a code of its own: a client tells "too late" from "taken".
    expected_code = "approval_expired" if current is A.EXPIRED else "invalid_transition"
    assert refused.value.code == expected_code
    assert isinstance(refused.value, ApprovalExpired) == (current is A.EXPIRED)
    extensions = refused.value.extensions()
    assert {k: extensions[k] for k in ("current", "target", "allowed")} == {
        "current": current.value,
        "target": target.value,
        "allowed": sorted(t.value for t in APPROVAL_ALLOWED[current]),
    }


def test_every_settlement_is_final() -> None:
    assert APPROVAL_TERMINAL == {A.APPROVED, A.REJECTED, A.EXPIRED, A.CANCELLED}


def test_an_expired_approval_s_problem_names_its_deadline_and_decision() -> None:
    error = ApprovalExpired("approved", expires_at="2026-01-01T00:00:00+00:00", decision="rejected")
    assert (error.status_code, error.code) == (409, "approval_expired")
    assert error.extensions() == {
        "current": "expired",
        "target": "approved",
        "allowed": [],
        "expires_at": "2026-01-01T00:00:00+00:00",
        "decision": "rejected",
    }
    assert "its timeout policy decided: rejected" in error.detail
