"""The roll-up as a table: the subtasks' node statuses over a DAG, with and without
fail_fast → the parent's outcome and the subtasks to cancel."""

from __future__ import annotations

import pytest

from app.coordination.engine.dag import SubtaskDag
from app.coordination.engine.roll_up import roll_up
from app.core.states import NodeStatus, TaskStatus

N, Task = NodeStatus, TaskStatus
P, R, C, F, X = N.PENDING, N.RUNNING, N.COMPLETED, N.FAILED, N.CANCELLED

WIDE = SubtaskDag(((), (), ()))  # three independent subtasks
CHAIN = SubtaskDag(((), (0,), (1,)))  # 0 → 1 → 2
DIAMOND = SubtaskDag(((), (0,), (0,), (1, 2)))

TABLE = [
    # dag, statuses, fail_fast, outcome, cancel
    (WIDE, [C, C, C], False, Task.COMPLETED, ()),
    (WIDE, [C, C, C], True, Task.COMPLETED, ()),
    (WIDE, [C, R, P], False, None, ()),
    (WIDE, [C, R, P], True, None, ()),
    # a failure: the others run on, then the parent fails
    (WIDE, [F, R, P], False, None, ()),
    (WIDE, [F, C, C], False, Task.FAILED, ()),
    # fail_fast: the parent fails now, and what is not settled is cancelled
    (WIDE, [F, R, P], True, Task.FAILED, (1, 2)),
    (WIDE, [F, C, R], True, Task.FAILED, (2,)),
    (WIDE, [F, C, C], True, Task.FAILED, ()),
    # what depends on a failed or cancelled subtask can never start
    (CHAIN, [F, P, P], False, Task.FAILED, (1, 2)),
    (CHAIN, [C, X, P], False, Task.FAILED, (2,)),
    (DIAMOND, [C, F, R, P], False, None, (3,)),
    (DIAMOND, [C, F, C, P], False, Task.FAILED, (3,)),
    (DIAMOND, [C, F, R, P], True, Task.FAILED, (2, 3)),
    # cancelled: all of them → the parent is cancelled; some → it fails
    (WIDE, [X, X, X], False, Task.CANCELLED, ()),
    (CHAIN, [X, P, P], True, Task.CANCELLED, (1, 2)),
    (WIDE, [X, C, C], False, Task.FAILED, ()),
    (WIDE, [X, R, C], True, None, ()),  # fail_fast is about failures, not cancels
]


@pytest.mark.parametrize(("dag", "statuses", "fail_fast", "outcome", "cancel"), TABLE)
def test_roll_up(
    dag: SubtaskDag,
    statuses: list[NodeStatus],
    fail_fast: bool,
    outcome: TaskStatus | None,
    cancel: tuple[int, ...],
) -> None:
    rolled = roll_up(statuses, dag, fail_fast=fail_fast)
    assert (rolled.outcome, rolled.cancel) == (outcome, cancel)


def test_the_reason_names_the_subtasks() -> None:
    assert roll_up([F, C, X], WIDE, fail_fast=False).reason == "subtask(s) 0, 2 did not complete"
    assert roll_up([C, R, P], WIDE, fail_fast=False).reason == "subtask(s) 1, 2 to finish"
    assert roll_up([R, F, P], WIDE, fail_fast=True).reason == "subtask(s) 1 failed (fail_fast)"


def test_a_status_per_subtask_is_required() -> None:
    with pytest.raises(ValueError, match="2 statuses for 3 subtasks"):
        roll_up([C, C], WIDE, fail_fast=False)
