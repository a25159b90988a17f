"""The loop's watchers and the state they carry from one boundary to the next.

Tool-loop detection, the stagnation detector and the recovery ladder each keep a small
state, and the escalation ladder remembers the tools it withdrew (degraded); together they
ride in every checkpoint's `loop_counters`, so a resumed run goes on where it stood.
States are values: `after_batch` returns the next ones, which the loop adopts only once
the boundary that records them has committed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from app.config import LoopGuardSettings
from app.engine.runs import RunEvent
from app.llm.messages import ToolUseBlock
from app.llm.provider import ToolChoice
from app.loop.compaction import LadderState
from app.loop.loop_detection import LoopState, observe_batch
from app.loop.stagnation import Stagnation, StagnationPolicy, StagnationState, observe_turn


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
    results message), events, and whether the run must stop as stagnant."""

    guards: Guards
    notes: list[str]
    events: list[RunEvent]
    stop: Stagnation | None


@dataclass(frozen=True)
class Guards:
    loops: LoopState = field(default_factory=LoopState)
    stagnation: StagnationState = field(default_factory=StagnationState)
    ladder: LadderState = field(default_factory=LadderState)
    degraded: frozenset[str] = frozenset()  # optional tools withdrawn for the rest of the run

    @classmethod
    def load(cls, counters: Mapping[str, Any] | None) -> Guards:
        counters = counters or {}
        return cls(
            LoopState.from_json(counters.get("loop_detection")),
            StagnationState.from_json(counters.get("stagnation")),
            LadderState.from_json(counters.get("compaction")),
            frozenset(counters.get("degraded_tools", ())),
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
        }

    @property
    def tool_choice(self) -> ToolChoice | None:
        """A tool the next LLM call must use (the loop ladder's forced `ask_human`)."""
        return self.loops.tool_choice

    def after_batch(self, calls: list[ToolUseBlock], policy: StagnationPolicy) -> BatchVerdict:
        loops, detection = observe_batch(self.loops, calls)
        stagnation, verdict = observe_turn(self.stagnation, calls, policy)
        notes: list[str] = []
        events: list[RunEvent] = []
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
        return BatchVerdict(replace(self, loops=loops, stagnation=stagnation), notes, events, stop)
