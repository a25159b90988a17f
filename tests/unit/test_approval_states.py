"""The approval state machine over every (from, to) pair: asked once, answered once."""

from __future__ import annotations

import itertools

import pytest

from app.approval_states import (
    APPROVAL_ALLOWED,
    APPROVAL_TERMINAL,
    ApprovalKind,
    ApprovalStatus,
    check_transition,
)
from app.errors import InvalidTransition

A = ApprovalStatus

# Written out independently of the module: only a pending approval can be answered.
EDGES = {
    (A.PENDING, A.APPROVED),
    (A.PENDING, A.REJECTED),
    (A.PENDING, A.CANCELLED),
}


def test_values_are_the_database_text() -> None:
    assert [s.value for s in A] == ["pending", "approved", "rejected", "cancelled"]
    assert [k.value for k in ApprovalKind] == ["task_review", "tool_call"]


@pytest.mark.parametrize(("current", "target"), list(itertools.product(A, A)))
def test_every_pair_follows_the_table(current: ApprovalStatus, target: ApprovalStatus) -> None:
    allowed = (current, target) in EDGES
    assert (target in APPROVAL_ALLOWED[current]) == allowed
    if allowed:
        check_transition(current, target)
    else:
        with pytest.raises(InvalidTransition) as refused:
            check_transition(current, target)
        assert refused.value.extensions() == {
            "current": current.value,
            "target": target.value,
            "allowed": sorted(t.value for t in APPROVAL_ALLOWED[current]),
        }


def test_every_answer_is_final() -> None:
    assert APPROVAL_TERMINAL == {A.APPROVED, A.REJECTED, A.CANCELLED}
