"""The scripted provider: plays the turns declared in an agent's model config.

The turn to play is the request's `turn` (the LLM calls the run made before this one), so
every run of a conversation starts the script afresh, a resumed run continues where it
stopped, and text the loop adds to the transcript (notes, summaries) does not move it.
A turn's `fault` is raised on the first `times` attempts at that turn (counted per provider
instance, which the pool keeps per run), then the turn answers; what a fault means is
`faults.py`'s.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter, OrderedDict
from dataclasses import replace

from app.core.messages import Block, TextBlock, ToolResultBlock, ToolUseBlock
from app.core.model_config import ScriptedTurn, ScriptedUsage
from app.llm.provider import (
    LLMRequest,
    LLMResponse,
    ModelOwner,
    TextSink,
    Usage,
    UsageSink,
)
from app.llm.providers.scripted.faults import fault_error

SCRIPTED_KEPT = 4096  # runs whose scripted provider (and its fault counts) a pool keeps


def _size(block: Block) -> int:
    """Characters a block adds to the prompt, roughly (cheap: no serialisation)."""
    if isinstance(block, TextBlock):
        return len(block.text)
    if isinstance(block, ToolResultBlock):
        return len(block.content)
    return len(block.name) + 16 * len(block.input)


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _input_of(usage: ScriptedUsage) -> Usage:
    return Usage(usage.input_tokens, 0, usage.cache_write_tokens, usage.cache_read_tokens)


class ScriptedProvider:
    def __init__(self, script: list[ScriptedTurn]) -> None:
        self._script = script
        self._faults_raised: Counter[int] = Counter()

    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
    ) -> LLMResponse:
        position = request.turn
        turn = self._script[position] if position < len(self._script) else None
        prompt = len(request.system) + sum(_size(b) for m in request.messages for b in m.content)
        scripted = turn.usage if turn is not None else None
        billed = Usage(prompt // 4) if scripted is None else _input_of(scripted)
        if on_usage is not None:  # the input is known (and billed) as the answer begins
            on_usage(billed)
        if turn is not None and turn.latency_ms:
            await asyncio.sleep(turn.latency_ms / 1000)
        if turn is not None and turn.fault and self._faults_raised[position] < turn.fault.times:
            self._faults_raised[position] += 1
            raise fault_error(turn.fault)
        content = self._answer(turn, request)
        text = "".join(b.text for b in content if isinstance(b, TextBlock))
        if on_text is not None and text:
            for start in range(0, len(text), 16):  # a few deltas, like a real stream
                if start and turn is not None and turn.stream_interval_ms:
                    await asyncio.sleep(turn.stream_interval_ms / 1000)
                await on_text(text[start : start + 16])
        return LLMResponse(
            content=content,
            stop_reason="tool_use"
            if any(isinstance(b, ToolUseBlock) for b in content)
            else "end_turn",
            usage=replace(
                billed,
                output_tokens=scripted.output_tokens
                if scripted is not None
                else _estimate_tokens(text or "x"),
            ),
            model=request.model,  # a fallback model answers under its own name
        )

    def _answer(self, turn: ScriptedTurn | None, request: LLMRequest) -> list[Block]:
        if turn is None:
            return [TextBlock(text="(the script has no more turns)")]
        forced = request.tool_choice.name if request.tool_choice else None
        if turn.tool_calls and request.tools:
            calls = [c for c in turn.tool_calls if forced is None or c.name == forced]
            if calls:
                return [
                    ToolUseBlock(id=f"toolu_{uuid.uuid4().hex[:24]}", name=c.name, input=c.input)
                    for c in calls
                ]
        if turn.text is not None:
            return [TextBlock(text=turn.text)]
        # A tool turn asked for when no tools are offered (a final summary turn).
        return [TextBlock(text="Summary: the scripted agent stopped before finishing its plan.")]


class ScriptedProviders:
    """The `ProviderPool` of scripted models: one provider per agent version and run, since
    a provider counts the faults it raised, so a run retried in this process gets past
    them. The most recently used `SCRIPTED_KEPT` are kept."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[str, int, str], ScriptedProvider] = OrderedDict()

    def __call__(self, owner: ModelOwner, run_id: str) -> ScriptedProvider:
        assert owner.model.script is not None  # the schema requires it
        slot = (owner.id, owner.version, run_id)
        if slot not in self._kept:
            self._kept[slot] = ScriptedProvider(owner.model.script)
            if len(self._kept) > SCRIPTED_KEPT:
                self._kept.popitem(last=False)
        self._kept.move_to_end(slot)
        return self._kept[slot]

    async def aclose(self) -> None:
        self._kept.clear()
