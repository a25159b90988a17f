"""Every state machine of the service, as data: tasks, runs, workflow executions and
their nodes, approvals. Each enum's values are the database text; each `*_ALLOWED` table is
the single source of truth for its machine, and each machine has its `check_*_transition`,
which the one writer of that status calls before it writes.

    task       created → assigned → in_progress → in_review → completed (+ blocked, failed,
               interrupted, cancelled; `failed → assigned` only while retries remain)
    run        queued → running → completed | failed | cancelled | timed_out |
               waiting_on_human | dead_letter; back to queued by a retry, a resume, a
               person's answer or a hand-back at shutdown
    execution  running → completed | failed | cancelled
    approval   pending → approved | rejected | expired | cancelled
    sprint     planning → active → in_review → retrospective → completed (strictly linear)
"""

from __future__ import annotations

from enum import StrEnum

from app.core.errors import ApprovalExpired, InvalidTransition
from app.core.vocabulary import BoardColumn

# -- tasks -------------------------------------------------------------------------------


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

TASK_ALLOWED: dict[TaskStatus, frozenset[TaskStatus]] = {
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

TASK_TERMINAL: frozenset[TaskStatus] = frozenset(
    s for s, targets in TASK_ALLOWED.items() if not targets
)


# The tasks an agent holds: its `max_concurrent_tasks` bounds how many of its tasks are
# in these statuses. `created` has no owner yet; `completed` and `cancelled` are over;
# `failed` is held by nobody until a retry assigns it again (and holds it again).
TASK_HELD: frozenset[TaskStatus] = frozenset(
    {S.ASSIGNED, S.IN_PROGRESS, S.IN_REVIEW, S.BLOCKED, S.INTERRUPTED}
)


# The board's columns, both ways; the other statuses (blocked, failed, interrupted,
# cancelled) are off the board.
COLUMN_STATUS: dict[BoardColumn, TaskStatus] = {
    BoardColumn.BACKLOG: S.CREATED,
    BoardColumn.READY: S.ASSIGNED,
    BoardColumn.IN_PROGRESS: S.IN_PROGRESS,
    BoardColumn.REVIEW: S.IN_REVIEW,
    BoardColumn.DONE: S.COMPLETED,
}
STATUS_COLUMN: dict[TaskStatus, BoardColumn] = {s: c for c, s in COLUMN_STATUS.items()}


def allowed_targets(
    current: TaskStatus, *, retry_count: int, max_retries: int
) -> frozenset[TaskStatus]:
    """Targets reachable from `current` for a task with these retry counters."""
    targets = TASK_ALLOWED[current]
    if current is S.FAILED and retry_count >= max_retries:
        return frozenset()
    return targets


def task_path(current: TaskStatus, target: TaskStatus) -> tuple[TaskStatus, ...] | None:
    """The shortest walk of allowed transitions from `current` to `target` (its steps,
    `target` last; empty when already there), never through a retry (which needs the
    counters); None when the table has no way."""
    paths: dict[TaskStatus, tuple[TaskStatus, ...]] = {current: ()}
    frontier = [current]
    while frontier and target not in paths:
        step = []
        for status in frontier:
            for nxt in sorted(TASK_ALLOWED[status]):
                if nxt not in paths and not is_retry(status, nxt):
                    paths[nxt] = (*paths[status], nxt)
                    step.append(nxt)
        frontier = step
    return paths.get(target)


def is_retry(current: TaskStatus, target: TaskStatus) -> bool:
    """A reassignment after failure consumes one retry."""
    return current is S.FAILED and target is S.ASSIGNED


def check_task_transition(
    current: TaskStatus, target: TaskStatus, *, retry_count: int, max_retries: int
) -> None:
    """Raise `invalid_transition` (409), naming the allowed targets, unless the table (and
    the retry guard) allows `current -> target`."""
    allowed = allowed_targets(current, retry_count=retry_count, max_retries=max_retries)
    if target in allowed:
        return
    why = ""
    if is_retry(current, target):
        why = f" (retries exhausted: {retry_count} of {max_retries} used)"
    raise InvalidTransition(current, target, allowed, why)


# -- runs ----------------------------------------------------------------------------------


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


def check_run_transition(current: RunStatus, target: RunStatus) -> None:
    """Raise `invalid_transition` (409) unless the table allows `current -> target`."""
    allowed = RUN_ALLOWED[current]
    if target not in allowed:
        raise InvalidTransition(current, target, allowed)


def run_sources(target: RunStatus) -> frozenset[RunStatus]:
    """The statuses a run may reach `target` from (set-based writers filter on them)."""
    return frozenset(s for s, targets in RUN_ALLOWED.items() if target in targets)


class PlanStepStatus(StrEnum):
    PENDING = "pending"  # in the plan, not started. In: the plan, or a replan.
    RUNNING = "running"  # the executor works on it; a resumed run continues it here.
    COMPLETED = "completed"  # the executor gave its result; terminal.
    FAILED = "failed"  # the executor said it cannot be done; a replan may follow; terminal.


PS = PlanStepStatus

PLAN_STEP_ALLOWED: dict[PlanStepStatus, frozenset[PlanStepStatus]] = {
    PS.PENDING: frozenset({PS.RUNNING}),
    PS.RUNNING: frozenset({PS.COMPLETED, PS.FAILED}),
    PS.COMPLETED: frozenset(),
    PS.FAILED: frozenset(),
}


class StopReason(StrEnum):
    """Why a run stopped (`runs.stop_reason`); the status says how it ended."""

    END_TURN = "end_turn"  # completed: the model gave its final answer
    MAX_ITERATIONS = "max_iterations"  # completed: its iteration limit
    STAGNATION = "stagnation"  # completed: it kept doing the same thing
    SOFT_TIME_LIMIT = "soft_time_limit"  # completed: one last turn without tools summarised
    TOO_MANY_ERRORS = "too_many_errors"  # failed: its tool batches kept failing
    HARD_TIME_LIMIT = "hard_time_limit"  # failed: out of time
    PROVIDER_ERROR = "provider_error"  # failed: an LLM call failed for good
    PROVIDER_UNAVAILABLE = "provider_unavailable"  # failed: no provider for its model
    BUDGET_EXHAUSTED = "budget_exhausted"  # failed, not retried: its next call did not fit
    TOOLS_UNAVAILABLE = "tools_unavailable"  # failed: an MCP server of its agent did not start
    AGENT_MISSING = "agent_missing"  # failed: its agent was deleted
    PLAN_INVALID = "plan_invalid"  # failed: plan_execute's planner gave no valid plan, twice
    PLAN_FAILED = "plan_failed"  # failed: a plan step failed with no replan left
    INTERNAL = "internal"  # failed: a bug
    CANCELLED = "cancelled"  # cancelled
    HEARTBEAT_LOST = "heartbeat_lost"  # timed_out: its worker died or hung


class WaitReason(StrEnum):
    """What a run `waiting_on_human` waits for (its `waiting_for.reason`)."""

    ASK_HUMAN = "ask_human"  # the agent asked a question: the answer is the call's result
    APPROVAL = "approval"  # a side-effecting call waits for a person's approval
    RESUME_UNSAFE = "resume_unsafe"  # a side-effecting call was cut short: did it happen?
    SYSTEM_PROMPT_CHANGED = "system_prompt_changed"  # its agent's prompt changed under it


class ResumeDecision(StrEnum):
    """What the reconciler did with a run it timed out (its error log entry says)."""

    AUTOMATIC = "automatic"  # requeued it
    EXHAUSTED = "exhausted"  # gave up on it: it took down every worker so far
    DISABLED = "disabled"  # left it: automatic resume is off
    UNAVAILABLE = "unavailable"  # left it: its last checkpoint cannot be resumed


# -- workflow executions and their nodes ----------------------------------------------------


class ExecutionStatus(StrEnum):
    RUNNING = "running"  # tasks instantiated at activation; the observer moves it out.
    COMPLETED = "completed"  # every task of the execution completed (skipped ones aside).
    FAILED = "failed"  # a task failed with no retry left.
    CANCELLED = "cancelled"  # cancelled through the API, or one of its tasks was.


EXECUTION_ALLOWED: dict[ExecutionStatus, frozenset[ExecutionStatus]] = {
    ExecutionStatus.RUNNING: frozenset(
        {ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED}
    ),
    ExecutionStatus.COMPLETED: frozenset(),
    ExecutionStatus.FAILED: frozenset(),
    ExecutionStatus.CANCELLED: frozenset(),
}
EXECUTION_TERMINAL = frozenset(s for s, targets in EXECUTION_ALLOWED.items() if not targets)


class NodeStatus(StrEnum):
    PENDING = "pending"  # its task waits to be worked (or to be reassigned after a failure)
    RUNNING = "running"  # its task is in progress or in review
    COMPLETED = "completed"  # its task completed; control nodes are completed at activation
    FAILED = "failed"  # its task failed with no retry left
    SKIPPED = "skipped"  # on a branch a conditional did not take; no task was made
    CANCELLED = "cancelled"  # its task was cancelled or deleted, or the execution was


def check_execution_transition(current: ExecutionStatus, target: ExecutionStatus) -> None:
    """Raise `invalid_transition` (409) unless the table allows `current -> target`."""
    allowed = EXECUTION_ALLOWED[current]
    if target not in allowed:
        raise InvalidTransition(current, target, allowed)


# -- approvals -------------------------------------------------------------------------------

# An approval is asked once and settled once: `pending` is the only state with a way out.
#
#     pending ──a person──▶ approved | rejected
#             ──its wait ran out (auto_approve / auto_deny)──▶ expired
#             ──the task or run it gated moved on──▶ cancelled
#
# `status` says how an approval was settled; `decision` says what it decided, which is what
# the gated task or tool call follows: `approved` / `rejected` for a person's answer (the
# same as the status), the timeout policy's effect for `expired` (`auto_approve` → approved,
# `auto_deny` → rejected), none while pending or when cancelled. An escalation is not a
# transition: the approval stays `pending`, open to a person, with a later expiry.


class ApprovalStatus(StrEnum):
    PENDING = "pending"  # asked, unanswered. In: a review gate or a gated tool call.
    APPROVED = "approved"  # a person said yes; terminal.
    REJECTED = "rejected"  # a person said no, with a reason; terminal.
    # Nobody answered before `expires_at` and the policy decided (see `decision`); terminal.
    EXPIRED = "expired"
    # The task or run it gated moved on without it (left review by hand, superseded by a
    # new review round, the run ended or was cancelled while waiting); terminal, no decision.
    CANCELLED = "cancelled"


class ApprovalDecision(StrEnum):
    """What a settled approval decided: the gated work goes ahead, or it does not."""

    APPROVED = "approved"
    REJECTED = "rejected"


A = ApprovalStatus

APPROVAL_ALLOWED: dict[ApprovalStatus, frozenset[ApprovalStatus]] = {
    A.PENDING: frozenset({A.APPROVED, A.REJECTED, A.EXPIRED, A.CANCELLED}),
    A.APPROVED: frozenset(),
    A.REJECTED: frozenset(),
    A.EXPIRED: frozenset(),
    A.CANCELLED: frozenset(),
}

APPROVAL_TERMINAL: frozenset[ApprovalStatus] = frozenset(
    s for s, targets in APPROVAL_ALLOWED.items() if not targets
)


def check_approval_transition(current: ApprovalStatus, target: ApprovalStatus) -> None:
    """Raise unless the table allows `current -> target`: `approval_expired` (409) when
    the approval expired (its policy decided; nobody may answer it any more), otherwise
    `invalid_transition` (409)."""
    allowed = APPROVAL_ALLOWED[current]
    if target in allowed:
        return
    if current is A.EXPIRED:
        raise ApprovalExpired(target)
    raise InvalidTransition(current, target, allowed, " (the approval was already decided)")


# -- webhook deliveries --------------------------------------------------------------------
# One POST of one event to one subscription, tried until the receiver answers 2xx or the
# attempts run out. The deliverer (`webhooks/engine/deliverer.py`) moves it after each
# attempt; a person's redeliver sends a settled one again with a fresh attempt budget. A
# retry is not a transition: the delivery stays `pending`, with a later `next_attempt_at`.


class DeliveryStatus(StrEnum):
    # Waiting for its next attempt (the first, or a retry after a failure) at
    # `next_attempt_at`. In: the outbox trigger, a failed attempt with attempts left, a
    # redeliver. A deliverer holds it while `locked_until` is ahead (one attempt in flight).
    PENDING = "pending"
    SUCCEEDED = "succeeded"  # the receiver answered 2xx. Out: a redeliver.
    DEAD_LETTER = "dead_letter"  # every attempt of its budget failed. Out: a redeliver.


W = DeliveryStatus

DELIVERY_ALLOWED: dict[DeliveryStatus, frozenset[DeliveryStatus]] = {
    W.PENDING: frozenset({W.SUCCEEDED, W.DEAD_LETTER}),
    W.SUCCEEDED: frozenset({W.PENDING}),  # redeliver
    W.DEAD_LETTER: frozenset({W.PENDING}),  # redeliver
}


def check_delivery_transition(current: DeliveryStatus, target: DeliveryStatus) -> None:
    """Raise `invalid_transition` (409) unless the table allows `current -> target`."""
    allowed = DELIVERY_ALLOWED[current]
    if target not in allowed:
        why = " (it is waiting for its next attempt already)" if current is W.PENDING else ""
        raise InvalidTransition(current, target, allowed, why)


# -- sprints ---------------------------------------------------------------------------------
# A time-box of a project's tasks. Strictly linear: each status has one way out, and none
# back; a sprint never starts again (a new one is created after it). Only `SprintCommands`
# (`sprints/engine/sprints.py`) moves a sprint, through `check_sprint_transition`. A project has at
# most one `active` sprint (a partial unique index); any number may be planned.


class SprintStatus(StrEnum):
    PLANNING = "planning"  # created; its backlog (tasks, points) and dates may change.
    ACTIVE = "active"  # being worked; its backlog is fixed. One a project at a time.
    IN_REVIEW = "in_review"  # time is up; the work done is reviewed.
    RETROSPECTIVE = "retrospective"  # the team looks back at how it went.
    COMPLETED = "completed"  # over; its velocity (points committed, completed) is fixed.


SP = SprintStatus

SPRINT_ALLOWED: dict[SprintStatus, frozenset[SprintStatus]] = {
    SP.PLANNING: frozenset({SP.ACTIVE}),
    SP.ACTIVE: frozenset({SP.IN_REVIEW}),
    SP.IN_REVIEW: frozenset({SP.RETROSPECTIVE}),
    SP.RETROSPECTIVE: frozenset({SP.COMPLETED}),
    SP.COMPLETED: frozenset(),
}

SPRINT_TERMINAL: frozenset[SprintStatus] = frozenset(
    s for s, targets in SPRINT_ALLOWED.items() if not targets
)


def check_sprint_transition(current: SprintStatus, target: SprintStatus) -> None:
    """Raise `invalid_transition` (409), naming the one allowed target, unless the table
    allows `current -> target`."""
    allowed = SPRINT_ALLOWED[current]
    if target not in allowed:
        why = " (a sprint moves one step forward at a time)" if allowed else ""
        raise InvalidTransition(current, target, allowed, why)
