"""The sprint machine is strictly linear: from each status exactly one way forward, none
back, and `completed` the end; the check names the one allowed target."""

from __future__ import annotations

import itertools

import pytest

from app.core.errors import InvalidTransition
from app.core.states import (
    SPRINT_ALLOWED,
    SPRINT_TERMINAL,
    SprintStatus,
    check_sprint_transition,
)

ORDER = list(SprintStatus)
PAIRS = [(a, b) for a in SprintStatus for b in SprintStatus]


def test_the_lifecycle_is_one_line_in_declaration_order() -> None:
    assert [s.value for s in ORDER] == [
        "planning",
        "active",
        "in_review",
        "retrospective",
        "completed",
    ]
    for current, nxt in itertools.pairwise(ORDER):
        assert SPRINT_ALLOWED[current] == {nxt}
    assert SPRINT_TERMINAL == {SprintStatus.COMPLETED}


@pytest.mark.parametrize(("current", "target"), PAIRS)
def test_check_follows_the_table(current: SprintStatus, target: SprintStatus) -> None:
    if target in SPRINT_ALLOWED[current]:
        check_sprint_transition(current, target)
        return
    with pytest.raises(InvalidTransition) as refused:
        check_sprint_transition(current, target)
    assert refused.value.allowed == sorted(SPRINT_ALLOWED[current])
    assert refused.value.current == current.value and refused.value.target == target.value
