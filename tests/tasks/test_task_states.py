"""The task state machine, checked over every (from, to) pair against the lifecycle
written out below."""

from __future__ import annotations

import itertools

import pytest

from app.core.states import TASK_ALLOWED, TASK_TERMINAL, TaskStatus, allowed_targets, is_retry

S = TaskStatus

# The task lifecycle, written out independently of app.core.states.
SEED_EDGES = {
    (S.CREATED, S.ASSIGNED),
    (S.ASSIGNED, S.IN_PROGRESS),
    (S.ASSIGNED, S.FAILED),
    (S.ASSIGNED, S.BLOCKED),
    (S.ASSIGNED, S.CANCELLED),
    (S.ASSIGNED, S.INTERRUPTED),
    (S.IN_PROGRESS, S.IN_REVIEW),
    (S.IN_PROGRESS, S.FAILED),
    (S.IN_PROGRESS, S.CANCELLED),
    (S.IN_PROGRESS, S.INTERRUPTED),
    (S.IN_REVIEW, S.COMPLETED),
    (S.IN_REVIEW, S.IN_PROGRESS),
    (S.BLOCKED, S.ASSIGNED),
    (S.FAILED, S.ASSIGNED),
    (S.INTERRUPTED, S.ASSIGNED),
}


def test_values_are_the_lowercase_database_text() -> None:
    assert [s.value for s in S] == [
        "created",
        "assigned",
        "in_progress",
        "in_review",
        "completed",
        "blocked",
        "failed",
        "cancelled",
        "interrupted",
    ]


@pytest.mark.parametrize(("current", "target"), list(itertools.product(S, S)))
def test_every_pair_matches_the_seed(current: TaskStatus, target: TaskStatus) -> None:
    allowed = allowed_targets(current, retry_count=0, max_retries=1)
    assert (target in allowed) == ((current, target) in SEED_EDGES)


def test_only_completed_and_cancelled_are_terminal() -> None:
    assert TASK_TERMINAL == {S.COMPLETED, S.CANCELLED}
    assert set(TASK_ALLOWED) == set(S)


@pytest.mark.parametrize(
    ("retry_count", "max_retries", "can_retry"),
    [(0, 1, True), (1, 1, False), (0, 0, False), (2, 3, True), (3, 3, False)],
)
def test_failed_to_assigned_only_while_retries_remain(
    retry_count: int, max_retries: int, can_retry: bool
) -> None:
    allowed = allowed_targets(S.FAILED, retry_count=retry_count, max_retries=max_retries)
    assert (S.ASSIGNED in allowed) is can_retry


def test_only_failed_to_assigned_counts_as_a_retry() -> None:
    retries = {pair for pair in SEED_EDGES if is_retry(*pair)}
    assert retries == {(S.FAILED, S.ASSIGNED)}
