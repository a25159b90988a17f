"""How the execution observer reads task statuses: the table in its module docstring."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from app.core.states import ExecutionStatus, NodeStatus, TaskStatus
from app.tasks.schemas.tasks import TaskRead
from app.workflows.engine.workflow_observer import execution_status_of, node_status_of
from app.workflows.engine.workflows import cancel_route

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def task(
    status: TaskStatus,
    *,
    retry_count: int = 0,
    max_retries: int = 1,
    assigned_to: str | None = None,
) -> TaskRead:
    return TaskRead(
        assigned_to=assigned_to,
        id="task_1",
        title="t",
        created_by="me",
        status=status,
        retry_count=retry_count,
        max_retries=max_retries,
        version=1,
        created_at=NOW,
        updated_at=NOW,
    )


@pytest.mark.parametrize(
    ("status", "retry_count", "expected"),
    [
        (TaskStatus.CREATED, 0, NodeStatus.PENDING),
        (TaskStatus.ASSIGNED, 0, NodeStatus.PENDING),
        (TaskStatus.BLOCKED, 0, NodeStatus.PENDING),
        (TaskStatus.INTERRUPTED, 0, NodeStatus.PENDING),
        (TaskStatus.FAILED, 0, NodeStatus.PENDING),  # one retry left: it will be reassigned
        (TaskStatus.IN_PROGRESS, 0, NodeStatus.RUNNING),
        (TaskStatus.IN_REVIEW, 0, NodeStatus.RUNNING),
        (TaskStatus.COMPLETED, 0, NodeStatus.COMPLETED),
        (TaskStatus.FAILED, 1, NodeStatus.FAILED),  # retries used up
        (TaskStatus.CANCELLED, 0, NodeStatus.CANCELLED),
    ],
)
def test_node_status_follows_the_task(
    status: TaskStatus, retry_count: int, expected: NodeStatus
) -> None:
    assert node_status_of(task(status, retry_count=retry_count)) is expected


def test_every_task_status_has_a_node_status() -> None:
    for status in TaskStatus:
        assert node_status_of(task(status)) in NodeStatus


def test_a_deleted_task_counts_as_cancelled() -> None:
    assert node_status_of(None) is NodeStatus.CANCELLED


P, R, C, F, X = (
    NodeStatus.PENDING,
    NodeStatus.RUNNING,
    NodeStatus.COMPLETED,
    NodeStatus.FAILED,
    NodeStatus.CANCELLED,
)


ALONE: dict[str, Any] = {"all": []}  # a branch of its own: it waits on nothing
APART = {"a": ALONE, "b": ALONE, "c": ALONE}  # three parallel branches
CHAIN = {"a": ALONE, "b": "a", "c": "b"}  # a -> b -> c
EITHER = {"a": ALONE, "b": ALONE, "c": {"any": ["a", "b"]}}  # c after a or b


@pytest.mark.parametrize(
    ("graph", "nodes", "fail_fast", "expected"),
    [
        (APART, [C, C, C], False, ExecutionStatus.COMPLETED),
        (APART, [C, R, P], False, ExecutionStatus.RUNNING),
        # A failed branch waits for its siblings, unless fail_fast.
        (APART, [C, F, R], False, ExecutionStatus.RUNNING),
        (APART, [C, F, R], True, ExecutionStatus.FAILED),
        (APART, [F, P, P], False, ExecutionStatus.RUNNING),  # they may still start
        (APART, [C, F, C], False, ExecutionStatus.FAILED),  # nothing else to wait for
        (CHAIN, [F, P, P], False, ExecutionStatus.FAILED),  # what is left waits on the failure
        (CHAIN, [C, F, P], False, ExecutionStatus.FAILED),
        (EITHER, [F, R, P], False, ExecutionStatus.RUNNING),  # b may still start c
        (EITHER, [F, F, P], False, ExecutionStatus.FAILED),
        (APART, [C, X, R], False, ExecutionStatus.CANCELLED),
        (APART, [F, X, C], False, ExecutionStatus.FAILED),  # a failure is reported over a cancel
        (APART, [F, X, R], True, ExecutionStatus.FAILED),
        ({}, [], False, ExecutionStatus.COMPLETED),
    ],
)
def test_execution_status_follows_its_task_nodes(
    graph: dict[str, Any], nodes: list[NodeStatus], fail_fast: bool, expected: ExecutionStatus
) -> None:
    node_status = dict(zip(graph, nodes, strict=True)) | {"start": C, "skipped": NodeStatus.SKIPPED}
    assert execution_status_of(node_status, graph, fail_fast=fail_fast) is expected


S = TaskStatus


@pytest.mark.parametrize(
    ("status", "retry_count", "assigned_to", "route"),
    [
        (S.ASSIGNED, 0, "ann", [S.CANCELLED]),
        (S.IN_PROGRESS, 0, "ann", [S.CANCELLED]),
        (S.BLOCKED, 0, "ann", [S.ASSIGNED, S.CANCELLED]),
        (S.INTERRUPTED, 0, "ann", [S.ASSIGNED, S.CANCELLED]),
        (S.FAILED, 0, "ann", [S.ASSIGNED, S.CANCELLED]),
        (S.FAILED, 1, "ann", []),  # failed for good: nothing more will run
        (S.CREATED, 0, None, []),  # nobody will run it
        (S.IN_REVIEW, 0, "ann", []),  # its work is done; the review decides
        (S.COMPLETED, 0, "ann", []),
        (S.CANCELLED, 0, "ann", []),
    ],
)
def test_cancelling_a_workflow_cancels_each_task_by_an_allowed_route(
    status: TaskStatus, retry_count: int, assigned_to: str | None, route: list[TaskStatus]
) -> None:
    assert cancel_route(task(status, retry_count=retry_count, assigned_to=assigned_to)) == route
