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


class RunStatus(StrEnum):
    QUEUED = "queued"  # waiting for its lane and a worker. In: create, retry, resume.
    RUNNING = "running"  # a worker holds its lease and runs the loop; holds the lane.
    WAITING_ON_HUMAN = "waiting_on_human"  # paused for a person; still holds the lane.
    COMPLETED = "completed"  # the agent answered; terminal.
    FAILED = "failed"  # an error ended it; may be retried (-> queued) or dead-lettered.
    CANCELLED = "cancelled"  # a cancel was observed at a boundary (or before start); terminal.
    TIMED_OUT = "timed_out"  # hard limit hit or heartbeat lost; may be resumed (-> queued).
    DEAD_LETTER = "dead_letter"  # retries exhausted; a person may send it back to the queue.


R = RunStatus

RUN_ALLOWED: dict[RunStatus, frozenset[RunStatus]] = {
    R.QUEUED: frozenset({R.RUNNING, R.CANCELLED}),
    # A failure leaves `running` for a retry (`queued`, after a backoff) or, with no retries
    # left, for `dead_letter`: the `failed` in between is recorded as its event.
    R.RUNNING: frozenset(
        {
            R.COMPLETED,
            R.FAILED,
            R.CANCELLED,
            R.TIMED_OUT,
            R.WAITING_ON_HUMAN,
            R.QUEUED,
            R.DEAD_LETTER,
        }
    ),
    # A human's answer sends the run back to the head of its lane's queue.
    R.WAITING_ON_HUMAN: frozenset({R.QUEUED, R.RUNNING, R.CANCELLED, R.TIMED_OUT}),
    R.FAILED: frozenset({R.QUEUED, R.DEAD_LETTER}),
    R.TIMED_OUT: frozenset({R.QUEUED}),
    R.DEAD_LETTER: frozenset({R.QUEUED}),
    R.COMPLETED: frozenset(),
    R.CANCELLED: frozenset(),
}

# A lane is held by at most one run in these states (a unique partial index enforces it).
RUN_ACTIVE: frozenset[RunStatus] = frozenset({R.RUNNING, R.WAITING_ON_HUMAN})
# No worker will touch these again without a person or a policy sending them back.
RUN_SETTLED: frozenset[RunStatus] = frozenset(
    {R.COMPLETED, R.FAILED, R.CANCELLED, R.TIMED_OUT, R.DEAD_LETTER}
)
RUN_TERMINAL: frozenset[RunStatus] = frozenset(s for s, t in RUN_ALLOWED.items() if not t)
