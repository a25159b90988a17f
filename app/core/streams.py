"""The names of the event streams (rows of `events`, or a run's history; served over SSE,
woken by the bus)."""

from __future__ import annotations

from typing import Any

TASK_STREAM = "tasks"  # every task's changes (`GET /v1/tasks/events`)
RUNS_STREAM = "runs"  # every run's lifecycle (`GET /v1/runs/events`); wakes the workers
APPROVALS_STREAM = "approvals"  # approvals asked and settled (`GET /v1/approvals/events`)
TRIGGERS_STREAM = "triggers"  # triggers fired, skipped or failed (`GET /v1/triggers/events`)
BUDGETS_STREAM = "budgets"  # budgets' alerts at 50, 80 and 100 % (`GET /v1/budgets/events`)
SPRINTS_STREAM = "sprints"  # sprints created, changed and moved (`GET /v1/sprints/events`)
WORKTREES_STREAM = "worktrees"  # worktrees made, committed, merged (`GET /v1/worktrees/events`)
WEBHOOKS_STREAM = "webhooks"  # webhook deliveries' attempts (`GET /v1/webhooks/events`)
# Not a stream of rows: a wake-up for this process's coordinator when a coordination was
# started here (another process's coordinator finds it on its next pass).
COORDINATIONS_STARTED = "coordinations-started"
# Not a stream of rows: a wake-up for this process's merge queue when a workspace's
# settings changed (its merge order, its capacity); other processes see it next pass.
WORKSPACES_CHANGED = "workspaces-changed"
# Not a stream of rows: the outbox trigger NOTIFYs this name when it queued deliveries, to
# wake the deliverers of every process.
DELIVERIES_DUE = "webhook-deliveries"

# One event as a stream holds it: its type (`agent_run.started`, `task.created`, …) and its data.
StreamEvent = tuple[str, dict[str, Any]]


def run_stream(run_id: str) -> str:
    """Everything one run does (`GET /v1/runs/{id}/events`)."""
    return f"run:{run_id}"


def run_of(stream: str) -> str | None:
    """The run whose stream this is (its history), or None for any other stream."""
    return stream.removeprefix("run:") if stream.startswith("run:") else None


def lane_stream(lane: str) -> str:
    """The lifecycle events (`agent_run.*`) of every run on a lane (`GET …/lanes/{lane}/events`)."""
    return f"lane:{lane}"


def execution_stream(execution_id: str) -> str:
    """One workflow execution's events (`GET /v1/workflow-executions/{id}/events`)."""
    return f"workflow:{execution_id}"


def execution_of(stream: str) -> str | None:
    """The workflow execution whose stream this is, or None for any other stream."""
    return stream.removeprefix("workflow:") if stream.startswith("workflow:") else None


def coordination_stream(coordination_id: str) -> str:
    """One task coordination's phases, subtasks and runs (`GET /v1/coordinations/{id}/events`)."""
    return f"coordination:{coordination_id}"
