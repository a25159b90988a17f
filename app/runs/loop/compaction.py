"""Auto-compaction and the recovery ladder: keep a run's prompt under a share of
the model's context window by folding older messages into a summary (R1), pruning deeper
(R2), and at last asking the human (R3) — at most `max_recovery_actions` times per run.

Pure policy over a list of messages. The caller owns the I/O: it passes an async
`summarise` (a cheap model call), stores the returned context with a `compaction`
checkpoint, and keeps `LadderState` in that checkpoint's `loop_counters` so a resumed run
goes on where it stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from functools import cached_property
from typing import Any, Literal

from app.core.config import CompactionSettings
from app.core.messages import Message, TextBlock, ToolResultBlock
from app.core.streams import StreamEvent
from app.llm import tokens
from app.llm.provider import ToolChoice, ToolSpec

log = logging.getLogger(__name__)

Summarise = Callable[[Sequence[Message]], Awaitable[str]]
Stage = Literal["R1", "R2", "R3"]

# Each stage escalates to the next when the prompt is over budget again within the window;
# after R3 (the human has spoken) the ladder starts over.
_ESCALATION: dict[Stage, Stage] = {"R1": "R2", "R2": "R3"}
_LABELS = {"R1": "Compacted", "R2": "Deep pruned"}
PIN_PREFIX = "[Pinned: latest result of tool "
ASK_HUMAN_QUESTION = (
    "I have made progress, but I am losing context faster than I can recover it. "
    "Should I keep going, change direction, or stop?"
)


@dataclass(frozen=True)
class LadderState:
    """A run's recovery counters; JSON round trip through `loop_counters`."""

    compactions_used: int = 0  # R1
    prunes_used: int = 0  # R2
    asks_used: int = 0  # R3
    last_stage: Stage | None = None
    last_stage_iteration: int | None = None
    # Consecutive failed summary calls; at the policy's limit the run only truncates.
    summary_failures: int = 0

    @property
    def recoveries_used(self) -> int:
        return self.compactions_used + self.prunes_used + self.asks_used

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> LadderState:
        """Counters read back from a checkpoint; absent ones (a run before any recovery, or
        an older checkpoint) take their defaults."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in known})

    def after(self, stage: Stage, iteration: int) -> LadderState:
        used = {"R1": "compactions_used", "R2": "prunes_used", "R3": "asks_used"}[stage]
        return replace(
            self,
            **{used: getattr(self, used) + 1},
            last_stage=stage,
            last_stage_iteration=iteration,
        )

    def next_stage(self, iteration: int, window: int) -> Stage:
        if (
            self.last_stage in _ESCALATION
            and self.last_stage_iteration is not None
            and iteration - self.last_stage_iteration <= window
        ):
            return _ESCALATION[self.last_stage]
        return "R1"


@dataclass(frozen=True)
class Compaction:
    """An R1 or R2 step: `messages` is the whole new context (summary first)."""

    stage: Literal["R1", "R2"]
    messages: list[Message]
    method: Literal["summary", "truncation"]
    folded: int  # older messages replaced by the summary
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int

    def event(self, iteration: int) -> StreamEvent:
        kind = "agent.compaction.run" if self.stage == "R1" else "agent.recovery.fired"
        data = {k: v for k, v in asdict(self).items() if k != "messages"}
        return kind, {**data, "iteration": iteration}


@dataclass(frozen=True)
class AskHuman:
    """R3: the next LLM call must be an `ask_human` call asking `question`."""

    tokens: int
    messages: int
    question: str = ASK_HUMAN_QUESTION
    stage: Literal["R3"] = "R3"

    @property
    def tool_choice(self) -> ToolChoice:
        return ToolChoice(type="tool", name="ask_human")

    @property
    def instruction(self) -> str:
        """A user message for the forced call, so the model asks this very question."""
        return (
            "Your context is filling faster than it can be compacted. Call ask_human now "
            f"with this question: {self.question}"
        )

    def event(self, iteration: int) -> StreamEvent:
        return "agent.recovery.fired", {
            "stage": "R3",
            "tokens_before": self.tokens,
            "tokens_after": self.tokens,
            "messages_before": self.messages,
            "messages_after": self.messages,
            "question": self.question,
            "iteration": iteration,
        }


@dataclass(frozen=True)
class Recovery:
    """What one check decided: the steps taken (in order), the ladder's new state, and
    `capped` when the prompt is still over budget but the run's recoveries are used up.
    `messages` (when a step compacted) replace the transcript through `through_position`."""

    steps: list[Compaction | AskHuman]
    state: LadderState
    iteration: int
    through_position: int
    capped: bool = False

    @property
    def messages(self) -> list[Message] | None:
        """The new live context, or None when no step changed it."""
        compactions = [s for s in self.steps if isinstance(s, Compaction)]
        return compactions[-1].messages if compactions else None

    @property
    def ask_human(self) -> AskHuman | None:
        return next((s for s in self.steps if isinstance(s, AskHuman)), None)

    @property
    def events(self) -> list[StreamEvent]:
        return [s.event(self.iteration) for s in self.steps]


@dataclass(frozen=True)
class Compactor:
    """One run's compaction policy: its settings, its summariser, and the fixed part of
    its prompt (system prompt, tools, the model's context window)."""

    settings: CompactionSettings
    summarise: Summarise
    context_window: int
    system: str = ""
    tools: Sequence[ToolSpec] = ()
    prefix: Sequence[Message] = ()  # sent before the live messages (the run journal)

    @property
    def budget(self) -> int:
        return int(self.context_window * self.settings.threshold_ratio)

    @cached_property
    def _fixed_tokens(self) -> int:
        """The system prompt, tools and prefix: the same for every call of the run."""
        return tokens.count_request(self.system, self.prefix, self.tools)

    def estimate(self, messages: Sequence[Message]) -> int:
        return self._fixed_tokens + sum(tokens.count_message(m) for m in messages)

    async def recover(
        self,
        messages: Sequence[Message],
        *,
        through_position: int,
        iteration: int,
        state: LadderState,
    ) -> Recovery | None:
        """Check the live context (`messages`, covering the transcript through
        `through_position`) before an LLM call; None when it is within budget. Otherwise
        climb the ladder from the stage `state` calls for, one step after another in this
        same check while the prompt stays over budget (a compaction that did not suffice
        escalates at once), ending at R3 or when the run's recoveries are used up."""
        current = list(messages)
        estimate = self.estimate(current)
        if estimate <= self.budget:
            return None
        steps: list[Compaction | AskHuman] = []
        window = self.settings.escalation_window_iterations
        stage: Stage | None = state.next_stage(iteration, window)
        while stage is not None and estimate > self.budget:
            if state.recoveries_used >= self.settings.max_recovery_actions:
                return Recovery(steps, state, iteration, through_position, capped=True)
            if stage == "R3":
                steps.append(AskHuman(tokens=estimate, messages=len(current)))
                state = state.after("R3", iteration)
                break
            compaction, state = await self._compact(stage, current, estimate, state)
            if compaction is not None:  # else too few messages to fold: try the next stage
                steps.append(compaction)
                state = state.after(stage, iteration)
                current, estimate = compaction.messages, compaction.tokens_after
            stage = _ESCALATION.get(stage)
        return Recovery(steps, state, iteration, through_position)

    async def _compact(
        self, stage: Literal["R1", "R2"], messages: list[Message], before: int, state: LadderState
    ) -> tuple[Compaction | None, LadderState]:
        keep = (
            self.settings.keep_last_messages
            if stage == "R1"
            else self.settings.deep_prune_keep_messages
        )
        cut = cut_index(messages, keep)
        head, kept = messages[:cut], messages[cut:]
        if not head or (len(head) == 1 and is_summary(head[0])):
            return None, state
        summary, state = await self._summary_of(head, state)
        label = _LABELS[stage]
        if summary is None:
            text = f"[{label}: earlier history was truncated; {len(head)} messages dropped]"
        else:
            text = f"[{label}: {len(head)} earlier messages summarised]\n\n{summary}"
        pins = pinned_results(head, self.settings.pin_max_chars)
        opening = Message(role="user", content=[TextBlock(text=text), *pins])
        compacted = [opening, *kept]
        return Compaction(
            stage=stage,
            messages=compacted,
            method="truncation" if summary is None else "summary",
            folded=len(head),
            tokens_before=before,
            tokens_after=self.estimate(compacted),
            messages_before=len(messages),
            messages_after=len(compacted),
        ), state

    async def _summary_of(
        self, head: list[Message], state: LadderState
    ) -> tuple[str | None, LadderState]:
        """The summary of `head`, or None (truncate) when the call fails or the run has
        seen too many failures in a row to keep trying."""
        if state.summary_failures >= self.settings.summary_failures_before_truncation_only:
            return None, state
        try:
            summary = (await self.summarise(head)).strip()
            if not summary:
                raise ValueError("the summary came back empty")
        except Exception as exc:  # any failure: truncate so the run never stalls on it
            log.warning("compaction summary failed, truncating instead: %s", exc)
            return None, replace(state, summary_failures=state.summary_failures + 1)
        return summary, replace(state, summary_failures=0)


def cut_index(messages: Sequence[Message], keep: int) -> int:
    """Where the verbatim tail starts: `keep` messages from the end, moved earlier while it
    would start with tool results, so no result is parted from the call it answers (the
    call is always in the message just before) and the tail never opens with an orphan."""
    cut = max(0, len(messages) - keep)
    while cut > 0 and any(isinstance(b, ToolResultBlock) for b in messages[cut].content):
        cut -= 1
    return cut


def is_summary(message: Message) -> bool:
    """Whether `message` is the opening message of an earlier compaction."""
    first = message.content[0] if message.content else None
    return (
        message.role == "user"
        and isinstance(first, TextBlock)
        and first.text.startswith(tuple(f"[{label}:" for label in _LABELS.values()))
    )


def pinned_results(head: Sequence[Message], max_chars: int) -> list[TextBlock]:
    """The latest successful result of each tool called in `head`, as text blocks (a
    `tool_result` block would point at a call that is no longer there). Failed results
    are skipped: pinning one would tell the model that the error is what it knows. Pins of
    an earlier compaction carry over until a newer result of the same tool replaces them."""
    names: dict[str, str] = {}
    pins: dict[str, str] = {}
    for message in head:
        for block in message.content:
            if isinstance(block, TextBlock) and block.text.startswith(PIN_PREFIX):
                name = block.text[len(PIN_PREFIX) : block.text.index("]")]
                pins.pop(name, None)
                pins[name] = block.text
            elif isinstance(block, ToolResultBlock):
                name = names.get(block.tool_use_id, "")
                if name and not block.is_error:
                    pins.pop(name, None)  # re-inserted: pins keep the order they came in
                    pins[name] = f"{PIN_PREFIX}{name}]\n{_capped(block.content, max_chars)}"
        names.update((call.id, call.name) for call in message.tool_uses)
    return [TextBlock(text=text) for text in pins.values()]


def _capped(content: str, max_chars: int) -> str:
    if len(content) <= max_chars:
        return content
    return f"{content[:max_chars]}\n[... {len(content) - max_chars} more characters cut]"
