"""The terminators: the checks at each boundary of a run, before its next LLM call, that
may end it (or hand it back to the queue).

Each terminator is a small function of what the loop knows at that boundary
(`AtBoundary`) that returns a `Stop`, or None to let the run go on. `TERMINATORS` lists
them in the order that decides who wins when several hold at once: a shutdown hands the
run back unless a person cancelled it; a cancel beats every limit; a run whose tool calls
kept failing fails before any time or iteration limit counts; running out of hard time
fails the run, while the soft limit still lets it summarise. The races table in
docs/architecture.md points here.

Adding a terminator: a function here, its entry in `TERMINATORS`, and a setting for its
threshold (read through `AtBoundary`). Two endings are not boundary checks and live where
they are decided: the model's final answer (`end_turn`) when its response is recorded, and
stagnation when a tool batch's watchers judge it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.agents.schemas import Limits
from app.core.messages import Message, last_assistant_text
from app.core.states import RunStatus, StopReason
from app.core.streams import StreamEvent
from app.costs.store.costs import CallCost
from app.runs.loop.watchers import ErrorStreak, Watchers
from app.runs.schemas.runs import RunRead

ERROR_LIMIT_EVENT = "agent_run.error_limit"


@dataclass(frozen=True)
class AtBoundary:
    """What a terminator sees: the run as last committed and the loop's state."""

    run: RunRead
    limits: Limits
    watchers: Watchers
    history: Sequence[Message]
    elapsed_s: float  # of this execution: a wait on a person is not charged
    shutting_down: bool  # this worker is stopping
    max_error_batches: int  # 0: no "too many errors" terminator


class Ending(enum.Enum):
    HAND_BACK = "hand_back"  # back to the head of its lane's queue, for any worker
    SETTLE = "settle"  # the run ends here
    SUMMARISE = "summarise"  # one last turn without tools, whose text is the result


@dataclass(frozen=True)
class Stop:
    """How a run ends: decided by a terminator, or by the loop itself (the final answer,
    stagnation, a failure)."""

    ending: Ending
    status: RunStatus | None = None
    reason: StopReason | None = None
    result: str | None = None
    error: str | None = None  # the error's message; its code is the stop reason
    event: StreamEvent | None = None  # recorded before the run's own ending event
    retryable: bool = True  # False: a retry with backoff would fail the same way
    watchers: Watchers | None = None  # the state the final checkpoint records, if not the loop's
    messages: tuple[Message, ...] = ()  # the last messages, written with the ending
    counters: dict[str, Any] | None = None  # the run's counters, when a last call counted
    call: CallCost | None = None  # that call, for the cost totals


def failed(reason: StopReason, message: str, *, retryable: bool = True) -> Stop:
    """The run fails (and, `retryable`, is retried with backoff)."""
    return Stop(Ending.SETTLE, RunStatus.FAILED, reason, error=message, retryable=retryable)


Terminator = Callable[[AtBoundary], Stop | None]


def shutting_down(at: AtBoundary) -> Stop | None:
    if at.shutting_down and not at.run.cancel_requested:
        return Stop(Ending.HAND_BACK)
    return None


def cancelled(at: AtBoundary) -> Stop | None:
    """A cancel is seen here; nothing is interrupted mid-tool."""
    if at.run.cancel_requested:
        return Stop(Ending.SETTLE, RunStatus.CANCELLED, StopReason.CANCELLED)
    return None


def too_many_errors(at: AtBoundary) -> Stop | None:
    """The model's tool batches kept failing (every call of `max_error_batches` batches in
    a row). Checked here as well as where a batch is recorded, so that a run resumed after
    a crash between its last failing batch and its settling stops before another LLM call.
    Not retried: another attempt resumes the same transcript and model, which fail the same
    way. The final checkpoint starts a new streak, so that a person's retry gives the model
    a fresh chance."""
    streak = at.watchers.errors
    if not streak.reached(at.max_error_batches):
        return None
    details = {
        "max_consecutive_error_batches": at.max_error_batches,
        "batches": streak.batches,
        "last_errors": list(streak.last_errors),
    }
    return Stop(
        Ending.SETTLE,
        RunStatus.FAILED,
        StopReason.TOO_MANY_ERRORS,
        error=streak.message,
        event=(ERROR_LIMIT_EVENT, details),
        retryable=False,
        watchers=replace(at.watchers, errors=ErrorStreak()),
    )


def out_of_time(limits: Limits) -> Stop:
    """The run reached its hard time limit (here, or during a call it bounded). Not retried
    with backoff: another attempt would get a fresh limit and could run as long again, so
    a person decides (`POST /v1/runs/{id}/retry`)."""
    message = f"the run exceeded its hard time limit of {limits.hard_time_limit_s:g} s"
    return failed(StopReason.HARD_TIME_LIMIT, message, retryable=False)


def hard_time_limit(at: AtBoundary) -> Stop | None:
    return out_of_time(at.limits) if at.elapsed_s >= at.limits.hard_time_limit_s else None


def soft_time_limit(at: AtBoundary) -> Stop | None:
    if at.elapsed_s >= at.limits.soft_time_limit_s:
        return Stop(Ending.SUMMARISE, RunStatus.COMPLETED, StopReason.SOFT_TIME_LIMIT)
    return None


def max_iterations(at: AtBoundary) -> Stop | None:
    limit = at.limits.max_iterations
    if at.run.iteration < limit:
        return None
    return Stop(
        Ending.SETTLE,
        RunStatus.COMPLETED,
        StopReason.MAX_ITERATIONS,
        result=last_assistant_text(at.history),
        event=("agent_run.iteration_limit", {"max_iterations": limit}),
    )


# Who wins, first to last.
TERMINATORS: tuple[Terminator, ...] = (
    shutting_down,
    cancelled,
    too_many_errors,
    hard_time_limit,
    soft_time_limit,
    max_iterations,
)


def first_stop(at: AtBoundary, terminators: Sequence[Terminator] = TERMINATORS) -> Stop | None:
    """The stop of the first terminator that holds, in the who-wins order."""
    for terminator in terminators:
        stop = terminator(at)
        if stop is not None:
            return stop
    return None
