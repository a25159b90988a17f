"""The run and execution machines' checks, written out independently of their tables:
what a run and an execution may become, and the 409 that names the way out."""

from __future__ import annotations

import pytest

from app.core.errors import InvalidTransition
from app.core.states import (
    ExecutionStatus,
    RunStatus,
    StopReason,
    check_execution_transition,
    check_run_transition,
    run_sources,
)

R = RunStatus
LEGAL_RUN_MOVES = [
    (R.QUEUED, R.RUNNING),  # a claim
    (R.QUEUED, R.CANCELLED),
    (R.RUNNING, R.COMPLETED),
    (R.RUNNING, R.QUEUED),  # a hand-back or a retry after backoff
    (R.RUNNING, R.WAITING_ON_HUMAN),
    (R.RUNNING, R.TIMED_OUT),  # the reconciler
    (R.WAITING_ON_HUMAN, R.QUEUED),  # a person answered
    (R.TIMED_OUT, R.QUEUED),  # a resume
    (R.DEAD_LETTER, R.QUEUED),  # a person's retry
]
ILLEGAL_RUN_MOVES = [
    (R.COMPLETED, R.RUNNING),  # a claim of a settled run
    (R.CANCELLED, R.QUEUED),  # a release of a cancelled one
    (R.COMPLETED, R.TIMED_OUT),  # a time-out of a completed one
    (R.RUNNING, R.RUNNING),
    (R.QUEUED, R.COMPLETED),  # nothing settles a run no worker ran
    (R.TIMED_OUT, R.RUNNING),  # a resume goes through the queue
]


@pytest.mark.parametrize(("current", "target"), LEGAL_RUN_MOVES)
def test_a_run_may_make_these_moves(current: RunStatus, target: RunStatus) -> None:
    check_run_transition(current, target)


@pytest.mark.parametrize(("current", "target"), ILLEGAL_RUN_MOVES)
def test_a_run_may_not_make_these(current: RunStatus, target: RunStatus) -> None:
    with pytest.raises(InvalidTransition) as refused:
        check_run_transition(current, target)
    assert refused.value.extensions()["current"] == current.value
    assert target.value not in refused.value.extensions()["allowed"]


def test_settled_runs_have_no_way_out_but_a_persons() -> None:
    for settled in (R.COMPLETED, R.CANCELLED):
        with pytest.raises(InvalidTransition) as refused:
            check_run_transition(settled, R.QUEUED)
        assert refused.value.allowed == []
    assert run_sources(R.RUNNING) >= {R.QUEUED}
    assert R.COMPLETED not in run_sources(R.QUEUED)


def test_an_execution_leaves_running_once() -> None:
    E = ExecutionStatus
    for end in (E.COMPLETED, E.FAILED, E.CANCELLED):
        check_execution_transition(E.RUNNING, end)
        with pytest.raises(InvalidTransition):
            check_execution_transition(end, E.CANCELLED if end is not E.CANCELLED else E.FAILED)


def test_stop_reasons_are_the_stored_text() -> None:
    assert StopReason.TOO_MANY_ERRORS.value == "too_many_errors"
    assert StopReason("heartbeat_lost") is StopReason.HEARTBEAT_LOST
