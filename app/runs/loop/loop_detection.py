"""Tool-loop detection: after each tool batch, notice a model that keeps calling
the same tool and escalate from a nudge, to a directive, to a forced `ask_human`.

`observe_batch` is pure. Its state is a small value the loop keeps in every checkpoint's
`loop_counters` (`to_json`/`from_json`), so a resumed run climbs the same ladder, and a
run's detection starts fresh with the run rather than with whatever the conversation held.

The ladder, and when it moves:
- a detection fires only when the latest batch repeats the thrash (a batch that does
  something else is the model listening, not a reason to escalate);
- each detection climbs one rung: nudge → directive → force_ask_human (and stays there);
- the ladder resets once the thrash has left the window of recent calls, and the whole
  state resets when a batch carries `ask_human`: the person's answer is new direction.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.core.messages import Message, TextBlock, ToolUseBlock
from app.llm.provider import ToolChoice

ASK_HUMAN = "ask_human"
EVENT = "agent.loop.detected"

LoopTier = Literal["identical", "pattern"]
LoopLevel = Literal["nudge", "directive", "force_ask_human"]
LADDER: tuple[LoopLevel, ...] = ("nudge", "directive", "force_ask_human")


@dataclass(frozen=True)
class LoopPolicy:
    """Fixed thresholds: identical thrash is one (tool, arguments) at least 3 times
    in the last 6 calls; pattern thrash is one tool at least 4 times there, with differing
    arguments."""

    window_calls: int = 6
    identical_min: int = 3
    pattern_min: int = 4

    def __post_init__(self) -> None:
        if not 2 <= self.identical_min <= self.window_calls:
            raise ValueError("identical_min must be between 2 and window_calls")
        if not self.identical_min <= self.pattern_min <= self.window_calls:
            raise ValueError("pattern_min must be between identical_min and window_calls")


def call_fingerprint(call: ToolUseBlock) -> str:
    """`name:digest`, equal for two calls exactly when their tool and arguments are (key
    order aside): the first 16 hex digits of the SHA-256 of the canonical JSON arguments."""
    canonical = json.dumps(call.input, sort_keys=True, separators=(",", ":"))
    return f"{call.name}:{hashlib.sha256(canonical.encode()).hexdigest()[:16]}"


def _tool(fingerprint: str) -> str:
    return fingerprint.rpartition(":")[0]


@dataclass(frozen=True)
class LoopState:
    """What the detector remembers between batches."""

    recent: tuple[str, ...] = ()  # fingerprints of the latest calls, oldest first
    detections: int = 0  # detections since the ladder last reset: the next one's rung
    force_tool: str | None = None  # the tool the next LLM call must call

    @property
    def tool_choice(self) -> ToolChoice | None:
        """The constraint for the next LLM call; kept in the state (not only in the
        detection) so a run that crashes before that call still makes it forced."""
        return None if self.force_tool is None else ToolChoice(type="tool", name=self.force_tool)

    def to_json(self) -> dict[str, Any]:
        return {
            "recent": list(self.recent),
            "detections": self.detections,
            "force_tool": self.force_tool,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> LoopState:
        """The state `to_json` wrote; a checkpoint without one gives a fresh state."""
        if not data:
            return cls()
        return cls(
            recent=tuple(str(f) for f in data.get("recent", ())),
            detections=int(data.get("detections", 0)),
            force_tool=data.get("force_tool"),
        )


@dataclass(frozen=True)
class LoopDetection:
    """One detection: which thrash, the rung it reached, and what the loop does about it."""

    tier: LoopTier
    tool: str
    level: LoopLevel
    count: int  # calls of the thrash among the recent ones
    window_calls: int  # how many recent calls were looked at
    detections: int  # detections since the ladder last reset, this one included

    @property
    def note(self) -> str:
        """Text for the model, sent after the batch's tool results."""
        if self.tier == "identical":
            what = f"called `{self.tool}` with the same arguments {self.count} times"
        else:
            what = f"called `{self.tool}` {self.count} times with varying arguments"
        recent = f"in your last {self.window_calls} tool calls"
        if self.level == "nudge":
            return (
                f"Loop check: you {what} {recent}. If it is not getting you what you need, "
                "try a different approach or a different tool."
            )
        if self.level == "directive":
            return (
                f"Loop check: stop calling `{self.tool}`. You {what} {recent} and it has not "
                "worked. Use a different tool, work with what you already have, or give your "
                "final answer now."
            )
        return (
            f"Loop check: you are still repeating `{self.tool}`. Call `{ASK_HUMAN}` now: say "
            "what you tried, what you found, and what you need to go on."
        )

    @property
    def tool_choice(self) -> ToolChoice | None:
        if self.level != "force_ask_human":
            return None
        return ToolChoice(type="tool", name=ASK_HUMAN)

    @property
    def event(self) -> tuple[str, dict[str, Any]]:
        return (
            EVENT,
            {
                "tier": self.tier,
                "tool": self.tool,
                "level": self.level,
                "count": self.count,
                "window_calls": self.window_calls,
                "detections": self.detections,
            },
        )


def observe_batch(
    state: LoopState, calls: Sequence[ToolUseBlock], policy: LoopPolicy | None = None
) -> tuple[LoopState, LoopDetection | None]:
    """The state once `calls` (one answered tool batch) are counted, and the detection
    they trigger, if any. Call it once per batch, when its results are committed."""
    policy = policy or LoopPolicy()
    if any(call.name == ASK_HUMAN for call in calls):
        return LoopState(), None
    batch = [call_fingerprint(call) for call in calls]
    recent = (*state.recent, *batch)[-policy.window_calls :]
    found = _thrash(recent, policy, batch)
    if found is None:
        still = _thrash(recent, policy, recent) is not None
        return LoopState(recent, state.detections if still else 0), None
    tier, tool, count = found
    level = LADDER[min(state.detections, len(LADDER) - 1)]
    detection = LoopDetection(tier, tool, level, count, len(recent), state.detections + 1)
    force = ASK_HUMAN if level == "force_ask_human" else None
    return LoopState(recent, state.detections + 1, force), detection


def _thrash(
    recent: Sequence[str], policy: LoopPolicy, among: Collection[str]
) -> tuple[LoopTier, str, int] | None:
    """The heaviest thrash in `recent` that a call of `among` takes part in (identical
    before pattern; ties go to the larger fingerprint, so the answer is deterministic)."""
    identical = [
        (n, f) for f, n in Counter(recent).items() if n >= policy.identical_min and f in among
    ]
    if identical:
        count, fingerprint = max(identical)
        return "identical", _tool(fingerprint), count
    # Had all of a tool's recent calls had the same arguments, that call (one of `among`)
    # would be identical thrash: pattern thrash always has differing arguments.
    tools = {_tool(f) for f in among}
    pattern = [
        (n, t)
        for t, n in Counter(_tool(f) for f in recent).items()
        if n >= policy.pattern_min and t in tools
    ]
    if pattern:
        count, tool = max(pattern)
        return "pattern", tool, count
    return None


def with_notes(results: Message, notes: Sequence[str]) -> Message:
    """The tool-results message with the detectors' notes after its `tool_result` blocks
    (which the Messages API wants first): the notes reach the model in the same turn, the
    transcript stays valid, and the tool results themselves stay what the tools returned."""
    if not notes:
        return results
    return Message(role="user", content=[*results.content, *(TextBlock(text=n) for n in notes)])
