"""The roll-up: what the subtasks' statuses make of the parent task, and which subtasks
to cancel now. A subtask's status is its node status (`node_status_of` in
`app.workflows.engine.workflow_observer`, as a workflow's task nodes), so that a failed subtask with
a retry left is still pending, and `failed` is final. The rules, in order:

    1. A subtask that depends, directly or not, on a failed or cancelled one can never
       start: it is cancelled.
    2. With `fail_fast`, a failed subtask cancels every subtask not settled, and the
       parent fails now.
    3. While a subtask (not being cancelled) is pending or running: no outcome yet.
    4. Every subtask settled: all completed → the parent completes; all cancelled (the
       coordination was called off) → the parent is cancelled; otherwise it fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.coordination.engine.dag import SubtaskDag
from app.core.states import NodeStatus, TaskStatus

_UNSETTLED = frozenset({NodeStatus.PENDING, NodeStatus.RUNNING})
_LOST = frozenset({NodeStatus.FAILED, NodeStatus.CANCELLED})


@dataclass(frozen=True)
class RollUp:
    """`outcome`: the parent's status, None while subtasks are still to finish; `cancel`:
    the subtasks (indices, ascending) to cancel now."""

    outcome: TaskStatus | None
    cancel: tuple[int, ...]
    reason: str


def _doomed(statuses: Sequence[NodeStatus], dag: SubtaskDag) -> set[int]:
    """The unsettled subtasks downstream of a lost one. Dependencies have lower waves, so
    one pass in wave order sees each subtask's dependencies decided before it."""
    lost = {i for i, status in enumerate(statuses) if status in _LOST}
    doomed: set[int] = set()
    for wave in dag.waves():
        for i in wave:
            downstream = any(d in lost or d in doomed for d in dag.dependencies[i])
            if downstream and statuses[i] in _UNSETTLED:
                doomed.add(i)
    return doomed


def _named(indices: Sequence[int] | set[int]) -> str:
    return ", ".join(map(str, sorted(indices)))


def roll_up(statuses: Sequence[NodeStatus], dag: SubtaskDag, *, fail_fast: bool) -> RollUp:
    """`statuses`: each subtask's, by index (as many as the DAG has)."""
    if len(statuses) != len(dag.dependencies):
        raise ValueError(f"{len(statuses)} statuses for {len(dag.dependencies)} subtasks")
    failed = [i for i, status in enumerate(statuses) if status is NodeStatus.FAILED]
    unsettled = {i for i, status in enumerate(statuses) if status in _UNSETTLED}
    if fail_fast and failed:
        return RollUp(
            TaskStatus.FAILED,
            tuple(sorted(unsettled)),
            f"subtask(s) {_named(failed)} failed (fail_fast)",
        )
    cancel = _doomed(statuses, dag)
    if unsettled - cancel:
        return RollUp(
            None, tuple(sorted(cancel)), f"subtask(s) {_named(unsettled - cancel)} to finish"
        )
    final = [NodeStatus.CANCELLED if i in cancel else s for i, s in enumerate(statuses)]
    if all(status is NodeStatus.COMPLETED for status in final):
        return RollUp(TaskStatus.COMPLETED, (), "every subtask completed")
    if all(status is NodeStatus.CANCELLED for status in final):
        return RollUp(TaskStatus.CANCELLED, tuple(sorted(cancel)), "every subtask was cancelled")
    not_completed = [i for i, status in enumerate(final) if status is not NodeStatus.COMPLETED]
    return RollUp(
        TaskStatus.FAILED,
        tuple(sorted(cancel)),
        f"subtask(s) {_named(not_completed)} did not complete",
    )
