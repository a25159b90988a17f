"""The state machines as data: each enum's values are the database text.

`ALLOWED` reads like the seed's diagram and is the single source of truth; the guard on
`failed -> assigned` (retries left) lives in `allowed_targets()` beside it.
"""

from __future__ import annotations

from enum import StrEnum


class TaskStatus(StrEnum):
    CREATED = "created"  # just made; nobody owns it yet. Out: assignment.
    ASSIGNED = "assigned"  # has an owner, not started. In: assignment, unblock, retry, restart.
    IN_PROGRESS = "in_progress"  # an agent works it. In: start, rework after review.
    IN_REVIEW = "in_review"  # agent done, waiting for a reviewer's verdict.
    COMPLETED = "completed"  # approved; terminal.
    BLOCKED = "blocked"  # waiting on something outside; unblocking reassigns.
    FAILED = "failed"  # setup or runtime failure; reassignable while retries remain.
    CANCELLED = "cancelled"  # abandoned on purpose; terminal.
    INTERRUPTED = "interrupted"  # stopped by a shutdown; reassigned on restart.


S = TaskStatus

ALLOWED: dict[TaskStatus, frozenset[TaskStatus]] = {
    S.CREATED: frozenset({S.ASSIGNED}),
    S.ASSIGNED: frozenset({S.IN_PROGRESS, S.FAILED, S.BLOCKED, S.CANCELLED, S.INTERRUPTED}),
    S.IN_PROGRESS: frozenset({S.IN_REVIEW, S.FAILED, S.CANCELLED, S.INTERRUPTED}),
    S.IN_REVIEW: frozenset({S.COMPLETED, S.IN_PROGRESS}),
    S.BLOCKED: frozenset({S.ASSIGNED}),
    S.FAILED: frozenset({S.ASSIGNED}),
    S.INTERRUPTED: frozenset({S.ASSIGNED}),
    S.COMPLETED: frozenset(),
    S.CANCELLED: frozenset(),
}

TERMINAL: frozenset[TaskStatus] = frozenset(s for s, targets in ALLOWED.items() if not targets)


def allowed_targets(
    current: TaskStatus, *, retry_count: int, max_retries: int
) -> frozenset[TaskStatus]:
    """Targets reachable from `current` for a task with these retry counters."""
    targets = ALLOWED[current]
    if current is S.FAILED and retry_count >= max_retries:
        return frozenset()
    return targets


def is_retry(current: TaskStatus, target: TaskStatus) -> bool:
    """A reassignment after failure consumes one retry."""
    return current is S.FAILED and target is S.ASSIGNED
