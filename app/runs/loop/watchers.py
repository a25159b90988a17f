"""The loop's watchers and the state they carry from one boundary to the next.

Tool-loop detection, the stagnation detector, the error streak (what the "too many
errors" terminator counts) and the recovery ladder each keep a small state, and the escalation
ladder remembers the tools it withdrew (degraded); together they ride in every
checkpoint's `loop_counters`, so a resumed run goes on where it stood. States are values:
`after_batch` returns the next ones, which the loop adopts only once the boundary that
records them has committed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from app.core.config import LoopGuardSettings
from app.core.messages import ToolUseBlock
from app.core.streams import StreamEvent
from app.llm.provider import ToolChoice
from app.runs.loop.compaction import LadderState
from app.runs.loop.loop_detection import LoopState, observe_batch
from app.runs.loop.stagnation import Stagnation, StagnationPolicy, StagnationState, observe_turn

_NAMED_ERRORS = 3  # errors of the latest batch kept to name the stop
_ERROR_CHARS = 300  # of each: enough to say what failed, small in every checkpoint


@dataclass(frozen=True)
class ErrorStreak:
    """Tool batches in a row in which every call of the model failed, and the errors of
    the latest one (kept, not read back from the transcript, so the stop names them
    however the run got to it: straight on, or resumed after a crash)."""

    batches: int = 0
    last_errors: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"batches": self.batches, "last_errors": list(self.last_errors)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ErrorStreak:
        """The streak `to_json` wrote; a checkpoint from before it existed has none."""
        if not data:
            return cls()
        return cls(int(data.get("batches", 0)), tuple(str(e) for e in data.get("last_errors", ())))

    def after(self, results: Sequence[tuple[str, bool]]) -> ErrorStreak:
        """The streak once a batch's results (content, is_error) of the model's own calls
        are counted: all errors extend it, any success ends it, none leaves it as it is."""
        if not results:
            return self
        if not all(is_error for _, is_error in results):
            return ErrorStreak()
        named = tuple(content[:_ERROR_CHARS] for content, _ in results[:_NAMED_ERRORS])
        return ErrorStreak(self.batches + 1, named)

    def reached(self, limit: int) -> bool:
        """At `limit` batches the run stops; 0 turns the terminator off."""
        return 0 < limit <= self.batches

    @property
    def message(self) -> str:
        """The run's error: how many batches failed, and how the last one did."""
        last = "; ".join(self.last_errors) or "(no error text)"
        return f"{self.batches} tool batches in a row failed in every call; the last: {last}"


def stagnation_policy(settings: LoopGuardSettings) -> StagnationPolicy:
    """The policy from the `loop_guards` settings (its fields carry a `stagnation_` prefix)."""
    prefix = "stagnation_"
    return StagnationPolicy(
        **{
            name.removeprefix(prefix): value
            for name, value in settings.model_dump().items()
            if name.startswith(prefix)
        }
    )


@dataclass(frozen=True)
class BatchVerdict:
    """What the watchers make of one tool batch: notes for the model (added to the batch's
    results message), events, and whether the run must stop as stagnant. A stop for too
    many errors is the loop's next boundary check, read from `watchers.errors`."""

    watchers: Watchers
    notes: list[str]
    events: list[StreamEvent]
    stop: Stagnation | None


@dataclass(frozen=True)
class Watchers:
    loops: LoopState = field(default_factory=LoopState)
    stagnation: StagnationState = field(default_factory=StagnationState)
    ladder: LadderState = field(default_factory=LadderState)
    degraded: frozenset[str] = frozenset()  # optional tools withdrawn for the rest of the run
    errors: ErrorStreak = field(default_factory=ErrorStreak)

    @classmethod
    def load(cls, counters: Mapping[str, Any] | None) -> Watchers:
        counters = counters or {}
        return cls(
            LoopState.from_json(counters.get("loop_detection")),
            StagnationState.from_json(counters.get("stagnation")),
            LadderState.from_json(counters.get("compaction")),
            frozenset(counters.get("degraded_tools", ())),
            ErrorStreak.from_json(counters.get("error_streak")),
        )

    @cached_property
    def counters(self) -> dict[str, Any]:
        """The JSON of every checkpoint's `loop_counters` (built once per state: states
        are values, and most boundaries carry the same one)."""
        return {
            "loop_detection": self.loops.to_json(),
            "stagnation": self.stagnation.to_json(),
            "compaction": self.ladder.to_json(),
            "degraded_tools": sorted(self.degraded),
            "error_streak": self.errors.to_json(),
        }

    @property
    def tool_choice(self) -> ToolChoice | None:
        """A tool the next LLM call must use (the loop ladder's forced `ask_human`)."""
        return self.loops.tool_choice

    def after_batch(
        self,
        calls: list[ToolUseBlock],
        results: Mapping[str, tuple[str, bool]],
        policy: StagnationPolicy,
        *,
        declined: Collection[str] = (),
        max_error_batches: int,
    ) -> BatchVerdict:
        """`results`: call id -> (content, is_error), a call without one being an error;
        `declined`: calls a person (or an approval's expiry) refused, which are neither the
        model's error nor its success, so the streak leaves them out."""
        errors = self.errors.after(
            [results.get(c.id, ("", True)) for c in calls if c.id not in declined]
        )
        if errors.reached(max_error_batches):
            # The error terminator takes this batch: the run fails once it is recorded, so
            # a note from the loop ladder or stagnation would reach nobody, and their
            # events (a rung climbed, a stagnation stop) would tell of what never happened.
            # Their states stay as they were: they did not see the batch.
            return BatchVerdict(replace(self, errors=errors), [], [], None)
        loops, detection = observe_batch(self.loops, calls)
        stagnation, verdict = observe_turn(self.stagnation, calls, policy)
        notes: list[str] = []
        events: list[StreamEvent] = []
        if detection is not None:
            notes.append(detection.note)
            events.append(detection.event)
        stop = None
        if detection is not None and verdict is not None and verdict.action == "correct":
            # The loop ladder already corrects this batch (and escalates towards a person):
            # stagnation adds no second note and spends no correction on it. A stop for
            # stagnation, its corrections spent earlier, still stands.
            stagnation = replace(stagnation, corrections=self.stagnation.corrections)
            verdict = None
        if verdict is not None:
            events.append(verdict.event)
            if verdict.action == "correct":
                notes.append(verdict.note)
            else:
                stop = verdict
        watchers = replace(self, loops=loops, stagnation=stagnation, errors=errors)
        return BatchVerdict(watchers, notes, events, stop)
