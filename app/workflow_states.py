"""Workflow vocabularies and the execution state machine, as data (values = database text).

Kept beside `states.py` rather than inside it while workflows grow; the shape is the same:
enums with one line per member, a TERMINAL set, an ALLOWED table.
"""

from __future__ import annotations

from enum import StrEnum


class NodeType(StrEnum):
    START = "start"  # the single entry point
    END = "end"  # the single exit point
    TASK = "task"  # becomes one task at activation
    AGENT_ASSIGNMENT = "agent_assignment"  # names who gets the tasks downstream of it
    CONDITIONAL = "conditional"  # takes its true or its false edge, on the runtime context
    PARALLEL_SPLIT = "parallel_split"  # fans out to 2+ branches that run side by side
    PARALLEL_JOIN = "parallel_join"  # fans in: waits for all branches, or for any one


class EdgeType(StrEnum):
    SEQUENTIAL = "sequential"  # plain flow
    CONDITIONAL_TRUE = "conditional_true"  # taken when the source's condition holds
    CONDITIONAL_FALSE = "conditional_false"  # taken when it does not
    PARALLEL_BRANCH = "parallel_branch"  # one branch out of a parallel split


class JoinStrategy(StrEnum):
    ALL = "all"  # the join passes when every live branch is done
    ANY = "any"  # the join passes when one branch is done


class ReviewTimeoutPolicy(StrEnum):
    AUTO_APPROVE = "auto_approve"  # an unanswered review approves the task
    AUTO_DENY = "auto_deny"  # an unanswered review rejects it
    ESCALATE = "escalate"  # an unanswered review goes to someone else


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
