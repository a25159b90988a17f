"""Stagnation detection: over the last tool-bearing turns, a high share of
repeated calls, or turns going round in an A→B→A→B cycle, means the agent is stuck. It
gets a corrective note (up to `max_corrections`), then the run stops: `stagnation`.

`observe_turn` is pure; its state goes into every checkpoint's `loop_counters` beside the
loop detector's, so corrections already spent stay spent across a crash and resume.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.core.messages import ToolUseBlock
from app.runs.loop.loop_detection import ASK_HUMAN, call_fingerprint

EVENT = "agent.stagnation.detected"

Turn = tuple[str, ...]  # the call fingerprints of one turn, sorted: call order does not matter


@dataclass(frozen=True)
class StagnationPolicy:
    """When a run counts as stuck, and how often it is corrected first."""

    enabled: bool = True
    window_size: int = 5  # recent tool-bearing turns looked at
    repetition_threshold: float = 0.6  # share of repeated calls in the window that is stuck
    cycle_detection: bool = True  # also treat A→B→A→B turn cycles as stuck
    max_corrections: int = 1  # corrective notes before the run stops (0: stop at once)
    min_tool_turns: int = 2  # tool-bearing turns needed before any verdict

    def __post_init__(self) -> None:
        if not 1 <= self.min_tool_turns <= self.window_size:
            raise ValueError("min_tool_turns must be between 1 and window_size")
        if not 0 < self.repetition_threshold <= 1:
            raise ValueError("repetition_threshold must be in (0, 1]")
        if self.max_corrections < 0:
            raise ValueError("max_corrections must not be negative")


@dataclass(frozen=True)
class StagnationState:
    """The window of recent turns and the corrections spent in this run."""

    turns: tuple[Turn, ...] = ()
    corrections: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"turns": [list(turn) for turn in self.turns], "corrections": self.corrections}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> StagnationState:
        """The state `to_json` wrote; a checkpoint without one gives a fresh state."""
        if not data:
            return cls()
        return cls(
            turns=tuple(tuple(str(f) for f in turn) for turn in data.get("turns", ())),
            corrections=int(data.get("corrections", 0)),
        )


def repetition_ratio(turns: Sequence[Turn]) -> float:
    """Excess duplicates over all calls of the window: a call seen 3 times adds 2."""
    counts = _counts(turns)
    total = sum(counts.values())
    return 0.0 if total == 0 else sum(n - 1 for n in counts.values()) / total


def _counts(turns: Sequence[Turn]) -> Counter[str]:
    return Counter(f for turn in turns for f in turn)


def cycle_length(turns: Sequence[Turn]) -> int | None:
    """The shortest k ≥ 2 whose last k turns repeat the k before them (A→B→A→B is 2)."""
    for k in range(2, len(turns) // 2 + 1):
        if turns[-2 * k : -k] == turns[-k:]:
            return k
    return None


@dataclass(frozen=True)
class Stagnation:
    """A verdict: correct the agent (a note for it), or stop the run."""

    action: Literal["correct", "terminate"]
    repetition_ratio: float
    cycle_length: int | None
    window_turns: int
    corrections: int  # corrections spent before this verdict

    @property
    def note(self) -> str:
        """The corrective text, sent after the turn's tool results."""
        how = (
            f"go round in a cycle of {self.cycle_length} turns"
            if self.cycle_length is not None
            else "repeat the same tool calls"
        )
        return (
            f"Progress check: your last {self.window_turns} tool turns {how} without making "
            "progress. Step back: state what you have learned and what is still missing, "
            "then take a different approach, or give your final answer if you have enough."
        )

    @property
    def details(self) -> dict[str, Any]:
        """The verdict as data: the event's payload, and the run's stop details."""
        return {
            "action": self.action,
            "repetition_ratio": round(self.repetition_ratio, 3),
            "cycle_length": self.cycle_length,
            "window_turns": self.window_turns,
            "corrections": self.corrections,
        }

    @property
    def event(self) -> tuple[str, dict[str, Any]]:
        return EVENT, self.details


def observe_turn(
    state: StagnationState, calls: Sequence[ToolUseBlock], policy: StagnationPolicy | None = None
) -> tuple[StagnationState, Stagnation | None]:
    """The state once one answered tool batch is counted, and the verdict it brings, if
    any. Call it once per batch, when its results are committed.

    Two rules keep the detector fair: a turn none of whose calls is
    repeated in the window is progress and gets no verdict (so a compliant turn right
    after a correction is never what stops the run), and a turn carrying `ask_human`
    clears the state (a person's answer is new direction)."""
    policy = policy or StagnationPolicy()
    if not policy.enabled or not calls:
        return state, None
    if any(call.name == ASK_HUMAN for call in calls):
        return StagnationState(), None
    turn = tuple(sorted(call_fingerprint(call) for call in calls))
    turns = (*state.turns, turn)[-policy.window_size :]
    counts = _counts(turns)
    if len(turns) < policy.min_tool_turns or all(counts[f] == 1 for f in turn):
        return StagnationState(turns, state.corrections), None
    ratio = repetition_ratio(turns)
    cycle = cycle_length(turns) if policy.cycle_detection else None
    if ratio < policy.repetition_threshold and cycle is None:
        return StagnationState(turns, state.corrections), None
    spent = state.corrections
    if spent < policy.max_corrections:
        verdict = Stagnation("correct", ratio, cycle, len(turns), spent)
        return StagnationState(turns, spent + 1), verdict
    return StagnationState(turns, spent), Stagnation("terminate", ratio, cycle, len(turns), spent)
